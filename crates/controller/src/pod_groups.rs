//! PodGroups for gang scheduling (see [`eto_engine::gang`]): their API, and reading, writing
//! and deleting a job's PodGroup.
//!
//! The PodGroup CRDs are the gang scheduler's, not eto's. When the scheduler the operator is
//! set to use has no PodGroup API in the cluster, the operator says so at start-up and keeps
//! running: jobs are planned with [`eto_engine::gang::Gang::Missing`] (no pods, a condition naming the CRD)
//! until the PodGroup watch completes a list, which it retries with backoff, so installing
//! the scheduler later is picked up without a restart.

use std::sync::Arc;

use eto_api::well_known::MANAGER;
use eto_engine::pod_group::{GangScheduler, PodGroup};
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;

use crate::context::{Context, Stores};
use crate::error::Error;
use crate::ownership::Owner;
use crate::watches::dynamic_api;

/// The PodGroup resource of `scheduler`.
pub fn resource(scheduler: &GangScheduler) -> ApiResource {
    let (group, version) = (scheduler.group(), scheduler.version());
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: "PodGroup".into(),
        plural: "podgroups".into(),
    }
}

/// The PodGroup `name` in `namespace` that the object with `uid` controls, as the cache shows
/// it; `None` when there is none, or it does not read as a PodGroup.
pub fn cached(stores: &Stores, namespace: &str, name: &str, uid: &str) -> Option<PodGroup> {
    let object = cached_object(stores, namespace, name)?;
    if !eto_engine::job::controlled_by(&object.metadata, uid) {
        return None;
    }
    let value = serde_json::to_value(object.as_ref()).ok()?;
    serde_json::from_value(value).ok()
}

/// The PodGroup `name` in `namespace` as the cache shows it, whoever controls it.
fn cached_object(stores: &Stores, namespace: &str, name: &str) -> Option<Arc<DynamicObject>> {
    stores
        .pod_groups
        .get(&ObjectRef::new_with(name, stores.pod_groups_resource.clone()).within(namespace))
}

/// Applies `group` once the job may write it (see [`crate::ownership`]).
///
/// # Errors
/// The PodGroup of that name is not the job's, or the write failed.
pub async fn apply(
    ctx: &Context,
    namespace: &str,
    group: &PodGroup,
    owner: &Owner,
) -> Result<(), Error> {
    let name = group.metadata.name.clone().unwrap_or_default();
    let resource = &ctx.stores.pod_groups_resource;
    let groups = dynamic_api(&ctx.client, Some(namespace), resource);
    // A PodGroup of the job's name may be someone else's (made by hand, or by mpi-operator for
    // the same MPIJob): never written over.
    let existing = match cached_object(&ctx.stores, namespace, &name) {
        Some(cached) => Some(cached.metadata.clone()),
        None => groups
            .get_metadata_opt(&name)
            .await
            .map_err(|source| Error::Read {
                kind: "PodGroup",
                name: name.clone(),
                source,
            })?
            .map(|found| found.metadata),
    };
    if let Some(existing) = existing {
        owner.may_write("PodGroup", &existing)?;
    }
    let params = PatchParams::apply(MANAGER).force();
    groups
        .patch(&name, &params, &Patch::Apply(group))
        .await
        .map_err(|source| Error::Apply {
            kind: "PodGroup",
            name,
            source,
        })?;
    ctx.metrics.count_write("PodGroup", "apply");
    Ok(())
}

/// Deletes the PodGroup `name`; one already gone is not an error.
///
/// # Errors
/// The deletion failed.
pub async fn delete(ctx: &Context, namespace: &str, name: &str) -> Result<(), Error> {
    let resource = &ctx.stores.pod_groups_resource;
    let groups = dynamic_api(&ctx.client, Some(namespace), resource);
    match groups.delete(name, &DeleteParams::background()).await {
        Ok(_) => {
            ctx.metrics.count_write("PodGroup", "delete");
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(source) => Err(Error::Delete {
            kind: "PodGroup",
            name: name.into(),
            source,
        }),
    }
}
