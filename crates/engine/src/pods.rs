//! Reading the state of a pod.

use eto_api::well_known::POD_DELETION_COST_ANNOTATION;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

/// The pod's `status.phase`, `Pending` when unset.
pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// Whether the pod's deletion has started.
pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Whether the pod still runs its containers at `now`: it is `Running` and, if it is being
/// deleted, its grace period has not ended (eto's PID 1 keeps its training running until then,
/// see [`crate::builders::termination`]).
pub fn runs_at(pod: &Pod, now: jiff::Timestamp) -> bool {
    phase(pod) == "Running"
        && pod
            .metadata
            .deletion_timestamp
            .as_ref()
            .is_none_or(|deleted| deleted.0 > now)
}

/// Since when every container of `pod` runs (the latest start among them), if they all run
/// and the kubelet said when.
pub fn running_since(pod: &Pod) -> Option<jiff::Timestamp> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .map(|status| {
            Some(
                status
                    .state
                    .as_ref()?
                    .running
                    .as_ref()?
                    .started_at
                    .as_ref()?
                    .0,
            )
        })
        .collect::<Option<Vec<_>>>()?
        .into_iter()
        .max()
}

/// Whether the pod has finished (`Succeeded` or `Failed`).
pub fn is_finished(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

/// The pod condition that says the pod is Ready.
pub const READY_CONDITION: &str = "Ready";

/// The pod condition set when the pod is about to be disrupted.
pub const DISRUPTION_TARGET_CONDITION: &str = "DisruptionTarget";

/// The pod conditions the engine reads, of which it reads only the type and the status.
pub const CONDITIONS_READ: [&str; 2] = [READY_CONDITION, DISRUPTION_TARGET_CONDITION];

fn condition_is_true(pod: &Pod, type_: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == type_ && c.status == "True")
        })
}

/// Whether the pod runs, is Ready and is not being deleted.
pub fn is_ready(pod: &Pod) -> bool {
    phase(pod) == "Running" && condition_is_true(pod, READY_CONDITION) && !is_terminating(pod)
}

/// The pod's deletion cost (its `controller.kubernetes.io/pod-deletion-cost` annotation): a
/// shrinking job removes the pods of the lowest cost first. 0 when unset or not an `int32`, as
/// for a ReplicaSet.
pub fn deletion_cost(pod: &Pod) -> i32 {
    annotation(pod, POD_DELETION_COST_ANNOTATION)
        .and_then(|cost| cost.parse().ok())
        .unwrap_or(0)
}

/// Whether the pod is about to be disrupted (`DisruptionTarget=True`: a spot reclaim, a
/// preemption, a drain).
pub fn is_disrupted(pod: &Pod) -> bool {
    condition_is_true(pod, DISRUPTION_TARGET_CONDITION)
}

/// The reason of the pod's `DisruptionTarget=True` condition, if it is being disrupted.
pub fn disruption_reason(pod: &Pod) -> Option<&str> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == DISRUPTION_TARGET_CONDITION && c.status == "True")?
        .reason
        .as_deref()
}

/// The node the pod was bound to, if any.
pub fn node(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// The exit code and reason of the first container that terminated, if any did.
pub fn termination(pod: &Pod) -> Option<(i32, Option<&str>)> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    statuses.iter().find_map(|status| {
        let terminated = status.state.as_ref()?.terminated.as_ref()?;
        Some((terminated.exit_code, terminated.reason.as_deref()))
    })
}

/// The pod's `status.reason` (for example `Evicted`), if any.
pub fn reason(pod: &Pod) -> Option<&str> {
    pod.status.as_ref().and_then(|s| s.reason.as_deref())
}

/// The value of label `key`, if set.
pub fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// The path of `path` on port `port` of pod `pod` in `namespace` through the API server's
/// pod proxy, which reaches a pod wherever eto runs.
pub fn proxy_path(namespace: &str, pod: &str, port: impl std::fmt::Display, path: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy{path}")
}

/// The value of the pod's annotation `key`, if set.
pub fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// What a pod's container is doing, as its kubelet last reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activity {
    /// Nothing reported of it (the pod is not on a node yet, or its kubelet said nothing).
    Unknown,
    /// Waiting to start for the first time (pulling its image, say).
    Starting,
    /// Its process runs.
    Runs,
    /// It exited with 0, and does not run again.
    Exited,
    /// Its process ended with a non-zero code and does not run now: terminated for good, or
    /// waiting to be started again (`CrashLoopBackOff`).
    Failed {
        /// The exit code of its last end.
        exit_code: i32,
    },
}

