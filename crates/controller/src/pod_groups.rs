//! PodGroups for gang scheduling (see [`eto_engine::gang`]): their API, whether the cluster
//! serves it, and reading, writing and deleting a job's PodGroup.
//!
//! The PodGroup CRDs are the gang scheduler's, not eto's. When the scheduler the operator is
//! set to use has no PodGroup API in the cluster, the operator says so at start-up and keeps
//! running: jobs are planned with [`Gang::Missing`] (no pods, a condition naming the CRD)
//! until the PodGroup watch completes a list, which it retries with backoff, so installing
//! the scheduler later is picked up without a restart.

use std::sync::Arc;

use eto_api::well_known::MANAGER;
use eto_engine::gang::{Gang, GangScheduler, PodGroup};
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;

use crate::context::{Context, Stores};
use crate::error::Error;
use crate::listed::Listed;
use crate::ownership::Owner;

/// The name [`Listed`] knows the PodGroup cache by.
pub const POD_GROUPS: &str = "PodGroup";

/// The gang scheduler the operator uses, and whether its PodGroups are served.
#[derive(Clone, Debug)]
pub struct GangSettings {
    /// The scheduler.
    pub scheduler: GangScheduler,
    /// The caches' first lists: the PodGroup API is served once its cache has listed.
    pub listed: Listed,
}

impl GangSettings {
    /// Gang scheduling as jobs are planned with it now.
    pub fn gang(&self) -> Gang<'_> {
        if self.listed.has(&[POD_GROUPS]) {
            Gang::Ready(&self.scheduler)
        } else {
            Gang::Missing(&self.scheduler)
        }
    }
}

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

fn api(client: &Client, namespace: Option<&str>, resource: &ApiResource) -> Api<DynamicObject> {
    match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

/// Whether the cluster serves `scheduler`'s PodGroups where `namespace` (every namespace for
/// `None`) can be listed: `false` for a 404 (no such API).
///
/// # Errors
/// Listing failed for another reason (for example RBAC).
pub async fn served(
    client: &Client,
    namespace: Option<&str>,
    scheduler: &GangScheduler,
) -> Result<bool, kube::Error> {
    let groups = api(client, namespace, &resource(scheduler));
    match groups.list_metadata(&ListParams::default().limit(1)).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(error) => Err(error),
    }
}

/// The PodGroup `name` in `namespace` that the object with `uid` controls, as the cache shows
/// it; `None` when there is none, or it does not read as a PodGroup.
pub fn cached(stores: &Stores, namespace: &str, name: &str, uid: &str) -> Option<PodGroup> {
    let object: Arc<DynamicObject> = stores
        .pod_groups
        .get(&ObjectRef::new_with(name, stores.pod_groups_resource.clone()).within(namespace))?;
    if !eto_engine::kind::controlled_by(&object.metadata, uid) {
        return None;
    }
    let value = serde_json::to_value(object.as_ref()).ok()?;
    serde_json::from_value(value).ok()
}

fn cached_object(ctx: &Context, namespace: &str, name: &str) -> Option<Arc<DynamicObject>> {
    let stores = &ctx.stores;
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
    let groups = api(&ctx.client, Some(namespace), resource);
    // A PodGroup of the job's name may be someone else's (made by hand, or by mpi-operator for
    // the same MPIJob): never written over.
    let existing = match cached_object(ctx, namespace, &name) {
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
    let groups = api(&ctx.client, Some(namespace), resource);
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
