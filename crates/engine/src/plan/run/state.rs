//! Where a job's current run stands, as one value.
//!
//! [`RunState::of`] derives it once per reconcile from the status the last reconcile wrote;
//! every rule of the run asks it, rather than reading conditions back. A rule that moves the
//! run to another state ([`super::Run::enter`]) sets it for the rest of the reconcile, and the
//! conditions and events that report the move are written by that transition: they are its
//! output, never its input.
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
//!        │      │unsuspended            v  (below the minimum)
//!        └──────┘         └──── SuspendedBelowMinimum (a new run waits for its workers)
//!                   spec.suspend          │ minimum ready: resume launcher
//!                                         v
//!                                     AtMinimum
//! ```
//!
//! With no launcher running or no grace period, `Suspending` is skipped: the run goes straight
//! to a suspended state. A launcher that fails while the run is `BelowMinimum` (or below its
//! minimum at all, having had it) goes to `SuspendedBelowMinimum` too.

use eto_api::common::ConditionStatus;
use eto_api::training_job::{Notice, NoticeKind, TrainingJobStatus};

use super::suspension::BELOW_MIN_WORKERS;
use crate::conditions as c;

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
    /// Suspended because too few workers were ready: the pods of the old run are gone, and a
    /// new run waits for its minimum, whose launcher resumes the training from its checkpoint.
    SuspendedBelowMinimum,
    /// Suspended by the spec (`spec.suspend`, `runPolicy.suspend`, the job supervisor's
    /// annotation): no pod until unsuspended.
    SuspendedBySpec {
        /// Whether a launcher ever ran: when unsuspended, a new run resumes from the
        /// checkpoint; otherwise the job simply starts.
        ran: bool,
    },
}

impl RunState {
    /// The state `status` (the last reconcile's) records. `launcher_waited` says that the
    /// run's launcher, which starts only once the minimum is ready, runs: the run has had its
    /// minimum even when the status does not say so (an operator stopped before recording it).
    pub(crate) fn of(status: &TrainingJobStatus, launcher_waited: bool) -> Self {
        if let Some(notice) = status
            .notice
            .as_ref()
            .filter(|notice| notice.kind == NoticeKind::Suspend)
        {
            return Self::Suspending(notice.clone());
        }
        let conditions = &status.conditions;
        if let Some(suspended) = c::find(conditions, c::SUSPENDED)
            .filter(|condition| condition.status == ConditionStatus::True)
        {
            return if suspended.reason.as_deref() == Some(BELOW_MIN_WORKERS) {
                Self::SuspendedBelowMinimum
            } else {
                Self::SuspendedBySpec {
                    ran: c::find(conditions, c::LAUNCHER_CREATED).is_some(),
                }
            };
        }
        match c::find(conditions, c::WORKERS_READY) {
            Some(ready) if ready.status == ConditionStatus::True => Self::AtMinimum,
            Some(ready)
                if ready.reason.as_deref() == Some(BELOW_MIN_WORKERS) || launcher_waited =>
            {
                Self::BelowMinimum {
                    since: ready
                        .last_transition_time
                        .as_ref()
                        .map_or(jiff::Timestamp::UNIX_EPOCH, |time| time.0),
                }
            }
            None if launcher_waited => Self::AtMinimum,
            _ => Self::WaitingForMinimum,
        }
    }

    /// Whether the run has had its minimum of ready workers (so that fewer is a drop below
    /// it, not a wait for it).
    pub(crate) fn had_minimum(&self) -> bool {
        matches!(self, Self::AtMinimum | Self::BelowMinimum { .. })
    }

    /// Whether the job is suspended, for either reason.
    pub(crate) fn is_suspended(&self) -> bool {
        matches!(
            self,
            Self::SuspendedBelowMinimum | Self::SuspendedBySpec { .. }
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
        let status = |conditions: Vec<JobCondition>, notice: Option<Notice>| TrainingJobStatus {
            conditions,
            notice,
            ..TrainingJobStatus::default()
        };
        // (status, the launcher that waited for the minimum runs, state)
        let cases = [
            (status(vec![], None), false, RunState::WaitingForMinimum),
            (status(vec![], None), true, RunState::AtMinimum),
            (
                status(
                    vec![condition(c::WORKERS_READY, false, "WaitingForWorkers")],
                    None,
                ),
                false,
                RunState::WaitingForMinimum,
            ),
            (
                status(
                    vec![condition(c::WORKERS_READY, true, "WorkersReady")],
                    None,
                ),
                false,
                RunState::AtMinimum,
            ),
            (
                status(
                    vec![condition(c::WORKERS_READY, false, BELOW_MIN_WORKERS)],
                    None,
                ),
                false,
                RunState::BelowMinimum { since: at(7) },
            ),
            (
                status(
                    vec![condition(c::WORKERS_READY, false, "WaitingForWorkers")],
                    None,
                ),
                true,
                RunState::BelowMinimum { since: at(7) },
            ),
            (
                status(
                    vec![condition(c::WORKERS_READY, false, BELOW_MIN_WORKERS)],
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
                status(vec![condition(c::SUSPENDED, true, BELOW_MIN_WORKERS)], None),
                false,
                RunState::SuspendedBelowMinimum,
            ),
            (
                status(vec![condition(c::SUSPENDED, true, "Suspended")], None),
                false,
                RunState::SuspendedBySpec { ran: false },
            ),
            (
                status(
                    vec![
                        condition(c::SUSPENDED, true, "Suspended"),
                        condition(c::LAUNCHER_CREATED, false, "Suspended"),
                    ],
                    None,
                ),
                false,
                RunState::SuspendedBySpec { ran: true },
            ),
            (
                status(vec![condition(c::SUSPENDED, false, "Resumed")], None),
                false,
                RunState::WaitingForMinimum,
            ),
        ];
        for (index, (status, launcher_waited, expected)) in cases.into_iter().enumerate() {
            assert_eq!(
                RunState::of(&status, launcher_waited),
                expected,
                "case {index}"
            );
        }
    }
}