impl Activity {
    /// Whether a process may run in the container: it runs, or nothing says it does not.
    pub fn may_run(self) -> bool {
        matches!(self, Self::Runs | Self::Unknown)
    }
}

/// The status of `pod`'s container `name`, else of its first container, if reported.
fn container_status<'a>(pod: &'a Pod, name: Option<&str>) -> Option<&'a ContainerStatus> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    statuses
        .iter()
        .find(|status| Some(status.name.as_str()) == name)
        .or_else(|| statuses.first())
}

/// What `pod`'s container `name` (else its first) is doing. A pod that is not `Running` runs
/// no process, whatever its containers last said.
pub fn activity(pod: &Pod, name: Option<&str>) -> Activity {
    let Some(status) = container_status(pod, name) else {
        return match phase(pod) {
            "Running" => Activity::Unknown,
            "Succeeded" => Activity::Exited,
            "Failed" => Activity::Failed {
                exit_code: termination(pod).map_or(1, |(code, _)| code),
            },
            _ => Activity::Starting,
        };
    };
    let state = status.state.as_ref();
    if let Some(terminated) = state.and_then(|state| state.terminated.as_ref()) {
        return match terminated.exit_code {
            0 => Activity::Exited,
            exit_code => Activity::Failed { exit_code },
        };
    }
    if state.is_some_and(|state| state.running.is_some()) && phase(pod) == "Running" {
        return Activity::Runs;
    }
    let last_end = status
        .last_state
        .as_ref()
        .and_then(|last| last.terminated.as_ref())
        .map(|terminated| terminated.exit_code);
    match last_end {
        Some(exit_code) if exit_code != 0 => Activity::Failed { exit_code },
        _ if state.is_some_and(|state| state.waiting.is_some()) => Activity::Starting,
        _ if phase(pod) == "Running" => Activity::Unknown,
        _ => Activity::Starting,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "w"}, "status": status})).unwrap()
    }

    fn container(
        name: &str,
        state: serde_json::Value,
        last: serde_json::Value,
    ) -> serde_json::Value {
        json!({"name": name, "image": "i", "imageID": "", "ready": false, "restartCount": 1,
               "state": state, "lastState": last})
    }

    #[test]
    fn a_containers_activity_reads_as_its_kubelet_reports_it() {
        let running = json!({"running": {"startedAt": "2027-01-15T08:00:00Z"}});
        let crash_loop = json!({"waiting": {"reason": "CrashLoopBackOff"}});
        let pulling = json!({"waiting": {"reason": "ContainerCreating"}});
        let ended = |code: i32| json!({"terminated": {"exitCode": code, "reason": "Error"}});
        // (pod status, activity of container "pytorch")
        let cases = [
            (json!({"phase": "Pending"}), Activity::Starting),
            (json!({"phase": "Running"}), Activity::Unknown),
            (json!({"phase": "Succeeded"}), Activity::Exited),
            (
                json!({"phase": "Failed"}),
                Activity::Failed { exit_code: 1 },
            ),
            (
                json!({"phase": "Running", "containerStatuses": [container("pytorch", running.clone(), json!({}))]}),
                Activity::Runs,
            ),
            (
                json!({"phase": "Running", "containerStatuses": [container("pytorch", crash_loop.clone(), ended(1))]}),
                Activity::Failed { exit_code: 1 },
            ),
            (
                json!({"phase": "Pending", "containerStatuses": [container("pytorch", pulling, json!({}))]}),
                Activity::Starting,
            ),
            (
                json!({"phase": "Failed", "containerStatuses": [container("pytorch", ended(137), json!({}))]}),
                Activity::Failed { exit_code: 137 },
            ),
            (
                json!({"phase": "Succeeded", "containerStatuses": [container("pytorch", ended(0), json!({}))]}),
                Activity::Exited,
            ),
            // The training container is found by name, whatever its place.
            (
                json!({"phase": "Running", "containerStatuses": [
                    container("sidecar", running.clone(), json!({})),
                    container("pytorch", crash_loop, ended(2))]}),
                Activity::Failed { exit_code: 2 },
            ),
            // Without one of that name, the first container is the training's.
            (
                json!({"phase": "Running", "containerStatuses": [container("main", running, json!({}))]}),
                Activity::Runs,
            ),
        ];
        for (index, (status, expected)) in cases.into_iter().enumerate() {
            assert_eq!(
                activity(&pod(status), Some("pytorch")),
                expected,
                "case {index}"
            );
        }
        assert!(Activity::Runs.may_run() && Activity::Unknown.may_run());
        assert!(!Activity::Failed { exit_code: 1 }.may_run() && !Activity::Starting.may_run());
    }
}
