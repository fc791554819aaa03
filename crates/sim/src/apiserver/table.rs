//! The `meta.k8s.io/v1` Table form of objects, which `kubectl get` asks for: printer columns
//! of custom resources, and the familiar columns of pods, nodes, services and events.

use serde_json::{Value, json};

use crate::resources::{ResourceType, read_json_path};

/// Whether an `Accept` header asks for a Table.
pub fn wanted(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

struct Column {
    name: &'static str,
    type_: &'static str,
    priority: i32,
    cell: fn(&Value, jiff::Timestamp) -> Value,
}

fn name(object: &Value, _: jiff::Timestamp) -> Value {
    object["metadata"]["name"].clone()
}

fn age(object: &Value, now: jiff::Timestamp) -> Value {
    Value::String(age_of(
        object["metadata"]["creationTimestamp"].as_str(),
        now,
    ))
}

/// A timestamp's age in kubectl's style (`45s`, `3m12s`, `2h`, `4d`), `<unknown>` if unset.
pub fn age_of(timestamp: Option<&str>, now: jiff::Timestamp) -> String {
    let Some(then) = timestamp.and_then(|t| t.parse::<jiff::Timestamp>().ok()) else {
        return "<unknown>".into();
    };
    let seconds = now.duration_since(then).as_secs().max(0);
    let (minutes, hours, days) = (seconds / 60, seconds / 3600, seconds / 86_400);
    match seconds {
        s if s < 120 => format!("{s}s"),
        _ if minutes < 10 => format!("{minutes}m{}s", seconds % 60),
        _ if minutes < 180 => format!("{minutes}m"),
        _ if hours < 8 => format!("{hours}h{}m", minutes % 60),
        _ if hours < 48 => format!("{hours}h"),
        _ if days < 8 => format!("{days}d{}h", hours % 24),
        _ => format!("{days}d"),
    }
}

/// The items of the array `items`, each formatted by `format`, comma-separated; `<none>` when
/// there are none (as kubectl prints empty lists).
fn comma_list(items: &Value, format: impl Fn(&Value) -> String) -> Value {
    let formatted: Vec<String> = items.as_array().into_iter().flatten().map(format).collect();
    json!(if formatted.is_empty() {
        "<none>".into()
    } else {
        formatted.join(",")
    })
}

fn pod_status(pod: &Value) -> String {
    if pod["metadata"].get("deletionTimestamp").is_some() {
        return "Terminating".into();
    }
    let statuses = pod["status"]["containerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for status in &statuses {
        if let Some(reason) = status["state"]["waiting"]["reason"].as_str() {
            return reason.into();
        }
        if let Some(reason) = status["state"]["terminated"]["reason"].as_str() {
            return reason.into();
        }
    }
    pod["status"]["reason"]
        .as_str()
        .or_else(|| pod["status"]["phase"].as_str())
        .unwrap_or("Pending")
        .into()
}

fn pod_columns() -> Vec<Column> {
    vec![
        Column {
            name: "Name",
            type_: "string",
            priority: 0,
            cell: name,
        },
        Column {
            name: "Ready",
            type_: "string",
            priority: 0,
            cell: |pod, _| {
                let total = pod["spec"]["containers"].as_array().map_or(0, Vec::len);
                let ready = pod["status"]["containerStatuses"]
                    .as_array()
                    .map_or(0, |s| {
                        s.iter()
                            .filter(|c| c["ready"].as_bool() == Some(true))
                            .count()
                    });
                json!(format!("{ready}/{total}"))
            },
        },
        Column {
            name: "Status",
            type_: "string",
            priority: 0,
            cell: |pod, _| json!(pod_status(pod)),
        },
        Column {
            name: "Restarts",
            type_: "string",
            priority: 0,
            cell: |pod, _| {
                let restarts: i64 = pod["status"]["containerStatuses"]
                    .as_array()
                    .map_or(0, |s| {
                        s.iter().filter_map(|c| c["restartCount"].as_i64()).sum()
                    });
                json!(restarts.to_string())
            },
        },
        Column {
            name: "Age",
            type_: "string",
            priority: 0,
            cell: age,
        },
        Column {
            name: "IP",
            type_: "string",
            priority: 1,
            cell: |pod, _| json!(pod["status"]["podIP"].as_str().unwrap_or("<none>")),
        },
        Column {
            name: "Node",
            type_: "string",
            priority: 1,
            cell: |pod, _| json!(pod["spec"]["nodeName"].as_str().unwrap_or("<none>")),
        },
    ]
}

fn node_columns() -> Vec<Column> {
    vec![
        Column {
            name: "Name",
            type_: "string",
            priority: 0,
            cell: name,
        },
        Column {
            name: "Status",
            type_: "string",
            priority: 0,
            cell: |node, _| {
                let ready = node["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True");
                let mut status = if ready {
                    "Ready".to_string()
                } else {
                    "NotReady".to_string()
                };
                if node["spec"]["unschedulable"].as_bool() == Some(true) {
                    status.push_str(",SchedulingDisabled");
                }
                json!(status)
            },
        },
        Column {
            name: "Age",
            type_: "string",
            priority: 0,
            cell: age,
        },
        Column {
            name: "GPUs",
            type_: "string",
            priority: 0,
            cell: |node, _| {
                json!(
                    node["status"]["allocatable"]["nvidia.com/gpu"]
                        .as_str()
                        .unwrap_or("0")
                )
            },
        },
        Column {
            name: "Taints",
            type_: "string",
            priority: 1,
            cell: |node, _| {
                comma_list(&node["spec"]["taints"], |t| {
                    format!(
                        "{}:{}",
                        t["key"].as_str().unwrap_or_default(),
                        t["effect"].as_str().unwrap_or_default()
                    )
                })
            },
        },
    ]
}

fn service_columns() -> Vec<Column> {
    vec![
        Column {
            name: "Name",
            type_: "string",
            priority: 0,
            cell: name,
        },
        Column {
            name: "Type",
            type_: "string",
            priority: 0,
            cell: |s, _| s["spec"]["type"].clone(),
        },
        Column {
            name: "Cluster-IP",
            type_: "string",
            priority: 0,
            cell: |s, _| s["spec"]["clusterIP"].clone(),
        },
        Column {
            name: "Port(s)",
            type_: "string",
            priority: 0,
            cell: |s, _| {
                comma_list(&s["spec"]["ports"], |p| {
                    format!("{}/{}", p["port"], p["protocol"].as_str().unwrap_or("TCP"))
                })
            },
        },
        Column {
            name: "Age",
            type_: "string",
            priority: 0,
            cell: age,
        },
    ]
}

fn event_columns() -> Vec<Column> {
    vec![
        Column {
            name: "Last Seen",
            type_: "string",
            priority: 0,
            cell: |e, now| {
                let last = e["lastTimestamp"]
                    .as_str()
                    .or_else(|| e["series"]["lastObservedTime"].as_str())
                    .or_else(|| e["eventTime"].as_str());
                json!(age_of(last, now))
            },
        },
        Column {
            name: "Type",
            type_: "string",
            priority: 0,
            cell: |e, _| e["type"].clone(),
        },
        Column {
            name: "Reason",
            type_: "string",
            priority: 0,
            cell: |e, _| e["reason"].clone(),
        },
        Column {
            name: "Object",
            type_: "string",
            priority: 0,
            cell: |e, _| {
                // core/v1 names it `involvedObject`, events.k8s.io/v1 `regarding`.
                let object = if e["involvedObject"].is_object() {
                    &e["involvedObject"]
                } else {
                    &e["regarding"]
                };
                json!(format!(
                    "{}/{}",
                    object["kind"].as_str().unwrap_or_default().to_lowercase(),
                    object["name"].as_str().unwrap_or_default()
                ))
            },
        },
        Column {
            name: "Message",
            type_: "string",
            priority: 0,
            cell: |e, _| match &e["message"] {
                Value::Null => e["note"].clone(),
                message => message.clone(),
            },
        },
    ]
}

fn default_columns() -> Vec<Column> {
    vec![
        Column {
            name: "Name",
            type_: "string",
            priority: 0,
            cell: name,
        },
        Column {
            name: "Age",
            type_: "string",
            priority: 0,
            cell: age,
        },
    ]
}

fn builtin_columns(resource: &ResourceType) -> Vec<Column> {
    match (resource.id.group.as_str(), resource.id.plural.as_str()) {
        ("", "pods") => pod_columns(),
        ("", "nodes") => node_columns(),
        ("", "services") => service_columns(),
        ("", "events") => event_columns(),
        _ => default_columns(),
    }
}

/// The Table of `objects` of `resource`.
pub fn table(
    resource: &ResourceType,
    objects: &[&Value],
    resource_version: &str,
    include_object: bool,
) -> Value {
    let now = jiff::Timestamp::now();
    let row_object = |object: &Value| {
        if include_object {
            object.clone()
        } else {
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": object["metadata"]})
        }
    };
    let (definitions, rows): (Vec<Value>, Vec<Value>) = if resource.custom {
        let mut definitions = vec![
            json!({"name": "Name", "type": "string", "format": "name", "description": "Name of the object", "priority": 0}),
        ];
        definitions.extend(resource.printer_columns.iter().map(|c| {
            let type_ = if c.type_ == "date" { "string" } else { c.type_.as_str() };
            json!({"name": c.name, "type": type_, "format": "", "description": c.description, "priority": c.priority})
        }));
        let rows = objects
            .iter()
            .map(|object| {
                let mut cells = vec![object["metadata"]["name"].clone()];
                cells.extend(resource.printer_columns.iter().map(|c| {
                    match read_json_path(object, &c.json_path) {
                        Some(value) if c.type_ == "date" => json!(age_of(value.as_str(), now)),
                        Some(value) => value.clone(),
                        None => Value::Null,
                    }
                }));
                json!({"cells": cells, "object": row_object(object)})
            })
            .collect();
        (definitions, rows)
    } else {
        let columns = builtin_columns(resource);
        let definitions = columns
            .iter()
            .map(|c| json!({"name": c.name, "type": c.type_, "format": if c.name == "Name" { "name" } else { "" }, "description": c.name, "priority": c.priority}))
            .collect();
        let rows = objects
            .iter()
            .map(|object| {
                let cells: Vec<Value> = columns.iter().map(|c| (c.cell)(object, now)).collect();
                json!({"cells": cells, "object": row_object(object)})
            })
            .collect();
        (definitions, rows)
    };
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_kubectl() {
        let now: jiff::Timestamp = "2026-11-22T12:00:00Z".parse().unwrap();
        let cases = [
            ("2026-11-22T11:59:15Z", "45s"),
            ("2026-11-22T11:56:48Z", "3m12s"),
            ("2026-11-22T10:00:00Z", "120m"),
            ("2026-11-22T07:30:00Z", "4h30m"),
            ("2026-11-21T00:00:00Z", "36h"),
            ("2026-11-18T00:00:00Z", "4d12h"),
            ("2026-10-01T12:00:00Z", "52d"),
        ];
        for (then, expected) in cases {
            assert_eq!(age_of(Some(then), now), expected, "{then}");
        }
        assert_eq!(age_of(None, now), "<unknown>");
    }

    #[test]
    fn events_show_their_object_and_message_in_either_api() {
        let now: jiff::Timestamp = "2026-11-22T12:00:00Z".parse().unwrap();
        let core = json!({
            "type": "Normal", "reason": "Created", "message": "created workers",
            "involvedObject": {"kind": "TrainingJob", "name": "job"},
            "eventTime": "2026-11-22T11:59:00Z",
        });
        let new = json!({
            "type": "Normal", "reason": "Created", "note": "created workers",
            "regarding": {"kind": "TrainingJob", "name": "job"},
            "eventTime": "2026-11-22T11:59:00Z",
        });
        for event in [core, new] {
            let cells: Vec<Value> = event_columns()
                .iter()
                .map(|column| (column.cell)(&event, now))
                .collect();
            assert_eq!(
                cells,
                [
                    json!("60s"),
                    json!("Normal"),
                    json!("Created"),
                    json!("trainingjob/job"),
                    json!("created workers")
                ],
                "{event}"
            );
        }
    }
}
