//! Reading a job's children and requests from the watch caches. No API request is made here:
//! what a cache cannot answer is looked up in [`crate::lookups`].

use std::sync::Arc;

use eto_engine::children::Children;
use eto_engine::job::JobRef;
use eto_engine::scaling::{Scaler, ScalerKind};
use kube::Resource;
use kube::api::DynamicObject;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::context::Stores;
use crate::pod_groups;

fn named<K>(store: &Store<K>, namespace: &str, name: &str) -> Option<Arc<K>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    store.get(&ObjectRef::new(name).within(namespace))
}

/// The children of `job` in `stores` (see [`eto_engine::children`]): the objects of its
/// namespace under its children's names and the pods its uid controls, kept by the engine's
/// rule. Found by name or by controller uid, never by looking at other jobs' children.
pub fn children(stores: &Stores, job: JobRef<'_>) -> Children {
    let namespace = job.metadata().namespace.as_deref().unwrap_or_default();
    let wanted = Children::wanted(job);
    let launcher_job = wanted
        .launcher_job
        .as_deref()
        .and_then(|name| named(&stores.launcher_jobs, namespace, name));
    // Children share their job's namespace: a controller uid finds them all.
    let mut pods = stores.pods.controlled_by(namespace, job.uid());
    if let Some(launcher) = launcher_job
        .as_ref()
        .and_then(|launcher| launcher.metadata.uid.as_deref())
    {
        pods.extend(stores.pods.controlled_by(namespace, launcher));
    }
    let rbac = wanted.launcher_rbac.as_deref();
    let found = Children {
        pods,
        departed: stores.pods.departed_from(namespace, job.uid()),
        launcher_job,
        worker_service: named(&stores.services, namespace, &wanted.service),
        pod_services: wanted
            .pod_services
            .iter()
            .filter_map(|name| named(&stores.services, namespace, name))
            .collect(),
        config_map: named(&stores.config_maps, namespace, &wanted.config_map),
        service_account: rbac.and_then(|name| named(&stores.service_accounts, namespace, name)),
        role: rbac.and_then(|name| named(&stores.roles, namespace, name)),
        role_binding: rbac.and_then(|name| named(&stores.role_bindings, namespace, name)),
        scalers: if job.kind().scaled_by_requests() {
            scalers(stores, namespace, job.name())
        } else {
            Vec::new()
        },
        pod_group: pod_groups::cached(stores, namespace, &wanted.pod_group, job.uid()),
        autoscaler: wanted
            .autoscaler
            .as_deref()
            .and_then(|name| named(&stores.autoscalers, namespace, name)),
    };
    Children::controlled(job, found)
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
        let resource = crate::resources::request_resource(kind);
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
