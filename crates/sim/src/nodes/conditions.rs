//! Pod conditions as the kubelet and the scheduler write them.

use serde_json::{Value, json};

use crate::options::timestamp_now;

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
