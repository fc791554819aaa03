//! Nodes in cooldown: where a worker of the job failed recently, and so where its new workers
//! would rather not go.
//!
//! A worker whose containers failed on a node (an error exit; not an eviction, a disruption or
//! a deletion, which say nothing about the node's health for this job; nor an exit its node's
//! loss caused, which the pod's `DisruptionTarget` condition shows) puts that node in
//! cooldown for `elasticPolicy.blacklistCooldownSeconds`; a failure on a node already in
//! cooldown starts it again. Workers created meanwhile get a *preferred* node affinity term
//! against the nodes in cooldown ([`avoiding`]), so the scheduler places them elsewhere when
//! another node fits and on a node in cooldown when none does: a worker never waits only for a
//! cooldown to end.
//!
//! # How the preference is expressed
//! kube-apiserver accepts exactly one value for `In` and `NotIn` on a node *field*
//! (`matchFields` on `metadata.name`), so a list of nodes cannot go into one requirement. The
//! preference is one term (weight [`AVOIDANCE_WEIGHT`]) holding one `metadata.name NotIn
//! [node]` requirement per node; the requirements of a term must all hold, so a node outside
//! the cooldown matches the term and scores the full weight, and a node in cooldown scores
//! nothing, however many nodes are listed. At most [`AVOIDED_NODES_LIMIT`] nodes are listed,
//! those whose cooldown started last, so that a long cooldown list cannot swell every new
//! pod's spec; the status keeps up to [`COOLDOWN_LIMIT`].

use std::time::Duration;

use eto_api::job_status::{COOLDOWN_LIMIT, NodeCooldown};
use k8s_openapi::api::core::v1::{
    NodeSelectorRequirement, NodeSelectorTerm, PodSpec, PreferredSchedulingTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Weight of the preference against nodes in cooldown: the highest the scheduler accepts.
pub const AVOIDANCE_WEIGHT: i32 = 100;

/// The most nodes a new worker's preference lists: the cooldowns that started last.
pub const AVOIDED_NODES_LIMIT: usize = 32;

/// A worker that failed on a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failure<'a> {
    /// The node.
    pub node: &'a str,
    /// The worker pod.
    pub pod: &'a str,
}

