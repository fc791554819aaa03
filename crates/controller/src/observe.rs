//! Reading a job's children from the caches: no API requests, except for the existence of a
//! user-provided SSH Secret, which eto does not cache (it caches only its own objects).

use std::sync::Arc;

use eto_api::training_job::JobPhase;
use eto_engine::effective_spec::SshSecretSource;
use eto_engine::gang::{self, Gang, PodGroup};
use eto_engine::kind::{JobRef, Kind};
use eto_engine::names;
use eto_engine::plan::{Observed, RejectedPod, SecretPresence, TakenName};
use eto_engine::scaling::{Scaler, ScalerKind};
use k8s_openapi::api::batch::v1::Job as BatchJob;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Resource};

use crate::apply::NamespacedObject;
use crate::context::{Context, Stores};
use crate::error::Error;
use crate::ownership::Owner;
use crate::pod_groups;

/// The children of a job found in the caches, and its ScaleIn and ScaleOut requests.
pub struct Children {
    launcher_job: Option<Arc<BatchJob>>,
    pods: Vec<Arc<Pod>>,
    scalers: Vec<Scaler>,
    worker_service: Option<Arc<Service>>,
    config_map: Option<Arc<ConfigMap>>,
    service_account: Option<Arc<ServiceAccount>>,
    role: Option<Arc<Role>>,
    role_binding: Option<Arc<RoleBinding>>,
    pod_group: Option<PodGroup>,
}

/// Whether `object` is controlled by the object with `uid`.
fn controlled_by<K: Resource>(object: &K, uid: &str) -> bool {
    eto_engine::kind::controlled_by(object.meta(), uid)
}

fn named<K>(store: &Store<K>, namespace: &str, name: &str, uid: &str) -> Option<Arc<K>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    store
        .get(&ObjectRef::new(name).within(namespace))
        .filter(|object| controlled_by(object.as_ref(), uid))
}

impl Children {
    /// The children of `job` in `stores`: objects in its namespace that it controls, and the
    /// pods of an MPIJob's launcher Job. Found by name or by controller uid, never by looking
    /// at other jobs' children.
    pub fn of(stores: &Stores, job: JobRef<'_>) -> Self {
        let namespace = job.metadata().namespace.as_deref().unwrap_or_default();
        let name = job.name();
        let uid = job.uid();
        let kind = job.kind();
        let launcher_job = match kind {
            Kind::MpiJob => named(
                &stores.launcher_jobs,
                namespace,
                &names::launcher(name),
                uid,
            ),
            Kind::TrainingJob => None,
        };
        let launcher_uid = launcher_job
            .as_ref()
            .and_then(|launcher| launcher.metadata.uid.clone());
        // Children share their job's namespace: a controller uid finds them all.
        let mut pods = stores.pods.controlled_by(namespace, uid);
        if let Some(launcher) = &launcher_uid {
            pods.extend(stores.pods.controlled_by(namespace, launcher));
        }
        // ScaleIn and ScaleOut requests and the launcher's RBAC exist for TrainingJobs only.
        let training = kind == Kind::TrainingJob;
        let launcher_rbac = names::launcher_rbac(name);
        Self {
            launcher_job,
            pods,
            scalers: if training {
                scalers(stores, namespace, name)
            } else {
                Vec::new()
            },
            worker_service: named(
                &stores.services,
                namespace,
                &names::job_service(kind, name),
                uid,
            ),
            config_map: named(
                &stores.config_maps,
                namespace,
                &names::config_map(name),
                uid,
            ),
            service_account: named(&stores.service_accounts, namespace, &launcher_rbac, uid)
                .filter(|_| training),
            role: named(&stores.roles, namespace, &launcher_rbac, uid).filter(|_| training),
            role_binding: named(&stores.role_bindings, namespace, &launcher_rbac, uid)
                .filter(|_| training),
            pod_group: pod_groups::cached(stores, namespace, gang::pod_group_name(job), uid),
        }
    }

    /// The workers `job`'s status lists that the pod cache lacks: gone, or not in the cache
    /// yet.
    fn missing_workers(&self, job: JobRef<'_>) -> Vec<String> {
        job.status()
            .target_workers
            .into_iter()
            .filter(|worker| {
                !self
                    .pods
                    .iter()
                    .any(|pod| pod.metadata.name.as_deref() == Some(worker.as_str()))
            })
            .collect()
    }

