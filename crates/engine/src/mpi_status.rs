//! An MPIJob's status, converted to and from the engine's shape, and the conversions of the
//! parts every Kubeflow job's status shares (eto's fields, replica counts), which a
//! PyTorchJob's uses too.
//!
//! The conversion is lossless for everything eto writes, so a status eto wrote reads back as
//! it was planned. A status mpi-operator wrote has no `phase`; it is read from the conditions
//! mpi-operator set, so that a job it finished stays finished under eto.

use std::collections::BTreeMap;

use eto_api::common::{ConditionStatus, JobCondition, ReplicaStatus};
use eto_api::kubeflow::{EtoJobStatus, KubeflowReplicaStatus};
use eto_api::mpi_job::MPIJobStatus;
use eto_api::training_job::{JobPhase, ReplicaType, TrainingJobStatus};

use crate::conditions as c;

/// `status` in the engine's shape.
pub fn to_engine(status: &MPIJobStatus) -> TrainingJobStatus {
    kubeflow_to_engine(
        &status.conditions,
        status
            .replica_statuses
            .iter()
            .map(|(replica, counts)| (*replica, counts)),
        &status.eto,
        TrainingJobStatus {
            start_time: status.start_time.clone(),
            completion_time: status.completion_time.clone(),
            ..TrainingJobStatus::default()
        },
    )
}

/// A Kubeflow job's status in the engine's shape: its `conditions`, its replica counts by
/// the engine's replica type (the Worker's carry the scale selector), eto's part, and the
/// times in `times`. A status without eto's phase reads it from the conditions.
pub(crate) fn kubeflow_to_engine<'a>(
    conditions: &[JobCondition],
    replica_statuses: impl Iterator<Item = (ReplicaType, &'a KubeflowReplicaStatus)>,
    eto: &EtoJobStatus,
    times: TrainingJobStatus,
) -> TrainingJobStatus {
    let mut engine = eto_to_engine(eto);
    engine.phase = engine.phase.or_else(|| phase_from_conditions(conditions));
    engine.conditions = conditions.to_vec();
    engine.start_time = times.start_time;
    engine.completion_time = times.completion_time;
    for (replica, counts) in replica_statuses {
        if replica == ReplicaType::Worker {
            engine.selector.clone_from(&counts.selector);
        }
        engine
            .replica_statuses
            .insert(replica, counts_to_engine(counts));
    }
    engine
}

/// `status`, planned in the engine's shape, as an MPIJob's status.
pub fn from_engine(status: TrainingJobStatus) -> MPIJobStatus {
    let eto = eto_from_engine(&status);
    let selector = status.selector;
    let replica_statuses: BTreeMap<ReplicaType, KubeflowReplicaStatus> = status
        .replica_statuses
        .into_iter()
        .map(|(replica, counts)| {
            let selector = selector.clone().filter(|_| replica == ReplicaType::Worker);
            (replica, counts_from_engine(&counts, selector))
        })
        .collect();
    MPIJobStatus {
        conditions: status.conditions,
        replica_statuses,
        start_time: status.start_time,
        completion_time: status.completion_time,
        last_reconcile_time: None,
        eto,
    }
}

/// A Kubeflow job's replica counts in the engine's shape.
fn counts_to_engine(counts: &KubeflowReplicaStatus) -> ReplicaStatus {
    ReplicaStatus {
        active: counts.active,
        succeeded: counts.succeeded,
        failed: counts.failed,
    }
}

/// The engine's replica counts as a Kubeflow job has them, with the replicas' `selector`.
pub(crate) fn counts_from_engine(
    counts: &ReplicaStatus,
    selector: Option<String>,
) -> KubeflowReplicaStatus {
    KubeflowReplicaStatus {
        active: counts.active,
        succeeded: counts.succeeded,
        failed: counts.failed,
        label_selector: None,
        selector,
    }
}

