//! What a pod's containers do when a simulated kubelet starts them: the mistakes of a first
//! training job, as a real kubelet reports them.
//!
//! - An image whose registry host ends in `.invalid` (RFC 2606: it never resolves) cannot be
//!   pulled: the container waits in `ErrImagePull`, then `ImagePullBackOff`, the pod `Pending`.
//! - An image reference that does not parse (an upper-case repository, a space) waits in
//!   `InvalidImageName`.
//! - An environment variable or `envFrom` source taken from a Secret or ConfigMap that does not
//!   exist (or lacks the key), unless marked optional, makes the container wait in
//!   `CreateContainerConfigError`; it starts once the object appears.
//! - A container whose command is `false` exits with code 1 as soon as it starts. The pod
//!   annotations [`EXIT_AFTER`], [`EXIT_CODE`] and [`TERMINATION_MESSAGE`] make any container
//!   exit that long after it started, with that code and termination message.
//!
//! An exit ends the pod as its restart policy says (see [`super::kubelet::terminate`]): `Never`
//! makes it `Failed`, `OnFailure` and `Always` hold the container in `CrashLoopBackOff`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::resources::ResourceId;
use crate::store::{ObjectKey, State};

/// Pod annotation: how long after it starts each container exits (`1s`, `500ms`, `2m`).
pub const EXIT_AFTER: &str = "sim.eto.dev/exit-after";
/// Pod annotation: the exit code of that exit (default 1).
pub const EXIT_CODE: &str = "sim.eto.dev/exit-code";
/// Pod annotation: the termination message of that exit, as a kubelet takes it from the
/// container's termination log or, with `FallbackToLogsOnError`, its last log lines.
pub const TERMINATION_MESSAGE: &str = "sim.eto.dev/termination-message";

/// How long a waiting container's pull is retried before its reason turns from
/// `ErrImagePull` to `ImagePullBackOff`, and how often a container waiting for its
/// configuration is tried again.
pub const RETRY: Duration = Duration::from_secs(1);

/// What starting a pod's containers gives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// Every container runs.
    Runs,
    /// A container cannot start: it waits with `reason`, the pod stays `Pending`.
    Waits {
        /// The container's name.
        container: String,
        /// The kubelet's waiting reason.
        reason: String,
        /// Its message.
        message: String,
    },
    /// The containers run, and exit `after` they started.
    Exits(Exit),
}

/// A container exit the pod carries in itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exit {
    /// After how long.
    pub after: Duration,
    /// With which code.
    pub exit_code: i32,
    /// With which termination message, if any.
    pub message: Option<String>,
}

/// What starting `pod`'s containers gives in `state`; `tried` says whether the kubelet tried
/// before (a pull that failed once is backed off).
pub fn start(state: &State, pod: &Value, tried: bool) -> Start {
    let namespace = pod["metadata"]["namespace"].as_str().unwrap_or_default();
    let containers = pod["spec"]["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(pod["spec"]["containers"].as_array().into_iter().flatten());
    for container in containers {
        let name = container["name"].as_str().unwrap_or_default().to_string();
        let image = container["image"].as_str().unwrap_or_default();
        if let Some((reason, message)) = image_problem(image, tried)
            .or_else(|| configuration_problem(state, namespace, container))
        {
            return Start::Waits {
                container: name,
                reason: reason.into(),
                message,
            };
        }
    }
    exit(pod).map_or(Start::Runs, Start::Exits)
}

/// The exit `pod` carries: its annotations', else that of a first container running `false`.
fn exit(pod: &Value) -> Option<Exit> {
    let annotation = |key: &str| pod["metadata"]["annotations"][key].as_str();
    let message = annotation(TERMINATION_MESSAGE).map(str::to_string);
    let exit_code = annotation(EXIT_CODE)
        .and_then(|code| code.parse().ok())
        .unwrap_or(1);
    if let Some(after) = annotation(EXIT_AFTER).and_then(parse_duration) {
        return Some(Exit {
            after,
            exit_code,
            message,
        });
    }
    let runs_false = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|container| {
            container["command"][0]
                .as_str()
                .is_some_and(|command| matches!(command, "false" | "/bin/false" | "/usr/bin/false"))
        });
    runs_false.then_some(Exit {
        after: Duration::ZERO,
        exit_code: 1,
        message,
    })
}

/// `500ms`, `1s`, `2m`.
fn parse_duration(text: &str) -> Option<Duration> {
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    match unit {
        "ms" => Some(Duration::from_millis(number)),
        "s" => Some(Duration::from_secs(number)),
        "m" => Some(Duration::from_secs(number * 60)),
        _ => None,
    }
}

