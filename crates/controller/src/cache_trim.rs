//! What eto's watch caches keep of an object: what the engine and the controller read, not
//! the bookkeeping the API server adds.
//!
//! Every object is trimmed as it arrives from a watch, before it is cached, so a cache holds
//! one trimmed copy per object and the untrimmed one is dropped at once. With thousands of
//! pods this is most of eto's memory: an object's `managedFields` (one entry per writer:
//! eto, kubelet's status updates, the scheduler's binding) is often larger than the rest of
//! it, and a pod's spec, with its containers and volumes, is most of the rest.
//!
//! # Guarantees
//! - Dropped: `metadata.managedFields`; the annotation
//!   `kubectl.kubernetes.io/last-applied-configuration` (a whole copy of the object that
//!   `kubectl apply` keeps on jobs and requests); a Secret's `data` and `stringData` (eto only
//!   needs to know that the job's SSH Secret exists, so private keys are not held in memory);
//!   a pod's spec but for `nodeName` and the container port named `eto-progress` of the
//!   containers that declare one (where a training pod serves its progress, see
//!   `eto_engine::group_report::progress_source`), the only fields of it eto reads (a pod's spec
//!   never changes, and eto changes a pod's labels and annotations with a merge patch of its
//!   metadata, see `eto_engine::pod_metadata`); of a pod's status, all but its phase, reason,
//!   message, the type and status of the conditions the engine reads (`Ready` and
//!   `DisruptionTarget`, see `eto_engine::pods::CONDITIONS_READ`) and, of each container and
//!   init container, its name, readiness, restart count, since when it runs, why it waits (with
//!   the kubelet's message when it waits for good, see `eto_engine::own_failure`), how it
//!   terminated (exit code and reason, and the end of its termination message after an error)
//!   and how it last terminated before that; a
//!   HorizontalPodAutoscaler's status (kube-controller-manager's, which eto does not read).
//! - Everything else is kept: metadata, the other kinds' specs.
//!
//! # Caveats
//! A cached object is therefore not a faithful copy of the stored one: nothing may write a
//! cached object back (eto never does: it applies objects it builds, and patches status).

use eto_engine::group_report::PROGRESS_PORT_NAME;
use eto_engine::own_failure::STUCK_REASONS;
use eto_engine::pods::CONDITIONS_READ;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::Job as BatchJob;
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, ContainerPort, ContainerState, ContainerStateRunning,
    ContainerStateTerminated, ContainerStateWaiting, ContainerStatus, Pod, PodCondition, PodSpec,
    PodStatus, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;

/// The annotation in which `kubectl apply` keeps the object it last applied.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Removes from an object what eto's caches do not keep (see the module documentation).
pub trait Trim {
    /// Removes what is not cached, in place.
    fn trim(&mut self);
}

/// Drops the metadata eto does not read: managed fields and the last applied copy.
fn trim_metadata(metadata: &mut ObjectMeta) {
    metadata.managed_fields = None;
    if let Some(annotations) = metadata.annotations.as_mut() {
        annotations.remove(LAST_APPLIED_ANNOTATION);
        if annotations.is_empty() {
            metadata.annotations = None;
        }
    }
}

macro_rules! trim_metadata_only {
    ($($kind:ty),*) => {
        $(impl Trim for $kind {
            fn trim(&mut self) {
                trim_metadata(&mut self.metadata);
            }
        })*
    };
}

trim_metadata_only!(
    Service,
    ConfigMap,
    ServiceAccount,
    Role,
    RoleBinding,
    BatchJob,
    DynamicObject
);

impl Trim for HorizontalPodAutoscaler {
    fn trim(&mut self) {
        trim_metadata(&mut self.metadata);
        self.status = None;
    }
}

impl Trim for Pod {
    fn trim(&mut self) {
        trim_metadata(&mut self.metadata);
        if let Some(spec) = self.spec.as_mut() {
            *spec = PodSpec {
                node_name: spec.node_name.take(),
                containers: std::mem::take(&mut spec.containers)
                    .into_iter()
                    .filter_map(kept_progress_port)
                    .collect(),
                ..PodSpec::default()
            };
        }
        self.status = self.status.take().map(|status| PodStatus {
            phase: status.phase,
            reason: status.reason,
            message: status.message,
            conditions: status.conditions.map(kept_conditions),
            container_statuses: status
                .container_statuses
                .map(|statuses| statuses.into_iter().map(kept_of_container).collect()),
            init_container_statuses: status
                .init_container_statuses
                .map(|statuses| statuses.into_iter().map(kept_of_container).collect()),
            ..PodStatus::default()
        });
    }
}

