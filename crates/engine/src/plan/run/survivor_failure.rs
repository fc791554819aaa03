//! Replica groups that did not survive another group's loss, and a run that lost every group.
//!
//! TorchFT promises that a lost replica group costs the others no restart, but training code
//! can break the promise: with torchft 0.2.0's own `DistributedDataParallel`, a group lost
//! while the others wait in an allreduce with it ends their training too (see
//! `docs/pytorchjob.md`). A Worker of a job of replica groups whose training fails (an error
//! exit) within [`SURVIVOR_WINDOW`] of the platform taking another Worker (disrupted, evicted,
//! deleted, or on a node that announced it goes; in this reconcile or recorded in the
//! blacklist) is a survivor that the loss took down, not code failing on its own:
//!
//! - it is replaced at once under its group id, heals from a live group if one is left, and is
//!   neither backed off nor counted against `backoffLimit` (see `worker_backoff.rs`), nor is
//!   its node cooled down;
//! - a Warning event [`SURVIVOR_RESTARTED`] says so, and `status.replicaGroups.survivorRestarts`
//!   counts it.
//!
//! **When no group is left alive** (every Worker pod that ran before the loss is lost, whatever
//! took it) after the groups' quorum had trained a step, nothing is left to heal from: the
//! groups' state is lost. The new groups start from the newest checkpoint their code saved, or
//! from step 0. A Warning event [`GROUP_STATE_LOST`] and `status.replicaGroups.stateLost` say
//! so and name the step reached; once the Lighthouse reports the new groups' first quorum, the
//! status shows its step and an event [`GROUPS_RESUMED`] (a Warning when it is behind the step
//! reached) says how many steps are trained again.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use eto_api::job_status::{GroupStateLoss, ReplicaGroupsStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::Run;
use crate::loss::Loss;
use crate::names;
use crate::pods;
use crate::quorum_report::QuorumReport;
use crate::target_workers::WorkerDecision;

/// Reason of the Warning event of a survivor that failed after another group's loss.
pub const SURVIVOR_RESTARTED: &str = "SurvivorRestarted";

/// Reason of the Warning event when no group of a run is left alive.
pub const GROUP_STATE_LOST: &str = "GroupStateLost";

/// Reason of the event when the groups that replaced a run's lost ones train again.
pub const GROUPS_RESUMED: &str = "GroupsResumed";

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

    /// Reports the survivors `failed` (see [`Self::survivors_failed`]) and, when `decision`
    /// left no group alive of those `current` held, that the groups' state is lost.
    pub(super) fn report_lost_groups(
        &mut self,
        decision: &WorkerDecision,
        current: &BTreeMap<u32, &Pod>,
        failed: &BTreeSet<u32>,
    ) {
        if !self.context.job_ref.coordinator().groups_stand_alone {
            return;
        }
        let name = self.name().to_string();
        let cause = self
            .recent_platform_loss(SURVIVOR_WINDOW)
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
        let mut status = self
            .planner
            .status
            .replica_groups
            .clone()
            .unwrap_or_default();
        for lost in decision.lost.iter().filter(|l| failed.contains(&l.index)) {
            status.survivor_restarts += 1;
            let then = match lost.replacement {
                Some(replacement) => format!(
                    "replaced at once by {}, under its group id",
                    names::worker(&name, replacement)
                ),
                None => "not replaced".to_string(),
            };
            self.planner.event(
                true,
                SURVIVOR_RESTARTED,
                "Replace",
                format!(
                    "worker {} {} soon after {cause}: its replica group did not survive that loss (with TorchFT, wrap the model with eto_notice.fault_tolerant_ddp); it is {then}, not backed off",
                    names::worker(&name, lost.index),
                    lost.loss.describe()
                ),
            );
        }
        if let Some(loss) = self.state_lost(decision, current, &status) {
            self.planner.event(
                true,
                GROUP_STATE_LOST,
                "Replace",
                format!(
                    "no replica group is left alive ({cause}, and the others' training failed or was lost): the groups' state at step {} is lost, and none is left to heal from; the new groups start from the newest checkpoint their code saved, or from step 0",
                    loss.step
                ),
            );
            status.state_lost = Some(loss);
        }
        if status != ReplicaGroupsStatus::default() {
            self.planner.status.replica_groups = Some(status);
        }
    }

    /// The loss of the groups' state, when `decision` leaves none of the Worker pods that
    /// held it (those of `current` that ran before this reconcile's losses, spares waiting for
    /// an id aside) and the groups had trained a step that no loss reported yet.
    fn state_lost(
        &self,
        decision: &WorkerDecision,
        current: &BTreeMap<u32, &Pod>,
        status: &ReplicaGroupsStatus,
    ) -> Option<GroupStateLoss> {
        // This reconcile's report of the Lighthouse, fresher than the status's.
        let (step, quorum_id) = match self
            .observed
            .group_report
            .and_then(|report| report.quorum.as_ref())
        {
            Some(quorum) if quorum.step >= status.step => (quorum.step, quorum.quorum_id),
            _ => (status.step, status.quorum_id),
        };
        if decision.lost.is_empty() || step == 0 {
            return None;
        }
        if status
            .state_lost
            .as_ref()
            .is_some_and(|lost| lost.resumed_at.is_none() || lost.quorum_id == status.quorum_id)
        {
            return None;
        }
        let gone: BTreeSet<u32> = decision
            .lost
            .iter()
            .map(|lost| lost.index)
            .chain(decision.left_with_group.iter().map(|left| left.index))
            .collect();
        // A group that started after the loss holds nothing yet: it heals from a live one.
        let since = self
            .recent_platform_loss(SURVIVOR_WINDOW)
            .map_or(self.planner.now, |(entry, _)| entry.time.0);
        let spares = self.context.job_ref.waiting_spares(current);
        let alive = current.iter().any(|(index, pod)| {
            !gone.contains(index)
                && !spares.contains(index)
                && Loss::of(Some(pod)).is_none()
                && pods::phase(pod) == "Running"
                && pod
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .is_some_and(|created| created.0 < since)
        });
        (!alive).then_some(GroupStateLoss {
            time: Time(self.planner.now),
            step,
            quorum_id,
            resumed_at: None,
        })
    }

    /// Notes in `status` the step the new groups train at once the Lighthouse's report
    /// `quorum` shows their first quorum after every group was lost, and says so.
    pub(super) fn show_resumption(
        &mut self,
        quorum: &QuorumReport,
        status: &mut ReplicaGroupsStatus,
    ) {
        let Some(lost) = status
            .state_lost
            .as_mut()
            .filter(|lost| lost.resumed_at.is_none())
        else {
            return;
        };
        if quorum.quorum_id == lost.quorum_id || quorum.participants == 0 {
            return;
        }
        lost.resumed_at = Some(quorum.step);
        let behind = lost.step - quorum.step;
        let warning = behind > 0;
        let how = if warning {
            format!(
                "{behind} steps behind the step {} the lost groups had reached: those steps are trained again",
                lost.step
            )
        } else {
            format!(
                "at or past the step {} the lost groups had reached: they resumed from a checkpoint",
                lost.step
            )
        };
        self.planner.event(
            warning,
            GROUPS_RESUMED,
            "Resume",
            format!(
                "the replica groups train again in a quorum of {}, at step {} when eto first read it, {how}",
                quorum.participants, quorum.step
            ),
        );
    }
}
