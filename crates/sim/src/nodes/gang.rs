//! Gang admission, as Volcano and the scheduler-plugins coscheduling plugin do it: the pods of
//! a PodGroup are placed only when at least its `minMember` of them can run together.
//!
//! A pod belongs to the group its annotation `scheduling.k8s.io/group-name` (Volcano) or its
//! label `scheduling.x-k8s.io/pod-group` (coscheduling) names, in its namespace; the group's
//! `spec.minMember` is read from a PodGroup of either API (`scheduling.volcano.sh/v1beta1`,
//! `scheduling.x-k8s.io/v1alpha1`), which must be installed as a CRD. A pod of a group that
//! does not exist is not placed. A group that cannot form may preempt the members of other
//! groups beyond their minimum that are marked preemptable (see [`elastic_victims`]), as
//! Volcano reclaims elastic tasks. The scheduler forms a group with `form` and evicts a
//! victim with `preempt`. Not simulated: queues, `minResources`, timeouts.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Value;

use super::conditions::delete_disrupted;
use super::placement::{add, fit};
use super::quantity::{Milli, pod_requests};

use crate::options::WriteOptions;
use crate::resources::ResourceId;
use crate::store::{ObjectKey, State};

/// Volcano's annotation naming a pod's group.
pub const VOLCANO_GROUP_ANNOTATION: &str = "scheduling.k8s.io/group-name";
/// The coscheduling plugin's label naming a pod's group.
pub const COSCHEDULING_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";
/// The API groups of PodGroups.
const POD_GROUP_APIS: [&str; 2] = ["scheduling.volcano.sh", "scheduling.x-k8s.io"];

/// A PodGroup, by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Group {
    /// Namespace of the group and its pods.
    pub namespace: String,
    /// Name of the group.
    pub name: String,
}

/// Whether `resource` is a PodGroup resource.
pub fn is_pod_groups(resource: &ResourceId) -> bool {
    resource.plural == "podgroups" && POD_GROUP_APIS.contains(&resource.group.as_str())
}

/// The group `pod` belongs to, if any.
pub fn group_of(pod: &Value) -> Option<Group> {
    let metadata = &pod["metadata"];
    let name = metadata["annotations"][VOLCANO_GROUP_ANNOTATION]
        .as_str()
        .or_else(|| metadata["labels"][COSCHEDULING_GROUP_LABEL].as_str())?;
    Some(Group {
        namespace: metadata["namespace"].as_str().unwrap_or_default().into(),
        name: name.into(),
    })
}

/// The `minMember` of `group` (at least 1), or `None` when no PodGroup of that name exists.
pub fn min_member(state: &State, group: &Group) -> Option<usize> {
    let key = ObjectKey::new(&group.namespace, &group.name);
    POD_GROUP_APIS.iter().find_map(|api| {
        let found = state.get(&ResourceId::new(api, "podgroups"), &key)?;
        let min = found["spec"]["minMember"].as_u64().unwrap_or(1).max(1);
        Some(usize::try_from(min).unwrap_or(usize::MAX))
    })
}

/// Volcano's mark of a pod its scheduler may preempt (eto puts it on workers, not launchers).
pub const PREEMPTABLE: &str = "volcano.sh/preemptable";

/// Whether `pod` may be preempted: annotated or labelled [`PREEMPTABLE`] `"true"`.
fn preemptable(pod: &Value) -> bool {
    let metadata = &pod["metadata"];
    metadata["annotations"][PREEMPTABLE] == "true" || metadata["labels"][PREEMPTABLE] == "true"
}

/// A placed pod the scheduler may preempt: its key, its node, what it requests.
pub type Victim = (ObjectKey, String, BTreeMap<String, Milli>);

/// Where a bound pod is, what it requests, and its group.
pub type Placement = (String, BTreeMap<String, Milli>, Option<Group>);

/// The pods that may be preempted so that `starving` can form, youngest first: preemptable
/// members of other groups beyond those groups' minimum (as Volcano never takes a formed gang
/// below its `minMember`), not already being deleted. `placed` is each bound pod's node,
/// requests and group.
pub fn elastic_victims<'a>(
    state: &State,
    placed: impl Iterator<
        Item = (
            &'a ObjectKey,
            &'a (String, BTreeMap<String, Milli>, Option<Group>),
        ),
    >,
    starving: &Group,
) -> Vec<Victim> {
    let mut live: HashMap<Group, usize> = HashMap::new();
    let mut candidates: HashMap<Group, Vec<(String, Victim)>> = HashMap::new();
    for (key, (node, requests, group)) in placed {
        let Some(group) = group.as_ref().filter(|group| *group != starving) else {
            continue;
        };
        let Some(pod) = state.get(&super::pods(), key) else {
            continue;
        };
        if pod["metadata"].get("deletionTimestamp").is_some() {
            continue;
        }
        *live.entry(group.clone()).or_default() += 1;
        if preemptable(pod) {
            let created = pod["metadata"]["creationTimestamp"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            candidates
                .entry(group.clone())
                .or_default()
                .push((created, (key.clone(), node.clone(), requests.clone())));
        }
    }
    let mut victims: Vec<(String, Victim)> = Vec::new();
    for (group, mut members) in candidates {
        let Some(min) = min_member(state, &group) else {
            continue;
        };
        let excess = live.get(&group).copied().unwrap_or(0).saturating_sub(min);
        members.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.0.cmp(&a.1.0)));
        victims.extend(members.into_iter().take(excess));
    }
    victims.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.0.cmp(&a.1.0)));
    victims.into_iter().map(|(_, victim)| victim).collect()
}

/// The pending members of a group (positions in the pending pods) of which `needed` more must
/// be placed together for it to form.
pub(super) struct Shortfall<'a> {
    pub(super) group: &'a Group,
    pub(super) members: &'a [usize],
    pub(super) needed: usize,
}

/// What the pods on each node request, by the node's position.
pub(super) type Usage = Vec<BTreeMap<String, Milli>>;

/// Up to `needed` of `members` (positions in `pending`, oldest first) placed on `nodes` whose
/// pods request `used`: the usage after them, and where each went.
pub(super) fn form(
    pending: &[Arc<Value>],
    members: &[usize],
    needed: usize,
    nodes: &[(Arc<Value>, BTreeMap<String, Milli>)],
    mut used: Usage,
) -> (Usage, Vec<(usize, usize)>) {
    let mut formed = Vec::new();
    for &at in members {
        if formed.len() >= needed {
            break;
        }
        if let Ok(node) = fit(&pending[at], nodes, &used) {
            add(&mut used[node], &pod_requests(&pending[at]));
            formed.push((at, node));
        }
    }
    (used, formed)
}

/// Preempts pod `key`: marks it `DisruptionTarget` (reason `PreemptionByScheduler`, as
/// kube-scheduler does) and deletes it with its grace period; returns whether it did.
pub(super) fn preempt(
    state: &mut State,
    resource: &crate::resources::ResourceType,
    key: &ObjectKey,
    options: &WriteOptions,
) -> bool {
    delete_disrupted(
        state,
        resource,
        key,
        (
            "PreemptionByScheduler",
            "preempted for a pod group that waits for its minimum",
        ),
        options,
    )
}
