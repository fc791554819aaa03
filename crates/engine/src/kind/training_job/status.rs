//! A TrainingJob's status, converted to and from the engine's shape: the same fields but for
//! those that mean nothing for a TrainingJob (a training group, workers held for one).

use eto_api::TrainingJobStatus;

use crate::status::JobStatus;

/// `status` in the engine's shape.
pub fn to_engine(status: &TrainingJobStatus) -> JobStatus {
    let status = status.clone();
    JobStatus {
        phase: status.phase,
        conditions: status.conditions,
        replica_statuses: status.replica_statuses,
        start_time: status.start_time,
        completion_time: status.completion_time,
        current_scaler: status.current_scaler,
        restart_count: status.restart_count,
        target_workers: status.target_workers,
        current_workers: status.current_workers,
        next_worker_index: status.next_worker_index,
        run: status.run,
        notice: status.notice,
        observed_generation: status.observed_generation,
        workers: status.workers,
        blacklist: status.blacklist,
        draining_workers: status.draining_workers,
        held_workers: Vec::new(),
        group: None,
        replica_groups: None,
        nodes_in_cooldown: status.nodes_in_cooldown,
        node_warnings: status.node_warnings,
        backoff: status.backoff,
        selector: status.selector,
        steps: std::collections::BTreeMap::new(),
        goodput: status.goodput,
    }
}

/// `status`, planned in the engine's shape, as a TrainingJob's status.
pub fn from_engine(status: JobStatus) -> TrainingJobStatus {
    TrainingJobStatus {
        phase: status.phase,
        conditions: status.conditions,
        replica_statuses: status.replica_statuses,
        start_time: status.start_time,
        completion_time: status.completion_time,
        current_scaler: status.current_scaler,
        restart_count: status.restart_count,
        target_workers: status.target_workers,
        current_workers: status.current_workers,
        next_worker_index: status.next_worker_index,
        run: status.run,
        notice: status.notice,
        observed_generation: status.observed_generation,
        workers: status.workers,
        blacklist: status.blacklist,
        draining_workers: status.draining_workers,
        nodes_in_cooldown: status.nodes_in_cooldown,
        node_warnings: status.node_warnings,
        backoff: status.backoff,
        goodput: status.goodput,
        selector: status.selector,
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_status_eto_wrote_reads_back_as_it_was_planned() {
        let written: TrainingJobStatus = serde_json::from_value(json!({
            "phase": "Running", "restartCount": 1, "run": 2,
            "targetWorkers": ["mnist-worker-0", "mnist-worker-3"],
            "currentWorkers": ["mnist-worker-0"], "nextWorkerIndex": 4,
            "workers": {"ready": 1, "pending": 1, "desired": 2, "min": 1},
            "blacklist": [{"pod": "mnist-worker-1", "reason": "Evicted", "time": "2026-11-20T10:00:00Z"}],
            "selector": "training.kubeflow.org/job-name=mnist",
            "conditions": [{"type": "Running", "status": "True", "reason": "TrainingJobRunning"}]
        }))
        .unwrap();
        assert_eq!(from_engine(to_engine(&written)), written);
    }
}