/// eto's part of a Kubeflow job's status in the engine's shape; the rest is left default.
fn eto_to_engine(eto: &EtoJobStatus) -> TrainingJobStatus {
    TrainingJobStatus {
        phase: eto.phase,
        restart_count: eto.restart_count.unwrap_or_default(),
        target_workers: eto.target_workers.clone(),
        current_workers: eto.current_workers.clone(),
        next_worker_index: eto.next_worker_index,
        run: eto.run,
        notice: eto.notice.clone(),
        observed_generation: eto.observed_generation,
        workers: eto.workers.clone(),
        blacklist: eto.blacklist.clone(),
        draining_workers: eto.draining_workers.clone(),
        nodes_in_cooldown: eto.nodes_in_cooldown.clone(),
        node_warnings: eto.node_warnings.clone(),
        ..TrainingJobStatus::default()
    }
}

/// eto's part of `status`, as a Kubeflow job's status has it.
pub(crate) fn eto_from_engine(status: &TrainingJobStatus) -> EtoJobStatus {
    EtoJobStatus {
        observed_generation: status.observed_generation,
        phase: status.phase,
        restart_count: Some(status.restart_count),
        run: status.run,
        workers: status.workers.clone(),
        target_workers: status.target_workers.clone(),
        current_workers: status.current_workers.clone(),
        next_worker_index: status.next_worker_index,
        notice: status.notice.clone(),
        blacklist: status.blacklist.clone(),
        draining_workers: status.draining_workers.clone(),
        nodes_in_cooldown: status.nodes_in_cooldown.clone(),
        node_warnings: status.node_warnings.clone(),
    }
}

/// Whether another operator (mpi-operator) started the job: its status has conditions but
/// nothing eto writes.
pub fn started_elsewhere(status: &MPIJobStatus) -> bool {
    started_elsewhere_by(&status.conditions, &status.eto)
}

/// Whether a Kubeflow job's status with `conditions` and eto's part `eto` was written by
/// another operator: it has conditions but nothing eto writes.
pub fn started_elsewhere_by(conditions: &[JobCondition], eto: &EtoJobStatus) -> bool {
    !conditions.is_empty()
        && eto.phase.is_none()
        && eto.run.is_none()
        && eto.observed_generation.is_none()
}

/// The phase the conditions of a status written by a Kubeflow operator describe.
fn phase_from_conditions(conditions: &[JobCondition]) -> Option<JobPhase> {
    let holds = |type_| c::is_true(conditions, type_);
    [
        (c::FAILED, JobPhase::Failed),
        (c::SUCCEEDED, JobPhase::Succeeded),
        (c::SUSPENDED, JobPhase::Suspended),
        (c::RESTARTING, JobPhase::Restarting),
        (c::RUNNING, JobPhase::Running),
    ]
    .into_iter()
    .find(|(type_, _)| holds(type_))
    .map(|(_, phase)| phase)
    .or_else(|| {
        c::find(conditions, c::CREATED)
            .filter(|created| created.status == ConditionStatus::True)
            .map(|_| JobPhase::Created)
    })
}

#[cfg(test)]
mod tests {
    use eto_api::training_job::{NoticeKind, WorkerSummary};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    /// A status as mpi-operator writes it for a job that succeeded.
    fn written_by_mpi_operator() -> MPIJobStatus {
        serde_json::from_value(json!({
            "conditions": [
                {"type": "Created", "status": "True", "reason": "MPIJobCreated",
                 "lastTransitionTime": "2026-11-20T10:00:00Z", "lastUpdateTime": "2026-11-20T10:00:00Z"},
                {"type": "Running", "status": "False", "reason": "MPIJobRunning",
                 "lastTransitionTime": "2026-11-20T11:00:00Z", "lastUpdateTime": "2026-11-20T11:00:00Z"},
                {"type": "Succeeded", "status": "True", "reason": "MPIJobSucceeded",
                 "lastTransitionTime": "2026-11-20T11:00:00Z", "lastUpdateTime": "2026-11-20T11:00:00Z"}
            ],
            "replicaStatuses": {
                "Launcher": {"succeeded": 1},
                "Worker": {"labelSelector": {"matchLabels": {"training.kubeflow.org/job-name": "pi"}}}
            },
            "startTime": "2026-11-20T10:00:00Z",
            "completionTime": "2026-11-20T11:00:00Z",
            "lastReconcileTime": "2026-11-20T11:00:00Z"
        }))
        .unwrap()
    }

