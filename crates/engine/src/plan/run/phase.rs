//! The job's phase and the conditions that go with it, at the end of a reconcile.

use eto_api::job_status::JobPhase;

use crate::conditions;
use crate::discovery::Host;
use crate::effective_spec::LauncherStart;

use super::state::{Fact, RunState};
use super::{Run, suspension};

impl Run<'_, '_> {
    pub(super) fn phase(&mut self, hosts: &[Host]) {
        let name = self.name().to_string();
        let min = self.context.spec.workers.min as usize;
        // What the run trains with: the hosts of discovery, which include an MPIJob's launcher
        // when it trains too ([`Run::counts`] counts the target's workers only).
        let ready = hosts.len();
        let target = self.planner.status.target_workers.len();
        let kind = self.context.kind();
        // A job whose workers decide its outcome trains while its workers run (out of host
        // discovery too, when told to checkpoint).
        let launcher_running = if self.workers_decide() {
            ready > 0 || self.training()
        } else {
            self.launcher().is_some_and(|l| l.is_running())
        };
        let workers_ready = ready >= min;
        let workers_message = format!(
            "{ready} of {target} workers ready ({} {min})",
            self.context.job_ref.min_field()
        );
        // Below the minimum after having reached it in this run, as opposed to not there yet:
        // only the former may suspend a running job.
        // A run told to checkpoint had it too.
        let dropped = self.state.had_minimum()
            || self.launcher_waited()
            || matches!(self.state, RunState::Suspending(_));
        // The training runs: its launcher runs and the run has had its minimum.
        let training = launcher_running && (workers_ready || dropped);
        let reason = if workers_ready {
            "WorkersReady"
        } else if dropped {
            suspension::BELOW_MIN_WORKERS
        } else {
            WAITING_FOR_WORKERS
        };
        self.planner.condition(
            conditions::WORKERS_READY,
            workers_ready,
            reason,
            &workers_message,
        );
        self.step(Fact::Counted {
            minimum_ready: workers_ready,
            had_minimum: dropped,
            now: self.planner.now,
        });
        let suspended = self.state.is_suspended();
        let suspending = matches!(self.state, RunState::Suspending(_));
        let elastic = self.context.spec.elastic;
        let watch_minimum = elastic.suspend_below_min_workers && !suspended && !suspending;
        if !workers_ready && training && watch_minimum {
            // Looked at again when too few workers have been ready for too long.
            let since = match *self.state.current_run() {
                RunState::BelowMinimum { since } => since,
                _ => self.planner.now,
            };
            let due = crate::time::after(since, elastic.below_min);
            self.planner.requeue_at(due);
        }
        let phase = self.state.phase(training, self.scaling);
        // Pods that fail on their own say why the job does not train, where it does not.
        let failing = self.report_failing_pods();
        let stall = failing.filter(|_| !training);
        if phase != JobPhase::Restarting
            && conditions::find(&self.planner.status.conditions, conditions::RESTARTING).is_some()
        {
            self.planner.condition(
                conditions::RESTARTING,
                false,
                "RestartDone",
                "the earlier run's pods are gone",
            );
        }
        match phase {
            JobPhase::Running | JobPhase::Scaling => {
                let message = format!(
                    "training runs with {ready} workers{}",
                    kind.hosts_listed_suffix()
                );
                let reason = kind.reason("Running");
                if !matches!(
                    self.planner.status_before.phase,
                    Some(JobPhase::Running | JobPhase::Scaling)
                ) {
                    self.planner.event(
                        false,
                        &reason,
                        "Run",
                        format!("{} {name} is running: {message}", kind.vocabulary().name),
                    );
                }
                self.planner
                    .condition(conditions::RUNNING, true, &reason, &message);
                self.planner
                    .condition(conditions::READY, true, &reason, &message);
            }
            JobPhase::Restarting => {
                let message = "waiting for the pods of the failed run to go".to_string();
                self.not_ready(&kind.reason("Restarting"), &message, stall.as_ref());
            }
            JobPhase::Suspended => {
                let pending = target.saturating_sub(ready);
                let message = format!(
                    "suspended: it resumes from its checkpoint once {} ready ({ready} ready, {pending} pending)",
                    suspension::workers(self.context.spec.workers.min, "worker is", "workers are")
                );
                let reason = match self.state.current_run() {
                    RunState::SuspendedAfterLoss { reason } => reason.clone(),
                    _ => suspension::BELOW_MIN_WORKERS.to_string(),
                };
                self.not_ready(&reason, &message, stall.as_ref());
            }
            _ => {
                let (reason, message) = if !workers_ready && !launcher_running {
                    let when = match self.context.spec.launcher_start {
                        LauncherStart::WhenMinReady => "the launcher starts",
                        LauncherStart::AtStartup => "training starts",
                    };
                    (
                        WAITING_FOR_WORKERS,
                        format!("{workers_message}; {when} once {min} are ready"),
                    )
                } else {
                    (
                        "LauncherPending",
                        format!(
                            "{} {} is starting",
                            self.context.job_ref.launcher_called(),
                            self.context.job_ref.launcher_name()
                        ),
                    )
                };
                if conditions::find(&self.planner.status.conditions, conditions::RUNNING)
                    .is_some_and(|r| r.status == eto_api::common::ConditionStatus::True)
                {
                    self.planner
                        .condition(conditions::RUNNING, false, reason, &message);
                }
                self.not_ready(reason, &message, stall.as_ref());
            }
        }
        if let RunState::Suspending(notice) = &self.state {
            let message = notice.message.clone();
            self.not_ready("Suspending", &message, stall.as_ref());
        }
        match &stall {
            Some((reason, message)) => {
                self.planner
                    .condition(conditions::STALLED, true, reason, message);
            }
            None => self.planner.condition(
                conditions::STALLED,
                false,
                "Progressing",
                "the job makes progress",
            ),
        }
        self.planner.status.phase = Some(phase);
    }

    /// Sets `Ready=False` with `reason` and `message`, or with those of `stall`: pods that
    /// fail on their own keep the job from training.
    fn not_ready(&mut self, reason: &str, message: &str, stall: Option<&(String, String)>) {
        let (reason, message) = stall.map_or((reason, message), |(r, m)| (r.as_str(), m.as_str()));
        self.planner
            .condition(conditions::READY, false, reason, message);
    }
}

/// Reason of `WorkersReady=False` while a run waits for its first `minReplicas` ready workers
/// (after it had them, the reason is `BelowMinWorkers`).
pub(super) const WAITING_FOR_WORKERS: &str = "WaitingForWorkers";
