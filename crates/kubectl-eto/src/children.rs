//! The objects eto made for a job, read from the API server and selected by the engine's rule
//! (see [`eto_engine::children`]), so that the engine can be asked what it would decide.

use std::sync::Arc;

use eto_engine::children::Children;
use eto_engine::gang::Gang;
use eto_engine::job::JobRef;
use eto_engine::plan::{Observed, SecretPresence};
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::Resource;
use kube::api::{Api, ListParams};
use serde::de::DeserializeOwned;

use crate::error::{Error, Request, is_not_found};

/// The object `name` of `K` in `namespace`, whoever controls it.
async fn named<K>(
    client: &Client,
    namespace: &str,
    resource: &str,
    name: &str,
) -> Result<Option<Arc<K>>, Error>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    match api.get_opt(name).await {
        Ok(object) => Ok(object.map(Arc::new)),
        Err(error) if is_not_found(&error) => Ok(None),
        Err(error) => Err(Request {
            verb: "get",
            resource,
            namespace: Some(namespace),
        }
        .failed(error)),
    }
}

/// Reads the children of `job` from the API server: the objects of its namespace under the
/// names [`Children::wanted`] gives and the pods with its job label, kept by the engine's rule
/// ([`Children::controlled`]), as the operator keeps those of its caches. Its ScaleIn and
/// ScaleOut requests, and a PyTorchJob's autoscaler, are not read: they do not change which
/// hosts are ready.
pub async fn fetch(client: &Client, job: JobRef<'_>) -> Result<Children, Error> {
    let namespace = job.namespace();
    let wanted = Children::wanted(job);
    let launcher_job = match &wanted.launcher_job {
        Some(name) => named(client, namespace, "jobs.batch", name).await?,
        None => None,
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector = format!("{}={}", job.kind().vocabulary().job_name_label, job.name());
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
        .map(Arc::new)
        .collect();
    let mut found = Children {
        pods,
        launcher_job,
        worker_service: named(client, namespace, "services", &wanted.service).await?,
        config_map: named(client, namespace, "configmaps", &wanted.config_map).await?,
        ..Children::default()
    };
    if let Some(rbac) = &wanted.launcher_rbac {
        found.service_account = named(client, namespace, "serviceaccounts", rbac).await?;
        found.role = named(client, namespace, "roles.rbac.authorization.k8s.io", rbac).await?;
        found.role_binding = named(
            client,
            namespace,
            "rolebindings.rbac.authorization.k8s.io",
            rbac,
        )
        .await?;
    }
    Ok(Children::controlled(job, found))
}

/// The engine's view of `job` with `children`, as the operator would plan it: the SSH Secret
/// taken as present, no requests, no gang scheduler (none of them changes which hosts are
/// ready).
pub fn observed<'a>(children: &'a Children, job: JobRef<'a>) -> Observed<'a> {
    children.observed(job, SecretPresence::Present, &[], None, Gang::Off)
}
