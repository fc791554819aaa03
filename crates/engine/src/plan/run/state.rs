//! Where a job's current run stands, as one value.
//!
//! [`RunState::of`] derives it once per reconcile from the status the last reconcile wrote;
//! every rule of the run asks it, rather than reading conditions back. A run changes state in
//! one function, [`RunState::step`], from what a rule of the reconcile found ([`Fact`]); the
//! conditions and events that report the move are written by that rule: they are its output,
//! never its input. The phase is a mapping of the state ([`RunState::phase`]).
//!
//! # States and transitions
//!
//! ```text
//!                   ┌──────────── restart (launcher failed, OnFailure) ────────────┐
//!                   v                                                               │
//! WaitingForMinimum ──minimum ready──> AtMinimum <──back at minimum── BelowMinimum{since}
//!        ^      │                          │    ──fewer ready────────────> │
//!        │      │                          │                               │
//!        │      │ spec.suspend             │ spec.suspend, or certain      │ belowMinSeconds,
//!        │      v                          v loss below the minimum        v or spec.suspend
//!        │  SuspendedBySpec <───── Suspending(notice) <──────────────────────┘
//!        │      │         ^             │  deadline, or the launcher exited
//!        │      │unsuspended            v  (below the minimum, or the launcher lost)
//!        └──────┘         └──── SuspendedAfterLoss (a new run waits for its workers)
//!                   spec.suspend          │ minimum ready: resume launcher
//!                                         v
//!                                     AtMinimum
//!
//! Restarting{new_run}: any of WaitingForMinimum, AtMinimum, BelowMinimum while an earlier
//!                      run's pods remain (after a restart or a resume)
//! any state ──launcher succeeded, or the job failed for good──> Finished (terminal)
//! ```
//!
//! With no launcher running or no grace period, `Suspending` is skipped: the run goes straight
//! to a suspended state. A launcher that fails while the run is `BelowMinimum` (or below its
//! minimum at all, having had it) goes to `SuspendedAfterLoss` too, and so does a run whose
//! launcher the platform took (see `launcher_loss.rs`): from any state but a suspended or
//! finished one, through `Suspending` when the launcher still runs (its node announced it
//! goes, or it is being evicted or deleted), straight when it is gone.
//!
//! Two states frame the diagram:
//! - **`Restarting`** wraps `WaitingForMinimum`, `AtMinimum` and `BelowMinimum` while the pods
//!   (or the launcher Job) of an earlier run are still going: after a restart (the launcher
//!   failed under `OnFailure`), and after a resume, until the old run's pods are gone. The new
//!   run moves through its states meanwhile; the phase says `Restarting` until then.
//! - **`Finished`** is where the launcher's success, a failure past `backoffLimit`, a
//!   `Never` policy or `activeDeadlineSeconds` lead (the phase `Succeeded` or `Failed`). It is
//!   terminal: a finished job only applies its `cleanPodPolicy` and `ttlSecondsAfterFinished`.

use eto_api::common::ConditionStatus;
use eto_api::job_status::{JobPhase, Notice, NoticeKind};

use crate::status::JobStatus;

use super::suspension::{BELOW_MIN_WORKERS, resumes_by_itself};
use crate::conditions;

/// Where a job's current run stands (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum RunState {
    /// The run waits for its first `minReplicas` ready workers: a new job, a restarted one,
    /// or one unsuspended by its spec. Its launcher starts once they are ready (an MPIJob's
    /// `AtStartup` launcher at once).
    WaitingForMinimum,
    /// The run has had its minimum of ready workers and has it: it trains.
    AtMinimum,
    /// The run has had its minimum and has had fewer ready workers since `since`:
    /// `belowMinSeconds` runs from there, for losses that may come back.
    BelowMinimum {
        /// When the ready workers fell below the minimum.
        since: jiff::Timestamp,
    },
    /// The `Suspend` notice is out: the pods checkpoint until its deadline or until the
    /// launcher exits, then the run is suspended. A notice is a promise: this state ends in a
    /// suspend even if capacity returns meanwhile.
    Suspending(Notice),
    /// Suspended because the run lost what it trains with: too few workers stayed ready
    /// (`BelowMinWorkers`), the platform took its launcher (`LauncherDisrupted`), or the
    /// launcher failed as the collateral damage of a worker's loss (`WorkerDisrupted`). The pods
    /// of the old run are gone, and a new run waits for its minimum, whose launcher resumes the
    /// training from its checkpoint.
    SuspendedAfterLoss {
        /// The reason of the suspend, which the resume notice repeats.
        reason: String,
    },
    /// Suspended by the spec (`spec.suspend`, `runPolicy.suspend`, the job supervisor's
    /// annotation): no pod until unsuspended.
    SuspendedBySpec {
        /// Whether a launcher ever ran: when unsuspended, a new run resumes from the
        /// checkpoint; otherwise the job simply starts.
        ran: bool,
    },
    /// An earlier run's pods or launcher Job are still going (being deleted): `new_run` is
    /// where the current run stands meanwhile, one of `WaitingForMinimum`, `AtMinimum` and
    /// `BelowMinimum`.
    Restarting {
        /// The current run's own state.
        new_run: Box<RunState>,
    },
    /// The job succeeded or failed. Terminal.
    Finished {
        /// Whether it succeeded.
        succeeded: bool,
    },
}