/// The nodes in cooldown after `now`: those of `previous` whose cooldown has not ended, with
/// each of `failures` starting (or restarting) its node's cooldown. A zero `cooldown` keeps
/// none. Sorted by node name; at most [`COOLDOWN_LIMIT`], those ending first dropped first.
pub fn update(
    previous: &[NodeCooldown],
    failures: &[Failure<'_>],
    cooldown: Duration,
    now: jiff::Timestamp,
) -> Vec<NodeCooldown> {
    if cooldown.is_zero() {
        return Vec::new();
    }
    let until = crate::time::after(now, cooldown);
    let mut nodes: Vec<NodeCooldown> = previous
        .iter()
        .filter(|entry| entry.until.0 > now)
        .filter(|entry| !failures.iter().any(|f| f.node == entry.node))
        .cloned()
        .collect();
    for failure in failures {
        nodes.retain(|entry| entry.node != failure.node);
        nodes.push(NodeCooldown {
            node: failure.node.to_string(),
            pod: failure.pod.to_string(),
            until: Time(until),
        });
    }
    if nodes.len() > COOLDOWN_LIMIT {
        nodes.sort_by_key(|entry| std::cmp::Reverse(entry.until.0));
        nodes.truncate(COOLDOWN_LIMIT);
    }
    nodes.sort_by(|a, b| a.node.cmp(&b.node));
    nodes
}

/// When the first of `nodes` leaves its cooldown, if any is in one.
pub fn next_end(nodes: &[NodeCooldown]) -> Option<jiff::Timestamp> {
    nodes.iter().map(|entry| entry.until.0).min()
}

/// Adds to `spec` a preference against `nodes` (by node name; see the module documentation
/// for its form and bound); no change when `nodes` is empty. The template's own affinity is
/// kept.
pub fn avoiding(spec: &mut PodSpec, nodes: &[NodeCooldown]) {
    if nodes.is_empty() {
        return;
    }
    let mut newest: Vec<&NodeCooldown> = nodes.iter().collect();
    // A cooldown ends a fixed time after it started: the latest ends are the latest starts.
    newest.sort_by(|a, b| b.until.0.cmp(&a.until.0).then_with(|| a.node.cmp(&b.node)));
    newest.truncate(AVOIDED_NODES_LIMIT);
    newest.sort_by(|a, b| a.node.cmp(&b.node));
    let requirements = newest
        .into_iter()
        .map(|entry| NodeSelectorRequirement {
            key: "metadata.name".into(),
            operator: "NotIn".into(),
            values: Some(vec![entry.node.clone()]),
        })
        .collect();
    let preference = PreferredSchedulingTerm {
        weight: AVOIDANCE_WEIGHT,
        preference: NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(requirements),
        },
    };
    crate::affinity::prefer_nodes(spec, preference);
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn at(seconds: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn entry(node: &str, pod: &str, until: i64) -> NodeCooldown {
        NodeCooldown {
            node: node.into(),
            pod: pod.into(),
            until: Time(at(until)),
        }
    }

    const TEN_MINUTES: Duration = Duration::from_secs(600);

    struct Case {
        name: &'static str,
        previous: Vec<NodeCooldown>,
        failures: Vec<Failure<'static>>,
        now: i64,
        expected: Vec<NodeCooldown>,
    }

    #[test]
    fn cooldowns_start_renew_and_end() {
        let failure = |node, pod| Failure { node, pod };
        let cases = [
            Case {
                name: "a failure starts a cooldown",
                previous: vec![],
                failures: vec![failure("n1", "w-1")],
                now: 0,
                expected: vec![entry("n1", "w-1", 600)],
            },
            Case {
                name: "a second failure on the node starts it again",
                previous: vec![entry("n1", "w-1", 600)],
                failures: vec![failure("n1", "w-4")],
                now: 300,
                expected: vec![entry("n1", "w-4", 900)],
            },
            Case {
                name: "an ended cooldown is dropped",
                previous: vec![entry("n1", "w-1", 600), entry("n2", "w-2", 900)],
                failures: vec![],
                now: 600,
                expected: vec![entry("n2", "w-2", 900)],
            },
            Case {
                name: "nodes are listed by name",
                previous: vec![entry("n2", "w-2", 900)],
                failures: vec![failure("n1", "w-5")],
                now: 0,
                expected: vec![entry("n1", "w-5", 600), entry("n2", "w-2", 900)],
            },
            Case {
                name: "nothing failed, nothing cools",
                previous: vec![],
                failures: vec![],
                now: 0,
                expected: vec![],
            },
        ];
        for case in cases {
            assert_eq!(
                update(&case.previous, &case.failures, TEN_MINUTES, at(case.now)),
                case.expected,
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn a_zero_cooldown_keeps_no_node() {
        let failures = [Failure {
            node: "n1",
            pod: "w-1",
        }];
        assert!(update(&[entry("n2", "w-2", 900)], &failures, Duration::ZERO, at(0)).is_empty());
    }

    #[test]
    fn the_list_is_bounded_and_keeps_the_cooldowns_that_end_last() {
        let previous: Vec<NodeCooldown> = (0..COOLDOWN_LIMIT)
            .map(|i| entry(&format!("n{i:03}"), "w", 100 + i64::try_from(i).unwrap()))
            .collect();
        let failures = [Failure {
            node: "fresh",
            pod: "w-9",
        }];
        let nodes = update(&previous, &failures, TEN_MINUTES, at(0));
        assert_eq!(nodes.len(), COOLDOWN_LIMIT);
        assert!(nodes.iter().any(|n| n.node == "fresh"));
        assert!(
            !nodes.iter().any(|n| n.node == "n000"),
            "the cooldown ending first is dropped"
        );
        assert_eq!(next_end(&nodes), Some(at(101)));
    }

    #[test]
    fn new_pods_prefer_other_nodes_and_keep_the_templates_affinity() {
        let mut spec: PodSpec = serde_json::from_value(serde_json::json!({
            "containers": [],
            "affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]},
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}]
            }}
        }))
        .unwrap();
        avoiding(
            &mut spec,
            &[entry("n1", "w-1", 600), entry("n2", "w-2", 600)],
        );
        let affinity = serde_json::to_value(&spec.affinity).unwrap();
        assert_eq!(
            affinity["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][1],
            serde_json::json!({"weight": 100, "preference": {"matchFields": [
                {"key": "metadata.name", "operator": "NotIn", "values": ["n1"]},
                {"key": "metadata.name", "operator": "NotIn", "values": ["n2"]}]}})
        );
        assert_eq!(
            affinity["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"],
            10
        );
        assert!(
            affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"].is_object()
        );

        let mut plain = PodSpec::default();
        avoiding(&mut plain, &[]);
        assert_eq!(plain.affinity, None, "no cooldown, no affinity");
    }

    /// kube-apiserver's rule for node field requirements: `metadata.name`, `In` or `NotIn`,
    /// exactly one value (eto-sim checks the whole pod the same way; see its conformance
    /// tests).
    fn is_valid_field_requirement(requirement: &NodeSelectorRequirement) -> bool {
        requirement.key == "metadata.name"
            && matches!(requirement.operator.as_str(), "In" | "NotIn")
            && requirement.values.as_ref().is_some_and(|v| v.len() == 1)
    }

    #[test]
    fn any_number_of_nodes_in_cooldown_gives_an_affinity_the_api_server_accepts() {
        // (nodes in cooldown, nodes listed)
        let cases = [
            (1, 1),
            (2, 2),
            (3, 3),
            (AVOIDED_NODES_LIMIT, AVOIDED_NODES_LIMIT),
            (COOLDOWN_LIMIT, AVOIDED_NODES_LIMIT),
        ];
        for (count, listed) in cases {
            let nodes: Vec<NodeCooldown> = (0..count)
                .map(|i| entry(&format!("n{i:03}"), "w", i64::try_from(i).unwrap()))
                .collect();
            let mut spec = PodSpec::default();
            avoiding(&mut spec, &nodes);
            let terms = spec
                .affinity
                .and_then(|a| a.node_affinity)
                .and_then(|n| n.preferred_during_scheduling_ignored_during_execution)
                .unwrap();
            assert_eq!(terms.len(), 1, "one term, {count} nodes");
            assert_eq!(terms[0].weight, AVOIDANCE_WEIGHT);
            let requirements = terms[0].preference.match_fields.clone().unwrap();
            assert_eq!(requirements.len(), listed, "{count} nodes");
            assert!(
                requirements.iter().all(is_valid_field_requirement),
                "{count} nodes: {requirements:?}"
            );
            // The cooldowns that started last are the ones listed.
            let listed_nodes: Vec<String> = requirements
                .iter()
                .flat_map(|r| r.values.clone().unwrap())
                .collect();
            let expected: Vec<String> = (count - listed..count)
                .map(|i| format!("n{i:03}"))
                .collect();
            assert_eq!(listed_nodes, expected, "{count} nodes");
        }
    }
}