/// Why `image` cannot be pulled, as a kubelet with containerd says it.
fn image_problem(image: &str, tried: bool) -> Option<(&'static str, String)> {
    let repository = image.split(['@', ':']).next().unwrap_or_default();
    if image.is_empty()
        || image.contains(char::is_whitespace)
        || repository.chars().any(|c| c.is_ascii_uppercase())
    {
        return Some((
            "InvalidImageName",
            format!(
                "Failed to apply default image tag \"{image}\": couldn't parse image name \"{image}\": invalid reference format"
            ),
        ));
    }
    let host = image.split('/').next().unwrap_or_default();
    let host = host.split(':').next().unwrap_or_default();
    if !image.contains('/') || !host.ends_with(".invalid") {
        return None;
    }
    Some(if tried {
        (
            "ImagePullBackOff",
            format!("Back-off pulling image \"{image}\""),
        )
    } else {
        (
            "ErrImagePull",
            format!(
                "failed to pull and unpack image \"{image}\": failed to resolve reference \"{image}\": dial tcp: lookup {host}: no such host"
            ),
        )
    })
}

/// What keeps `container` from being configured: a Secret or ConfigMap its environment takes
/// from that does not exist, or lacks the key.
fn configuration_problem(
    state: &State,
    namespace: &str,
    container: &Value,
) -> Option<(&'static str, String)> {
    let lookup = |plural: &str, name: &str| {
        state
            .get(
                &ResourceId::new("", plural),
                &ObjectKey::new(namespace, name),
            )
            .map(|object| (**object).clone())
    };
    let missing = |plural: &str, kind: &str, reference: &Value, key: Option<&str>| {
        if reference["optional"].as_bool() == Some(true) {
            return None;
        }
        let name = reference["name"].as_str().unwrap_or_default();
        let Some(object) = lookup(plural, name) else {
            return Some(format!("{} \"{name}\" not found", kind.to_lowercase()));
        };
        let key = key?;
        let has = ["data", "stringData", "binaryData"]
            .iter()
            .any(|field| object[field].get(key).is_some());
        (!has).then(|| format!("couldn't find key {key} in {kind} {namespace}/{name}"))
    };
    let from_env = container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|variable| {
            let from = &variable["valueFrom"];
            [
                ("secrets", "Secret", "secretKeyRef"),
                ("configmaps", "ConfigMap", "configMapKeyRef"),
            ]
            .into_iter()
            .find_map(|(plural, kind, field)| {
                let reference = from.get(field)?;
                missing(plural, kind, reference, reference["key"].as_str())
            })
        });
    let from_sources = || {
        container["envFrom"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|source| {
                [
                    ("secrets", "Secret", "secretRef"),
                    ("configmaps", "ConfigMap", "configMapRef"),
                ]
                .into_iter()
                .find_map(|(plural, kind, field)| missing(plural, kind, source.get(field)?, None))
            })
    };
    from_env
        .or_else(from_sources)
        .map(|message| ("CreateContainerConfigError", message))
}

/// `pod` as the kubelet shows it while container `container` waits with `reason`: `Pending`,
/// not ready, every container waiting (the named one with the reason).
pub fn waiting_status(pod: &Value, container: &str, reason: &str, message: &str) -> Value {
    let statuses: Vec<Value> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|spec| {
            let name = spec["name"].as_str().unwrap_or_default();
            let state = if name == container {
                json!({"waiting": {"reason": reason, "message": message}})
            } else {
                json!({"waiting": {"reason": "PodInitializing"}})
            };
            json!({"name": name, "image": spec["image"], "imageID": "", "ready": false,
                "started": false, "restartCount": 0, "state": state})
        })
        .collect();
    let mut waiting = pod.clone();
    waiting["status"]["phase"] = json!("Pending");
    waiting["status"]["containerStatuses"] = Value::Array(statuses);
    waiting
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_that_cannot_be_pulled_are_told_apart() {
        let cases = [
            ("busybox", false, None),
            ("registry.example.com/team/train:v1", false, None),
            ("localhost:5000/train:v1", false, None),
            ("example.invalid/none:v1", false, Some("ErrImagePull")),
            ("example.invalid/none:v1", true, Some("ImagePullBackOff")),
            (
                "example.invalid:5000/none:v1",
                true,
                Some("ImagePullBackOff"),
            ),
            ("Team/Train:v1", false, Some("InvalidImageName")),
            ("", false, Some("InvalidImageName")),
        ];
        for (image, tried, expected) in cases {
            assert_eq!(
                image_problem(image, tried).map(|(reason, _)| reason),
                expected,
                "{image}"
            );
        }
    }

    #[test]
    fn durations_read_as_annotations_write_them() {
        assert_eq!(parse_duration("1s"), Some(Duration::from_secs(1)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("soon"), None);
        assert_eq!(parse_duration("5h"), None);
    }

    #[test]
    fn a_pod_carries_its_exit() {
        let pod = json!({"metadata": {"annotations": {EXIT_AFTER: "1s", EXIT_CODE: "3", TERMINATION_MESSAGE: "boom"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        assert_eq!(
            exit(&pod),
            Some(Exit {
                after: Duration::from_secs(1),
                exit_code: 3,
                message: Some("boom".into())
            })
        );
        let false_ =
            json!({"spec": {"containers": [{"name": "c", "image": "i", "command": ["false"]}]}});
        assert_eq!(
            exit(&false_),
            Some(Exit {
                after: Duration::ZERO,
                exit_code: 1,
                message: None
            })
        );
        let runs = json!({"spec": {"containers": [{"name": "c", "image": "i", "command": ["sleep", "1d"]}]}});
        assert_eq!(exit(&runs), None);
    }
}