    #[test]
    fn a_status_written_by_mpi_operator_reads_its_phase_from_the_conditions() {
        let status = written_by_mpi_operator();
        assert!(started_elsewhere(&status));
        let engine = to_engine(&status);
        assert_eq!(engine.phase, Some(JobPhase::Succeeded));
        assert_eq!(engine.replica_statuses[&ReplicaType::Launcher].succeeded, 1);
        assert_eq!(engine.start_time, status.start_time);
        assert_eq!(engine.completion_time, status.completion_time);
    }

    #[test]
    fn phases_follow_the_condition_that_holds() {
        let cases = [
            (vec![], None),
            (vec![("Created", "True")], Some(JobPhase::Created)),
            (
                vec![("Created", "True"), ("Running", "True")],
                Some(JobPhase::Running),
            ),
            (
                vec![("Created", "True"), ("Suspended", "True")],
                Some(JobPhase::Suspended),
            ),
            (
                vec![("Running", "True"), ("Failed", "True")],
                Some(JobPhase::Failed),
            ),
            (
                vec![("Suspended", "False"), ("Running", "True")],
                Some(JobPhase::Running),
            ),
        ];
        for (conditions, phase) in cases {
            let conditions: Vec<_> = conditions
                .iter()
                .map(|(type_, status)| json!({"type": type_, "status": status}))
                .collect();
            let status: MPIJobStatus =
                serde_json::from_value(json!({ "conditions": conditions })).unwrap();
            assert_eq!(to_engine(&status).phase, phase, "{conditions:?}");
        }
    }

    #[test]
    fn what_eto_writes_reads_back_unchanged() {
        let engine = TrainingJobStatus {
            phase: Some(JobPhase::Running),
            restart_count: 2,
            run: Some(3),
            next_worker_index: Some(7),
            target_workers: vec!["pi-worker-5".into(), "pi-worker-6".into()],
            current_workers: vec!["pi-worker-5".into()],
            observed_generation: Some(4),
            selector: Some(
                "training.kubeflow.org/job-name=pi,training.kubeflow.org/job-role=worker".into(),
            ),
            replica_statuses: BTreeMap::from([
                (
                    ReplicaType::Launcher,
                    ReplicaStatus {
                        active: 1,
                        ..ReplicaStatus::default()
                    },
                ),
                (
                    ReplicaType::Worker,
                    ReplicaStatus {
                        active: 1,
                        failed: 1,
                        ..ReplicaStatus::default()
                    },
                ),
            ]),
            workers: Some(WorkerSummary {
                ready: 1,
                pending: 1,
                desired: 2,
                spec_replicas: Some(2),
                min: 1,
                max: None,
            }),
            notice: Some(eto_api::training_job::Notice {
                kind: NoticeKind::Resume,
                reason: "BelowMinWorkers".into(),
                since: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    "2026-11-20T10:00:00Z".parse().unwrap(),
                ),
                deadline: None,
                message: "resume".into(),
            }),
            ..TrainingJobStatus::default()
        };
        let written = from_engine(engine.clone());
        assert!(!started_elsewhere(&written));
        assert_eq!(
            written.replica_statuses[&ReplicaType::Worker]
                .selector
                .as_deref(),
            engine.selector.as_deref()
        );
        assert_eq!(
            written.replica_statuses[&ReplicaType::Launcher].selector,
            None
        );
        let json = serde_json::to_value(&written).unwrap();
        let read: MPIJobStatus = serde_json::from_value(json).unwrap();
        assert_eq!(to_engine(&read), engine);
    }
}
