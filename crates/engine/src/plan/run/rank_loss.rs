//! A run whose workers are its ranks ([`WorkerNames::PerRun`]: a static torchrun job, whose
//! `RANK` is a pod's index) cannot go on without one of them: the other ranks' collective
//! operations fail with it, and a replacement under another index would have no rank. So a
//! lost worker ends the run, and the next run, once the old pods are gone, numbers its workers
//! from 0 again:
//!
//! - a worker the platform took (evicted, disrupted, deleted by someone else, gone with its
//!   node) starts a new run that counts nothing: the training code did not fail;
//! - a worker whose training failed starts a new run counted against `backoffLimit` when its
//!   replica's `restartPolicy` replaces a worker that failed that way (`OnFailure`, `Always`,
//!   `ExitCode` after a kill by a signal), and fails the job otherwise (`Never`, or `ExitCode`
//!   with an exit code of the training's own).
//!
//! A worker that completed is no loss: the Master's end is the run's.

use super::{Restart, Run, RunState};
use crate::job::WorkerNames;
use crate::loss::Loss;

impl Run<'_, '_> {
    /// Ends the run if it lost a rank (see the module documentation); returns whether it
    /// goes on.
    pub(super) fn ranks_kept(&mut self) -> bool {
        if self.context.job_ref.worker_names() != WorkerNames::PerRun
            || matches!(self.state, RunState::Suspending(_))
            || self.state.is_suspended()
        {
            return true;
        }
        let losses: Vec<(String, Loss)> =
            self.planner
                .status_before
                .target_workers
                .iter()
                .filter_map(|worker| {
                    let pod =
                        self.observed.pods.iter().copied().find(|p| {
                            p.metadata.name.as_deref() == Some(worker) && !self.is_stale(p)
                        });
                    let loss = Loss::of(pod).filter(|loss| *loss != Loss::Completed)?;
                    Some((worker.clone(), loss))
                })
                .collect();
        let Some((worker, loss)) = losses
            .iter()
            .find(|(_, loss)| !loss.is_the_platforms())
            .or_else(|| losses.first())
        else {
            return true;
        };
        let what = format!("worker {worker} {}", loss.describe());
        if losses.iter().all(|(_, loss)| loss.is_the_platforms()) {
            let message = format!(
                "{what}: the run cannot go on without its rank; a new run starts, counting nothing"
            );
            self.start_new_run(&message, Restart::Uncounted);
            return true;
        }
        self.restart_after_worker_failure(&what, loss)
    }
}
