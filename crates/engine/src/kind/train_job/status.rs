//! A TrainJob's status as Trainer's users and tools read it, converted to and from the
//! engine's shape.
//!
//! What Trainer's readers depend on: `conditions` holds Trainer's types only (`Suspended`,
//! `Complete`, `Failed`), so that a running job has none of the last two and the `kubeflow`
//! SDK reads it as running from its pods, and the `State` column (the last condition) shows
//! the latest of them; `jobsStatus` counts each initializer step and the trainer step as
//! JobSet counts a replicated job of one Job. eto's own conditions are in `etoConditions`, which the engine reads back.

use std::collections::BTreeMap;

use eto_api::common::{ConditionStatus, JobCondition, ReplicaType};
use eto_api::job_status::JobPhase;
use eto_api::train_job::{ReplicatedJobStatus, TrainJobStatus, TrainerStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::labels::NODE_STEP;
use crate::conditions;
use crate::kind::kubeflow_status::{counts_from_engine, eto_from_engine, kubeflow_to_engine};
use crate::kind::pytorch_job::status::{group_from_engine, group_to_engine};
use crate::status::{JobStatus, StepState};

/// Trainer's condition types: the engine's `Suspended`, `Succeeded` and `Failed`.
const TRAINER_TYPES: [(&str, &str); 3] = [
    (conditions::SUSPENDED, "Suspended"),
    (conditions::SUCCEEDED, "Complete"),
    (conditions::FAILED, "Failed"),
];

/// The reason of `Complete`, as JobSet gives it.
const COMPLETE_REASON: &str = "AllJobsCompleted";

/// `status` in the engine's shape. A status Trainer's controller wrote (no eto part) reads
/// its phase from Trainer's conditions.
pub fn to_engine(status: &TrainJobStatus) -> JobStatus {
    let replica_statuses = status
        .replica_statuses
        .iter()
        .filter_map(|(type_, counts)| {
            let type_ = match type_.as_str() {
                "Master" => ReplicaType::Launcher,
                "Worker" => ReplicaType::Worker,
                _ => return None,
            };
            Some((type_, counts))
        });
    let mut engine = kubeflow_to_engine(
        &status.eto_conditions,
        replica_statuses,
        &status.eto,
        JobStatus {
            start_time: status.start_time.clone(),
            completion_time: status.completion_time.clone(),
            ..JobStatus::default()
        },
    );
    if engine.phase.is_none() {
        let holds = |type_: &str| {
            status
                .conditions
                .iter()
                .any(|c| c.type_ == type_ && c.status == "True")
        };
        engine.phase = if holds("Failed") {
            Some(JobPhase::Failed)
        } else if holds("Complete") {
            Some(JobPhase::Succeeded)
        } else {
            None
        };
    }
    JobStatus {
        held_workers: status.held_workers.clone(),
        group: status.rendezvous.clone().map(group_to_engine),
        replica_groups: status.replica_groups.clone(),
        steps: status
            .jobs_status
            .iter()
            .filter(|step| step.name != NODE_STEP)
            .map(|step| {
                let state = StepState {
                    active: step.active > 0,
                    ready: step.ready > 0,
                    succeeded: step.succeeded > 0,
                    failed: step.failed > 0,
                };
                (step.name.clone(), state)
            })
            .collect(),
        ..engine
    }
}

/// `status`, planned in the engine's shape, as a TrainJob's status.
pub fn from_engine(status: JobStatus) -> TrainJobStatus {
    let eto = eto_from_engine(&status);
    let replica_statuses = status
        .replica_statuses
        .iter()
        .map(|(type_, counts)| {
            let (name, selector) = match type_ {
                ReplicaType::Launcher => ("Master", None),
                ReplicaType::Worker => ("Worker", status.selector.clone()),
            };
            (name.to_string(), counts_from_engine(counts, selector))
        })
        .collect::<BTreeMap<_, _>>();
    TrainJobStatus {
        conditions: trainer_conditions(&status.conditions),
        jobs_status: status
            .steps
            .iter()
            .map(|(name, state)| {
                let flag = |holds: bool| i32::from(holds);
                ReplicatedJobStatus {
                    name: name.clone(),
                    ready: flag(state.ready || state.succeeded),
                    succeeded: flag(state.succeeded),
                    failed: flag(state.failed),
                    active: flag(state.active),
                    suspended: 0,
                }
            })
            .chain(std::iter::once(node_step(&status)))
            .collect(),
        trainer_status: trainer_status(&status),
        eto_conditions: status.conditions,
        replica_statuses,
        start_time: status.start_time,
        completion_time: status.completion_time,
        eto,
        held_workers: status.held_workers,
        rendezvous: status.group.map(group_from_engine),
        replica_groups: status.replica_groups,
    }
}

/// Trainer's conditions from the engine's: `Suspended` as it is, `Complete` and `Failed` once
/// they hold, the most recently changed last.
fn trainer_conditions(engine: &[JobCondition]) -> Vec<Condition> {
    let mut shown: Vec<Condition> = TRAINER_TYPES
        .iter()
        .filter_map(|(engine_type, trainer_type)| {
            let condition = engine.iter().find(|c| c.type_ == *engine_type)?;
            let holds = condition.status == ConditionStatus::True;
            if !holds && *engine_type != conditions::SUSPENDED {
                return None;
            }
            let reason = match *trainer_type {
                "Complete" => COMPLETE_REASON.to_string(),
                _ => condition
                    .reason
                    .clone()
                    .unwrap_or_else(|| (*trainer_type).into()),
            };
            Some(Condition {
                type_: (*trainer_type).into(),
                status: if holds { "True" } else { "False" }.into(),
                reason,
                message: condition.message.clone().unwrap_or_default(),
                last_transition_time: condition
                    .last_transition_time
                    .clone()
                    .or_else(|| condition.last_update_time.clone())
                    .unwrap_or(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                        jiff::Timestamp::UNIX_EPOCH,
                    )),
                observed_generation: condition.observed_generation,
            })
        })
        .collect();
    shown.sort_by_key(|condition| condition.last_transition_time.0);
    shown
}

