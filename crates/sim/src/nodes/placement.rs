//! Where a pod fits: the predicates of kube-scheduler this simulation keeps, and its choice
//! among the nodes that pass them.
//!
//! A pod fits a node that is Ready and schedulable, whose labels satisfy the pod's
//! `nodeSelector` and required node affinity, whose `NoSchedule`/`NoExecute` taints the pod
//! tolerates, and whose allocatable resources (CPU, memory, pods and any extended resource such
//! as `nvidia.com/gpu`) cover the pod's requests on top of those of the pods already bound there
//! and not finished. Among fitting nodes, those satisfying the most of the pod's preferred node
//! affinity (the sum of the weights of the terms they match) win; among those the fullest wins
//! (bin packing, which keeps whole GPU nodes free), ties broken by name. kube-scheduler weighs
//! preferred node affinity against its other scores; here it always comes first, which is the
//! outcome a single strong preference (weight 100) gets there.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::quantity::{Milli, parse_value, pod_requests};

/// Whether `pod` tolerates `taint`.
pub fn tolerates(pod: &Value, taint: &Value) -> bool {
    toleration_of(pod, taint).is_some()
}

/// The first toleration of `pod` that tolerates `taint`.
pub fn toleration_of<'p>(pod: &'p Value, taint: &Value) -> Option<&'p Value> {
    pod["spec"]["tolerations"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|toleration| {
            let key_matches = match toleration["key"].as_str() {
                None | Some("") => toleration["operator"].as_str() == Some("Exists"),
                Some(key) => Some(key) == taint["key"].as_str(),
            };
            let value_matches = match toleration["operator"].as_str() {
                Some("Exists") => true,
                _ => {
                    toleration["value"].as_str().unwrap_or_default()
                        == taint["value"].as_str().unwrap_or_default()
                }
            };
            let effect_matches = toleration["effect"]
                .as_str()
                .is_none_or(|e| e.is_empty() || Some(e) == taint["effect"].as_str());
            key_matches && value_matches && effect_matches
        })
}

pub(super) fn expression_matches(expression: &Value, value: Option<&str>) -> bool {
    let values: Vec<&str> = expression["values"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    match expression["operator"].as_str() {
        Some("In") => value.is_some_and(|v| values.contains(&v)),
        Some("NotIn") => !value.is_some_and(|v| values.contains(&v)),
        Some("Exists") => value.is_some(),
        Some("DoesNotExist") => value.is_none(),
        Some("Gt") => value
            .and_then(|v| v.parse::<i64>().ok())
            .zip(values.first().and_then(|v| v.parse::<i64>().ok()))
            .is_some_and(|(v, bound)| v > bound),
        Some("Lt") => value
            .and_then(|v| v.parse::<i64>().ok())
            .zip(values.first().and_then(|v| v.parse::<i64>().ok()))
            .is_some_and(|(v, bound)| v < bound),
        _ => false,
    }
}

/// Whether `node` satisfies a `NodeSelectorTerm`: all its label expressions and all its field
/// expressions (only `metadata.name` is a node field the scheduler knows).
pub(super) fn term_matches(term: &Value, node: &Value) -> bool {
    let labels = &node["metadata"]["labels"];
    let expressions = term["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|expression| {
            let key = expression["key"].as_str().unwrap_or_default();
            expression_matches(expression, labels.get(key).and_then(Value::as_str))
        });
    let fields = term["matchFields"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|expression| {
            let value = match expression["key"].as_str() {
                Some("metadata.name") => node["metadata"]["name"].as_str(),
                _ => None,
            };
            expression_matches(expression, value)
        });
    expressions && fields
}

pub(super) fn selector_matches(pod: &Value, node: &Value) -> bool {
    let labels = &node["metadata"]["labels"];
    let selector_ok = pod["spec"]["nodeSelector"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(key, value)| labels.get(key) == Some(value));
    let terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        .as_array();
    let affinity_ok = terms.is_none_or(|terms| terms.iter().any(|term| term_matches(term, node)));
    selector_ok && affinity_ok
}

