//! Whether the platform, not the training code, took a pod away.
//!
//! A pod of a job ends either because its training code ended it (an exit, a crash) or because
//! the cluster took it: a spot reclaim, a preemption, an eviction, a drain, its node's loss or
//! shutdown, a deletion. eto never counts the second kind as the training code's failure: it
//! neither fails a job for it nor uses `backoffLimit` on it, and its status and events say
//! what the platform did. The exit code cannot tell the two apart (a process killed for a
//! reclaim exits 137 as one killed for its memory, and `torchrun` exits 1 for a SIGTERM as for
//! a crash), so eto reads what Kubernetes says about the pod:
//!
//! - The condition `DisruptionTarget=True`, which the control plane and the kubelet set on a
//!   pod they are about to end: `PreemptionByScheduler`, `DeletionByTaintManager` (a
//!   `NoExecute` taint, such as an unreachable node's), `EvictionByEvictionAPI` (a drain, a
//!   spot handler's cordon and drain), `DeletionByPodGC` (its node is gone) and
//!   `TerminationByKubelet` (node-pressure eviction, graceful node shutdown).
//! - The pod's `status.reason`, for what the kubelet ends or refuses without that condition
//!   (older clusters, or a pod that never ran): `Evicted`, `Preempting`, `Terminated` and
//!   `Shutdown` (node shutdown), `NodeLost`, and the admission refusals `OutOf<resource>`,
//!   `UnexpectedAdmissionError`, `NodeAffinity`.
//! - A deletion under way (`deletionTimestamp`) that eto did not ask for: a person, a drain
//!   that deletes rather than evicts, another controller. (eto's own deletions end a run, so
//!   their pods are of an earlier run or of a finished job, and are never asked about.)
//!
//! A pod that succeeded is not taken to be disrupted by its `status.reason` alone, but the
//! condition and a deletion under way still make it one: training code that saves and exits 0
//! on the SIGTERM of an eviction was stopped by the platform, not finished.

use k8s_openapi::api::core::v1::Pod;

use crate::pods;

/// The `status.reason` values with which the kubelet or the node controller ends or refuses a
/// pod for reasons of the node, not of the pod's code. `OutOf<resource>` is matched by prefix.
const NODE_REASONS: [&str; 7] = [
    "Evicted",
    "Preempting",
    "Terminated",
    "Shutdown",
    "NodeLost",
    "UnexpectedAdmissionError",
    "NodeAffinity",
];

/// How the platform took a pod away (or is taking it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disruption {
    /// What Kubernetes says: the `DisruptionTarget` condition's reason, the pod's
    /// `status.reason`, or `Deleted` for a deletion.
    pub reason: String,
    /// The node the pod ran on, when it was bound to one.
    pub node: Option<String>,
    /// Whether the pod has ended (`Failed` or `Succeeded`), rather than still running out its
    /// termination.
    pub ended: bool,
}

impl Disruption {
    /// What happened to the pod, as a verb phrase that follows its name in an event: "was
    /// evicted through the Eviction API (a drain or a reclaim)". The node is not named: the
    /// caller says where.
    pub fn describe(&self) -> String {
        let tense = if self.ended { "was" } else { "is being" };
        let what = match self.reason.as_str() {
            "PreemptionByScheduler" => "preempted by the scheduler",
            "DeletionByTaintManager" => "deleted for a NoExecute taint of its node",
            "EvictionByEvictionAPI" => "evicted through the Eviction API (a drain or a reclaim)",
            "DeletionByPodGC" => "deleted with its node, which is gone",
            "TerminationByKubelet" => {
                "terminated by the kubelet (node-pressure eviction or node shutdown)"
            }
            "Evicted" => "evicted by the kubelet (node pressure)",
            "Preempting" => "preempted by the kubelet",
            "Terminated" | "Shutdown" => "terminated by its node's shutdown",
            "NodeLost" => "lost with its node",
            "Deleted" => "deleted (not by eto)",
            crate::node_warnings::NODE_WARNING => "reclaimed: its node announced it goes away",
            reason if reason.starts_with("OutOf") || NODE_REASONS.contains(&reason) => {
                return format!("was refused by its node's kubelet ({reason})");
            }
            _ => "disrupted (DisruptionTarget)",
        };
        format!("{tense} {what}")
    }
}

