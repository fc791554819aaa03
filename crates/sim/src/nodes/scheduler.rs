//! A scheduler for pods whose `schedulerName` is `default-scheduler`.
//!
//! A pod fits a node that is Ready and schedulable, whose labels satisfy the pod's
//! `nodeSelector` and required node affinity, whose `NoSchedule`/`NoExecute` taints the pod
//! tolerates, and whose allocatable resources (CPU, memory, pods and any extended resource such
//! as `nvidia.com/gpu`) cover the pod's requests on top of those of the pods already bound there
//! and not finished. Among fitting nodes, those satisfying the most of the pod's preferred node
//! affinity (the sum of the weights of the terms they match) win; among those the fullest wins
//! (bin packing, which keeps whole GPU nodes free), ties broken by name. Pods are considered
//! oldest first. A pod that fits nowhere
//! gets `PodScheduled=False` with reason `Unschedulable` and a message in the real scheduler's
//! style (`0/3 nodes are available: 3 Insufficient nvidia.com/gpu.`).
//!
//! Not simulated: preemption, pod (anti-)affinity, topology spread, volumes and ports.
//! kube-scheduler weighs preferred node affinity against its other scores; here it always
//! comes first, which is the outcome a single strong preference (weight 100) gets there.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::{Value, json};

use super::quantity::{Milli, parse_value, pod_requests};
use super::{Changed, pods, terminal};
use crate::errors::ApiError;
use crate::operations::{Subresource, WriteOptions, timestamp_now};
use crate::resources::ResourceId;
use crate::store::{ObjectKey, State};

const MANAGER: &str = "default-scheduler";

