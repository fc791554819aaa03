//! A scheduler for pods whose `schedulerName` is `default-scheduler`, or one of the gang
//! schedulers it stands in for (see [`SCHEDULER_NAMES`] and [`super::gang`]).
//!
//! Where a pod fits is [`super::placement`]'s; this module runs the passes: pods are
//! considered oldest first. A pod that fits nowhere
//! gets `PodScheduled=False` with reason `Unschedulable` and a message in the real scheduler's
//! style (`0/3 nodes are available: 3 Insufficient nvidia.com/gpu.`), and is tried again when
//! capacity may have been freed. The pods of a PodGroup are placed as a gang: at least its
//! `minMember` together, or none.
//!
//! A gang that cannot form preempts preemptable members of other gangs beyond their minimum
//! (see [`super::gang`]). Not simulated: preemption by pod priority, pod (anti-)affinity,
//! topology spread, volumes and ports.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Value, json};

use super::conditions::set_condition;
use super::gang::{Shortfall, form, preempt};
use super::placement::{add, allocatable, fit};
use super::quantity::{Milli, pod_requests};
use super::{Changed, gang, nodes, pods, terminal};
use crate::errors::ApiError;
use crate::options::{Subresource, WriteOptions, timestamp_now};
use crate::store::{ObjectKey, State};

const MANAGER: &str = "default-scheduler";

/// The `schedulerName`s of the pods this scheduler places: the default scheduler's, and those
/// of the gang schedulers it stands in for (Volcano, and the scheduler-plugins scheduler under
/// its usual name), whose pods it places as a gang (see [`gang`]).
pub const SCHEDULER_NAMES: [&str; 3] = [MANAGER, "volcano", "scheduler-plugins-scheduler"];

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