/// What is kept of a container: its name and the port it serves its progress on, if it
/// declares one.
fn kept_progress_port(container: Container) -> Option<Container> {
    let port = container
        .ports?
        .into_iter()
        .find(|port| port.name.as_deref() == Some(PROGRESS_PORT_NAME))?;
    Some(Container {
        name: container.name,
        ports: Some(vec![ContainerPort {
            name: port.name,
            container_port: port.container_port,
            ..ContainerPort::default()
        }]),
        ..Container::default()
    })
}

/// What is kept of a pod's conditions: the type and status of those the engine reads.
fn kept_conditions(conditions: Vec<PodCondition>) -> Vec<PodCondition> {
    let mut kept: Vec<PodCondition> = conditions
        .into_iter()
        .filter(|condition| CONDITIONS_READ.contains(&condition.type_.as_str()))
        .map(|condition| PodCondition {
            type_: condition.type_,
            status: condition.status,
            ..PodCondition::default()
        })
        .collect();
    // Collected in place, the vector still has room for every condition the pod had.
    kept.shrink_to_fit();
    kept
}

/// What is kept of a container's status: its identity, whether it runs, waits (and why) or
/// terminated (and how), and how it last terminated before that.
fn kept_of_container(status: ContainerStatus) -> ContainerStatus {
    ContainerStatus {
        name: status.name,
        ready: status.ready,
        restart_count: status.restart_count,
        state: status.state.map(kept_state),
        last_state: status
            .last_state
            .map(kept_state)
            .filter(|last| last.terminated.is_some()),
        ..ContainerStatus::default()
    }
}

/// What is kept of a container's state: since when it runs, why it waits, how it terminated
/// (the messages of a failure only, capped: see [`MESSAGE_KEPT`]).
fn kept_state(state: ContainerState) -> ContainerState {
    let stuck = |reason: &Option<String>| {
        reason
            .as_deref()
            .is_some_and(|reason| STUCK_REASONS.contains(&reason))
    };
    ContainerState {
        running: state.running.map(|running| ContainerStateRunning {
            started_at: running.started_at,
        }),
        waiting: state.waiting.map(|waiting| ContainerStateWaiting {
            message: waiting
                .message
                .filter(|_| stuck(&waiting.reason))
                .map(capped),
            reason: waiting.reason,
        }),
        terminated: state.terminated.map(|terminated| ContainerStateTerminated {
            exit_code: terminated.exit_code,
            reason: terminated.reason,
            message: terminated
                .message
                .filter(|_| terminated.exit_code != 0)
                .map(capped),
            ..ContainerStateTerminated::default()
        }),
    }
}

/// The longest part of a container's waiting or termination message a cache keeps: its end,
/// which says why (the kubelet keeps up to 4 KiB of a termination message).
pub const MESSAGE_KEPT: usize = 1024;

/// The last [`MESSAGE_KEPT`] bytes of `message`.
fn capped(message: String) -> String {
    if message.len() <= MESSAGE_KEPT {
        return message;
    }
    let mut start = message.len() - MESSAGE_KEPT;
    while !message.is_char_boundary(start) {
        start += 1;
    }
    message[start..].to_string()
}

