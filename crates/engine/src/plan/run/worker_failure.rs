//! A run its workers' own failure ended, where the workers decide the run (a PyTorchJob's
//! lost rank, see `rank_loss.rs`, or its lost torchrun group, see `lost_group.rs`): the
//! Worker replica's `restartPolicy` and `backoffLimit` decide between a new run and the job's
//! failure, as a failed launcher's restart policy does for the other kinds.

use super::worker_backoff::WORKER;
use super::{Restart, Run};
use crate::loss::Loss;

impl Run<'_, '_> {
    /// Starts a new run counted against `backoffLimit` when the Worker replica's restart
    /// policy replaces a worker lost as `loss` and the limit allows, once the Workers' back-off
    /// lets it (see `restart_backoff.rs`); fails the job otherwise. `what` says what ended the
    /// run. Returns whether the job goes on in this reconcile.
    pub(super) fn restart_after_worker_failure(&mut self, what: &str, loss: &Loss) -> bool {
        let policy = self
            .context
            .job_ref
            .replica_restart_policy()
            .unwrap_or(self.context.spec.worker_restart_policy);
        let restarts = self.planner.status_before.restart_count;
        let limit = self.context.spec.backoff_limit;
        let replaced = loss.is_replaced_under(policy);
        if replaced && u32::try_from(restarts).is_ok_and(|r| r < limit) {
            if !self.restart_due(WORKER, format!("Workers: {what}")) {
                return false;
            }
            let message = format!(
                "{what}; restarting the job (restart {} of {limit})",
                restarts + 1
            );
            self.start_new_run(&message, Restart::Counted);
            return true;
        }
        let why = if replaced {
            format!("; the backoff limit of {limit} restarts is reached")
        } else {
            format!(" (worker restartPolicy {policy:?})")
        };
        let reason = self.context.kind().reason("Failed");
        self.planner.fail(
            self.observed,
            self.context,
            &reason,
            &format!("{what}{why}"),
            true,
        );
        false
    }
}
