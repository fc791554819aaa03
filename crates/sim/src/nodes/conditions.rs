//! Pod conditions as the kubelet and the scheduler write them.

use std::sync::Arc;

use serde_json::{Value, json};

use super::pods;
use crate::options::{DeleteOptions, Subresource, WriteOptions, timestamp_now};
use crate::resources::ResourceType;
use crate::store::{ObjectKey, State};

/// Sets a pod condition, keeping `lastTransitionTime` when the status does not change.
pub fn set_condition(pod: &mut Value, condition: Value) {
    let conditions = pod["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut updated: Vec<Value> = Vec::new();
    let mut found = false;
    for existing in conditions {
        if existing["type"] == condition["type"] {
            found = true;
            let mut merged = condition.clone();
            if existing["status"] == condition["status"] {
                merged["lastTransitionTime"] = existing["lastTransitionTime"].clone();
            }
            updated.push(merged);
        } else {
            updated.push(existing);
        }
    }
    if !found {
        updated.push(condition);
    }
    pod["status"]["conditions"] = Value::Array(updated);
}

/// `pod` with the condition `DisruptionTarget=True` of `reason` and `message`, as Kubernetes
/// marks a pod it is about to stop.
pub fn disruption_target(pod: &Value, reason: &str, message: &str) -> Value {
    let mut marked = pod.clone();
    set_condition(
        &mut marked,
        json!({"type": "DisruptionTarget", "status": "True", "reason": reason, "message": message, "lastTransitionTime": timestamp_now()}),
    );
    marked
}

/// Marks pod `key` `DisruptionTarget` with `(reason, message)` and deletes it with its grace
/// period, as the control plane does with a pod it takes away; whether it wrote.
pub fn delete_disrupted(
    state: &mut State,
    resource: &ResourceType,
    key: &ObjectKey,
    (reason, message): (&str, &str),
    options: &WriteOptions,
) -> bool {
    let Some(pod) = state.get(&pods(), key).map(Arc::clone) else {
        return false;
    };
    let marked = state
        .replace(
            resource,
            &key.namespace,
            &key.name,
            disruption_target(&pod, reason, message),
            Some(Subresource::Status),
            options,
        )
        .is_ok();
    let deleted = state
        .delete(
            resource,
            &key.namespace,
            &key.name,
            &DeleteOptions::default(),
        )
        .is_ok();
    marked || deleted
}