/// What a rule of the reconcile found that moves the run (see [`RunState::step`]).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Fact {
    /// A new run starts (a restart, a resume) and waits for its minimum, or a suspended run's
    /// new run got its launcher.
    RunStarted,
    /// The `Suspend` notice went out to the run's pods.
    NoticeOut(Notice),
    /// The run lost what it trains with and is suspended: it resumes by itself, for `reason`.
    SuspendedAfterLoss {
        /// The reason of the suspend.
        reason: String,
    },
    /// The spec suspended the job.
    SuspendedBySpec {
        /// Whether a launcher ever ran.
        ran: bool,
    },
    /// The run's ready workers, counted at the end of a reconcile.
    Counted {
        /// Whether the minimum is ready.
        minimum_ready: bool,
        /// Whether the run has had its minimum (or was told to checkpoint), so that fewer is a
        /// drop below it.
        had_minimum: bool,
        /// When they were counted.
        now: jiff::Timestamp,
    },
}

/// What the status cannot tell about the run, observed from its objects.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Seen {
    /// The run's launcher, which starts only once the minimum is ready, runs: the run has had
    /// its minimum even when the status does not say so (an operator stopped before recording
    /// it).
    pub launcher_waited: bool,
    /// Pods or a launcher Job of an earlier run still exist.
    pub earlier_run_remains: bool,
}

impl RunState {
    /// The state `status` (the last reconcile's) records, with what is `seen` of the run.
    pub(crate) fn of(status: &JobStatus, seen: Seen) -> Self {
        if let Some(phase @ (JobPhase::Succeeded | JobPhase::Failed)) = status.phase {
            return Self::Finished {
                succeeded: phase == JobPhase::Succeeded,
            };
        }
        if let Some(notice) = status
            .notice
            .as_ref()
            .filter(|notice| notice.kind == NoticeKind::Suspend)
        {
            return Self::Suspending(notice.clone());
        }
        let conditions = &status.conditions;
        if let Some(suspended) = conditions::find(conditions, conditions::SUSPENDED)
            .filter(|condition| condition.status == ConditionStatus::True)
        {
            return if let Some(reason) =
                suspended.reason.as_deref().filter(|r| resumes_by_itself(r))
            {
                Self::SuspendedAfterLoss {
                    reason: reason.to_string(),
                }
            } else {
                Self::SuspendedBySpec {
                    ran: conditions::find(conditions, conditions::LAUNCHER_CREATED).is_some(),
                }
            };
        }
        let progress = match conditions::find(conditions, conditions::WORKERS_READY) {
            Some(ready) if ready.status == ConditionStatus::True => Self::AtMinimum,
            Some(ready)
                if ready.reason.as_deref() == Some(BELOW_MIN_WORKERS) || seen.launcher_waited =>
            {
                Self::BelowMinimum {
                    since: ready
                        .last_transition_time
                        .as_ref()
                        .map_or(jiff::Timestamp::UNIX_EPOCH, |time| time.0),
                }
            }
            None if seen.launcher_waited => Self::AtMinimum,
            _ => Self::WaitingForMinimum,
        };
        progress.restarting_if(seen.earlier_run_remains)
    }