/// The trainer step's counts as JobSet gives a replicated job of one Job: active while its
/// pods run, ready once every node is, and succeeded, failed or suspended with the job.
fn node_step(status: &JobStatus) -> ReplicatedJobStatus {
    let phase = status.phase;
    let flag = |holds: bool| i32::from(holds);
    let pods: i32 = status.replica_statuses.values().map(|c| c.active).sum();
    let ready = status
        .workers
        .as_ref()
        .is_some_and(|workers| workers.desired > 0 && workers.ready >= workers.desired);
    ReplicatedJobStatus {
        name: NODE_STEP.into(),
        ready: flag(ready && phase == Some(JobPhase::Running)),
        succeeded: flag(phase == Some(JobPhase::Succeeded)),
        failed: flag(phase == Some(JobPhase::Failed)),
        active: flag(pods > 0 && !matches!(phase, Some(JobPhase::Succeeded | JobPhase::Failed))),
        suspended: flag(phase == Some(JobPhase::Suspended)),
    }
}

/// The training's progress as Trainer shows it, where eto knows the total: the latest step
/// recorded in the goodput ledger (see [`crate::goodput`]) of the total the training said,
/// and the time the rest takes at the pace of its latest stretch of training. Absent when
/// the training reports no total.
fn trainer_status(status: &JobStatus) -> Option<TrainerStatus> {
    let latest = status.goodput.as_ref()?.latest.as_ref()?;
    let total = latest.total.filter(|total| *total > 0)?;
    let done = latest.step.clamp(0, total);
    let percent = i32::try_from(done * 100 / total).unwrap_or(100);
    let steps = latest.step - latest.first_step;
    let seconds = latest.at.0.duration_since(latest.first_at.0).as_secs_f64();
    let remaining = (steps > 0 && seconds > 0.0).then(|| {
        let left = (total - done) as f64 * seconds / steps as f64;
        i32::try_from(left.round() as i64).unwrap_or(i32::MAX)
    });
    Some(TrainerStatus {
        progress_percentage: Some(percent),
        estimated_remaining_seconds: remaining,
        metrics: Vec::new(),
        last_updated_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            latest.at.0,
        )),
    })
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::conditions;

    fn condition(type_: &str, holds: bool, at: &str, reason: &str) -> JobCondition {
        let time = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at.parse().unwrap());
        JobCondition {
            type_: type_.into(),
            status: if holds {
                ConditionStatus::True
            } else {
                ConditionStatus::False
            },
            reason: Some(reason.into()),
            message: Some(format!("{type_} message")),
            last_update_time: Some(time.clone()),
            last_transition_time: Some(time),
            observed_generation: None,
        }
    }

    #[test]
    fn a_running_job_shows_no_trainer_condition_and_a_finished_one_shows_complete_last() {
        let running = JobStatus {
            phase: Some(JobPhase::Running),
            conditions: vec![
                condition(
                    conditions::CREATED,
                    true,
                    "2026-01-01T00:00:00Z",
                    "TrainJobCreated",
                ),
                condition(
                    conditions::RUNNING,
                    true,
                    "2026-01-01T00:00:01Z",
                    "TrainJobRunning",
                ),
            ],
            ..JobStatus::default()
        };
        let shown = from_engine(running.clone());
        assert_eq!(shown.conditions, Vec::new());
        assert_eq!(shown.eto_conditions, running.conditions);
        let mut done = running;
        done.phase = Some(JobPhase::Succeeded);
        done.conditions.extend([
            condition(
                conditions::SUSPENDED,
                false,
                "2026-01-01T00:00:02Z",
                "Resumed",
            ),
            condition(
                conditions::SUCCEEDED,
                true,
                "2026-01-01T00:00:09Z",
                "TrainJobSucceeded",
            ),
        ]);
        let shown = from_engine(done.clone());
        let types: Vec<(&str, &str, &str)> = shown
            .conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str()))
            .collect();
        assert_eq!(
            types,
            [
                ("Suspended", "False", "Resumed"),
                ("Complete", "True", COMPLETE_REASON)
            ]
        );
        assert_eq!(shown.jobs_status[0].succeeded, 1);
        assert_eq!(
            to_engine(&shown),
            done,
            "eto's status reads back as planned"
        );
    }

    #[test]
    fn progress_is_the_latest_recorded_step_of_the_total_the_training_said() {
        let ledger: crate::goodput::Goodput = serde_json::from_value(serde_json::json!({
            "source": "TrainingReports", "since": "2026-01-01T00:00:00.000000Z",
            "seconds": {"productive": 100.0}, "current": "Productive",
            "currentSince": "2026-01-01T00:02:00.000000Z", "highestStep": 250,
            "latest": {"step": 250, "at": "2026-01-01T00:02:00.000000Z", "firstStep": 50,
                       "firstAt": "2026-01-01T00:00:20.000000Z", "run": 0, "total": 1000}
        }))
        .unwrap();
        let mut status = JobStatus {
            phase: Some(JobPhase::Running),
            goodput: Some(ledger),
            ..JobStatus::default()
        };
        let shown = from_engine(status.clone()).trainer_status.unwrap();
        assert_eq!(shown.progress_percentage, Some(25));
        assert_eq!(
            shown.estimated_remaining_seconds,
            Some(375),
            "750 steps left at 200 steps in 100 s"
        );
        if let Some(latest) = status.goodput.as_mut().and_then(|g| g.latest.as_mut()) {
            latest.total = None;
        }
        assert_eq!(
            from_engine(status).trainer_status,
            None,
            "no total, no progress"
        );
    }

    #[test]
    fn a_status_trainers_controller_wrote_reads_its_phase_from_its_conditions() {
        let written: TrainJobStatus = serde_json::from_value(serde_json::json!({
            "conditions": [{"type": "Complete", "status": "True", "reason": "AllJobsCompleted",
                "message": "jobset completed successfully", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "jobsStatus": [{"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}]
        }))
        .unwrap();
        assert_eq!(to_engine(&written).phase, Some(JobPhase::Succeeded));
    }
}