/// How the platform took `pod` away, if it did or is doing so (see the module
/// documentation).
pub fn of(pod: &Pod) -> Option<Disruption> {
    let ended = pods::is_finished(pod);
    let reason = pods::is_disrupted(pod)
        .then(|| {
            pods::disruption_reason(pod)
                .unwrap_or("DisruptionTarget")
                .to_string()
        })
        .or_else(|| {
            pods::reason(pod)
                .filter(|_| pods::phase(pod) == "Failed")
                .filter(|reason| reason.starts_with("OutOf") || NODE_REASONS.contains(reason))
                .map(str::to_string)
        })
        .or_else(|| pods::is_terminating(pod).then(|| "Deleted".to_string()))?;
    Some(Disruption {
        reason,
        node: pods::node(pod).map(str::to_string),
        ended,
    })
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn pod(status: serde_json::Value, deleting: bool) -> Pod {
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "gpu-3", "containers": []},
            "status": status});
        if deleting {
            pod["metadata"]["deletionTimestamp"] = json!("2026-11-22T00:00:30Z");
        }
        serde_json::from_value(pod).unwrap()
    }

    fn target(phase: &str, reason: &str) -> serde_json::Value {
        json!({"phase": phase, "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": reason}],
            "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}]})
    }

    fn failed(reason: &str, code: i32) -> serde_json::Value {
        json!({"phase": "Failed", "reason": reason,
            "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": code, "reason": "Error"}}}]})
    }

    #[test]
    fn what_kubernetes_says_decides_not_the_exit_code() {
        // (the pod, being deleted, the disruption's reason and description; None: the code's own)
        let cases = [
            (
                target("Failed", "DeletionByPodGC"),
                false,
                Some((
                    "DeletionByPodGC",
                    "was deleted with its node, which is gone",
                )),
            ),
            (
                target("Running", "EvictionByEvictionAPI"),
                true,
                Some((
                    "EvictionByEvictionAPI",
                    "is being evicted through the Eviction API (a drain or a reclaim)",
                )),
            ),
            (
                target("Failed", "PreemptionByScheduler"),
                false,
                Some(("PreemptionByScheduler", "was preempted by the scheduler")),
            ),
            (
                target("Succeeded", "TerminationByKubelet"),
                false,
                Some((
                    "TerminationByKubelet",
                    "was terminated by the kubelet (node-pressure eviction or node shutdown)",
                )),
            ),
            (
                failed("Evicted", 137),
                false,
                Some(("Evicted", "was evicted by the kubelet (node pressure)")),
            ),
            (
                failed("Terminated", 137),
                false,
                Some(("Terminated", "was terminated by its node's shutdown")),
            ),
            (
                failed("OutOfnvidia.com/gpu", 0),
                false,
                Some((
                    "OutOfnvidia.com/gpu",
                    "was refused by its node's kubelet (OutOfnvidia.com/gpu)",
                )),
            ),
            (
                json!({"phase": "Running"}),
                true,
                Some(("Deleted", "is being deleted (not by eto)")),
            ),
            // The training code's own ends: an error exit, a kill for memory, a success.
            (failed("", 1), false, None),
            (failed("", 137), false, None),
            (
                json!({"phase": "Succeeded", "reason": "Evicted"}),
                false,
                None,
            ),
            (json!({"phase": "Running"}), false, None),
        ];
        for (status, deleting, expected) in cases {
            let pod = pod(status.clone(), deleting);
            let found = of(&pod);
            assert_eq!(
                found
                    .as_ref()
                    .map(|d| (d.reason.as_str(), d.describe()))
                    .as_ref()
                    .map(|(r, d)| (*r, d.as_str())),
                expected,
                "{status}"
            );
        }
    }
}
