//! A pod's own failure, as the kubelet reports it: what its code, its image or its
//! configuration did, as opposed to what the platform did to it (see [`crate::disruption`]).
//!
//! Two forms, read from the pod's container statuses (init containers first, as they run
//! first):
//!
//! - **A container waits with a reason that does not clear by itself** ([`STUCK_REASONS`]): an
//!   image that cannot be pulled (`ErrImagePull`, `ImagePullBackOff`, `InvalidImageName`,
//!   `ErrImageNeverPull`), a configuration that cannot be made (`CreateContainerConfigError`:
//!   a missing Secret or ConfigMap; `CreateContainerError`), a process that cannot be started
//!   (`RunContainerError`, a hook's error), or a container the kubelet restarts in place and
//!   backs off (`CrashLoopBackOff`, with the exit that put it there).
//! - **The pod failed with an error exit** (`Failed`, a container terminated with a non-zero
//!   code) and the platform did not take it.
//!
//! A pod the platform takes or deleted has no failure of its own, whatever its containers say.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use crate::{disruption, pods};

/// Waiting reasons of a container that do not clear without a change: the kubelet retries,
/// but the same image, configuration or code fails again.
pub const STUCK_REASONS: [&str; 10] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "PreStartHookError",
    "PostStartHookError",
    "CrashLoopBackOff",
];

/// The longest part of a termination message a failure keeps: its last lines, which say why.
pub const MESSAGE_LIMIT: usize = 400;

/// How many lines of a termination message a failure keeps, from its end.
pub const MESSAGE_LINES: usize = 3;

/// A failure of a pod's own making.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnFailure {
    /// The container that failed.
    pub container: String,
    /// The kubelet's reason: a waiting reason of [`STUCK_REASONS`], or the termination reason
    /// of an exit (`Error`, `OOMKilled`, ...).
    pub reason: String,
    /// Whether the container waits (the pod still exists and may be fixed by a new template),
    /// rather than having ended the pod.
    pub waits: bool,
    /// The exit code, for an exit (and a `CrashLoopBackOff`, from the exit that caused it).
    pub exit_code: Option<i32>,
    /// What the kubelet says besides: the waiting message, or the last lines of the
    /// termination message (see [`MESSAGE_LINES`]).
    pub message: Option<String>,
}

impl OwnFailure {
    /// The failure `pod` shows, if it shows one of its own (see the module documentation).
    pub fn of(pod: &Pod) -> Option<Self> {
        if disruption::of(pod).is_some() {
            return None;
        }
        let status = pod.status.as_ref()?;
        let containers = status
            .init_container_statuses
            .iter()
            .flatten()
            .chain(status.container_statuses.iter().flatten());
        for container in containers.clone() {
            if let Some(failure) = Self::waiting(container) {
                return Some(failure);
            }
        }
        if pods::phase(pod) != "Failed" {
            return None;
        }
        containers.into_iter().find_map(|container| {
            let terminated = container.state.as_ref()?.terminated.as_ref()?;
            (terminated.exit_code != 0).then(|| Self {
                container: container.name.clone(),
                reason: terminated
                    .reason
                    .clone()
                    .unwrap_or_else(|| "Error".to_string()),
                waits: false,
                exit_code: Some(terminated.exit_code),
                message: terminated.message.as_deref().and_then(last_lines),
            })
        })
    }

    fn waiting(container: &ContainerStatus) -> Option<Self> {
        let waiting = container.state.as_ref()?.waiting.as_ref()?;
        let reason = waiting.reason.as_deref()?;
        if !STUCK_REASONS.contains(&reason) {
            return None;
        }
        let last_exit = container
            .last_state
            .as_ref()
            .and_then(|last| last.terminated.as_ref())
            .filter(|_| reason == "CrashLoopBackOff");
        Some(Self {
            container: container.name.clone(),
            reason: reason.to_string(),
            waits: true,
            exit_code: last_exit.map(|exit| exit.exit_code),
            message: match last_exit {
                Some(exit) => exit.message.as_deref().and_then(last_lines),
                None => waiting.message.clone().filter(|m| !m.is_empty()),
            },
        })
    }

    /// The failure in words, after the pod's name: `container worker exited with code 1
    /// (Error): ModuleNotFoundError: No module named 'trian'`, `container worker waits in
    /// ImagePullBackOff: Back-off pulling image "example.invalid/none:v1"`.
    pub fn describe(&self) -> String {
        let container = &self.container;
        let what = match (self.waits, self.exit_code) {
            (false, Some(code)) => format!(
                "container {container} exited with code {code} ({})",
                self.reason
            ),
            (false, None) => format!("container {container} failed ({})", self.reason),
            (true, Some(code)) => format!(
                "container {container} waits in {}: it exited with code {code}",
                self.reason
            ),
            (true, None) => format!("container {container} waits in {}", self.reason),
        };
        match &self.message {
            Some(message) => format!("{what}: {message}"),
            None => what,
        }
    }
}

