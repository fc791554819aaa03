//! Conditions of a job's status.
//!
//! The types are et-operator's (`Created`, `WorkersCreated`, `WorkersReady`,
//! `LauncherCreated`, `Running`, `Restarting`, `Scaling`, `Succeeded`, `Failed`) plus two that
//! generic
//! tools read: `Ready` (Argo CD and Flux health: the job runs or has succeeded) and `Stalled`
//! (it cannot make progress without a change: invalid spec, failure).

use eto_api::common::{ConditionStatus, JobCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The job is accepted.
pub const CREATED: &str = "Created";
/// The steps a job runs before its first run (a TrainJob's initializers) are done.
pub const PREPARED: &str = "Prepared";
/// Every target worker has a pod.
pub const WORKERS_CREATED: &str = "WorkersCreated";
/// At least `minReplicas` workers are ready.
pub const WORKERS_READY: &str = "WorkersReady";
/// The launcher of the current run was created.
pub const LAUNCHER_CREATED: &str = "LauncherCreated";
/// The launcher runs.
pub const RUNNING: &str = "Running";
/// The job is being restarted after its launcher failed.
pub const RESTARTING: &str = "Restarting";
/// A ScaleIn or ScaleOut is carried out (on the job and on the request).
pub const SCALING: &str = "Scaling";
/// The job is suspended: by `spec.suspend`, or waiting for workers after too few were left.
pub const SUSPENDED: &str = "Suspended";
/// The launcher finished successfully.
pub const SUCCEEDED: &str = "Succeeded";
/// The job failed for good.
pub const FAILED: &str = "Failed";
/// The job is healthy: running, or succeeded.
pub const READY: &str = "Ready";
/// The job cannot progress until someone changes something.
pub const STALLED: &str = "Stalled";

/// The condition of `type_`, if present.
pub fn find<'a>(conditions: &'a [JobCondition], type_: &str) -> Option<&'a JobCondition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of `type_` is present and true.
pub fn is_true(conditions: &[JobCondition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == ConditionStatus::True)
}

/// What a condition should say.
#[derive(Clone, Copy, Debug)]
pub struct Observation<'a> {
    /// Whether it holds.
    pub holds: bool,
    /// CamelCase reason.
    pub reason: &'a str,
    /// Human-readable message.
    pub message: &'a str,
}

/// Sets the condition of `type_`. `lastTransitionTime` moves only when the status flips, and
/// `lastUpdateTime` only when the status, reason or message changes; a condition that already
/// says the same is left untouched but for its `observedGeneration`.
pub fn set(
    conditions: &mut Vec<JobCondition>,
    type_: &str,
    observation: Observation<'_>,
    generation: Option<i64>,
    now: jiff::Timestamp,
) {
    let status = if observation.holds {
        ConditionStatus::True
    } else {
        ConditionStatus::False
    };
    let fresh = JobCondition {
        type_: type_.to_string(),
        status,
        reason: Some(observation.reason.to_string()),
        message: Some(observation.message.to_string()),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
        observed_generation: generation,
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        None => conditions.push(fresh),
        Some(existing) if existing.status != status => *existing = fresh,
        Some(existing) => {
            if existing.reason.as_deref() != Some(observation.reason)
                || existing.message.as_deref() != Some(observation.message)
            {
                existing.reason = fresh.reason;
                existing.message = fresh.message;
                existing.last_update_time = fresh.last_update_time;
            }
            existing.observed_generation = generation;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    #[test]
    fn timestamps_move_only_on_change() {
        let mut conditions = Vec::new();
        let waiting = Observation {
            holds: false,
            reason: "WaitingForWorkers",
            message: "1 of 2 ready",
        };
        set(&mut conditions, READY, waiting, Some(1), at(0));
        let first = conditions.clone();

        set(&mut conditions, READY, waiting, Some(1), at(10));
        assert_eq!(conditions, first, "the same observation changes nothing");

        let more = Observation {
            message: "2 of 3 ready",
            ..waiting
        };
        set(&mut conditions, READY, more, Some(2), at(20));
        assert_eq!(conditions[0].last_transition_time, Some(Time(at(0))));
        assert_eq!(conditions[0].last_update_time, Some(Time(at(20))));
        assert_eq!(conditions[0].observed_generation, Some(2));

        let running = Observation {
            holds: true,
            reason: "Running",
            message: "running",
        };
        set(&mut conditions, READY, running, Some(2), at(30));
        assert_eq!(conditions[0].last_transition_time, Some(Time(at(30))));
        assert!(is_true(&conditions, READY));
        assert_eq!(conditions.len(), 1);
    }
}
