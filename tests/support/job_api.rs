//! The API of a job of any kind, from the job itself: tests that apply jobs of several kinds
//! (the examples, the chaos benchmark's shapes) reach each through its `apiVersion` and
//! `kind`.

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::GroupVersionKind;

/// The API of `job`'s kind in `namespace`.
pub fn of(client: &Client, namespace: &str, job: &DynamicObject) -> Api<DynamicObject> {
    let types = job
        .types
        .as_ref()
        .expect("the job names its apiVersion and kind");
    let kind = GroupVersionKind::try_from(types).expect("a group, version and kind");
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&kind))
}
