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
//!
//! It returns what the next reconcile must see in the caches (see [`crate::freshness`]).

use eto_api::well_known::MANAGER;
use eto_engine::plan::{Child, ChildKind, Plan, WORKER_LOST};
use k8s_openapi::api::core::v1::{ObjectReference, Pod, Secret, Service};
use kube::Resource;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::context::Context;
use crate::error::Error;
use crate::freshness::Written;
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

/// Applies one child and counts the write.
async fn apply_one<K>(ctx: &Context, namespace: &str, object: &K) -> Result<(), Error>
where
    K: k8s_openapi::Resource
        + Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Serialize
        + DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    let name = object.meta().name.clone().unwrap_or_default();
    let api: Api<K> = Api::namespaced(ctx.client.clone(), namespace);
    api.patch(&name, &params(), &Patch::Apply(object))
        .await
        .map_err(|source| Error::Apply {
            kind: K::KIND,
            name,
            source,
        })?;
    ctx.metrics.writes.inc();
    Ok(())
}

async fn apply_child(
    ctx: &Context,
    namespace: &str,
    child: &Child,
    written: &mut Written,
) -> Result<(), Error> {
    match child {
        Child::Pod(pod) => {
            let cached =
                ObjectRef::new(pod.metadata.name.as_deref().unwrap_or_default()).within(namespace);
            let created = ctx.stores.pods.get(&cached).is_none();
            apply_one(ctx, namespace, pod.as_ref()).await?;
            if created {
                written.created_pods.push(cached);
            }
            Ok(())
        }
        Child::Service(service) => apply_one(ctx, namespace, service.as_ref()).await,
        Child::ConfigMap(config_map) => apply_one(ctx, namespace, config_map.as_ref()).await,
        Child::ServiceAccount(account) => apply_one(ctx, namespace, account.as_ref()).await,
        Child::Role(role) => apply_one(ctx, namespace, role.as_ref()).await,
        Child::RoleBinding(binding) => apply_one(ctx, namespace, binding.as_ref()).await,
    }
}

/// Deletes one child in the background and counts the write; one already gone is not an error.
async fn delete_one<K>(ctx: &Context, namespace: &str, name: &str) -> Result<(), Error>
where
    K: k8s_openapi::Resource
        + Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(ctx.client.clone(), namespace);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => {
            ctx.metrics.writes.inc();
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(source) => Err(Error::Delete {
            kind: K::KIND,
            name: name.into(),
            source,
        }),
    }
}

/// Carries out `plan` for `job`; see the module documentation for the order. Returns the
/// writes the caches must show before the job is planned again.
///
/// # Errors
/// The first write that failed; nothing after it is attempted.
pub async fn execute(ctx: &Context, job: &JobTarget<'_>, plan: Plan) -> Result<Written, Error> {
    let mut written = Written::default();
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
        apply_child(ctx, namespace, child, &mut written).await?;
    }
    for deletion in &plan.delete {
        match deletion.kind {
            ChildKind::Pod => delete_one::<Pod>(ctx, namespace, &deletion.name).await?,
            ChildKind::Service => delete_one::<Service>(ctx, namespace, &deletion.name).await?,
        }
    }
    let jobs: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, job.resource);
    if let Some(status) = &plan.status {
        let patch = json!({"apiVersion": job.resource.api_version, "kind": job.resource.kind, "status": status});
        let after = jobs
            .patch_status(job.name(), &params(), &Patch::Apply(&patch))
            .await
            .map_err(Error::Status)?;
        let before = job.object.metadata.resource_version.clone();
        if let Some(before) = before.filter(|b| after.metadata.resource_version.as_ref() != Some(b))
        {
            let cached = ObjectRef::from_obj_with(job.object, job.resource.clone());
            written.status = Some((cached, before));
        }
    }
    let reference = job.reference();
    for event in &plan.events {
        if event.reason == WORKER_LOST {
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
    Ok(written)
}
