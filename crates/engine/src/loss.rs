//! Why a worker stopped counting, and whether its restart policy replaces it.

use eto_api::common::ReplicaRestartPolicy;
use k8s_openapi::api::core::v1::Pod;

use crate::disruption::{self, Disruption};
use crate::pods;

/// Exit codes that [`ReplicaRestartPolicy::ExitCode`] retries: the process was killed by a
/// signal (128 + signal number), as preemptions and out-of-memory kills do.
pub const RETRIABLE_EXIT_CODES: std::ops::RangeInclusive<i32> = 129..=254;

/// Why a worker left the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Loss {
    /// Its containers exited with a non-zero code.
    Failed {
        /// Exit code of the first container that terminated, when known.
        exit_code: Option<i32>,
        /// Container termination reason, for example `Error` or `OOMKilled`.
        reason: String,
    },
    /// The kubelet evicted it (node pressure).
    Evicted {
        /// Exit code of its containers, when known.
        exit_code: Option<i32>,
    },
    /// The platform took it or is taking it (see [`crate::disruption`]): `DisruptionTarget` (a
    /// spot reclaim, a preemption, an eviction through the API, its node's loss), or the
    /// kubelet ended or refused it for its node's sake. Whatever its containers' exit code:
    /// the training code did not fail.
    Disrupted(Disruption),
    /// It finished successfully.
    Completed,
    /// It was deleted, or disappeared with its node.
    Deleted,
}

impl Loss {
    /// The loss `pod` shows, or `None` while it still counts (pending, starting, running). A
    /// missing pod (`None`) is [`Loss::Deleted`], and so is one being deleted that the platform
    /// did not mark as disrupted. What Kubernetes says of a pod that ended decides before its
    /// exit code does (see [`crate::disruption`]).
    pub fn of(pod: Option<&Pod>) -> Option<Self> {
        let Some(pod) = pod else {
            return Some(Self::Deleted);
        };
        let exit_code = pods::termination(pod).map(|(code, _)| code);
        let disruption = disruption::of(pod).filter(|d| d.reason != "Deleted");
        match (pods::phase(pod), disruption) {
            ("Failed", _) if pods::reason(pod) == Some("Evicted") => {
                Some(Self::Evicted { exit_code })
            }
            ("Failed", Some(disruption)) => Some(Self::Disrupted(disruption)),
            ("Succeeded", Some(disruption)) if pods::is_disrupted(pod) => {
                Some(Self::Disrupted(disruption))
            }
            ("Failed", None) if pods::is_terminating(pod) => Some(Self::Deleted),
            ("Failed", None) => Some(Self::Failed {
                exit_code,
                reason: pods::termination(pod)
                    .and_then(|(_, reason)| reason)
                    .or_else(|| pods::reason(pod))
                    .unwrap_or("Error")
                    .to_string(),
            }),
            ("Succeeded", _) => Some(Self::Completed),
            (_, Some(disruption)) => Some(Self::Disrupted(disruption)),
            _ if pods::is_terminating(pod) => Some(Self::Deleted),
            _ => None,
        }
    }

    /// The loss of a worker from its pod, or, when the pod is gone, from `departed`, the
    /// state its watch showed as it was deleted (see [`Self::of_departed`]).
    pub fn of_worker(pod: Option<&Pod>, departed: Option<&Pod>) -> Option<Self> {
        match pod {
            Some(_) => Self::of(pod),
            None => Some(Self::of_departed(departed)),
        }
    }

    /// The loss of a worker whose pod is gone, from `last`, the state the pod's watch showed
    /// as it was deleted, when known: what it showed if that was a loss (a pod the pod
    /// garbage collector marked `DisruptionTarget` and deleted at once, as when its node
    /// vanished), else [`Loss::Deleted`].
    pub fn of_departed(last: Option<&Pod>) -> Self {
        last.and_then(|pod| Self::of(Some(pod)))
            .unwrap_or(Self::Deleted)
    }

