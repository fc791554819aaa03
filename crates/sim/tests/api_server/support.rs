//! Helpers shared by eto-sim's integration tests.

use serde_json::Value;

/// An object as stored, without what the cluster assigns on creation: identity, times,
/// managed fields, a Service's cluster IPs.
pub fn without_assigned(mut object: Value) -> Value {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
        ] {
            metadata.remove(field);
        }
    }
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("clusterIP");
        spec.remove("clusterIPs");
    }
    object
}