    /// Whether the pod cache is behind the API server on `job`'s workers: a worker its status
    /// lists is missing from the cache but still exists. Planned from such a cache, the
    /// worker would be taken for deleted, blacklisted and replaced. The cache of this
    /// operator shows its own writes before it plans again ([`crate::freshness`]); this
    /// catches what it cannot: a worker created by another operator (two running by mistake)
    /// or a cache lagging for another reason. It costs one read per missing worker, and
    /// workers go missing only when they are deleted.
    ///
    /// # Errors
    /// A read failed.
    pub async fn workers_behind(&self, ctx: &Context, job: JobRef<'_>) -> Result<bool, Error> {
        let namespace = job.metadata().namespace.as_deref().unwrap_or_default();
        for worker in self.missing_workers(job) {
            if read_metadata::<Pod>(ctx, namespace, &worker)
                .await?
                .is_some()
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The objects that may control the children of `job`: the job, and its launcher Job.
    pub fn owner(&self, job: JobRef<'_>) -> Owner {
        Owner {
            job: job.uid().to_string(),
            launcher_job: self
                .launcher_job
                .as_ref()
                .and_then(|launcher| launcher.metadata.uid.clone()),
        }
    }

    /// The engine's view of `job` with these children; `taken` are names of its children
    /// found held by objects it does not control, `rejected_pod` a pod the API server
    /// refused to create, `gang` the operator's gang scheduling.
    pub fn observed<'a>(
        &'a self,
        job: JobRef<'a>,
        ssh_secret: SecretPresence,
        taken: &'a [TakenName],
        rejected_pod: Option<&'a RejectedPod>,
        gang: Gang<'a>,
    ) -> Observed<'a> {
        Observed {
            job,
            launcher_job: self.launcher_job.as_deref(),
            pods: self.pods.iter().map(AsRef::as_ref).collect(),
            worker_service: self.worker_service.as_deref(),
            config_map: self.config_map.as_deref(),
            service_account: self.service_account.as_deref(),
            role: self.role.as_deref(),
            role_binding: self.role_binding.as_deref(),
            ssh_secret,
            scalers: &self.scalers,
            taken,
            rejected_pod,
            gang,
            pod_group: self.pod_group.as_ref(),
        }
    }
}

/// The metadata of the object `name` of kind `K` in `namespace` as the API server has it (not
/// a cache: for objects the caches may lack), or `None` when there is none.
///
/// # Errors
/// The read failed.
pub async fn read_metadata<K: NamespacedObject>(
    ctx: &Context,
    namespace: &str,
    name: &str,
) -> Result<Option<ObjectMeta>, Error> {
    let api: Api<K> = Api::namespaced(ctx.client.clone(), namespace);
    let found = api
        .get_metadata_opt(name)
        .await
        .map_err(|source| Error::Read {
            kind: K::KIND,
            name: name.into(),
            source,
        })?;
    Ok(found.map(|object| object.metadata))
}

/// The job a ScaleIn or ScaleOut request selects (`spec.selector.name`), if any.
pub fn selected_job(request: &DynamicObject) -> Option<&str> {
    request.data["spec"]["selector"]["name"].as_str()
}

/// The ScaleIn and ScaleOut requests that select TrainingJob `name`, found by the index of
/// requests by job, not by looking at every request.
fn scalers(stores: &Stores, namespace: &str, name: &str) -> Vec<Scaler> {
    [
        (
            ScalerKind::ScaleIn,
            &stores.scale_ins,
            &stores.scale_ins_by_job,
        ),
        (
            ScalerKind::ScaleOut,
            &stores.scale_outs,
            &stores.scale_outs_by_job,
        ),
    ]
    .into_iter()
    .flat_map(|(kind, store, by_job)| {
        let resource = crate::apply::request_resource(kind);
        by_job
            .names(namespace, name)
            .into_iter()
            .filter_map(move |request| {
                store.get(&ObjectRef::new_with(&request, resource.clone()).within(namespace))
            })
            .filter(move |request| by_job.has_key(request, name))
            .filter_map(move |request| {
                serde_json::to_value(request.as_ref())
                    .ok()
                    .map(|value| Scaler::read(kind, &value))
            })
    })
    .collect()
}

/// Whether the job's SSH Secret exists: the generated one is looked up in the cache, a
/// provided one (annotation `arena.kubeflow.org/ssh-secret`) is read from the API, metadata
/// only, and only while the job may still need pods.
///
/// # Errors
/// Reading a provided Secret failed for another reason than its absence.
pub async fn ssh_secret(ctx: &Context, job: JobRef<'_>) -> Result<SecretPresence, Error> {
    let namespace = job.metadata().namespace.as_deref().unwrap_or_default();
    let name = job.name();
    let finished = matches!(
        job.status().phase,
        Some(JobPhase::Succeeded | JobPhase::Failed)
    );
    let provided = match eto_engine::validation::validate_job(job).map(|spec| spec.ssh_secret) {
        Ok(SshSecretSource::Provided(secret)) => secret,
        Ok(SshSecretSource::Generated) => {
            let generated = names::generated_ssh_secret(name);
            let cached = ctx
                .stores
                .secrets
                .get(&ObjectRef::<Secret>::new(&generated).within(namespace));
            return Ok(if cached.is_some() {
                SecretPresence::Present
            } else {
                SecretPresence::Missing
            });
        }
        // An invalid job gets no pods: the answer does not matter.
        Err(_) => return Ok(SecretPresence::Present),
    };
    if finished {
        return Ok(SecretPresence::Present);
    }
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    match secrets.get_metadata_opt(&provided).await {
        Ok(Some(_)) => Ok(SecretPresence::Present),
        Ok(None) => Ok(SecretPresence::Missing),
        Err(source) => Err(Error::ReadSecret {
            name: provided,
            source,
        }),
    }
}
