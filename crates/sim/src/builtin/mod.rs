//! What kube-apiserver does specially for some built-in types, a module each: pod defaults
//! and spec immutability (`pods`), Job defaults and selectors (`jobs`), HorizontalPodAutoscaler
//! defaults and bounds (`autoscalers`), service cluster IPs (`services`), the limits of Events
//! (`events`), CustomResourceDefinition registration (`crds`), and the garbage collector's
//! bookkeeping (`garbage_collection`). This module dispatches a write to them, and keeps the
//! namespaces' and Secrets' few rules and what a delete does.

use serde_json::{Value, json};

use crate::errors::{ApiError, Cause};
use crate::resources::{ResourceId, ResourceType};
use crate::store::{ObjectKey, State};

mod autoscalers;
mod crds;
mod events;
mod garbage_collection;
mod jobs;
mod pods;
mod services;

use autoscalers::admit_autoscaler;
use crds::{admit_crd, is_established};
pub use crds::{after_write, establish_due};
use events::admit_event;
pub use garbage_collection::{collect_garbage, orphan_dependents};
use jobs::admit_job;
use pods::admit_pod;
use services::admit_service;

fn is(resource: &ResourceType, group: &str, plural: &str) -> bool {
    resource.id.group == group && resource.id.plural == plural
}

fn invalid(resource: &ResourceType, object: &Value, causes: Vec<Cause>) -> ApiError {
    ApiError::Invalid {
        group: resource.id.group.clone(),
        kind: resource.kind.clone(),
        name: object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        causes,
    }
}

/// Type-specific defaults and checks of a write, after the generic metadata handling.
pub fn admit(
    state: &State,
    resource: &ResourceType,
    old: Option<&Value>,
    object: &mut Value,
) -> Result<(), ApiError> {
    if is(resource, "", "pods") {
        admit_pod(resource, old, object)
    } else if is(resource, "", "services") {
        admit_service(state, resource, old, object)
    } else if is(resource, "batch", "jobs") {
        admit_job(resource, old, object)
    } else if is(resource, "", "namespaces") {
        if old.is_none() {
            object["spec"]["finalizers"] = json!(["kubernetes"]);
            object["status"]["phase"] = json!("Active");
        }
        // As kube-apiserver's admission: a label naming the namespace, always.
        let name = object["metadata"]["name"].clone();
        object["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
        Ok(())
    } else if is(resource, "", "events") {
        admit_event(resource, object)
    } else if is(resource, "", "secrets") {
        if object["type"].as_str().is_none_or(str::is_empty) {
            object["type"] = json!("Opaque");
        }
        Ok(())
    } else if is(resource, "autoscaling", "horizontalpodautoscalers") {
        admit_autoscaler(resource, object)
    } else if is(
        resource,
        "apiextensions.k8s.io",
        "customresourcedefinitions",
    ) {
        let established = is_established(object)
            || old.is_some_and(is_established)
            || state.crd_establish_delay.is_zero();
        admit_crd(resource, object, established).map(drop)
    } else {
        Ok(())
    }
}

/// Effects of a removal: dependents are queued for garbage collection, and a CRD takes its
/// objects and its resource type with it.
pub fn after_remove(state: &mut State, resource: &ResourceType, removed: &Value) {
    if let Some(uid) = removed["metadata"]["uid"].as_str() {
        state.gc_queue.push(uid.to_string());
    }
    if is(
        resource,
        "apiextensions.k8s.io",
        "customresourcedefinitions",
    ) {
        let group = removed["spec"]["group"].as_str().unwrap_or_default();
        let plural = removed["spec"]["names"]["plural"]
            .as_str()
            .unwrap_or_default();
        let id = ResourceId::new(group, plural);
        let keys: Vec<ObjectKey> = state.list(&id, None).map(|(key, _)| key.clone()).collect();
        for key in keys {
            if let Some(object) = state.remove(&id, &key)
                && let Some(uid) = object["metadata"]["uid"].as_str()
            {
                state.gc_queue.push(uid.to_string());
            }
        }
        state.drop_resource(&id);
        state.registry.remove(&id);
        if let Some(name) = removed["metadata"]["name"].as_str() {
            state.establishing.remove(name);
        }
    }
}

/// The grace period of a delete: pods that run on a node get theirs (the request's, else
/// `terminationGracePeriodSeconds`); everything else goes at once.
pub fn grace_period(resource: &ResourceType, object: &Value, requested: Option<i64>) -> i64 {
    if !is(resource, "", "pods")
        || object["spec"]["nodeName"]
            .as_str()
            .unwrap_or_default()
            .is_empty()
    {
        return 0;
    }
    requested
        .or_else(|| object["spec"]["terminationGracePeriodSeconds"].as_i64())
        .unwrap_or(30)
        .max(0)
}

/// Whether an object being deleted stays when a write leaves it without finalizers: a pod
/// bound to a node and deleted with a grace period goes when its kubelet ends it (or a
/// deletion without grace forces it), whatever else writes to it meanwhile.
pub fn awaits_its_kubelet(resource: &ResourceType, object: &Value) -> bool {
    is(resource, "", "pods")
        && !object["spec"]["nodeName"]
            .as_str()
            .unwrap_or_default()
            .is_empty()
        && object["metadata"]["deletionGracePeriodSeconds"]
            .as_i64()
            .is_some_and(|grace| grace > 0)
}

/// Whether a delete only marks the object: namespaces wait for their contents to go.
pub fn holds_deletion(resource: &ResourceType, object: &Value) -> bool {
    is(resource, "", "namespaces")
        && object["spec"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
}

/// Marks an object whose deletion started: namespaces become `Terminating`, and the
/// collector is told about namespaces and foreground deletions it has to finish.
pub fn deletion_started(state: &mut State, resource: &ResourceType, object: &mut Value) {
    let foreground = object["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| f.contains(&json!("foregroundDeletion")));
    if is(resource, "", "namespaces") {
        object["status"]["phase"] = json!("Terminating");
    }
    if (is(resource, "", "namespaces") || foreground)
        && let Some(uid) = object["metadata"]["uid"].as_str()
    {
        state.gc_queue.push(uid.to_string());
    }
}
