//! Whether an object already says what eto would apply, so that a reconcile with nothing to
//! change writes nothing.

use serde::Serialize;
use serde_json::Value;

/// Whether every field `desired` sets has the same value in `observed`. Fields only the API
/// server or other managers set (defaults, status, other labels) do not matter; lists must
/// match item by item.
pub fn is_applied(desired: &impl Serialize, observed: &impl Serialize) -> bool {
    match (
        serde_json::to_value(desired),
        serde_json::to_value(observed),
    ) {
        (Ok(desired), Ok(observed)) => contained(&desired, &observed),
        _ => false,
    }
}

fn contained(desired: &Value, observed: &Value) -> bool {
    match (desired, observed) {
        (Value::Object(desired), Value::Object(observed)) => {
            desired.iter().all(|(key, value)| match observed.get(key) {
                Some(observed) => contained(value, observed),
                None => value.is_null(),
            })
        }
        (Value::Array(desired), Value::Array(observed)) => {
            desired.len() == observed.len()
                && desired.iter().zip(observed).all(|(d, o)| contained(d, o))
        }
        (desired, observed) => desired == observed,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn defaults_and_extra_fields_do_not_count_but_differences_do() {
        let desired = json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        let observed = json!({"metadata": {"name": "a", "uid": "u", "labels": {"x": "1", "y": "2"}}, "spec": {"containers": [{"name": "c", "image": "i", "imagePullPolicy": "IfNotPresent"}], "dnsPolicy": "ClusterFirst"}, "status": {}});
        assert!(is_applied(&desired, &observed));
        let changed = json!({"metadata": {"name": "a", "labels": {"x": "2"}}});
        assert!(!is_applied(&changed, &observed));
        let more_containers = json!({"spec": {"containers": [{"name": "c"}, {"name": "d"}]}});
        assert!(!is_applied(&more_containers, &observed));
    }
}
