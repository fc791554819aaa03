//! The nodes a run's Workers failed on cool down: a failed Worker's node, and a silent
//! one's (see `silent_workers.rs`), is avoided by new pods for `blacklistCooldownSeconds`
//! (see [`crate::cooldown`]); a survivor of another group's loss (see
//! `survivor_failure.rs`) and a Worker the platform took cool nothing down.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;

use super::Run;
use crate::loss::Loss;
use crate::target_workers::WorkerDecision;
use crate::{cooldown, pods};

impl Run<'_, '_> {
    /// Records the nodes of the Workers `decision` found failed, but the `survivors_failed`,
    /// and of the `silent` ones, among `current`, in `status.nodesInCooldown`, and wakes the
    /// job when the first cooldown ends.
    pub(super) fn cool_down_failed_nodes(
        &mut self,
        decision: &WorkerDecision,
        survivors_failed: &BTreeSet<u32>,
        silent: &BTreeMap<u32, jiff::Timestamp>,
        current: &BTreeMap<u32, &Pod>,
    ) {
        // A failed Worker's node cools down, and so does a silent one's.
        let failures: Vec<cooldown::Failure<'_>> = decision
            .lost
            .iter()
            .filter(|lost| matches!(lost.loss, Loss::Failed { .. }))
            .map(|lost| lost.index)
            .filter(|index| !survivors_failed.contains(index))
            .chain(silent.keys().copied())
            .filter_map(|index| {
                let pod = current.get(&index).filter(|p| !pods::is_disrupted(p))?;
                Some(cooldown::Failure {
                    node: pods::node(pod)?,
                    pod: pod.metadata.name.as_deref()?,
                })
            })
            .collect();
        let in_cooldown = cooldown::update(
            &self.planner.status_before.nodes_in_cooldown,
            &failures,
            self.context.spec.elastic.blacklist_cooldown,
            self.planner.now,
        );
        if let Some(end) = cooldown::next_end(&in_cooldown) {
            self.planner.requeue_at(end);
        }
        self.planner.status.nodes_in_cooldown = in_cooldown;
    }
}
