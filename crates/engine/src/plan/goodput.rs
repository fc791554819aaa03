//! The job's goodput ledger (see [`crate::goodput`]): what the planned status and the
//! coordinator's report say the job is doing, taken into `status.goodput` once every rule has
//! planned the status.
//!
//! - Finished (`Succeeded`, `Failed`): the ledger closes.
//! - Suspended (asked for, or below its minimum of workers), or not started: waiting.
//! - A notice asks the training to save a checkpoint (`Suspend`, `Checkpoint`): checkpoint.
//! - Restarting after its training failed, or an invalid spec: other.
//! - Fewer ready workers than the minimum: waiting while a worker waits for a node (or none
//!   exists yet), else the
//!   run's start-up (the group's re-formation once the run trained); the same while the
//!   training group its coordinator reports has not formed.
//! - A worker lost in this reconcile, where steps are reported: the same (the group re-forms
//!   without it; the next reported step says when it trains again).
//! - Otherwise it trains. Where the coordinator's report carries the training's steps (the
//!   kind's reader says from whom), they tell training from start-up and retrained steps from new
//!   ones; the plan reads the report again soon while it waits for a first step, and every
//!   [`crate::goodput::RECORD_EVERY`] while the job trains, or every
//!   [`crate::goodput::READ_EVERY`] where the training's own pods serve the steps: a read
//!   that goes unrecorded still counts once those pods are gone with their word
//!   ([`Observed::earlier_progress`]).

use eto_api::job_status::{JobPhase, NoticeKind};

use crate::goodput::{self, Activity, Goodput, GoodputBucket, ProgressSource, Sighting};
use crate::group_report::FORMING_POLL;
use crate::pods;
use crate::status::JobStatus;

use super::{Observed, Planner};

impl Planner {
    /// Moves the job's goodput ledger on (see the module documentation).
    pub(super) fn goodput(&mut self, observed: &Observed<'_>, valid: bool) {
        let before = self.status_before.goodput.as_ref();
        let run = self.status.current_run();
        let report = observed.group_report;
        let reported = report.and_then(|report| report.progress.as_ref());
        let latest = before.and_then(|ledger| ledger.latest.as_ref());
        let progress = reported.map(|reported| reported.read_at(latest, run, self.now));
        let earlier = observed
            .earlier_progress
            .map(|earlier| earlier.read_at(latest, run, self.now));
        let source = match reported {
            Some(reported) => reported.source,
            None => before.map_or(ProgressSource::PodStates, |ledger| ledger.source),
        };
        let trained_run = before.and_then(|ledger| ledger.trained_run);
        // A loss ends a reported stretch of training at its last step; without reports the
        // states after the loss tell whether the job still trains.
        let lost_now = source != ProgressSource::PodStates && !self.plan.tallies.lost.is_empty();
        let activity = if valid {
            activity(&self.status, observed, trained_run == Some(run), lost_now)
        } else {
            Activity::Idle(GoodputBucket::Other)
        };
        let created = observed
            .job
            .metadata()
            .creation_timestamp
            .as_ref()
            .map_or(self.now, |created| created.0);
        let begins_as = match self.status_before.phase {
            None | Some(JobPhase::Created) => GoodputBucket::Waiting,
            Some(_) => GoodputBucket::Other,
        };
        // A source that did not answer yet (a helper whose process still imports) is read
        // again as one that did.
        let readable = report.is_some() || observed.job.report_source(&observed.pods).is_some();
        let ledger = goodput::advance(
            before,
            &Sighting {
                source,
                created,
                activity,
                report: progress.as_ref(),
                earlier: earlier.as_ref(),
                run,
                begins_as,
                readable,
            },
            self.now,
        );
        let served_by_pods = observed.job.progress_served_by_pods(&observed.pods);
        if let Some(after) = read_again(&ledger, readable, served_by_pods) {
            self.requeue_at(crate::time::after(self.now, after));
        }
        self.status.goodput = Some(ledger);
    }
}

/// When to read the job's report again (`readable`: one was read now, or there is a place to
/// read one; `served_by_pods`: the training's own pods serve its steps): soon while a run
/// whose training reports steps waits for its first, every [`goodput::READ_EVERY`] while
/// it trains on steps its pods serve, every [`goodput::RECORD_EVERY`] while a job with a
/// report goes on otherwise (its training may start reporting); never once the job finished.
fn read_again(
    ledger: &Goodput,
    readable: bool,
    served_by_pods: bool,
) -> Option<std::time::Duration> {
    let current = ledger.current?;
    let reported = ledger.source != ProgressSource::PodStates;
    match current {
        GoodputBucket::StartUp | GoodputBucket::Reformation if reported => Some(FORMING_POLL),
        GoodputBucket::Productive | GoodputBucket::Retrained if reported && served_by_pods => {
            Some(goodput::READ_EVERY)
        }
        _ if readable || reported => Some(goodput::RECORD_EVERY),
        _ => None,
    }
}

/// What the planned `status` and the job's pods say it is doing. `trained` tells whether the
/// current run has trained: a group that is not formed then re-forms rather than starts;
/// `lost_now`, whether the plan found a worker lost (its group re-forms, or the job shrinks).
fn activity(
    status: &JobStatus,
    observed: &Observed<'_>,
    trained: bool,
    lost_now: bool,
) -> Activity {
    let forming = if trained {
        GoodputBucket::Reformation
    } else {
        GoodputBucket::StartUp
    };
    match status.phase {
        Some(JobPhase::Succeeded | JobPhase::Failed) => return Activity::Finished,
        None | Some(JobPhase::Suspended) => return Activity::Idle(GoodputBucket::Waiting),
        Some(JobPhase::Restarting) => return Activity::Idle(GoodputBucket::Other),
        Some(JobPhase::Created | JobPhase::Running | JobPhase::Scaling) => {}
    }
    if status
        .notice
        .as_ref()
        .is_some_and(|notice| matches!(notice.kind, NoticeKind::Suspend | NoticeKind::Checkpoint))
    {
        return Activity::Idle(GoodputBucket::Checkpoint);
    }
    let live_workers = super::live_workers(observed);
    // No worker yet, or one no node took: the job waits for capacity.
    let unplaced_worker =
        live_workers.is_empty() || live_workers.iter().any(|pod| pods::node(pod).is_none());
    let short = status
        .workers
        .as_ref()
        .is_some_and(|workers| workers.ready < workers.min.max(1));
    if short {
        return Activity::Idle(if unplaced_worker {
            GoodputBucket::Waiting
        } else {
            forming
        });
    }
    let group_down = status
        .group
        .as_ref()
        .is_some_and(|group| !group.complete || group.closed);
    if group_down || lost_now {
        return Activity::Idle(forming);
    }
    if status.phase == Some(JobPhase::Created) {
        return Activity::Idle(forming);
    }
    Activity::Training
}
