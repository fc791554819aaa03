//! A torchrun group that cannot go on: its run is lost, and the next one starts at once.
//!
//! The Workers of a PyTorchJob whose rendezvous eto hosts train as one torchrun group, which
//! re-forms whenever a Worker comes or goes, for as long as its rendezvous is open (see
//! `kind/pytorch_job/rendezvous.rs`). Two things end it for good:
//!
//! - **A closed rendezvous.** A torchrun agent that ends for any reason but a signal (its
//!   restarts spent, a rendezvous timeout, a crash) closes the rendezvous for every agent:
//!   each one that meets it again fails with `RendezvousClosedError`, and a container the
//!   kubelet restarts (`OnFailure`) fails again at once, until it crash-loops. The store's
//!   report says so (`closed`), and a Worker whose training container failed confirms it. A
//!   group whose training finished closes its rendezvous too, a moment before its Workers exit
//!   with 0: a closure that no failed Worker confirms is a loss only once the store has seen
//!   it closed for [`CLOSED_UNCONFIRMED`] with no Worker exiting with 0 (a failed agent's
//!   container may be started again at once, and fail only after its import).
//! - **Every Worker failing**: every Worker that started has its training container failed
//!   and not running (`CrashLoopBackOff`, or terminated with a non-zero code), whatever the
//!   report says.
//!
//! Waiting for such a group is waiting for nothing: not `belowMinSeconds`, not a grace period
//! for pods that run no training process. The run ends in this reconcile:
//!
//! - When the platform took a Worker of the run within [`LOSS_WINDOW`] (evicted, disrupted,
//!   deleted, gone with its node, or on a node that announced it goes), the group is that
//!   loss's collateral damage: the job suspends with reason [`GROUP_LOST`] and
//!   resumes in a new run, with a new rendezvous id, the `Resume` notice and nothing counted,
//!   exactly as after a suspend below its minimum. Workers whose training still runs are
//!   shown the `Suspend` notice and have `checkpointGraceSeconds` to save; when none runs,
//!   the job suspends at once.
//! - Otherwise the training code failed on its own: a new run counted against
//!   `backoffLimit`, as a failed launcher restarts a job, while the Worker `restartPolicy`
//!   would replace a Worker that failed so (not `Never`; under `ExitCode`, an exit code of a
//!   signal); past the limit, or under such a policy, the job fails.

use super::{Run, RunState};
use crate::loss::Loss;
use crate::pods::{self, Activity};

/// Reason of the `Suspended` condition, the notices and the events when a run's torchrun group
/// could not go on after the platform took one of its Workers.
pub const GROUP_LOST: &str = "GroupLost";

/// How long after the platform took a Worker a lost group is that loss's doing: torch 1.x's
/// agents whose restarts are spent wait at their exit barrier, for every agent of the round
/// (the lost one too), 300 s before they exit and close the rendezvous.
pub const LOSS_WINDOW: std::time::Duration = std::time::Duration::from_secs(360);

/// How long a closed rendezvous that no failed Worker confirms may be a finished group whose
/// Workers are about to exit with 0.
pub const CLOSED_UNCONFIRMED: std::time::Duration = std::time::Duration::from_secs(10);

/// What ended a group, as seen once.
struct Lost {
    /// Why, for the condition and the events.
    why: String,
    /// A Worker whose training failed, and its exit code, if one was seen.
    failed: Option<(String, i32)>,
}

impl Run<'_, '_> {
    /// Ends the run if its group is lost (see the module documentation); returns whether the
    /// reconcile goes on planning the run.
    pub(super) fn group_kept(&mut self) -> bool {
        if !self.context.job_ref.coordinator().group_reforms
            || matches!(self.state, RunState::Suspending(_))
            || self.state.is_suspended()
        {
            return true;
        }
        let Some(lost) = self.lost_group() else {
            return true;
        };
        if let Some(loss) = self.platform_loss() {
            let why = format!("{}, {loss}: the group did not survive that loss", lost.why);
            let grace = self.context.spec.elastic.checkpoint_grace;
            return self.start_suspending(GROUP_LOST, why, grace);
        }
        let failure = Loss::Failed {
            exit_code: lost.failed.as_ref().map(|(_, code)| *code),
            reason: "Error".into(),
        };
        let how = match &lost.failed {
            Some((worker, code)) => format!(" (worker {worker} exited with code {code})"),
            None => String::new(),
        };
        self.restart_after_worker_failure(&format!("{}{how}", lost.why), &failure)
    }

    /// Whether the run's group is lost, and why (see the module documentation); looks again
    /// when a closure may be confirmed later.
    fn lost_group(&mut self) -> Option<Lost> {
        let kind = self.context.kind();
        let mut failed = Vec::new();
        let mut started = 0;
        for worker in &self.planner.status.target_workers {
            let Some(pod) = self
                .observed
                .pods
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(worker.as_str()))
                .filter(|p| !self.is_stale(p))
            else {
                continue;
            };
            // The platform's losses are replaced, not failures of the group.
            if pods::is_terminating(pod)
                || pods::is_disrupted(pod)
                || !matches!(Loss::of(Some(pod)), None | Some(Loss::Failed { .. }))
            {
                continue;
            }
            match kind.training_activity(pod) {
                // A Worker whose training ended well: the group finished, or is finishing.
                Activity::Exited => return None,
                Activity::Starting => {}
                Activity::Failed { exit_code } => {
                    started += 1;
                    failed.push((worker.clone(), exit_code));
                }
                Activity::Runs | Activity::Unknown => started += 1,
            }
        }
        let first = failed.first().cloned();
        let closed = self
            .observed
            .group_report
            .and_then(|report| report.group.as_ref())
            .filter(|group| group.closed);
        let why = if let Some(group) = closed {
            let seen =
                std::time::Duration::from_secs_f64(group.closed_for.unwrap_or(0.0).clamp(0.0, 1e9));
            if first.is_none() && seen < CLOSED_UNCONFIRMED {
                let again = crate::time::after(self.planner.now, CLOSED_UNCONFIRMED - seen);
                self.planner.requeue_at(again);
                return None;
            }
            format!(
                "its torchrun rendezvous was closed in round {}, so no group forms again",
                group.round
            )
        } else if !failed.is_empty() && failed.len() == started {
            let names: Vec<&str> = failed.iter().map(|(name, _)| name.as_str()).collect();
            format!(
                "the training container of every started worker failed ({})",
                names.join(", ")
            )
        } else {
            return None;
        };
        Some(Lost { why, failed: first })
    }

    /// The platform's latest loss of a Worker of the run within [`LOSS_WINDOW`], said
    /// as a clause ("after worker w-1 was deleted 4s ago"): a Worker gone, being deleted or
    /// disrupted now, or one the blacklist recorded lost to the platform.
    fn platform_loss(&self) -> Option<String> {
        let gone_now = self.planner.status.target_workers.iter().find(|worker| {
            let pod = self
                .observed
                .pods
                .iter()
                .copied()
                .find(|p| p.metadata.name.as_deref() == Some(worker.as_str()));
            Loss::of(pod).is_some_and(|loss| loss.is_the_platforms())
        });
        if let Some(worker) = gone_now {
            return Some(format!("after worker {worker} was lost to the platform"));
        }
        let (entry, what) = self.recent_platform_loss(LOSS_WINDOW)?;
        let seconds = self.planner.now.duration_since(entry.time.0).as_secs();
        Some(format!(
            "{seconds}s after worker {} was lost to the platform ({what})",
            entry.pod
        ))
    }
}
