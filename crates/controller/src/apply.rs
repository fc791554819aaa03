//! Carrying out a plan: the only place that writes.
//!
//! Order, and why:
//! 1. The generated SSH Secret, created once (never applied again: its key pair must not
//!    change under running pods).
//! 2. Children, with server-side apply under the field manager `eto`, forced (eto owns them),
//!    in the plan's order: the launcher's ServiceAccount, Role and RoleBinding, the worker
//!    Service, new workers, the ConfigMap, then the launcher (which mounts the ConfigMap and
//!    runs as the ServiceAccount).
//! 3. Deletions (scale-in victims, pods of a failed run, clean-up after the job finished).
//! 4. The status, with server-side apply of `/status`: written after the children, so that a
//!    failed write of a child leaves the status describing what exists, and the next reconcile
//!    tries again.
//! 5. Events, best effort: a failure to record one is logged, not retried.
//! 6. The deletion of a finished job whose time to live ran out.

use eto_api::well_known::MANAGER;
use eto_engine::plan::{Child, ChildKind, Plan};
use k8s_openapi::api::core::v1::{ObjectReference, Pod, Secret, Service};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::context::Context;
use crate::error::Error;
use crate::ssh_keys;

/// The job a plan is for.
pub struct JobTarget<'a> {
    /// The job as the controller sees it.
    pub object: &'a DynamicObject,
    /// The TrainingJob resource.
    pub resource: &'a ApiResource,
}

impl JobTarget<'_> {
    fn namespace(&self) -> &str {
        self.object
            .metadata
            .namespace
            .as_deref()
            .unwrap_or_default()
    }

    fn name(&self) -> &str {
        self.object.metadata.name.as_deref().unwrap_or_default()
    }

    fn reference(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some(self.resource.api_version.clone()),
            kind: Some(self.resource.kind.clone()),
            name: self.object.metadata.name.clone(),
            namespace: self.object.metadata.namespace.clone(),
            uid: self.object.metadata.uid.clone(),
            resource_version: self.object.metadata.resource_version.clone(),
            field_path: None,
        }
    }
}

fn params() -> PatchParams {
    PatchParams::apply(MANAGER).force()
}

async fn apply_one<K>(
    client: &Client,
    namespace: &str,
    object: &K,
    kind: &'static str,
) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Serialize
        + DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    let name = object.meta().name.clone().unwrap_or_default();
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    api.patch(&name, &params(), &Patch::Apply(object))
        .await
        .map_err(|source| Error::Apply { kind, name, source })?;
    Ok(())
}

async fn apply_child(client: &Client, namespace: &str, child: &Child) -> Result<(), Error> {
    match child {
        Child::Pod(pod) => apply_one(client, namespace, pod.as_ref(), "Pod").await,
        Child::Service(service) => apply_one(client, namespace, service.as_ref(), "Service").await,
        Child::ConfigMap(config_map) => {
            apply_one(client, namespace, config_map.as_ref(), "ConfigMap").await
        }
        Child::ServiceAccount(account) => {
            apply_one(client, namespace, account.as_ref(), "ServiceAccount").await
        }
        Child::Role(role) => apply_one(client, namespace, role.as_ref(), "Role").await,
        Child::RoleBinding(binding) => {
            apply_one(client, namespace, binding.as_ref(), "RoleBinding").await
        }
    }
}

/// Carries out `plan` for `job`; see the module documentation for the order.
///
/// # Errors
/// The first write that failed; nothing after it is attempted.
pub async fn execute(ctx: &Context, job: &JobTarget<'_>, plan: Plan) -> Result<(), Error> {
    let client = &ctx.client;
    let namespace = job.namespace();
    if let Some(secret) = plan.create_ssh_secret {
        let name = secret.metadata.name.clone().unwrap_or_default();
        let comment = format!("eto:{namespace}/{}", job.name());
        let secret = ssh_keys::with_new_key_pair(secret, &comment).map_err(Error::GenerateKey)?;
        let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
        let created = secrets
            .create(
                &PostParams {
                    field_manager: Some(MANAGER.into()),
                    ..PostParams::default()
                },
                &secret,
            )
            .await;
        match created {
            Ok(_) => {
                ctx.metrics.writes.inc();
            }
            // Created by an earlier reconcile whose write the cache has not shown yet.
            Err(kube::Error::Api(status)) if status.is_already_exists() => {}
            Err(source) => return Err(Error::CreateSecret { name, source }),
        }
    }
    for child in &plan.apply {
        apply_child(client, namespace, child).await?;
        ctx.metrics.writes.inc();
    }
    for deletion in &plan.delete {
        let result = match deletion.kind {
            ChildKind::Pod => Api::<Pod>::namespaced(client.clone(), namespace)
                .delete(&deletion.name, &DeleteParams::background())
                .await
                .map(drop),
            ChildKind::Service => Api::<Service>::namespaced(client.clone(), namespace)
                .delete(&deletion.name, &DeleteParams::background())
                .await
                .map(drop),
        };
        match result {
            Ok(()) => {
                ctx.metrics.writes.inc();
            }
            Err(kube::Error::Api(status)) if status.is_not_found() => {}
            Err(source) => {
                let kind = match deletion.kind {
                    ChildKind::Pod => "Pod",
                    ChildKind::Service => "Service",
                };
                return Err(Error::Delete {
                    kind,
                    name: deletion.name.clone(),
                    source,
                });
            }
        }
    }
    let jobs: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, job.resource);
    if let Some(status) = &plan.status {
        let patch = json!({"apiVersion": job.resource.api_version, "kind": job.resource.kind, "status": status});
        jobs.patch_status(job.name(), &params(), &Patch::Apply(&patch))
            .await
            .map_err(Error::Status)?;
    }
    let reference = job.reference();
    for event in &plan.events {
        if event.reason == "WorkerLost" {
            ctx.metrics.workers_lost.inc();
        }
        let event = Event {
            type_: if event.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: event.reason.clone(),
            note: Some(event.note.clone()),
            action: event.action.clone(),
            secondary: None,
        };
        if let Err(error) = ctx.recorder.publish(&event, &reference).await {
            tracing::warn!(job = job.name(), namespace, %error, reason = event.reason, "failed to record an event");
        }
    }
    if plan.delete_job {
        match jobs.delete(job.name(), &DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.is_not_found() => {}
            Err(source) => return Err(Error::DeleteJob(source)),
        }
    }
    Ok(())
}