/// The last [`MESSAGE_LINES`] non-empty lines of a termination message, joined with ` / `, at
/// most [`MESSAGE_LIMIT`] bytes (cut at the front); `None` when it has none.
fn last_lines(message: &str) -> Option<String> {
    let lines: Vec<&str> = message
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    let kept = lines[lines.len().saturating_sub(MESSAGE_LINES)..].join(" / ");
    if kept.is_empty() {
        return None;
    }
    if kept.len() <= MESSAGE_LIMIT {
        return Some(kept);
    }
    let mut start = kept.len() - MESSAGE_LIMIT;
    while !kept.is_char_boundary(start) {
        start += 1;
    }
    Some(format!("...{}", &kept[start..]))
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::{Value, json};

    use super::*;

    fn pod(status: Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "w"}, "status": status})).unwrap()
    }

    fn container(state: Value, last: Value) -> Value {
        json!({"name": "worker", "image": "i", "imageID": "", "ready": false, "restartCount": 1,
            "state": state, "lastState": last})
    }

    #[test]
    fn a_pods_own_failure_is_read_from_its_containers() {
        let waiting = |reason: &str, message: &str| {
            container(
                json!({"waiting": {"reason": reason, "message": message}}),
                json!({}),
            )
        };
        let cases: Vec<(&str, Value, Option<&str>)> = vec![
            (
                "an image that cannot be pulled",
                json!({"phase": "Pending", "containerStatuses": [waiting("ImagePullBackOff", "Back-off pulling image \"example.invalid/none:v1\"")]}),
                Some(
                    "container worker waits in ImagePullBackOff: Back-off pulling image \"example.invalid/none:v1\"",
                ),
            ),
            (
                "a missing Secret",
                json!({"phase": "Pending", "containerStatuses": [waiting("CreateContainerConfigError", "secret \"wandb\" not found")]}),
                Some(
                    "container worker waits in CreateContainerConfigError: secret \"wandb\" not found",
                ),
            ),
            (
                "an init container first",
                json!({"phase": "Pending",
                    "initContainerStatuses": [{"name": "fetch", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                        "state": {"waiting": {"reason": "InvalidImageName", "message": "bad"}}}],
                    "containerStatuses": [waiting("PodInitializing", "")]}),
                Some("container fetch waits in InvalidImageName: bad"),
            ),
            (
                "a crash loop in place, with the exit that caused it",
                json!({"phase": "Running", "containerStatuses": [container(
                    json!({"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s"}}),
                    json!({"terminated": {"exitCode": 2, "reason": "Error", "message": "a\nb\n\nc\nd\n"}}))]}),
                Some(
                    "container worker waits in CrashLoopBackOff: it exited with code 2: b / c / d",
                ),
            ),
            (
                "an error exit",
                json!({"phase": "Failed", "containerStatuses": [container(
                    json!({"terminated": {"exitCode": 1, "reason": "Error", "message": "Traceback\nModuleNotFoundError: No module named 'trian'"}}),
                    json!({}))]}),
                Some(
                    "container worker exited with code 1 (Error): Traceback / ModuleNotFoundError: No module named 'trian'",
                ),
            ),
            (
                "out of memory",
                json!({"phase": "Failed", "containerStatuses": [container(
                    json!({"terminated": {"exitCode": 137, "reason": "OOMKilled"}}), json!({}))]}),
                Some("container worker exited with code 137 (OOMKilled)"),
            ),
            (
                "waiting to start is no failure",
                json!({"phase": "Pending", "containerStatuses": [waiting("ContainerCreating", "")]}),
                None,
            ),
            ("running", json!({"phase": "Running"}), None),
            (
                "the platform's doing is not the pod's",
                json!({"phase": "Failed", "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC"}],
                    "containerStatuses": [container(json!({"terminated": {"exitCode": 137, "reason": "Error"}}), json!({}))]}),
                None,
            ),
            (
                "an eviction is not the pod's",
                json!({"phase": "Failed", "reason": "Evicted"}),
                None,
            ),
        ];
        for (name, status, expected) in cases {
            assert_eq!(
                OwnFailure::of(&pod(status))
                    .map(|f| f.describe())
                    .as_deref(),
                expected,
                "{name}"
            );
        }
    }

    #[test]
    fn a_long_termination_message_keeps_its_end() {
        let long = format!("start\n{}\nthe cause", "x".repeat(2 * MESSAGE_LIMIT));
        let kept = last_lines(&long).unwrap();
        assert!(kept.ends_with("the cause"), "{kept}");
        assert!(kept.starts_with("..."), "{kept}");
        assert_eq!(kept.len(), MESSAGE_LIMIT + 3);
        assert_eq!(last_lines("\n\n"), None);
        assert_eq!(
            last_lines("é".repeat(MESSAGE_LIMIT).as_str()).map(|k| k.is_char_boundary(3)),
            Some(true)
        );
    }
}
