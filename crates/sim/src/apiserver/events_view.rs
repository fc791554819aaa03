//! `events.k8s.io/v1` Events are stored as core `v1` Events, as kube-apiserver stores them, so
//! that an Event written through either API is read through both (`kubectl get events` and
//! `kubectl describe` read the core API; operators such as eto write the new one).

use serde_json::{Map, Value};

/// Field renames between the two representations: (`events.k8s.io/v1`, core `v1`).
const RENAMES: [(&str, &str); 6] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn rename(object: &Value, from_new: bool, api_version: &str) -> Value {
    let Value::Object(map) = object else {
        return object.clone();
    };
    let mut renamed = Map::new();
    for (key, value) in map {
        let key = RENAMES
            .iter()
            .find(|(new, old)| if from_new { new == key } else { old == key })
            .map(|(new, old)| if from_new { *old } else { *new })
            .unwrap_or(key.as_str());
        renamed.insert(key.to_string(), value.clone());
    }
    renamed.insert("apiVersion".into(), Value::String(api_version.to_string()));
    renamed.insert("kind".into(), Value::String("Event".into()));
    // The core API names the reporting controller twice.
    if from_new {
        if let Some(controller) = map.get("reportingController") {
            renamed.insert("reportingComponent".into(), controller.clone());
            renamed.remove("reportingController");
        }
    } else if let Some(component) = map.get("reportingComponent") {
        renamed.insert("reportingController".into(), component.clone());
        renamed.remove("reportingComponent");
    }
    Value::Object(renamed)
}

/// An `events.k8s.io/v1` Event in its stored (core `v1`) form.
pub fn to_core(event: &Value) -> Value {
    rename(event, true, "v1")
}

/// A stored (core `v1`) Event as `events.k8s.io/v1` shows it.
pub fn from_core(event: &Value) -> Value {
    rename(event, false, "events.k8s.io/v1")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn events_convert_both_ways() {
        let new = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "n"},
            "regarding": {"kind": "Pod", "name": "p"}, "note": "hello", "reason": "Started",
            "type": "Normal", "reportingController": "eto", "reportingInstance": "eto-0",
            "eventTime": "2026-11-22T00:00:00.000000Z", "action": "Start"
        });
        let core = to_core(&new);
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["message"], "hello");
        assert_eq!(core["reportingComponent"], "eto");
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(from_core(&core), new);
    }
}