    /// Whether the platform, not the training code, ended the pod: evicted, disrupted,
    /// deleted or gone.
    pub fn is_the_platforms(&self) -> bool {
        matches!(
            self,
            Self::Evicted { .. } | Self::Disrupted(_) | Self::Deleted
        )
    }

    /// The kind of loss, for metrics: `Failed`, `Evicted`, `Disrupted`, `Completed` or
    /// `Deleted`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Failed { .. } => "Failed",
            Self::Evicted { .. } => "Evicted",
            Self::Disrupted(_) => "Disrupted",
            Self::Completed => "Completed",
            Self::Deleted => "Deleted",
        }
    }

    /// A one-word reason, as the blacklist records it.
    pub fn reason(&self) -> &str {
        match self {
            Self::Failed { reason, .. } => reason,
            Self::Evicted { .. } => "Evicted",
            Self::Disrupted(_) => "Disrupted",
            Self::Completed => "Completed",
            Self::Deleted => "Deleted",
        }
    }

    /// The exit code of the worker's containers, when known.
    pub fn exit_code(&self) -> Option<i32> {
        match self {
            Self::Failed { exit_code, .. } | Self::Evicted { exit_code } => *exit_code,
            _ => None,
        }
    }

    /// Whether `policy` replaces a worker lost this way: `Never` never does; `OnFailure`
    /// replaces failed, evicted and disrupted workers; `ExitCode` those whose exit code is in
    /// [`RETRIABLE_EXIT_CODES`], and evicted and disrupted ones (killed by a signal);
    /// `Always` every lost worker.
    pub fn is_replaced_under(&self, policy: ReplicaRestartPolicy) -> bool {
        match policy {
            ReplicaRestartPolicy::Never => false,
            ReplicaRestartPolicy::Always => true,
            ReplicaRestartPolicy::OnFailure => {
                matches!(
                    self,
                    Self::Failed { .. } | Self::Evicted { .. } | Self::Disrupted(_)
                )
            }
            ReplicaRestartPolicy::ExitCode => match self {
                Self::Failed { exit_code, .. } => {
                    exit_code.is_some_and(|code| RETRIABLE_EXIT_CODES.contains(&code))
                }
                Self::Evicted { .. } | Self::Disrupted(_) => true,
                Self::Completed | Self::Deleted => false,
            },
        }
    }

    /// How the loss reads in an event: `failed (exit code 1, Error)`.
    pub fn describe(&self) -> String {
        match self {
            Self::Failed {
                exit_code: Some(code),
                reason,
            } => format!("failed (exit code {code}, {reason})"),
            Self::Failed {
                exit_code: None,
                reason,
            } => format!("failed ({reason})"),
            Self::Evicted { .. } => "was evicted".into(),
            Self::Disrupted(disruption) => disruption.describe(),
            Self::Completed => "completed".into(),
            Self::Deleted => "was deleted".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use eto_api::common::ReplicaRestartPolicy::{Always, ExitCode, Never, OnFailure};
    use serde_json::json;

    use super::*;

    fn pod(status: serde_json::Value, deleting: bool) -> Pod {
        let mut pod = json!({"metadata": {"name": "w"}, "status": status});
        if deleting {
            pod["metadata"]["deletionTimestamp"] = json!("2026-11-22T00:00:00Z");
        }
        serde_json::from_value(pod).unwrap()
    }

    fn terminated(phase: &str, code: i32, reason: &str) -> serde_json::Value {
        json!({"phase": phase, "containerStatuses": [{"name": "w", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": code, "reason": reason}}}]})
    }

    #[test]
    fn losses_are_read_from_pods() {
        let cases = [
            (Some(pod(json!({"phase": "Running"}), false)), None),
            (Some(pod(json!({"phase": "Pending"}), false)), None),
            (None, Some(Loss::Deleted)),
            (
                Some(pod(json!({"phase": "Running"}), true)),
                Some(Loss::Deleted),
            ),
            (
                Some(pod(terminated("Failed", 1, "Error"), false)),
                Some(Loss::Failed {
                    exit_code: Some(1),
                    reason: "Error".into(),
                }),
            ),
            (
                Some(pod(terminated("Failed", 137, "OOMKilled"), false)),
                Some(Loss::Failed {
                    exit_code: Some(137),
                    reason: "OOMKilled".into(),
                }),
            ),
            (
                Some(pod(json!({"phase": "Failed", "reason": "Evicted"}), false)),
                Some(Loss::Evicted { exit_code: None }),
            ),
            (
                Some(pod(terminated("Succeeded", 0, "Completed"), false)),
                Some(Loss::Completed),
            ),
            (
                Some(pod(
                    json!({"phase": "Running", "conditions": [{"type": "DisruptionTarget", "status": "True"}]}),
                    false,
                )),
                Some(Loss::Disrupted(Disruption {
                    reason: "DisruptionTarget".into(),
                    node: None,
                    ended: false,
                })),
            ),
            // The platform's losses, whatever the exit code says.
            (
                Some(pod(
                    with_target(terminated("Failed", 137, "Error"), "DeletionByPodGC"),
                    false,
                )),
                Some(Loss::Disrupted(Disruption {
                    reason: "DeletionByPodGC".into(),
                    node: None,
                    ended: true,
                })),
            ),
            (
                // torchrun exits 1 on the SIGTERM of a reclaim, as it does for a crash.
                Some(pod(
                    with_target(terminated("Failed", 1, "Error"), "TerminationByKubelet"),
                    false,
                )),
                Some(Loss::Disrupted(Disruption {
                    reason: "TerminationByKubelet".into(),
                    node: None,
                    ended: true,
                })),
            ),
            (
                Some(pod(
                    json!({"phase": "Failed", "reason": "Terminated", "message": "Pod was terminated in response to imminent node shutdown."}),
                    false,
                )),
                Some(Loss::Disrupted(Disruption {
                    reason: "Terminated".into(),
                    node: None,
                    ended: true,
                })),
            ),
            (
                // Evicted through the API: marked, then deleted.
                Some(pod(
                    with_target(json!({"phase": "Running"}), "EvictionByEvictionAPI"),
                    true,
                )),
                Some(Loss::Disrupted(Disruption {
                    reason: "EvictionByEvictionAPI".into(),
                    node: None,
                    ended: false,
                })),
            ),
            (
                // Deleted by someone, killed on the way: a deletion, not a failure.
                Some(pod(terminated("Failed", 137, "Error"), true)),
                Some(Loss::Deleted),
            ),
        ];
        for (pod, expected) in cases {
            assert_eq!(Loss::of(pod.as_ref()), expected, "{pod:?}");
        }
    }

    fn with_target(mut status: serde_json::Value, reason: &str) -> serde_json::Value {
        status["conditions"] =
            json!([{"type": "DisruptionTarget", "status": "True", "reason": reason}]);
        status
    }

    #[test]
    fn restart_policies_decide_replacement() {
        let failed = |code| Loss::Failed {
            exit_code: Some(code),
            reason: "Error".into(),
        };
        // (loss, Never, OnFailure, ExitCode, Always)
        let cases = [
            (failed(1), false, true, false, true),
            (failed(128), false, true, false, true),
            (failed(129), false, true, true, true),
            (failed(137), false, true, true, true),
            (failed(254), false, true, true, true),
            (failed(255), false, true, false, true),
            (
                Loss::Failed {
                    exit_code: None,
                    reason: "Error".into(),
                },
                false,
                true,
                false,
                true,
            ),
            (
                Loss::Evicted {
                    exit_code: Some(137),
                },
                false,
                true,
                true,
                true,
            ),
            (
                Loss::Disrupted(Disruption {
                    reason: "PreemptionByScheduler".into(),
                    node: None,
                    ended: true,
                }),
                false,
                true,
                true,
                true,
            ),
            (Loss::Completed, false, false, false, true),
            (Loss::Deleted, false, false, false, true),
        ];
        for (loss, never, on_failure, exit_code, always) in cases {
            let decisions =
                [Never, OnFailure, ExitCode, Always].map(|policy| loss.is_replaced_under(policy));
            assert_eq!(
                decisions,
                [never, on_failure, exit_code, always],
                "{loss:?}"
            );
        }
    }
}
