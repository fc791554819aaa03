//! Groups that did not survive another group's loss.
//!
//! Where each group of a run stands alone (a PyTorchJob's TorchFT replica groups, see
//! [`crate::job::Coordinator::groups_stand_alone`]), the others are meant to train on through
//! a group's loss, but training code can break that promise (see
//! `kind/pytorch_job/replica_groups_status.rs`). A Worker whose training fails (an error
//! exit) within [`SURVIVOR_WINDOW`] of the platform taking another Worker (disrupted, evicted,
//! deleted, or on a node that announced it goes; in this reconcile or recorded in the
//! blacklist) is a survivor that the loss took down, not code failing on its own: it is
//! replaced at once under its group id, heals from a live group if one is left, and is neither
//! backed off nor counted against `backoffLimit` (see `worker_backoff.rs`), nor is its node
//! cooled down. The kind records such survivors, and a run left with no group alive, in the
//! status and the events.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::Run;
use crate::job::{FailedSurvivor, GroupLosses};
use crate::loss::Loss;
use crate::names;
use crate::pods;
use crate::target_workers::WorkerDecision;

/// How long after the platform took a Worker a group whose training fails is that loss's
/// survivor: TorchFT's collectives time out in seconds (Gloo's 5 s in its examples, the
/// `Manager`'s 10 s), a quorum in at most a minute.
pub const SURVIVOR_WINDOW: Duration = Duration::from_secs(60);

impl Run<'_, '_> {
    /// The Workers `decision` found lost whose training failed as survivors of another
    /// Worker's loss to the platform (see the module documentation); none unless the job
    /// trains as replica groups.
    pub(super) fn survivors_failed(&self, decision: &WorkerDecision) -> BTreeSet<u32> {
        if !self.context.job_ref.coordinator().groups_stand_alone {
            return BTreeSet::new();
        }
        let taken_now = decision
            .lost
            .iter()
            .any(|lost| lost.loss.is_the_platforms());
        if !taken_now && self.recent_platform_loss(SURVIVOR_WINDOW).is_none() {
            return BTreeSet::new();
        }
        decision
            .lost
            .iter()
            .filter(|lost| matches!(lost.loss, Loss::Failed { .. }))
            .map(|lost| lost.index)
            .collect()
    }

    /// Records the survivors `failed` (see [`Self::survivors_failed`]) and, when `decision`
    /// left no group alive of those `current` held, that the groups' state is lost (see
    /// [`crate::job::GroupedWorkers::record_group_losses`]); nothing when it lost no worker.
    pub(super) fn report_lost_groups(
        &mut self,
        decision: &WorkerDecision,
        current: &BTreeMap<u32, &Pod>,
        failed: &BTreeSet<u32>,
    ) {
        if !self.context.job_ref.coordinator().groups_stand_alone || decision.lost.is_empty() {
            return;
        }
        let name = self.name().to_string();
        let recent = self.recent_platform_loss(SURVIVOR_WINDOW);
        // A group that started after the latest loss to the platform holds nothing yet.
        let since = recent.map_or(self.planner.now, |(entry, _)| entry.time.0);
        let cause = recent
            .map(|(entry, what)| format!("worker {} was {what}", entry.pod))
            .or_else(|| {
                decision
                    .lost
                    .iter()
                    .find(|lost| !matches!(lost.loss, Loss::Failed { .. }))
                    .map(|lost| {
                        format!(
                            "worker {} {}",
                            names::worker(&name, lost.index),
                            lost.loss.describe()
                        )
                    })
            })
            .unwrap_or_else(|| "another group was lost".to_string());
        let survivors = decision
            .lost
            .iter()
            .filter(|lost| failed.contains(&lost.index))
            .map(|lost| FailedSurvivor {
                worker: names::worker(&name, lost.index),
                loss: lost.loss.describe(),
                replacement: lost
                    .replacement
                    .map(|replacement| names::worker(&name, replacement)),
            })
            .collect();
        let losses = GroupLosses {
            now: self.planner.now,
            cause: &cause,
            survivors,
            any_alive: self.any_group_alive(decision, current, since),
        };
        let events = self.context.job_ref.record_group_losses(
            &losses,
            self.observed.group_report,
            &mut self.planner.status,
        );
        self.planner.plan.events.extend(events);
    }

    /// Whether a worker among `current` created before `since` still trains after
    /// `decision`: not lost, not leaving with its group, not a waiting spare, running. A group
    /// that started later holds nothing yet: it heals from a live one.
    fn any_group_alive(
        &self,
        decision: &WorkerDecision,
        current: &BTreeMap<u32, &Pod>,
        since: jiff::Timestamp,
    ) -> bool {
        let gone: BTreeSet<u32> = decision
            .lost
            .iter()
            .map(|lost| lost.index)
            .chain(decision.left_with_group.iter().map(|left| left.index))
            .collect();
        let spares = self.context.job_ref.waiting_spares(current);
        current.iter().any(|(index, pod)| {
            !gone.contains(index)
                && !spares.contains(index)
                && Loss::of(Some(pod)).is_none()
                && pods::phase(pod) == "Running"
                && pod
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .is_some_and(|created| created.0 < since)
        })
    }
}
