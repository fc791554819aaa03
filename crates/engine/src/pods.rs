//! Reading the state of a pod.

use k8s_openapi::api::core::v1::Pod;

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
/// see [`crate::build::termination`]).
pub fn runs_at(pod: &Pod, now: jiff::Timestamp) -> bool {
    phase(pod) == "Running"
        && pod
            .metadata
            .deletion_timestamp
            .as_ref()
            .is_none_or(|deleted| deleted.0 > now)
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