impl Trim for Secret {
    fn trim(&mut self) {
        trim_metadata(&mut self.metadata);
        self.data = None;
        self.string_data = None;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::{Container, Volume};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    use super::*;

    fn metadata(annotations: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            name: Some("job-worker-0".into()),
            labels: Some(BTreeMap::from([("app".into(), "eto".into())])),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )
            .filter(|a: &BTreeMap<_, _>| !a.is_empty()),
            managed_fields: Some(vec![ManagedFieldsEntry {
                manager: Some("kubelet".into()),
                ..ManagedFieldsEntry::default()
            }]),
            resource_version: Some("7".into()),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_pod_keeps_its_metadata_its_node_and_the_status_the_engine_reads() {
        let mut pod = Pod {
            metadata: metadata(&[
                ("eto.dev/notice", "checkpoint"),
                (LAST_APPLIED_ANNOTATION, "{}"),
            ]),
            spec: Some(PodSpec {
                node_name: Some("gpu-1".into()),
                containers: vec![Container {
                    name: "worker".into(),
                    image: Some("horovod".into()),
                    ..Container::default()
                }],
                volumes: Some(vec![Volume {
                    name: "ssh".into(),
                    ..Volume::default()
                }]),
                ..PodSpec::default()
            }),
            status: serde_json::from_value(serde_json::json!({
                "phase": "Failed", "podIP": "10.0.0.7", "qosClass": "BestEffort",
                "conditions": [
                    {"type": "PodScheduled", "status": "True",
                        "lastTransitionTime": "2026-11-22T12:00:00Z"},
                    {"type": "Ready", "status": "False", "reason": "PodFailed",
                        "lastTransitionTime": "2026-11-22T12:05:00Z"},
                    {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet",
                        "message": "the node is shutting down",
                        "lastTransitionTime": "2026-11-22T12:04:00Z"},
                    {"type": "ContainersReady", "status": "False"},
                ],
                "containerStatuses": [{"name": "worker", "ready": false, "restartCount": 0,
                    "image": "horovod", "imageID": "sha256:0", "containerID": "sim://1",
                    "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                        "message": "a long termination log"}}}],
            }))
            .expect("a pod status"),
        };
        pod.trim();
        let mut expected = metadata(&[("eto.dev/notice", "checkpoint")]);
        expected.managed_fields = None;
        assert_eq!(pod.metadata, expected);
        assert_eq!(
            pod.spec,
            Some(PodSpec {
                node_name: Some("gpu-1".into()),
                ..PodSpec::default()
            })
        );
        assert_eq!(
            serde_json::to_value(pod.status).expect("a status serializes"),
            serde_json::json!({
                "phase": "Failed",
                "conditions": [
                    {"type": "Ready", "status": "False"},
                    {"type": "DisruptionTarget", "status": "True"},
                ],
                "containerStatuses": [{"name": "worker", "ready": false, "restartCount": 0,
                    "image": "", "imageID": "",
                    "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                        "message": "a long termination log"}}}],
            })
        );
    }

    #[test]
    fn a_container_that_serves_its_progress_keeps_that_port_and_nothing_else() {
        let container = |name: &str, ports: serde_json::Value| -> Container {
            serde_json::from_value(serde_json::json!({"name": name, "image": "i", "ports": ports}))
                .unwrap()
        };
        let mut pod = Pod {
            spec: Some(PodSpec {
                containers: vec![
                    container(
                        "sidecar",
                        serde_json::json!([{"name": "http", "containerPort": 80}]),
                    ),
                    container(
                        "worker",
                        serde_json::json!([{"name": "ssh", "containerPort": 22},
                            {"name": "eto-progress", "containerPort": 29411, "protocol": "TCP"}]),
                    ),
                ],
                ..PodSpec::default()
            }),
            ..Pod::default()
        };
        pod.trim();
        assert_eq!(
            pod.spec.unwrap().containers,
            [container(
                "worker",
                serde_json::json!([{"name": "eto-progress", "containerPort": 29411}])
            )]
            .map(|mut kept| {
                kept.image = None;
                kept
            })
        );
    }

    #[test]
    fn a_container_keeps_whether_it_runs_why_it_waits_and_how_it_last_ended() {
        let status = |state: serde_json::Value, last: serde_json::Value| -> ContainerStatus {
            serde_json::from_value(serde_json::json!({"name": "pytorch", "ready": false,
                "restartCount": 3, "image": "torch", "imageID": "sha256:0",
                "containerID": "containerd://1", "state": state, "lastState": last}))
            .expect("a container status")
        };
        let kept = |status: ContainerStatus| {
            serde_json::to_value(kept_of_container(status)).expect("a status serializes")
        };
        let ended = serde_json::json!({"terminated": {"exitCode": 1, "reason": "Error",
            "message": "RendezvousClosedError", "startedAt": "2026-11-22T12:00:00Z",
            "finishedAt": "2026-11-22T12:00:04Z", "containerID": "containerd://1"}});
        assert_eq!(
            kept(status(
                serde_json::json!({"waiting": {"reason": "CrashLoopBackOff",
                    "message": "back-off 40s restarting failed container"}}),
                ended.clone()
            )),
            serde_json::json!({"name": "pytorch", "ready": false, "restartCount": 3,
                "image": "", "imageID": "",
                "state": {"waiting": {"reason": "CrashLoopBackOff",
                    "message": "back-off 40s restarting failed container"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                    "message": "RendezvousClosedError"}}})
        );
        // A wait that clears by itself keeps no message, nor does a success; a long message
        // keeps its end.
        assert_eq!(
            kept(status(
                serde_json::json!({"waiting": {"reason": "ContainerCreating", "message": "pulling"}}),
                serde_json::json!({"terminated": {"exitCode": 0, "reason": "Completed", "message": "done"}})
            )),
            serde_json::json!({"name": "pytorch", "ready": false, "restartCount": 3,
                "image": "", "imageID": "",
                "state": {"waiting": {"reason": "ContainerCreating"}},
                "lastState": {"terminated": {"exitCode": 0, "reason": "Completed"}}})
        );
        let long = format!("{}the cause", "x".repeat(2 * MESSAGE_KEPT));
        let ended_long = kept(status(
            serde_json::json!({"terminated": {"exitCode": 2, "reason": "Error", "message": long}}),
            serde_json::json!({}),
        ));
        let message = ended_long["state"]["terminated"]["message"]
            .as_str()
            .unwrap_or_default();
        assert_eq!(
            (message.len(), message.ends_with("the cause")),
            (MESSAGE_KEPT, true)
        );
        assert_eq!(
            kept(status(
                serde_json::json!({"running": {"startedAt": "2026-11-22T12:00:14Z"}}),
                serde_json::json!({})
            )),
            serde_json::json!({"name": "pytorch", "ready": false, "restartCount": 3,
                "image": "", "imageID": "", "state": {"running": {"startedAt": "2026-11-22T12:00:14Z"}}})
        );
    }

    #[test]
    fn annotations_that_held_only_the_last_applied_copy_are_dropped_whole() {
        let mut job = DynamicObject {
            types: None,
            metadata: metadata(&[(LAST_APPLIED_ANNOTATION, "{\"spec\":{}}")]),
            data: serde_json::json!({"spec": {"minReplicas": 2}}),
        };
        job.trim();
        assert_eq!(job.metadata.annotations, None);
        assert_eq!(job.metadata.managed_fields, None);
        assert_eq!(job.data, serde_json::json!({"spec": {"minReplicas": 2}}));
    }

    #[test]
    fn a_secret_keeps_its_name_and_type_but_not_its_keys() {
        let mut secret = Secret {
            metadata: metadata(&[]),
            type_: Some("kubernetes.io/ssh-auth".into()),
            data: Some(BTreeMap::from([(
                "ssh-privatekey".into(),
                ByteString(b"-----BEGIN".to_vec()),
            )])),
            string_data: Some(BTreeMap::from([("extra".into(), "x".into())])),
            ..Secret::default()
        };
        secret.trim();
        assert_eq!(secret.metadata.name.as_deref(), Some("job-worker-0"));
        assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/ssh-auth"));
        assert_eq!((secret.data, secret.string_data), (None, None));
    }

    #[test]
    fn an_autoscaler_keeps_its_spec_but_not_the_status_its_controller_writes() {
        let mut hpa: HorizontalPodAutoscaler = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "ddp", "managedFields": [{"manager": "eto"}]},
            "spec": {"scaleTargetRef": {"kind": "PyTorchJob", "name": "ddp"}, "maxReplicas": 4},
            "status": {"currentReplicas": 3, "desiredReplicas": 4}
        }))
        .unwrap();
        let spec = hpa.spec.clone();
        hpa.trim();
        assert_eq!((hpa.spec, hpa.status), (spec, None));
        assert_eq!(hpa.metadata.managed_fields, None);
    }
}