/// What the scheduler remembers between passes: where the pods it counts are and what they
/// request, and which pods wait for a node.
#[derive(Debug, Default)]
pub struct Scheduler {
    /// Each bound, unfinished pod: its node, its requests and its gang group.
    placed: HashMap<ObjectKey, gang::Placement>,
    /// How many pods of each gang group are placed.
    group_placed: HashMap<gang::Group, usize>,
    /// The sum of the requests of the pods placed on each node.
    used: HashMap<String, BTreeMap<String, Milli>>,
    /// Unbound pods of this scheduler, not being deleted.
    waiting: BTreeSet<ObjectKey>,
    /// Whether the last pass held members of a formed gang back for another gang: the next
    /// pass tries every waiting pod, since that gang may have formed.
    held_back: bool,
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
        let freed = std::mem::take(&mut self.held_back) || freed;
        let mut keys: BTreeSet<&ObjectKey> = if freed {
            self.waiting.iter().collect()
        } else {
            changed
                .pods()
                .filter(|key| self.waiting.contains(*key))
                .collect()
        };
        // A gang is tried whole: a new member brings the others that wait.
        let groups: HashSet<gang::Group> = keys
            .iter()
            .filter_map(|key| gang::group_of(state.get(&pods(), key)?))
            .collect();
        if !groups.is_empty() {
            keys.extend(self.waiting.iter().filter(|key| {
                state
                    .get(&pods(), key)
                    .and_then(|pod| gang::group_of(pod))
                    .is_some_and(|group| groups.contains(&group))
            }));
        }
        let mut pending: Vec<Arc<Value>> = keys
            .into_iter()
            .filter_map(|key| state.get(&pods(), key).map(Arc::clone))
            .collect();
        if pending.is_empty() {
            return false;
        }
        // Parsed once a pass, not once for each pod and node; by name, so that a node's position
        // breaks ties as its name does.
        let mut nodes: Vec<(Arc<Value>, BTreeMap<String, Milli>)> = state
            .list(&nodes(), None)
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
        let (decisions, victims) = self.decide(state, &pending, &nodes, &mut used);
        let options = WriteOptions::internal(MANAGER);
        let mut wrote = false;
        for (key, _, _) in victims {
            wrote |= preempt(state, &pod_resource, &key, &options);
        }
        for (pod, decision) in pending.iter().zip(decisions) {
            let namespace = pod["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let name = pod["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            match decision {
                Ok(at) => {
                    let node = nodes[at].0["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    if bind(state, &pod_resource, &namespace, &name, &node, &options).is_ok() {
                        let key = ObjectKey::new(&namespace, &name);
                        self.waiting.remove(&key);
                        self.place(key, node, pod_requests(pod), gang::group_of(pod));
                        wrote = true;
                    }
                }
                Err(message) => {
                    let current = pod["status"]["conditions"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .find(|c| c["type"] == "PodScheduled")
                        .and_then(|c| c["message"].as_str());
                    if current != Some(message.as_str()) {
                        let mut unschedulable = (**pod).clone();
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

    /// Where each of `pending` (oldest first) goes: a node's position in `nodes`, or why it
    /// stays pending. `used` is what each node's pods request, and grows with each placement.
    ///
    /// Gangs first: each group (see [`gang`]) with fewer members placed than its `minMember`
    /// gets the members it lacks placed all at once, or none of them (they wait, holding
    /// nothing); groups are taken in the order of their oldest pending member, and each gets
    /// only its minimum here, so that every gang that fits forms before any grows (as
    /// Volcano's allocate action hands the turn on once a job is ready). Then every other pod,
    /// and the members of formed groups beyond their minimum, one at a time, oldest first.
    fn decide(
        &mut self,
        state: &State,
        pending: &[Arc<Value>],
        nodes: &[(Arc<Value>, BTreeMap<String, Milli>)],
        used: &mut Vec<BTreeMap<String, Milli>>,
    ) -> (Vec<Result<usize, String>>, Vec<gang::Victim>) {
        let mut victims: Vec<gang::Victim> = Vec::new();
        let mut decisions: Vec<Option<Result<usize, String>>> = vec![None; pending.len()];
        let mut groups_waiting: Vec<gang::Group> = Vec::new();
        let mut groups: Vec<gang::Group> = Vec::new();
        for pod in pending {
            if let Some(group) = gang::group_of(pod)
                && !groups.contains(&group)
            {
                groups.push(group);
            }
        }
        for group in groups {
            let members: Vec<usize> = (0..pending.len())
                .filter(|at| gang::group_of(&pending[*at]).as_ref() == Some(&group))
                .collect();
            let Some(min_member) = gang::min_member(state, &group) else {
                for at in members {
                    decisions[at] = Some(Err(format!("pod group {} not found", group.name)));
                }
                continue;
            };
            let placed = self.group_placed.get(&group).copied().unwrap_or(0);
            if placed >= min_member {
                continue;
            }
            let needed = min_member - placed;
            let (trial, formed) = form(pending, &members, needed, nodes, used.clone());
            if formed.len() >= needed {
                *used = trial;
                for (at, node) in formed {
                    decisions[at] = Some(Ok(node));
                }
                continue;
            }
            groups_waiting.push(group.clone());
            let shortfall = Shortfall {
                group: &group,
                members: &members,
                needed,
            };
            let preempted = self.preemption(state, pending, &shortfall, nodes, used);
            let message = if preempted.is_empty() {
                format!(
                    "pod group {} is not ready: {} of its {min_member} members fit",
                    group.name,
                    placed + formed.len()
                )
            } else {
                format!(
                    "pod group {} is not ready: preempting {} members of other groups beyond their minimum",
                    group.name,
                    preempted.len()
                )
            };
            victims.extend(preempted);
            for at in members {
                decisions[at] = Some(Err(message.clone()));
            }
        }
        // A gang that waits for its minimum keeps the members of formed gangs beyond theirs
        // from growing into the capacity it needs, as Volcano reserves the minimum of the
        // groups it has admitted to their queue (and reclaims elastic members for them).
        let starving = groups_waiting.first().cloned();
        let decisions = pending
            .iter()
            .zip(decisions)
            .map(|(pod, decided)| {
                decided.unwrap_or_else(|| {
                    if let (Some(waiting), Some(group)) = (&starving, gang::group_of(pod)) {
                        self.held_back = true;
                        return Err(format!(
                            "pod group {} has its minimum; its other members wait while pod group {} waits for its minimum",
                            group.name, waiting.name
                        ));
                    }
                    let node = fit(pod, nodes, used)?;
                    add(&mut used[node], &pod_requests(pod));
                    Ok(node)
                })
            })
            .collect();
        (decisions, victims)
    }

    /// The members of other groups to preempt so that the `shortfall` of a group fits: the
    /// fewest of [`gang::elastic_victims`], youngest first; none when even all of them would
    /// not make room.
    fn preemption(
        &self,
        state: &State,
        pending: &[Arc<Value>],
        shortfall: &Shortfall<'_>,
        nodes: &[(Arc<Value>, BTreeMap<String, Milli>)],
        used: &[BTreeMap<String, Milli>],
    ) -> Vec<gang::Victim> {
        let position: HashMap<&str, usize> = nodes
            .iter()
            .enumerate()
            .map(|(at, (node, _))| (node["metadata"]["name"].as_str().unwrap_or_default(), at))
            .collect();
        let candidates = gang::elastic_victims(state, self.placed.iter(), shortfall.group);
        let mut freed = used.to_vec();
        for (count, (_, node, requests)) in candidates.iter().enumerate() {
            if let Some(&at) = position.get(node.as_str()) {
                for (resource, amount) in requests {
                    *freed[at].entry(resource.clone()).or_default() -= amount;
                }
            }
            let (_, formed) = form(
                pending,
                shortfall.members,
                shortfall.needed,
                nodes,
                freed.clone(),
            );
            if formed.len() >= shortfall.needed {
                return candidates.into_iter().take(count + 1).collect();
            }
        }
        Vec::new()
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
                let group = gang::group_of(pod);
                self.place(key.clone(), node.to_string(), pod_requests(pod), group);
                false
            }
            None => {
                let ours = pod["spec"]["schedulerName"]
                    .as_str()
                    .is_none_or(|s| SCHEDULER_NAMES.contains(&s));
                if ours && pod["metadata"].get("deletionTimestamp").is_none() {
                    self.waiting.insert(key.clone());
                }
                was_placed
            }
        }
    }

    /// Counts pod `key`'s `requests` against `node`, and the pod in its gang `group`.
    fn place(
        &mut self,
        key: ObjectKey,
        node: String,
        requests: BTreeMap<String, Milli>,
        group: Option<gang::Group>,
    ) {
        add(self.used.entry(node.clone()).or_default(), &requests);
        if let Some(group) = &group {
            *self.group_placed.entry(group.clone()).or_default() += 1;
        }
        self.placed.insert(key, (node, requests, group));
    }

    /// Stops counting pod `key`; returns whether it was counted.
    fn unplace(&mut self, key: &ObjectKey) -> bool {
        let Some((node, requests, group)) = self.placed.remove(key) else {
            return false;
        };
        if let Some(group) = group
            && let Some(count) = self.group_placed.get_mut(&group)
        {
            *count -= 1;
            if *count == 0 {
                self.group_placed.remove(&group);
            }
        }
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
    use crate::nodes::NodeSpec;
    use crate::resources::ResourceId;

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
        let mut state = State::new(crate::store::History::default());
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

    fn member(name: &str, second: u32, group: &str) -> Value {
        let mut pod = pod(name, second, 1);
        pod["spec"]["schedulerName"] = json!("volcano");
        pod["metadata"]["annotations"] = json!({"scheduling.k8s.io/group-name": group});
        pod
    }

    #[test]
    fn every_gang_that_fits_forms_at_its_minimum_before_any_grows_and_none_half_forms() {
        let mut state = State::new(crate::store::History::default());
        state.put(
            &nodes(),
            ObjectKey::new("", "n1"),
            NodeSpec::gpu("n1", 5).to_object(0),
        );
        let groups = ResourceId::new("scheduling.volcano.sh", "podgroups");
        for (group, min) in [("a", 2), ("b", 2), ("c", 3)] {
            state.put(
                &groups,
                ObjectKey::new("default", group),
                json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                       "metadata": {"name": group, "namespace": "default", "uid": group},
                       "spec": {"minMember": min}}),
            );
        }
        // By age: a's three workers (two needed), c's three (all needed), b's three (two
        // needed); five GPUs.
        let members = [
            ("a-0", 1, "a"),
            ("a-1", 2, "a"),
            ("a-2", 3, "a"),
            ("c-0", 4, "c"),
            ("c-1", 5, "c"),
            ("c-2", 6, "c"),
            ("b-0", 7, "b"),
            ("b-1", 8, "b"),
            ("b-2", 9, "b"),
        ];
        for (name, second, group) in members {
            state.put(
                &pods(),
                ObjectKey::new("default", name),
                member(name, second, group),
            );
        }
        state.put(
            &pods(),
            ObjectKey::new("default", "orphan"),
            member("orphan", 0, "gone"),
        );
        let mut scheduler = Scheduler::default();
        scheduler.schedule(&mut state, &Changed::Everything);
        let placed: Vec<&str> = members
            .iter()
            .map(|(name, _, _)| *name)
            .filter(|name| node_of(&state, name).is_some())
            .collect();
        assert_eq!(
            placed,
            ["a-0", "a-1", "c-0", "c-1", "c-2"],
            "a forms at its minimum, then c at its three before a grows; b would need two of \
             the none left and takes nothing"
        );
        let message = |name: &str| {
            let pod = state
                .get(&pods(), &ObjectKey::new("default", name))
                .unwrap();
            pod["status"]["conditions"][0]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        assert_eq!(
            message("b-0"),
            "pod group b is not ready: 0 of its 2 members fit"
        );
        assert_eq!(
            message("a-2"),
            "pod group a has its minimum; its other members wait while pod group b waits for its minimum",
            "a does not grow while b waits"
        );
        assert_eq!(message("orphan"), "pod group gone not found");
    }

    #[test]
    fn a_gang_that_cannot_form_preempts_members_of_others_beyond_their_minimum_only() {
        let mut state = State::new(crate::store::History::default());
        state.put(
            &nodes(),
            ObjectKey::new("", "n1"),
            NodeSpec::gpu("n1", 4).to_object(0),
        );
        let groups = ResourceId::new("scheduling.volcano.sh", "podgroups");
        for group in ["a", "b"] {
            state.put(
                &groups,
                ObjectKey::new("default", group),
                json!({"metadata": {"name": group, "namespace": "default", "uid": group},
                       "spec": {"minMember": 2}}),
            );
        }
        let preemptable = |name: &str, second: u32, group: &str| {
            let mut pod = member(name, second, group);
            pod["metadata"]["annotations"]["volcano.sh/preemptable"] = json!("true");
            pod
        };
        for (name, second) in [("a-0", 1), ("a-1", 2), ("a-2", 3)] {
            state.put(
                &pods(),
                ObjectKey::new("default", name),
                preemptable(name, second, "a"),
            );
        }
        let mut scheduler = Scheduler::default();
        let mut cursor = state.resource_version();
        scheduler.schedule(&mut state, &Changed::Everything);
        assert!(
            ["a-0", "a-1", "a-2"]
                .iter()
                .all(|name| node_of(&state, name).is_some())
        );

        for (name, second) in [("b-0", 4), ("b-1", 5)] {
            state.put(
                &pods(),
                ObjectKey::new("default", name),
                preemptable(name, second, "b"),
            );
        }
        pass(&mut scheduler, &mut state, &mut cursor);
        let deleting = |name: &str| {
            state
                .get(&pods(), &ObjectKey::new("default", name))
                .is_some_and(|pod| pod["metadata"].get("deletionTimestamp").is_some())
        };
        assert!(deleting("a-2"), "a's youngest worker above its minimum");
        assert!(!deleting("a-0") && !deleting("a-1"), "a keeps its minimum");
        assert_eq!(
            node_of(&state, "b-0"),
            None,
            "b waits until the GPU is free"
        );

        state.remove(&pods(), &ObjectKey::new("default", "a-2"));
        pass(&mut scheduler, &mut state, &mut cursor);
        assert!(
            ["b-0", "b-1"]
                .iter()
                .all(|name| node_of(&state, name).is_some())
        );
    }
}