    /// The state after `fact`, inside [`RunState::Restarting`] while `earlier_run_remains`.
    /// A finished run stays finished, and so does a suspended or suspending one for the
    /// workers counted: counting moves only a run towards or at its minimum.
    pub(crate) fn step(self, fact: Fact, earlier_run_remains: bool) -> Self {
        let next = match fact {
            _ if matches!(self, Self::Finished { .. }) => return self,
            Fact::RunStarted => Self::WaitingForMinimum,
            Fact::NoticeOut(notice) => Self::Suspending(notice),
            Fact::SuspendedAfterLoss { reason } => Self::SuspendedAfterLoss { reason },
            Fact::SuspendedBySpec { ran } => Self::SuspendedBySpec { ran },
            Fact::Counted {
                minimum_ready,
                had_minimum,
                now,
            } => match self.current_run() {
                Self::Suspending(_) | Self::SuspendedAfterLoss { .. } => return self,
                Self::SuspendedBySpec { .. } => return self,
                _ if minimum_ready => Self::AtMinimum,
                Self::BelowMinimum { since } => Self::BelowMinimum { since: *since },
                _ if had_minimum => Self::BelowMinimum { since: now },
                _ => Self::WaitingForMinimum,
            },
        };
        next.restarting_if(earlier_run_remains)
    }

    /// The job's phase in this state, while its training runs (`training`) and a request
    /// scales it (`scaling`) or not.
    pub(crate) fn phase(&self, training: bool, scaling: bool) -> JobPhase {
        match self {
            Self::Finished { succeeded: true } => JobPhase::Succeeded,
            Self::Finished { succeeded: false } => JobPhase::Failed,
            Self::SuspendedAfterLoss { .. } | Self::SuspendedBySpec { .. } => JobPhase::Suspended,
            Self::Restarting { .. } => JobPhase::Restarting,
            _ if training && scaling => JobPhase::Scaling,
            _ if training => JobPhase::Running,
            _ => JobPhase::Created,
        }
    }

    /// `self` inside [`RunState::Restarting`] when `earlier_run_remains` and `self` is one of
    /// the states a run moves through towards and at its minimum; `self` otherwise.
    pub(crate) fn restarting_if(self, earlier_run_remains: bool) -> Self {
        match self {
            Self::WaitingForMinimum | Self::AtMinimum | Self::BelowMinimum { .. }
                if earlier_run_remains =>
            {
                Self::Restarting {
                    new_run: Box::new(self),
                }
            }
            other => other,
        }
    }

    /// The current run's own state: inside [`RunState::Restarting`], the state it wraps.
    pub(crate) fn current_run(&self) -> &Self {
        match self {
            Self::Restarting { new_run } => new_run,
            other => other,
        }
    }

    /// Whether the pods of an earlier run are still going.
    pub(crate) fn is_restarting(&self) -> bool {
        matches!(self, Self::Restarting { .. })
    }

    /// Whether the run has had its minimum of ready workers (so that fewer is a drop below
    /// it, not a wait for it).
    pub(crate) fn had_minimum(&self) -> bool {
        matches!(
            self.current_run(),
            Self::AtMinimum | Self::BelowMinimum { .. }
        )
    }

