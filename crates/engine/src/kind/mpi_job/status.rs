//! An MPIJob's status, converted to and from the engine's shape (the parts every Kubeflow job
//! shares by [`super::super::kubeflow_status`]).

use std::collections::BTreeMap;

use crate::status::JobStatus;
use eto_api::common::ReplicaType;
use eto_api::kubeflow::KubeflowReplicaStatus;
use eto_api::mpi_job::MPIJobStatus;

use crate::kind::kubeflow_status::{
    counts_from_engine, eto_from_engine, kubeflow_to_engine, started_elsewhere_by,
};

/// `status` in the engine's shape.
pub fn to_engine(status: &MPIJobStatus) -> JobStatus {
    kubeflow_to_engine(
        &status.conditions,
        status
            .replica_statuses
            .iter()
            .map(|(replica, counts)| (*replica, counts)),
        &status.eto,
        JobStatus {
            start_time: status.start_time.clone(),
            completion_time: status.completion_time.clone(),
            ..JobStatus::default()
        },
    )
}

/// `status`, planned in the engine's shape, as an MPIJob's status.
pub fn from_engine(status: JobStatus) -> MPIJobStatus {
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

/// Whether another operator (mpi-operator) started the job: its status has conditions but
/// nothing eto writes.
pub fn started_elsewhere(status: &MPIJobStatus) -> bool {
    started_elsewhere_by(&status.conditions, &status.eto)
}

#[cfg(test)]
mod tests {
    use eto_api::common::ReplicaStatus;
    use eto_api::job_status::{JobPhase, NoticeKind, WorkerSummary};
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
        let engine = JobStatus {
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
                spares: None,
            }),
            notice: Some(eto_api::job_status::Notice {
                kind: NoticeKind::Resume,
                reason: "BelowMinWorkers".into(),
                since: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    "2026-11-20T10:00:00Z".parse().unwrap(),
                ),
                deadline: None,
                message: "resume".into(),
            }),
            ..JobStatus::default()
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