/// The sum of the weights of the pod's preferred node affinity terms that `node` satisfies.
pub(super) fn preference(pod: &Value, node: &Value) -> i64 {
    pod["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|preferred| term_matches(&preferred["preference"], node))
        .filter_map(|preferred| preferred["weight"].as_i64())
        .sum()
}

pub(super) fn ready(node: &Value) -> bool {
    node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// A node's allocatable resources, parsed.
pub(super) fn allocatable(node: &Value) -> BTreeMap<String, Milli> {
    node["status"]["allocatable"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(resource, amount)| Some((resource.clone(), parse_value(amount)?)))
        .collect()
}

/// Why a pod does not fit a node (whose allocatable resources are `allocatable`), in the
/// scheduler's words.
pub(super) fn misfit(
    pod: &Value,
    requests: &BTreeMap<String, Milli>,
    node: &Value,
    allocatable: &BTreeMap<String, Milli>,
    used: &BTreeMap<String, Milli>,
) -> Option<String> {
    if !ready(node) {
        return Some("node(s) were not ready".into());
    }
    if node["spec"]["unschedulable"].as_bool() == Some(true) {
        return Some("node(s) were unschedulable".into());
    }
    if !selector_matches(pod, node) {
        return Some("node(s) didn't match Pod's node affinity/selector".into());
    }
    let untolerated = node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|taint| {
            matches!(taint["effect"].as_str(), Some("NoSchedule" | "NoExecute"))
                && !tolerates(pod, taint)
        });
    if let Some(taint) = untolerated {
        return Some(format!(
            "node(s) had untolerated taint {{{}: {}}}",
            taint["key"].as_str().unwrap_or_default(),
            taint["value"].as_str().unwrap_or_default()
        ));
    }
    for (resource, amount) in requests {
        if *amount == 0 {
            continue;
        }
        let allocatable = allocatable.get(resource).copied().unwrap_or(0);
        let in_use = used.get(resource).copied().unwrap_or(0);
        if in_use + amount > allocatable {
            let name = if resource == "pods" {
                "Too many pods".to_string()
            } else {
                format!("Insufficient {resource}")
            };
            return Some(name);
        }
    }
    None
}

/// The node `pod` goes to among `nodes` (whose pods request `used`): its position, or why
/// none fits, in the scheduler's words.
pub(super) fn fit(
    pod: &Value,
    nodes: &[(Arc<Value>, BTreeMap<String, Milli>)],
    used: &[BTreeMap<String, Milli>],
) -> Result<usize, String> {
    let requests = pod_requests(pod);
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut best: Option<(i64, Milli, Milli, usize)> = None;
    for (at, (node, allocatable)) in nodes.iter().enumerate() {
        let node_used = &used[at];
        if let Some(reason) = misfit(pod, &requests, node, allocatable, node_used) {
            *reasons.entry(reason).or_default() += 1;
            continue;
        }
        let free = |resource: &str| {
            allocatable.get(resource).copied().unwrap_or(0)
                - node_used.get(resource).copied().unwrap_or(0)
                - requests.get(resource).copied().unwrap_or(0)
        };
        let score = (
            -preference(pod, node),
            free("nvidia.com/gpu"),
            free("cpu"),
            at,
        );
        if best.is_none_or(|current| score < current) {
            best = Some(score);
        }
    }
    if let Some((_, _, _, at)) = best {
        return Ok(at);
    }
    let details: Vec<String> = reasons
        .iter()
        .map(|(reason, count)| format!("{count} {reason}"))
        .collect();
    Err(if details.is_empty() {
        "no nodes available to schedule pods".to_string()
    } else {
        format!(
            "0/{} nodes are available: {}.",
            nodes.len(),
            details.join(", ")
        )
    })
}

/// Adds `requests` to `used`.
pub(super) fn add(used: &mut BTreeMap<String, Milli>, requests: &BTreeMap<String, Milli>) {
    for (resource, amount) in requests {
        *used.entry(resource.clone()).or_default() += amount;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn tolerations_match_taints_as_kubernetes_does() {
        let taint = json!({"key": "spot", "value": "true", "effect": "NoSchedule"});
        let cases = [
            (json!([]), false),
            (
                json!([{"key": "spot", "operator": "Equal", "value": "true"}]),
                true,
            ),
            (json!([{"key": "spot", "value": "false"}]), false),
            (
                json!([{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]),
                true,
            ),
            (
                json!([{"key": "spot", "operator": "Exists", "effect": "NoExecute"}]),
                false,
            ),
            (json!([{"operator": "Exists"}]), true),
        ];
        for (tolerations, expected) in cases {
            let pod = json!({"spec": {"tolerations": tolerations}});
            assert_eq!(tolerates(&pod, &taint), expected, "{tolerations}");
        }
    }

    #[test]
    fn node_selectors_and_required_affinity_must_both_match() {
        let node = json!({"metadata": {"name": "n1", "labels": {"gpu": "a100", "zone": "z1", "cores": "64"}}});
        let pod = |spec: Value| json!({"spec": spec});
        let affinity = |expressions: Value| json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}}}});
        assert!(selector_matches(
            &pod(json!({"nodeSelector": {"gpu": "a100"}})),
            &node
        ));
        assert!(!selector_matches(
            &pod(json!({"nodeSelector": {"gpu": "v100"}})),
            &node
        ));
        assert!(selector_matches(
            &pod(affinity(
                json!([{"key": "zone", "operator": "In", "values": ["z1", "z2"]}])
            )),
            &node
        ));
        assert!(!selector_matches(
            &pod(affinity(
                json!([{"key": "zone", "operator": "NotIn", "values": ["z1"]}])
            )),
            &node
        ));
        assert!(selector_matches(
            &pod(affinity(
                json!([{"key": "cores", "operator": "Gt", "values": ["32"]}])
            )),
            &node
        ));
        assert!(!selector_matches(
            &pod(affinity(json!([{"key": "spot", "operator": "Exists"}]))),
            &node
        ));
        let by_name = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}]}}}});
        assert!(!selector_matches(&pod(by_name), &node));
    }

    #[test]
    fn a_node_scores_the_weights_of_the_preferred_terms_it_matches() {
        let node = json!({"metadata": {"name": "n1", "labels": {"zone": "z1"}}});
        let pod = json!({"spec": {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 30, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}},
            {"weight": 100, "preference": {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}},
            {"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}
        ]}}}});
        assert_eq!(preference(&pod, &node), 35);
        assert_eq!(preference(&json!({"spec": {}}), &node), 0);
    }
}
