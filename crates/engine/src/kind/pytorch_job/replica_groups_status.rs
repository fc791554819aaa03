//! What the status and the events of a job of replica groups (see [`super::replica_groups`])
//! show of its groups: the quorum their Lighthouse reports, the survivors another group's loss
//! took down, and a run that lost every group.
//!
//! TorchFT promises that a lost replica group costs the others no restart, but training code
//! can break the promise: with torchft 0.2.0's own `DistributedDataParallel`, a group lost
//! while the others wait in an allreduce with it ends their training too (see
//! `docs/pytorchjob.md`). The planner finds such survivors (`plan/run/survivor_failure.rs`)
//! and replaces them at once; here a Warning event [`SURVIVOR_RESTARTED`] says so, and
//! `status.replicaGroups.survivorRestarts` counts it.
//!
//! **When no group is left alive** (every Worker pod that ran before the loss is lost, whatever
//! took it) after the groups' quorum had trained a step, nothing is left to heal from: the
//! groups' state is lost. The new groups start from the newest checkpoint their code saved, or
//! from step 0. A Warning event [`GROUP_STATE_LOST`] and `status.replicaGroups.stateLost` say
//! so and name the step reached; once the Lighthouse reports the new groups' first quorum, the
//! status shows its step and an event [`GROUPS_RESUMED`] (a Warning when it is behind the step
//! reached) says how many steps are trained again.

use std::time::Duration;

use eto_api::job_status::{GroupStateLoss, ReplicaGroupsStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::event_spec::EventSpec;
use crate::group_report::{FORMING_POLL, GroupReport, QuorumReport};
use crate::job::{GroupLosses, ShownGroups};
use crate::status::JobStatus;

/// Reason of the Warning event of a survivor that failed after another group's loss.
pub const SURVIVOR_RESTARTED: &str = "SurvivorRestarted";

/// Reason of the Warning event when no group of a run is left alive.
pub const GROUP_STATE_LOST: &str = "GroupStateLost";

/// Reason of the event when the groups that replaced a run's lost ones train again.
pub const GROUPS_RESUMED: &str = "GroupsResumed";

/// How often eto reads the Lighthouse while the groups that replaced a run's lost ones are to
/// resume, to show the step they resume from.
pub const RESUMPTION_POLL: Duration = Duration::from_secs(1);

/// Shows the replica groups' quorum as their Lighthouse's `report` gives it (see
/// [`QuorumReport::status`]) for a run holding `groups` groups, keeping what eto counted of
/// the run's lost groups, and says when the groups resumed after a run lost them all. The
/// Lighthouse is read again every [`FORMING_POLL`] (every [`RESUMPTION_POLL`] while groups
/// that replaced a lost run's are to resume), whether or not it answered this time: the quorum
/// changes without any pod changing.
pub fn show(report: Option<&GroupReport>, groups: usize, status: &mut JobStatus) -> ShownGroups {
    let resuming = status
        .replica_groups
        .as_ref()
        .and_then(|groups| groups.state_lost.as_ref())
        .is_some_and(|lost| lost.resumed_at.is_none());
    let read_again = if resuming {
        RESUMPTION_POLL
    } else {
        FORMING_POLL
    };
    let mut events = Vec::new();
    if let Some(quorum) = report.and_then(|report| report.quorum.as_ref()) {
        let mut shown = quorum.status(groups);
        if let Some(before) = &status.replica_groups {
            shown.survivor_restarts = before.survivor_restarts;
            shown.state_lost = before.state_lost.clone();
        }
        events.extend(resumption(quorum, &mut shown));
        status.replica_groups = Some(shown);
    }
    ShownGroups { events, read_again }
}

/// Records what the run's groups lost in `status` (see the module documentation) and returns
/// the events that say so.
pub fn record_losses(
    losses: &GroupLosses<'_>,
    report: Option<&GroupReport>,
    status: &mut JobStatus,
) -> Vec<EventSpec> {
    let cause = losses.cause;
    let mut shown = status.replica_groups.clone().unwrap_or_default();
    let mut events = Vec::new();
    for survivor in &losses.survivors {
        shown.survivor_restarts += 1;
        let then = match &survivor.replacement {
            Some(replacement) => format!("replaced at once by {replacement}, under its group id"),
            None => "not replaced".to_string(),
        };
        events.push(EventSpec::new(
            true,
            SURVIVOR_RESTARTED,
            "Replace",
            format!(
                "worker {} {} soon after {cause}: its replica group did not survive that loss (with TorchFT, wrap the model with eto_notice.fault_tolerant_ddp); it is {then}, not backed off",
                survivor.worker, survivor.loss
            ),
        ));
    }
    if let Some(loss) = state_lost(losses, report, &shown) {
        events.push(EventSpec::new(
            true,
            GROUP_STATE_LOST,
            "Replace",
            format!(
                "no replica group is left alive ({cause}, and the others' training failed or was lost): the groups' state at step {} is lost, and none is left to heal from; the new groups start from the newest checkpoint their code saved, or from step 0",
                loss.step
            ),
        ));
        shown.state_lost = Some(loss);
    }
    if shown != ReplicaGroupsStatus::default() {
        status.replica_groups = Some(shown);
    }
    events
}

/// The groups' state, lost when `losses` left no group alive after their quorum trained a
/// step, unless the status already says it is lost and the groups did not train again since.
fn state_lost(
    losses: &GroupLosses<'_>,
    report: Option<&GroupReport>,
    shown: &ReplicaGroupsStatus,
) -> Option<GroupStateLoss> {
    // This reconcile's report of the Lighthouse, fresher than the status's.
    let (step, quorum_id) = match report.and_then(|report| report.quorum.as_ref()) {
        Some(quorum) if quorum.step >= shown.step => (quorum.step, quorum.quorum_id),
        _ => (shown.step, shown.quorum_id),
    };
    if step == 0 {
        return None;
    }
    if shown
        .state_lost
        .as_ref()
        .is_some_and(|lost| lost.resumed_at.is_none() || lost.quorum_id == shown.quorum_id)
    {
        return None;
    }
    (!losses.any_alive).then_some(GroupStateLoss {
        time: Time(losses.now),
        step,
        quorum_id,
        resumed_at: None,
    })
}

/// Once the groups that replaced a run's lost ones train in a new quorum, records the step
/// they resumed from in `shown` and returns the event that says how far behind it is.
fn resumption(quorum: &QuorumReport, shown: &mut ReplicaGroupsStatus) -> Option<EventSpec> {
    let lost = shown
        .state_lost
        .as_mut()
        .filter(|lost| lost.resumed_at.is_none())?;
    if quorum.quorum_id == lost.quorum_id || quorum.participants == 0 {
        return None;
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
    Some(EventSpec::new(
        warning,
        GROUPS_RESUMED,
        "Resume",
        format!(
            "the replica groups train again in a quorum of {}, at step {} when eto first read it, {how}",
            quorum.participants, quorum.step
        ),
    ))
}
