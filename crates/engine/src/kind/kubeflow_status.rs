//! The parts every Kubeflow job's status shares (conditions, replica counts, eto's fields),
//! converted to and from the engine's shape; each Kubeflow kind's `status` module converts the
//! rest.
//!
//! The conversion is lossless for everything eto writes, so a status eto wrote reads back as
//! it was planned. A status a Kubeflow operator wrote has no `phase`; it is read from the
//! conditions that operator set, so that a job it finished stays finished under eto.

use crate::status::JobStatus;
use eto_api::common::ReplicaType;
use eto_api::common::{ConditionStatus, JobCondition, ReplicaStatus};
use eto_api::job_status::JobPhase;
use eto_api::kubeflow::{EtoJobStatus, KubeflowReplicaStatus};

use crate::conditions;

/// A Kubeflow job's status in the engine's shape: its `conditions`, its replica counts by
/// the engine's replica type (the Worker's carry the scale selector), eto's part, and the
/// times in `times`. A status without eto's phase reads it from the conditions.
pub fn kubeflow_to_engine<'a>(
    conditions: &[JobCondition],
    replica_statuses: impl Iterator<Item = (ReplicaType, &'a KubeflowReplicaStatus)>,
    eto: &EtoJobStatus,
    times: JobStatus,
) -> JobStatus {
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

/// A Kubeflow job's replica counts in the engine's shape.
fn counts_to_engine(counts: &KubeflowReplicaStatus) -> ReplicaStatus {
    ReplicaStatus {
        active: counts.active,
        succeeded: counts.succeeded,
        failed: counts.failed,
        preempted: counts.preempted,
    }
}

/// The engine's replica counts as a Kubeflow job has them, with the replicas' `selector`.
pub fn counts_from_engine(
    counts: &ReplicaStatus,
    selector: Option<String>,
) -> KubeflowReplicaStatus {
    KubeflowReplicaStatus {
        active: counts.active,
        succeeded: counts.succeeded,
        failed: counts.failed,
        preempted: counts.preempted,
        label_selector: None,
        selector,
    }
}

/// eto's part of a Kubeflow job's status in the engine's shape; the rest is left default.
fn eto_to_engine(eto: &EtoJobStatus) -> JobStatus {
    JobStatus {
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
        backoff: eto.backoff.clone(),
        goodput: eto.goodput.clone(),
        ..JobStatus::default()
    }
}

/// eto's part of `status`, as a Kubeflow job's status has it.
pub fn eto_from_engine(status: &JobStatus) -> EtoJobStatus {
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
        backoff: status.backoff.clone(),
        goodput: status.goodput.clone(),
    }
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
    let holds = |type_| conditions::is_true(conditions, type_);
    [
        (conditions::FAILED, JobPhase::Failed),
        (conditions::SUCCEEDED, JobPhase::Succeeded),
        (conditions::SUSPENDED, JobPhase::Suspended),
        (conditions::RESTARTING, JobPhase::Restarting),
        (conditions::RUNNING, JobPhase::Running),
    ]
    .into_iter()
    .find(|(type_, _)| holds(type_))
    .map(|(_, phase)| phase)
    .or_else(|| {
        conditions::find(conditions, conditions::CREATED)
            .filter(|created| created.status == ConditionStatus::True)
            .map(|_| JobPhase::Created)
    })
}
