//! A PyTorchJob's status as training-operator v1's users and tools read it, converted to and
//! from the engine's shape.
//!
//! What v1's readers depend on: the `State` column is the type of the last condition, so v1's
//! condition types (`Created`, `Running`, `Restarting`, `Suspended`, `Succeeded`, `Failed`)
//! come last, the most recently changed at the end, after eto's own (`WorkersCreated`,
//! `WorkersReady`, `Ready`, `Stalled`, ...); each replica type's counts carry its pods'
//! label selector (the Workers' is the engine's, which selects the same pods as v1's). The engine's launcher, the pod whose outcome is the run's, is the Master.

use std::collections::BTreeMap;

use crate::status::{GroupStatus, JobStatus};
use eto_api::PyTorchJobStatus;
use eto_api::common::ReplicaType;
use eto_api::common::{ConditionStatus, JobCondition};
use eto_api::pytorch_job::{PyTorchReplicaType, RendezvousStatus};

use super::{JOB_NAME_LABEL, OPERATOR_NAME, OPERATOR_NAME_LABEL, REPLICA_TYPE_LABEL, type_label};
use crate::conditions;
use crate::kind::kubeflow_status::{counts_from_engine, eto_from_engine, kubeflow_to_engine};

/// v1's condition types, in the order that breaks ties between conditions changed at the same
/// moment: the later one is what the job is now.
const V1_TYPES: [&str; 6] = [
    conditions::CREATED,
    conditions::RUNNING,
    conditions::RESTARTING,
    conditions::SUSPENDED,
    conditions::SUCCEEDED,
    conditions::FAILED,
];

/// `status` in the engine's shape.
pub fn to_engine(status: &PyTorchJobStatus) -> JobStatus {
    JobStatus {
        held_workers: status.held_workers.clone(),
        group: status.rendezvous.clone().map(group_to_engine),
        replica_groups: status.replica_groups.clone(),
        ..kubeflow_to_engine(
            &status.conditions,
            status
                .replica_statuses
                .iter()
                .map(|(type_, counts)| (engine_type(*type_), counts)),
            &status.eto,
            JobStatus {
                start_time: status.start_time.clone(),
                completion_time: status.completion_time.clone(),
                ..JobStatus::default()
            },
        )
    }
}

/// torchrun's rendezvous as the engine's training group.
pub fn group_to_engine(rendezvous: RendezvousStatus) -> GroupStatus {
    GroupStatus {
        round: rendezvous.round,
        members: rendezvous.agents,
        waiting: rendezvous.waiting,
        spares: rendezvous.spares.unwrap_or_default(),
        complete: rendezvous.complete,
        closed: rendezvous.closed,
        last_reformation: rendezvous.last_reformation,
    }
}

/// The engine's training group as torchrun's rendezvous.
pub fn group_from_engine(group: GroupStatus) -> RendezvousStatus {
    RendezvousStatus {
        round: group.round,
        agents: group.members,
        waiting: group.waiting,
        spares: (group.spares > 0).then_some(group.spares),
        complete: group.complete,
        closed: group.closed,
        last_reformation: group.last_reformation,
    }
}

/// `status` of job `job`, planned in the engine's shape, as a PyTorchJob's status.
pub fn from_engine(job: &str, status: JobStatus) -> PyTorchJobStatus {
    let eto = eto_from_engine(&status);
    let replica_statuses = status
        .replica_statuses
        .iter()
        .map(|(type_, counts)| {
            // The Workers' selector is the engine's, which the scale subresource reads and
            // the next reconcile reads back; the Master's is v1's.
            let (type_, selector) = match type_ {
                ReplicaType::Launcher => (
                    PyTorchReplicaType::Master,
                    Some(selector(job, PyTorchReplicaType::Master)),
                ),
                ReplicaType::Worker => (PyTorchReplicaType::Worker, status.selector.clone()),
            };
            (type_, counts_from_engine(counts, selector))
        })
        .collect::<BTreeMap<_, _>>();
    PyTorchJobStatus {
        conditions: in_v1_order(status.conditions),
        replica_statuses,
        start_time: status.start_time,
        completion_time: status.completion_time,
        last_reconcile_time: None,
        eto,
        held_workers: status.held_workers,
        rendezvous: status.group.map(group_from_engine),
        replica_groups: status.replica_groups,
    }
}

/// The label selector of the pods of `type_` of job `job`, as v1 writes it.
pub fn selector(job: &str, type_: PyTorchReplicaType) -> String {
    format!(
        "{JOB_NAME_LABEL}={job},{OPERATOR_NAME_LABEL}={OPERATOR_NAME},{REPLICA_TYPE_LABEL}={}",
        type_label(type_)
    )
}

fn engine_type(type_: PyTorchReplicaType) -> ReplicaType {
    match type_ {
        PyTorchReplicaType::Master => ReplicaType::Launcher,
        PyTorchReplicaType::Worker => ReplicaType::Worker,
    }
}