    /// Whether the job is suspended, for either reason.
    pub(crate) fn is_suspended(&self) -> bool {
        matches!(
            self,
            Self::SuspendedAfterLoss { .. } | Self::SuspendedBySpec { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use eto_api::common::JobCondition;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use pretty_assertions::assert_eq;

    use super::*;

    fn at(seconds: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn condition(type_: &str, holds: bool, reason: &str) -> JobCondition {
        JobCondition {
            type_: type_.into(),
            status: if holds {
                ConditionStatus::True
            } else {
                ConditionStatus::False
            },
            reason: Some(reason.into()),
            message: None,
            last_update_time: None,
            last_transition_time: Some(Time(at(7))),
            observed_generation: None,
        }
    }

    fn notice(kind: NoticeKind) -> Notice {
        Notice {
            kind,
            reason: BELOW_MIN_WORKERS.into(),
            since: Time(at(0)),
            deadline: None,
            message: String::new(),
        }
    }

    #[test]
    fn the_state_is_read_from_the_status_the_last_reconcile_wrote() {
        let status = |conditions: Vec<JobCondition>, notice: Option<Notice>| JobStatus {
            conditions,
            notice,
            ..JobStatus::default()
        };
        // (status, the launcher that waited for the minimum runs, state)
        let cases = [
            (status(vec![], None), false, RunState::WaitingForMinimum),
            (status(vec![], None), true, RunState::AtMinimum),
            (
                status(
                    vec![condition(
                        conditions::WORKERS_READY,
                        false,
                        "WaitingForWorkers",
                    )],
                    None,
                ),
                false,
                RunState::WaitingForMinimum,
            ),
            (
                status(
                    vec![condition(conditions::WORKERS_READY, true, "WorkersReady")],
                    None,
                ),
                false,
                RunState::AtMinimum,
            ),
            (
                status(
                    vec![condition(
                        conditions::WORKERS_READY,
                        false,
                        BELOW_MIN_WORKERS,
                    )],
                    None,
                ),
                false,
                RunState::BelowMinimum { since: at(7) },
            ),
            (
                status(
                    vec![condition(
                        conditions::WORKERS_READY,
                        false,
                        "WaitingForWorkers",
                    )],
                    None,
                ),
                true,
                RunState::BelowMinimum { since: at(7) },
            ),
            (
                status(
                    vec![condition(
                        conditions::WORKERS_READY,
                        false,
                        BELOW_MIN_WORKERS,
                    )],
                    Some(notice(NoticeKind::Suspend)),
                ),
                true,
                RunState::Suspending(notice(NoticeKind::Suspend)),
            ),
            (
                status(vec![], Some(notice(NoticeKind::Resume))),
                false,
                RunState::WaitingForMinimum,
            ),
            (
                status(
                    vec![condition(conditions::SUSPENDED, true, BELOW_MIN_WORKERS)],
                    None,
                ),
                false,
                RunState::SuspendedAfterLoss {
                    reason: BELOW_MIN_WORKERS.into(),
                },
            ),
            (
                status(
                    vec![condition(conditions::SUSPENDED, true, "Suspended")],
                    None,
                ),
                false,
                RunState::SuspendedBySpec { ran: false },
            ),
            (
                status(
                    vec![
                        condition(conditions::SUSPENDED, true, "Suspended"),
                        condition(conditions::LAUNCHER_CREATED, false, "Suspended"),
                    ],
                    None,
                ),
                false,
                RunState::SuspendedBySpec { ran: true },
            ),
            (
                status(
                    vec![condition(conditions::SUSPENDED, false, "Resumed")],
                    None,
                ),
                false,
                RunState::WaitingForMinimum,
            ),
        ];
        for (index, (status, launcher_waited, expected)) in cases.into_iter().enumerate() {
            let seen = Seen {
                launcher_waited,
                earlier_run_remains: false,
            };
            assert_eq!(RunState::of(&status, seen), expected, "case {index}");
        }
    }

    #[test]
    fn an_earlier_runs_pods_make_the_run_restarting_and_a_finished_phase_is_final() {
        let earlier = Seen {
            launcher_waited: false,
            earlier_run_remains: true,
        };
        let status = |conditions: Vec<JobCondition>, phase: Option<JobPhase>| JobStatus {
            conditions,
            phase,
            ..JobStatus::default()
        };
        let restarting = |new_run: RunState| RunState::Restarting {
            new_run: Box::new(new_run),
        };
        // (status, state)
        let cases = [
            (
                status(vec![], None),
                restarting(RunState::WaitingForMinimum),
            ),
            (
                status(
                    vec![condition(conditions::WORKERS_READY, true, "WorkersReady")],
                    Some(JobPhase::Restarting),
                ),
                restarting(RunState::AtMinimum),
            ),
            (
                status(
                    vec![condition(
                        conditions::WORKERS_READY,
                        false,
                        BELOW_MIN_WORKERS,
                    )],
                    None,
                ),
                restarting(RunState::BelowMinimum { since: at(7) }),
            ),
            (
                status(
                    vec![condition(conditions::SUSPENDED, true, BELOW_MIN_WORKERS)],
                    None,
                ),
                RunState::SuspendedAfterLoss {
                    reason: BELOW_MIN_WORKERS.into(),
                },
            ),
            (
                status(vec![], Some(JobPhase::Succeeded)),
                RunState::Finished { succeeded: true },
            ),
            (
                status(
                    vec![condition(conditions::SUSPENDED, true, "Suspended")],
                    Some(JobPhase::Failed),
                ),
                RunState::Finished { succeeded: false },
            ),
        ];
        for (index, (status, expected)) in cases.into_iter().enumerate() {
            let state = RunState::of(&status, earlier);
            assert_eq!(state, expected, "case {index}");
            assert_eq!(
                state.had_minimum(),
                matches!(
                    state.current_run(),
                    RunState::AtMinimum | RunState::BelowMinimum { .. }
                ),
                "case {index}"
            );
        }
        assert!(restarting(RunState::AtMinimum).had_minimum());
        assert_eq!(
            RunState::WaitingForMinimum.restarting_if(false),
            RunState::WaitingForMinimum
        );
    }

    #[test]
    fn a_run_moves_in_one_function_from_what_a_reconcile_found() {
        use RunState::{AtMinimum, BelowMinimum, Finished, Suspending, WaitingForMinimum};
        let counted = |minimum_ready, had_minimum| Fact::Counted {
            minimum_ready,
            had_minimum,
            now: at(9),
        };
        let restarting = |new_run: RunState| RunState::Restarting {
            new_run: Box::new(new_run),
        };
        let suspending = || Suspending(notice(NoticeKind::Suspend));
        let after_loss = || RunState::SuspendedAfterLoss {
            reason: BELOW_MIN_WORKERS.into(),
        };
        let by_spec = RunState::SuspendedBySpec { ran: true };
        // (state, fact, an earlier run's pods remain, next state)
        let cases = [
            (
                WaitingForMinimum,
                counted(false, false),
                false,
                WaitingForMinimum,
            ),
            (WaitingForMinimum, counted(true, false), false, AtMinimum),
            (
                AtMinimum,
                counted(false, true),
                false,
                BelowMinimum { since: at(9) },
            ),
            (
                BelowMinimum { since: at(7) },
                counted(false, true),
                false,
                BelowMinimum { since: at(7) },
            ),
            (
                BelowMinimum { since: at(7) },
                counted(true, true),
                false,
                AtMinimum,
            ),
            // Its launcher waited for the minimum and runs: it had it.
            (
                WaitingForMinimum,
                counted(false, true),
                false,
                BelowMinimum { since: at(9) },
            ),
            (
                restarting(AtMinimum),
                counted(false, true),
                true,
                restarting(BelowMinimum { since: at(9) }),
            ),
            (restarting(AtMinimum), counted(true, true), false, AtMinimum),
            // Counting moves only a run towards or at its minimum.
            (suspending(), counted(true, true), false, suspending()),
            (after_loss(), counted(true, true), true, after_loss()),
            (by_spec.clone(), counted(true, true), false, by_spec.clone()),
            (
                AtMinimum,
                Fact::NoticeOut(notice(NoticeKind::Suspend)),
                false,
                suspending(),
            ),
            (
                suspending(),
                Fact::SuspendedAfterLoss {
                    reason: BELOW_MIN_WORKERS.into(),
                },
                true,
                after_loss(),
            ),
            (
                restarting(AtMinimum),
                Fact::SuspendedBySpec { ran: true },
                true,
                by_spec.clone(),
            ),
            (
                after_loss(),
                Fact::RunStarted,
                true,
                restarting(WaitingForMinimum),
            ),
            (by_spec, Fact::RunStarted, false, WaitingForMinimum),
            (
                Finished { succeeded: true },
                Fact::RunStarted,
                false,
                Finished { succeeded: true },
            ),
        ];
        for (index, (state, fact, earlier_run_remains, expected)) in cases.into_iter().enumerate() {
            assert_eq!(
                state.step(fact, earlier_run_remains),
                expected,
                "case {index}"
            );
        }
    }

    #[test]
    fn the_phase_is_a_mapping_of_the_state() {
        let restarting = RunState::Restarting {
            new_run: Box::new(RunState::AtMinimum),
        };
        // (state, training, scaling, phase)
        let cases = [
            (RunState::WaitingForMinimum, false, false, JobPhase::Created),
            (RunState::AtMinimum, true, false, JobPhase::Running),
            (RunState::AtMinimum, true, true, JobPhase::Scaling),
            (
                RunState::BelowMinimum { since: at(7) },
                true,
                false,
                JobPhase::Running,
            ),
            (
                RunState::Suspending(notice(NoticeKind::Suspend)),
                true,
                false,
                JobPhase::Running,
            ),
            (restarting, true, false, JobPhase::Restarting),
            (
                RunState::SuspendedAfterLoss {
                    reason: BELOW_MIN_WORKERS.into(),
                },
                false,
                false,
                JobPhase::Suspended,
            ),
            (
                RunState::SuspendedBySpec { ran: false },
                false,
                false,
                JobPhase::Suspended,
            ),
            (
                RunState::Finished { succeeded: true },
                false,
                false,
                JobPhase::Succeeded,
            ),
            (
                RunState::Finished { succeeded: false },
                false,
                false,
                JobPhase::Failed,
            ),
        ];
        for (index, (state, training, scaling, phase)) in cases.into_iter().enumerate() {
            assert_eq!(state.phase(training, scaling), phase, "case {index}");
        }
    }
}
