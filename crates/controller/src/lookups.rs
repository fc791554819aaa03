//! Reads from the API server, where a watch cache cannot answer: a worker the pod cache lacks
//! (gone, or not in the cache yet), an object that may hold a child's name without being eto's
//! (the caches hold only eto's own objects), and a Secret a job names. Each reads metadata
//! only, and only when the caches leave the question open.

use eto_api::job_status::JobPhase;
use eto_engine::children::Children;
use eto_engine::effective_spec::SshSecretSource;
use eto_engine::job::JobRef;
use eto_engine::job::{Reference, Referenced};
use eto_engine::names;
use eto_engine::plan::SecretPresence;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;

use crate::context::Context;
use crate::error::Error;
use crate::resources::NamespacedObject;

/// Whether the pod cache is behind the API server on `job`'s workers: a worker its status
/// lists is missing from `children` but still exists. Planned from such a cache, the worker
/// would be taken for deleted, blacklisted and replaced. The cache of this operator shows its
/// own writes before it plans again ([`crate::freshness`]); this catches what it cannot: a
/// worker created by another operator (two running by mistake) or a cache lagging for another
/// reason. It costs one read per missing worker, and workers go missing only when they are
/// deleted.
///
/// # Errors
/// A read failed.
pub async fn workers_behind(
    ctx: &Context,
    children: &Children,
    job: JobRef<'_>,
) -> Result<bool, Error> {
    let namespace = job.metadata().namespace.as_deref().unwrap_or_default();
    for worker in children.missing_workers(job) {
        if read_metadata::<Pod>(ctx, namespace, &worker)
            .await?
            .is_some()
        {
            return Ok(true);
        }
    }
    Ok(false)
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

/// The object `reference` names (a TrainJob's runtime), as the API server has it now: read
/// at every reconcile of the job that names it, so that a runtime created or changed after
/// its job counts at once.
///
/// # Errors
/// The read failed for another reason than the object's absence.
pub async fn referenced(ctx: &Context, reference: &Reference) -> Result<Referenced, Error> {
    let api: Api<DynamicObject> = match &reference.namespace {
        Some(namespace) => Api::namespaced_with(ctx.client.clone(), namespace, &reference.resource),
        None => Api::all_with(ctx.client.clone(), &reference.resource),
    };
    let found = api
        .get_opt(&reference.name)
        .await
        .map_err(|source| Error::Read {
            kind: "runtime",
            name: reference.name.clone(),
            source,
        })?;
    Ok(match found {
        Some(object) => Referenced::Found(serde_json::to_value(object.data).unwrap_or_default()),
        None => Referenced::Missing,
    })
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
    let provided = match job.validate().map(|spec| spec.ssh_secret) {
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
        // An invalid job gets no pods, and a job without SSH mounts none: the answer does
        // not matter.
        Ok(SshSecretSource::Unused) | Err(_) => return Ok(SecretPresence::Present),
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