/// `conditions` with eto's own types first, as they were, then v1's, the most recently
/// updated last; among v1's updated at the same moment, those that do not hold come first,
/// then [`V1_TYPES`]'s order (a suspend turns `Running` false and `Suspended` true at once:
/// the job is `Suspended`).
fn in_v1_order(conditions: Vec<JobCondition>) -> Vec<JobCondition> {
    let position =
        |condition: &JobCondition| V1_TYPES.iter().position(|type_| *type_ == condition.type_);
    let (mut v1, mut ordered): (Vec<_>, Vec<_>) = conditions
        .into_iter()
        .partition(|condition| position(condition).is_some());
    v1.sort_by_key(|condition| {
        (
            condition.last_update_time.clone(),
            condition.status == ConditionStatus::True,
            position(condition),
        )
    });
    ordered.extend(v1);
    ordered
}

#[cfg(test)]
mod tests {
    use eto_api::common::ReplicaStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use pretty_assertions::assert_eq;

    use super::*;

    fn condition(type_: &str, holds: bool, at: &str) -> JobCondition {
        let time = Time(format!("2026-11-26T10:00:{at}Z").parse().unwrap());
        JobCondition {
            type_: type_.into(),
            status: if holds {
                ConditionStatus::True
            } else {
                ConditionStatus::False
            },
            reason: Some(format!("PyTorchJob{type_}")),
            message: None,
            last_update_time: Some(time.clone()),
            last_transition_time: Some(time),
            observed_generation: None,
        }
    }

    fn state(conditions: Vec<JobCondition>) -> (Vec<String>, String) {
        let ordered = in_v1_order(conditions);
        let types: Vec<String> = ordered.iter().map(|c| c.type_.clone()).collect();
        let last = types.last().cloned().unwrap_or_default();
        (types, last)
    }

    #[test]
    fn the_state_column_shows_what_the_job_is_now() {
        let cases = [
            (
                vec![
                    condition("Created", true, "00"),
                    condition("Ready", true, "05"),
                    condition("Running", true, "05"),
                ],
                "Running",
            ),
            (
                vec![
                    condition("Created", true, "00"),
                    condition("Running", false, "09"),
                    condition("Suspended", true, "09"),
                    condition("Stalled", false, "09"),
                ],
                "Suspended",
            ),
            (
                vec![
                    condition("Created", true, "00"),
                    condition("Running", true, "20"),
                    condition("Suspended", false, "20"),
                ],
                "Running",
            ),
            (
                vec![
                    condition("Created", true, "00"),
                    condition("Succeeded", true, "30"),
                    condition("Running", false, "30"),
                ],
                "Succeeded",
            ),
            (
                vec![
                    condition("Created", true, "00"),
                    condition("Restarting", true, "12"),
                    condition("Running", false, "12"),
                ],
                "Restarting",
            ),
            (
                vec![
                    condition("Running", true, "10"),
                    condition("Failed", true, "40"),
                    condition("Created", true, "00"),
                ],
                "Failed",
            ),
        ];
        for (conditions, expected) in cases {
            let (types, last) = state(conditions);
            assert_eq!(last, expected, "{types:?}");
        }
    }

    #[test]
    fn etos_conditions_come_first_in_their_own_order() {
        let (types, _) = state(vec![
            condition("Running", true, "05"),
            condition("Stalled", false, "07"),
            condition("Created", true, "00"),
            condition("Ready", true, "07"),
        ]);
        assert_eq!(types, ["Stalled", "Ready", "Created", "Running"]);
    }

    #[test]
    fn the_master_is_the_engines_launcher_and_every_type_has_v1s_selector() {
        let engine = JobStatus {
            conditions: vec![condition("Created", true, "00")],
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
                        active: 2,
                        failed: 1,
                        ..ReplicaStatus::default()
                    },
                ),
            ]),
            phase: Some(eto_api::job_status::JobPhase::Running),
            run: Some(2),
            restart_count: 1,
            selector: Some(selector("ddp", PyTorchReplicaType::Worker)),
            ..JobStatus::default()
        };
        let written = from_engine("ddp", engine.clone());
        let json = serde_json::to_value(&written).unwrap();
        assert_eq!(json["replicaStatuses"]["Master"]["active"], 1);
        assert_eq!(
            json["replicaStatuses"]["Master"]["selector"],
            "training.kubeflow.org/job-name=ddp,training.kubeflow.org/operator-name=pytorchjob-controller,training.kubeflow.org/replica-type=master"
        );
        assert_eq!(json["replicaStatuses"]["Worker"]["failed"], 1);
        assert_eq!(json["run"], 2);
        let read: PyTorchJobStatus = serde_json::from_value(json).unwrap();
        assert_eq!(to_engine(&read), engine);
    }

    #[test]
    fn a_status_written_by_v1_reads_its_phase_from_its_conditions() {
        let status: PyTorchJobStatus = serde_json::from_value(serde_json::json!({
            "conditions": [
                {"type": "Created", "status": "True", "reason": "PyTorchJobCreated"},
                {"type": "Running", "status": "False", "reason": "PyTorchJobRunning"},
                {"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded"}
            ],
            "replicaStatuses": {"Master": {"succeeded": 1}, "Worker": {"active": 2}}
        }))
        .unwrap();
        let engine = to_engine(&status);
        assert_eq!(engine.phase, Some(eto_api::job_status::JobPhase::Succeeded));
        assert_eq!(engine.replica_statuses[&ReplicaType::Launcher].succeeded, 1);
    }
}
