//! Hot spares of an elastic PyTorchJob whose rendezvous eto hosts, or of its replica groups
//! (`elasticPolicy.spareReplicas`).
//!
//! torchrun (2.3 and later) keeps an agent that comes to a formed round holding `max_nodes`
//! members out of it, in the round's redundancy list, with no join timeout; when a member
//! leaves, that agent moves to the wait list at once, and the members re-form with it. So a
//! spare Worker whose agent waits there takes a lost Worker's place without a pod start:
//! no scheduling, no image pull, no interpreter start in the stall of the group.
//!
//! eto keeps the spares as it keeps the group's Workers (target workers, replaced under new
//! names when lost, gated when they join a running run): it holds `spares` Workers more than
//! the group's count whenever that count is the group's maximum, and none below it, where
//! torchrun would take them into the group. Which Workers wait as spares is torchrun's
//! choice (the last to come); eto counts them from the store's report. To keep a member and a
//! spare off the same node, a job with spares prefers one of its Workers per node.
//!
//! A job of TorchFT replica groups keeps its spares at every size instead ([`KeptWhen::Always`]):
//! there eto itself gives a waiting spare the place of a lost or added group (see
//! `kind::pytorch_job::replica_groups::seat`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodAffinityTerm, PodSpec, WeightedPodAffinityTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::effective_spec::WorkerCounts;

/// torchrun's `join_timeout` (in `PET_RDZV_CONF`) of a job with spares whose `rdzvConf` sets
/// none: a year. torch before 2.3 keeps a spare's agent waiting only until its join timeout
/// (600 s by default), and an agent that gives up closes the rendezvous for every agent of
/// the run. A longer wait costs nothing else here: eto ends a forming round's wait once its
/// agents joined (see [`crate::group_orders`]), and a group that stays below its minimum is
/// eto's to suspend.
pub const JOIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(365 * 24 * 3600);

/// The weight of the preference for a node without another of the job's Workers (of 100).
pub const SPREAD_WEIGHT: i32 = 50;

/// The node label the spread is over.
pub const NODE_TOPOLOGY: &str = "kubernetes.io/hostname";

/// When a job keeps its spares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeptWhen {
    /// Beside a group at its maximum only: below it, torchrun would take a spare into the
    /// group.
    AtMaximum,
    /// At every size: eto itself gives a spare its place (a spare replica group, see
    /// `kind::pytorch_job::replica_groups`).
    Always,
}

/// The spare Workers kept beside a group holding `group` Workers: `counts.spares` at every
/// size, or only when the group is at its maximum, as `when` says.
pub fn kept(counts: &WorkerCounts, group: u32, when: KeptWhen) -> u32 {
    match (when, counts.max) {
        (KeptWhen::Always, _) => counts.spares,
        (KeptWhen::AtMaximum, Some(max)) if group >= max => counts.spares,
        (KeptWhen::AtMaximum, _) => 0,
    }
}

/// Adds to `spec`, a Worker of a job with spares, a preference for a node where no pod
/// with the job's Worker labels `workers` runs; no change without spares. The template's
/// own affinity is kept.
pub fn spread(spec: &mut PodSpec, counts: &WorkerCounts, workers: &BTreeMap<String, String>) {
    if counts.spares == 0 {
        return;
    }
    let term = WeightedPodAffinityTerm {
        weight: SPREAD_WEIGHT,
        pod_affinity_term: PodAffinityTerm {
            label_selector: Some(LabelSelector {
                match_labels: Some(workers.clone()),
                match_expressions: None,
            }),
            topology_key: NODE_TOPOLOGY.into(),
            ..PodAffinityTerm::default()
        },
    };
    crate::affinity::prefer_apart_from(spec, term);
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn counts(max: Option<u32>, spares: u32) -> WorkerCounts {
        WorkerCounts {
            desired: 3,
            min: 2,
            max,
            spares,
        }
    }

    #[test]
    fn spares_are_kept_beside_a_full_group_or_at_every_size() {
        use KeptWhen::{Always, AtMaximum};
        let cases = [
            ("below the maximum", counts(Some(4), 1), 3, AtMaximum, 0),
            ("at the maximum", counts(Some(4), 1), 4, AtMaximum, 1),
            (
                "two spares at the maximum",
                counts(Some(4), 2),
                4,
                AtMaximum,
                2,
            ),
            ("no spares asked", counts(Some(4), 0), 4, AtMaximum, 0),
            ("unbounded", counts(None, 1), 4, AtMaximum, 0),
            (
                "spare groups below the maximum",
                counts(Some(4), 1),
                3,
                Always,
                1,
            ),
            (
                "spare groups at the maximum",
                counts(Some(4), 2),
                4,
                Always,
                2,
            ),
            ("no spare groups asked", counts(Some(4), 0), 3, Always, 0),
        ];
        for (name, counts, group, when, expected) in cases {
            assert_eq!(kept(&counts, group, when), expected, "{name}");
        }
    }

    #[test]
    fn workers_of_a_job_with_spares_prefer_nodes_without_another() {
        let labels = BTreeMap::from([("job".to_string(), "ddp".to_string())]);
        let mut own: PodSpec = serde_json::from_value(json!({
            "containers": [],
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "podAffinityTerm": {"topologyKey": "zone"}}
            ]}}
        }))
        .unwrap();
        spread(&mut own, &counts(Some(4), 1), &labels);
        let terms = own
            .affinity
            .and_then(|a| a.pod_anti_affinity)
            .and_then(|a| a.preferred_during_scheduling_ignored_during_execution)
            .unwrap();
        assert_eq!(
            serde_json::to_value(&terms).unwrap(),
            json!([
                {"weight": 10, "podAffinityTerm": {"topologyKey": "zone"}},
                {"weight": SPREAD_WEIGHT, "podAffinityTerm": {
                    "labelSelector": {"matchLabels": {"job": "ddp"}},
                    "topologyKey": NODE_TOPOLOGY
                }}
            ])
        );

        let mut without = PodSpec::default();
        spread(&mut without, &counts(Some(4), 0), &labels);
        assert_eq!(without.affinity, None);
    }
}
