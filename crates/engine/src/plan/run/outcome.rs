//! How a run ends on its own: its launcher or its workers succeed, its deadline passes, or
//! its launcher fails and the job restarts or fails.

use eto_api::job_status::JobPhase;
use eto_api::training_job::JobRestartPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::conditions;
use crate::loss::Loss;
use crate::own_failure::OwnFailure;
use crate::pods;

use super::{Launcher, Restart, Run};

impl Run<'_, '_> {
    /// Whether the workers, not a launcher, decide the run's outcome: when the coordinator
    /// only serves them, or trains beside them but the job has none (a PyTorchJob without a
    /// Master).
    pub(super) fn workers_decide(&self) -> bool {
        let coordinator = self.context.job_ref.coordinator();
        coordinator.only_serves
            || (coordinator.trains && self.context.job_ref.coordinator_template().is_none())
    }

    /// Whether the workers of a run they decide finished successfully: every worker of the
    /// run's target, or for an elastic PyTorchJob any one, as v1 decides.
    pub(super) fn every_worker_succeeded(&self) -> bool {
        let target = &self.planner.status_before.target_workers;
        let succeeded = |worker: &String| {
            self.observed.pods.iter().any(|pod| {
                pod.metadata.name.as_deref() == Some(worker.as_str())
                    && !self.is_stale(pod)
                    && pods::phase(pod) == "Succeeded"
            })
        };
        self.workers_decide()
            && !target.is_empty()
            && if self.context.job_ref.first_worker_success_decides() {
                target.iter().any(succeeded)
            } else {
                target.iter().all(succeeded)
            }
    }

    /// Applies `activeDeadlineSeconds`, which does not run while the job is suspended: the
    /// job fails with reason `DeadlineExceeded` once that long has passed since `startTime`,
    /// and its unfinished pods are deleted. Returns whether the job goes on.
    pub(super) fn within_deadline(&mut self) -> bool {
        let Some(deadline) = self
            .context
            .spec
            .active_deadline
            .filter(|_| !self.state.is_suspended())
        else {
            return true;
        };
        let start = self
            .planner
            .status
            .start_time
            .as_ref()
            .map_or(self.planner.now, |time| time.0);
        let due = crate::time::after(start, deadline);
        if self.planner.now >= due {
            let seconds = deadline.as_secs();
            self.planner.fail(
                self.observed,
                self.context,
                "DeadlineExceeded",
                &format!("the job ran longer than activeDeadlineSeconds ({seconds}s)"),
                true,
            );
            return false;
        }
        self.planner.requeue_at(due);
        true
    }

    /// The job succeeded; `message` says how.
    pub(super) fn succeed(self, message: &str) {
        let planner = self.planner;
        let kind = planner.kind;
        let reason = kind.reason("Succeeded");
        planner.status.phase = Some(JobPhase::Succeeded);
        planner.status.completion_time = Some(Time(planner.now));
        planner.condition(conditions::SUCCEEDED, true, &reason, message);
        planner.condition(conditions::RUNNING, false, &reason, message);
        planner.event(
            false,
            &reason,
            "Complete",
            format!(
                "{} {} succeeded: {message}",
                kind.vocabulary().name,
                self.context.name()
            ),
        );
        planner.finished(self.observed, self.context);
    }

    /// Restarts the job after its launcher failed, if the restart policy and the backoff limit
    /// allow; fails it otherwise. Returns whether the job goes on.
    /// The platform's losses of the launcher never come here (see `launcher_loss.rs`): this
    /// is the training code's failure.
    pub(super) fn restart_after_failure(&mut self, launcher: &Launcher<'_>) -> bool {
        let how = match launcher.pod.and_then(|pod| Loss::of(Some(pod))) {
            Some(loss) => loss.describe(),
            None => match launcher.job_failure {
                Some(why) => format!("failed ({why})"),
                None => "failed".to_string(),
            },
        };
        let kind = self.context.kind();
        let spec = self.context.spec;
        let restarts = self.planner.status_before.restart_count;
        if spec.job_restart_policy == JobRestartPolicy::OnFailure
            && u32::try_from(restarts).is_ok_and(|r| r < spec.backoff_limit)
        {
            let role = self.context.job_ref.coordinator().role;
            let cause = format!(
                "{role} {}: {}",
                self.context.job_ref.launcher_name(),
                launcher
                    .pod
                    .and_then(OwnFailure::of)
                    .map_or_else(|| how.clone(), |failure| failure.describe())
            );
            if !self.restart_due(role, cause) {
                return false;
            }
            let message = format!(
                "the {} {how}; restarting the job (restart {} of {})",
                self.context.job_ref.launcher_called(),
                restarts + 1,
                spec.backoff_limit
            );
            self.start_new_run(&message, Restart::Counted);
            return true;
        }
        let limit = if spec.job_restart_policy == JobRestartPolicy::OnFailure {
            format!(
                "; the backoff limit of {} restarts is reached",
                spec.backoff_limit
            )
        } else {
            String::new()
        };
        let reason = kind.reason("Failed");
        self.planner.fail(
            self.observed,
            self.context,
            &reason,
            &format!(
                "the {} {how}{limit}",
                self.context.job_ref.launcher_called()
            ),
            false,
        );
        false
    }
}