/// Whether `pod` tolerates `taint`.
pub fn tolerates(pod: &Value, taint: &Value) -> bool {
    pod["spec"]["tolerations"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|toleration| {
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

fn expression_matches(expression: &Value, value: Option<&str>) -> bool {
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
fn term_matches(term: &Value, node: &Value) -> bool {
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

fn selector_matches(pod: &Value, node: &Value) -> bool {
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
fn preference(pod: &Value, node: &Value) -> i64 {
    pod["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|preferred| term_matches(&preferred["preference"], node))
        .filter_map(|preferred| preferred["weight"].as_i64())
        .sum()
}

fn ready(node: &Value) -> bool {
    node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// A node's allocatable resources, parsed.
fn allocatable(node: &Value) -> BTreeMap<String, Milli> {
    node["status"]["allocatable"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(resource, amount)| Some((resource.clone(), parse_value(amount)?)))
        .collect()
}

/// Why a pod does not fit a node (whose allocatable resources are `allocatable`), in the
/// scheduler's words.
fn misfit(
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

/// Binds `pod` to `node` (the `binding` subresource), marking it `PodScheduled`.
///
/// # Errors
/// NotFound for a missing pod, Conflict when it is bound to another node already.
pub fn bind(
    state: &mut State,
    resource: &crate::resources::ResourceType,
    namespace: &str,
    name: &str,
    node: &str,
    options: &WriteOptions,
) -> Result<(), ApiError> {
    let pod = state.fetch(resource, namespace, name)?;
    match pod["spec"]["nodeName"].as_str() {
        Some(bound) if bound == node => return Ok(()),
        Some(bound) if !bound.is_empty() => {
            return Err(ApiError::Conflict {
                resource: resource.id.clone(),
                name: name.to_string(),
                message: format!(
                    "Operation cannot be fulfilled on pods/binding {name:?}: pod {name} is already assigned to node {bound:?}"
                ),
                causes: Vec::new(),
            });
        }
        _ => {}
    }
    let mut bound = (*pod).clone();
    bound["spec"]["nodeName"] = json!(node);
    let written = state.replace(resource, namespace, name, bound, None, options)?;
    let mut scheduled = (*written.object).clone();
    set_condition(
        &mut scheduled,
        json!({"type": "PodScheduled", "status": "True", "lastTransitionTime": timestamp_now()}),
    );
    state.replace(
        resource,
        namespace,
        name,
        scheduled,
        Some(Subresource::Status),
        options,
    )?;
    Ok(())
}

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

/// What the scheduler remembers between passes: where the pods it counts are and what they
/// request, and which pods wait for a node.
#[derive(Debug, Default)]
pub struct Scheduler {
    /// Each bound, unfinished pod: its node and its requests.
    placed: HashMap<ObjectKey, (String, BTreeMap<String, Milli>)>,
    /// The sum of the requests of the pods placed on each node.
    used: HashMap<String, BTreeMap<String, Milli>>,
    /// Unbound pods of this scheduler, not being deleted.
    waiting: BTreeSet<ObjectKey>,
}

impl Scheduler {
    /// Schedules the pending pods it can; returns whether it wrote anything. New and changed
    /// pending pods are tried at once; pods that found no node before are tried again only
    /// when capacity may have been freed (a pod finished or went, a node changed), as
    /// kube-scheduler moves unschedulable pods back to its active queue on such events.
    pub fn schedule(&mut self, state: &mut State, changed: &Changed) -> bool {
        let Ok(pod_resource) = state.resource(&pods()) else {
            return false;
        };
        let freed = match changed {
            Changed::Everything => {
                self.relist(state);
                true
            }
            Changed::Pods(keys) => {
                // Every key is observed: no short circuit.
                let mut freed = false;
                for key in keys {
                    freed |= self.observe(state, key);
                }
                freed
            }
        };
        let mut pending: Vec<Arc<Value>> = if freed {
            self.waiting.iter().collect::<Vec<_>>()
        } else {
            changed
                .pods()
                .filter(|key| self.waiting.contains(*key))
                .collect()
        }
        .into_iter()
        .filter_map(|key| state.get(&pods(), key).map(Arc::clone))
        .collect();
        if pending.is_empty() {
            return false;
        }
        // Parsed once a pass, not once for each pod and node; by name, so that a node's position
        // breaks ties as its name does.
        let mut nodes: Vec<(Arc<Value>, BTreeMap<String, Milli>)> = state
            .list(&ResourceId::new("", "nodes"), None)
            .map(|(_, n)| (Arc::clone(n), allocatable(n)))
            .collect();
        nodes.sort_by(|(a, _), (b, _)| {
            a["metadata"]["name"]
                .as_str()
                .cmp(&b["metadata"]["name"].as_str())
        });
        // What the pods bound to each node request, by the node's position.
        let mut used: Vec<BTreeMap<String, Milli>> = nodes
            .iter()
            .map(|(node, _)| {
                let name = node["metadata"]["name"].as_str().unwrap_or_default();
                self.used.get(name).cloned().unwrap_or_default()
            })
            .collect();
        pending.sort_by(|a, b| {
            let key = |p: &Value| {
                (
                    p["metadata"]["creationTimestamp"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    p["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                )
            };
            key(a).cmp(&key(b))
        });
        let options = WriteOptions::internal(MANAGER);
        let mut wrote = false;
        for pod in pending {
            let requests = pod_requests(&pod);
            let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
            let mut best: Option<(i64, Milli, Milli, usize)> = None;
            for (at, (node, allocatable)) in nodes.iter().enumerate() {
                let node_used = &used[at];
                if let Some(reason) = misfit(&pod, &requests, node, allocatable, node_used) {
                    *reasons.entry(reason).or_default() += 1;
                    continue;
                }
                let free = |resource: &str| {
                    allocatable.get(resource).copied().unwrap_or(0)
                        - node_used.get(resource).copied().unwrap_or(0)
                        - requests.get(resource).copied().unwrap_or(0)
                };
                let score = (
                    -preference(&pod, node),
                    free("nvidia.com/gpu"),
                    free("cpu"),
                    at,
                );
                if best.is_none_or(|current| score < current) {
                    best = Some(score);
                }
            }
            let namespace = pod["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let name = pod["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            match best {
                Some((_, _, _, at)) => {
                    let node = nodes[at].0["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    if bind(state, &pod_resource, &namespace, &name, &node, &options).is_ok() {
                        for (resource, amount) in &requests {
                            *used[at].entry(resource.clone()).or_default() += amount;
                        }
                        let key = ObjectKey::new(&namespace, &name);
                        self.waiting.remove(&key);
                        self.place(key, node, requests);
                        wrote = true;
                    }
                }
                None => {
                    let details: Vec<String> = reasons
                        .iter()
                        .map(|(reason, count)| format!("{count} {reason}"))
                        .collect();
                    let message = if details.is_empty() {
                        "no nodes available to schedule pods".to_string()
                    } else {
                        format!(
                            "0/{} nodes are available: {}.",
                            nodes.len(),
                            details.join(", ")
                        )
                    };
                    let current = pod["status"]["conditions"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .find(|c| c["type"] == "PodScheduled")
                        .and_then(|c| c["message"].as_str());
                    if current != Some(message.as_str()) {
                        let mut unschedulable = (*pod).clone();
                        set_condition(
                            &mut unschedulable,
                            json!({
                                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                "message": message, "lastTransitionTime": timestamp_now(),
                            }),
                        );
                        wrote |= state
                            .replace(
                                &pod_resource,
                                &namespace,
                                &name,
                                unschedulable,
                                Some(Subresource::Status),
                                &options,
                            )
                            .is_ok();
                    }
                }
            }
        }
        wrote
    }

    /// Rebuilds what the scheduler remembers from every pod.
    fn relist(&mut self, state: &State) {
        *self = Self::default();
        let keys: Vec<ObjectKey> = state
            .list(&pods(), None)
            .map(|(key, _)| key.clone())
            .collect();
        for key in &keys {
            self.observe(state, key);
        }
    }

    /// Brings what the scheduler remembers of pod `key` up to date; returns whether the pod
    /// stopped counting against its node's capacity.
    fn observe(&mut self, state: &State, key: &ObjectKey) -> bool {
        let was_placed = self.unplace(key);
        self.waiting.remove(key);
        let Some(pod) = state.get(&pods(), key) else {
            return was_placed;
        };
        if terminal(pod) {
            return was_placed;
        }
        match pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
            Some(node) => {
                self.place(key.clone(), node.to_string(), pod_requests(pod));
                false
            }
            None => {
                let ours = pod["spec"]["schedulerName"]
                    .as_str()
                    .is_none_or(|s| s == MANAGER);
                if ours && pod["metadata"].get("deletionTimestamp").is_none() {
                    self.waiting.insert(key.clone());
                }
                was_placed
            }
        }
    }

    /// Counts pod `key`'s `requests` against `node`.
    fn place(&mut self, key: ObjectKey, node: String, requests: BTreeMap<String, Milli>) {
        let used = self.used.entry(node.clone()).or_default();
        for (resource, amount) in &requests {
            *used.entry(resource.clone()).or_default() += amount;
        }
        self.placed.insert(key, (node, requests));
    }

    /// Stops counting pod `key`; returns whether it was counted.
    fn unplace(&mut self, key: &ObjectKey) -> bool {
        let Some((node, requests)) = self.placed.remove(key) else {
            return false;
        };
        if let Some(used) = self.used.get_mut(&node) {
            for (resource, amount) in requests {
                let left = used.entry(resource.clone()).or_default();
                *left -= amount;
                if *left == 0 {
                    used.remove(&resource);
                }
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::nodes::{NodeSpec, nodes};

    fn pod(name: &str, second: u32, gpus: u32) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": name, "creationTimestamp": format!("2026-01-01T00:00:{second:02}Z")},
            "spec": {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]},
            "status": {"phase": "Pending"},
        })
    }

    /// A pass over what changed after `cursor`; moves `cursor` to now.
    fn pass(scheduler: &mut Scheduler, state: &mut State, cursor: &mut u64) {
        let changed = match state.changes_since(*cursor) {
            Ok(changes) => Changed::of(&changes),
            Err(_) => Changed::Everything,
        };
        *cursor = state.resource_version();
        scheduler.schedule(state, &changed);
    }

    fn node_of(state: &State, name: &str) -> Option<String> {
        let pod = state.get(&pods(), &ObjectKey::new("default", name))?;
        pod["spec"]["nodeName"].as_str().map(String::from)
    }

    #[test]
    fn a_waiting_pod_gets_the_capacity_a_finished_one_frees_and_the_counts_stay_exact() {
        let mut state = State::new(1_000);
        let node = NodeSpec::gpu("n1", 2).to_object(0);
        state.put(&nodes(), ObjectKey::new("", "n1"), node);
        for (name, second) in [("a", 1), ("b", 2), ("c", 3)] {
            state.put(
                &pods(),
                ObjectKey::new("default", name),
                pod(name, second, 1),
            );
        }
        let mut scheduler = Scheduler::default();
        // As the control loop does: the changes of a pass are seen by the next one.
        let mut cursor = state.resource_version();
        scheduler.schedule(&mut state, &Changed::Everything);
        assert_eq!(node_of(&state, "a").as_deref(), Some("n1"), "oldest first");
        assert_eq!(node_of(&state, "b").as_deref(), Some("n1"));
        assert_eq!(node_of(&state, "c"), None, "two GPUs for three pods");

        // A new pod that fits nowhere waits too.
        state.put(&pods(), ObjectKey::new("default", "d"), pod("d", 4, 1));
        pass(&mut scheduler, &mut state, &mut cursor);
        assert_eq!(node_of(&state, "d"), None);

        // `a` finishes: the oldest waiting pod gets its GPU.
        let mut finished = (**state.get(&pods(), &ObjectKey::new("default", "a")).unwrap()).clone();
        finished["status"]["phase"] = json!("Succeeded");
        state.put(&pods(), ObjectKey::new("default", "a"), finished);
        pass(&mut scheduler, &mut state, &mut cursor);
        assert_eq!(node_of(&state, "c").as_deref(), Some("n1"));
        assert_eq!(node_of(&state, "d"), None);

        // `b` is removed: `d` follows.
        state.remove(&pods(), &ObjectKey::new("default", "b"));
        pass(&mut scheduler, &mut state, &mut cursor);
        assert_eq!(node_of(&state, "d").as_deref(), Some("n1"));

        // What was kept up to date matches what a fresh look at every pod finds.
        let mut fresh = Scheduler::default();
        fresh.relist(&state);
        assert_eq!(scheduler.used, fresh.used);
        assert_eq!(scheduler.waiting, fresh.waiting);
        assert_eq!(
            scheduler.used["n1"].get("nvidia.com/gpu").copied(),
            Some(2_000),
            "c and d, one GPU each, in thousandths"
        );
    }

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
