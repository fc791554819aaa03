//! The objects eto made for a job, read from the cluster the way the operator's caches hold
//! them, so that the engine can be asked what it would decide.

use eto_engine::kind::{JobRef, Kind};
use eto_engine::names;
use eto_engine::plan::{Observed, SecretPresence};
use k8s_openapi::api::batch::v1::Job as BatchJob;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, ListParams};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use crate::error::{Error, Request, is_not_found};

/// A job's children: objects it controls, and the pods of an MPIJob's launcher Job.
#[derive(Clone, Debug, Default)]
pub struct Children {
    /// Its pods, workers and launcher.
    pub pods: Vec<Pod>,
    /// An MPIJob's launcher Job.
    pub launcher_job: Option<BatchJob>,
    /// The Service of its workers.
    pub service: Option<Service>,
    /// Its ConfigMap.
    pub config_map: Option<ConfigMap>,
    /// A TrainingJob's launcher ServiceAccount.
    pub service_account: Option<ServiceAccount>,
    /// A TrainingJob's launcher Role.
    pub role: Option<Role>,
    /// A TrainingJob's launcher RoleBinding.
    pub role_binding: Option<RoleBinding>,
}

/// Whether `object` is controlled by the object with `uid`.
fn controlled_by<K: Resource>(object: &K, uid: &str) -> bool {
    eto_engine::kind::controlled_by(object.meta(), uid)
}

async fn named<K>(
    client: &Client,
    namespace: &str,
    resource: &str,
    name: &str,
    owner: &str,
) -> Result<Option<K>, Error>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    match api.get_opt(name).await {
        Ok(object) => Ok(object.filter(|object| controlled_by(object, owner))),
        Err(error) if is_not_found(&error) => Ok(None),
        Err(error) => Err(Request {
            verb: "get",
            resource,
            namespace: Some(namespace),
        }
        .failed(error)),
    }
}

impl Children {
    /// Reads the children of `job`.
    pub async fn fetch(client: &Client, job: JobRef<'_>) -> Result<Self, Error> {
        let namespace = job.namespace();
        let name = job.name();
        let uid = job.uid();
        let kind = job.kind();
        let launcher_job: Option<BatchJob> = match kind {
            Kind::MpiJob => {
                named(client, namespace, "jobs.batch", &names::launcher(name), uid).await?
            }
            Kind::TrainingJob => None,
        };
        let launcher_uid = launcher_job
            .as_ref()
            .and_then(|launcher| launcher.metadata.uid.clone());
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let selector = format!("{}={name}", kind.job_name_label());
        let pods = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|error| {
                Request {
                    verb: "list",
                    resource: "pods",
                    namespace: Some(namespace),
                }
                .failed(error)
            })?
            .items
            .into_iter()
            .filter(|pod| {
                controlled_by(pod, uid)
                    || launcher_uid
                        .as_deref()
                        .is_some_and(|launcher| controlled_by(pod, launcher))
            })
            .collect();
        let rbac = names::launcher_rbac(name);
        let training = kind == Kind::TrainingJob;
        Ok(Self {
            pods,
            launcher_job,
            service: named(
                client,
                namespace,
                "services",
                &names::job_service(kind, name),
                uid,
            )
            .await?,
            config_map: named(
                client,
                namespace,
                "configmaps",
                &names::config_map(name),
                uid,
            )
            .await?,
            service_account: if training {
                named(client, namespace, "serviceaccounts", &rbac, uid).await?
            } else {
                None
            },
            role: if training {
                named(
                    client,
                    namespace,
                    "roles.rbac.authorization.k8s.io",
                    &rbac,
                    uid,
                )
                .await?
            } else {
                None
            },
            role_binding: if training {
                named(
                    client,
                    namespace,
                    "rolebindings.rbac.authorization.k8s.io",
                    &rbac,
                    uid,
                )
                .await?
            } else {
                None
            },
        })
    }

    /// The engine's view of `job` with these children. The SSH Secret is taken as present and
    /// ScaleIn and ScaleOut requests as absent: neither changes which hosts are ready.
    pub fn observed<'a>(&'a self, job: JobRef<'a>) -> Observed<'a> {
        Observed {
            job,
            launcher_job: self.launcher_job.as_ref(),
            pods: self.pods.iter().collect(),
            worker_service: self.service.as_ref(),
            config_map: self.config_map.as_ref(),
            service_account: self.service_account.as_ref(),
            role: self.role.as_ref(),
            role_binding: self.role_binding.as_ref(),
            ssh_secret: SecretPresence::Present,
            scalers: &[],
            taken: &[],
            rejected_pod: None,
            gang: eto_engine::gang::Gang::Off,
            pod_group: None,
        }
    }

    /// The launcher's pod: `<job>-launcher` of a TrainingJob, the newest pod of an MPIJob's
    /// launcher Job.
    pub fn launcher_pod(&self, job: JobRef<'_>) -> Option<&Pod> {
        let role_label = job.kind().role_label();
        self.pods
            .iter()
            .filter(|pod| {
                pod.metadata
                    .labels
                    .as_ref()
                    .and_then(|labels| labels.get(role_label))
                    .is_some_and(|role| role == eto_api::well_known::LAUNCHER_ROLE)
            })
            .max_by_key(|pod| pod.metadata.creation_timestamp.clone())
    }

    /// The worker pods, by index.
    pub fn workers(&self, job: JobRef<'_>) -> Vec<&Pod> {
        let mut workers: Vec<(u32, &Pod)> = self
            .pods
            .iter()
            .filter_map(|pod| {
                let index = names::worker_index(job.name(), pod.metadata.name.as_deref()?)?;
                Some((index, pod))
            })
            .collect();
        workers.sort_by_key(|(index, _)| *index);
        workers.into_iter().map(|(_, pod)| pod).collect()
    }
}
