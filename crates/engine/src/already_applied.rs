//! Whether an object already says what eto would apply, so that a reconcile with nothing to
//! change writes nothing.

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use serde::Serialize;
use serde_json::Value;

use crate::quantity;

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

/// Whether `observed` already says what `desired` would apply. The API server writes
/// quantities in their canonical form (`1000m` reads back as `1`), so the metrics' amounts
/// compare by value.
pub fn autoscaler_is_applied(
    desired: &HorizontalPodAutoscaler,
    observed: &HorizontalPodAutoscaler,
) -> bool {
    match (
        serde_json::to_value(desired),
        serde_json::to_value(observed),
    ) {
        (Ok(mut desired), Ok(mut observed)) => {
            for value in [&mut desired, &mut observed] {
                amounts_by_value(value);
            }
            is_applied(&desired, &observed)
        }
        _ => false,
    }
}

/// Replaces the text of every metric target amount in `value` by its value in thousandths.
fn amounts_by_value(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            for (key, field) in fields.iter_mut() {
                let amount = match field {
                    Value::String(text) if key == "value" || key == "averageValue" => {
                        quantity::parse(text)
                    }
                    _ => None,
                };
                match amount {
                    Some(thousandths) => *field = Value::String(thousandths.to_string()),
                    None => amounts_by_value(field),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(amounts_by_value),
        _ => {}
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
