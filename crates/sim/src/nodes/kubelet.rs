//! A kubelet for every node, and the pod garbage collector.
//!
//! A pod bound to an existing node becomes `Running` and `Ready` (with a pod IP and running
//! container statuses) [`KubeletConfig::start_delay`] after the kubelet first sees it bound. A
//! pod being deleted is removed [`KubeletConfig::termination_delay`] (at most its grace period)
//! after the kubelet first sees its `deletionTimestamp`; a finished one at once. A pod bound to
//! a node that no longer exists is removed after [`KubeletConfig::orphan_gc_delay`], as the pod
//! garbage collector does. Containers run until tests end them with [`terminate`], unless
//! the pod carries its own failure (see [`containers`]): an image that cannot be pulled, a
//! missing Secret, a command that exits. The kubelet of a node that stopped reporting does
//! nothing; the taint manager deletes its pods (see [`unreachable`]).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::conditions::{disruption_target, set_condition};
use super::containers::{self, Exit, Start};
use super::{Changed, nodes, pods, terminal, unreachable};
use crate::errors::ApiError;
use crate::options::{Subresource, WriteOptions, timestamp_now};
use crate::resources::{ResourceId, ResourceType};
use crate::store::{ObjectKey, State};

const MANAGER: &str = "kubelet";

/// Timings of the simulated kubelets.
#[derive(Clone, Copy, Debug)]
pub struct KubeletConfig {
    /// From binding to Running and Ready.
    pub start_delay: Duration,
    /// From the deletion request to removal (capped by the pod's grace period).
    pub termination_delay: Duration,
    /// From the node's disappearance to the removal of its pods.
    pub orphan_gc_delay: Duration,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        Self {
            start_delay: Duration::ZERO,
            termination_delay: Duration::ZERO,
            orphan_gc_delay: Duration::ZERO,
        }
    }
}

/// When a kubelet first saw a pod (of the uid recorded) in a state that ends after a delay.
type Seen = HashMap<ObjectKey, (String, Instant)>;

/// What the kubelets remember between passes: the pods waiting for a timed transition.
#[derive(Debug, Default)]
pub struct Kubelets {
    bound_seen: Seen,
    deletion_seen: Seen,
    orphan_seen: Seen,
    /// Pods whose containers wait (see [`containers`]), with when they are tried again.
    retry_at: Seen,
    /// Running pods whose containers exit by themselves, with when, and how.
    exit_at: HashMap<ObjectKey, (String, Instant, Exit)>,
    /// Pods on a node that stopped reporting, with when the taint manager deletes them.
    evict_at: Seen,
    next_ip: u32,
}

/// When a pod of `uid` was first seen in a state, by what `earlier` recorded of that state:
/// `now` if nothing, or only a former pod of the same name.
fn first_seen(earlier: Option<(String, Instant)>, uid: &str, now: Instant) -> Instant {
    earlier
        .filter(|(seen_uid, _)| seen_uid == uid)
        .map_or(now, |(_, at)| at)
}

impl Kubelets {
    /// One pass over the pods that `changed` names and those waiting for a timed transition
    /// (over every pod for [`Changed::Everything`]). Returns whether it wrote anything, and when
    /// the next timed transition is due.
    pub fn sync(
        &mut self,
        state: &mut State,
        config: &KubeletConfig,
        changed: &Changed,
    ) -> (bool, Option<Instant>) {
        let Ok(resource) = state.resource(&pods()) else {
            return (false, None);
        };
        let now = Instant::now();
        let candidates: BTreeSet<ObjectKey> = match changed {
            Changed::Everything => state
                .list(&pods(), None)
                .map(|(key, _)| key.clone())
                .collect(),
            Changed::Pods(keys) => keys.clone(),
        }
        .into_iter()
        .chain(self.waiting().cloned())
        .collect();
        let mut wrote = false;
        let mut next: Option<Instant> = None;
        let mut due = |at: Instant| -> bool {
            if at <= now {
                true
            } else {
                next = Some(next.map_or(at, |n| n.min(at)));
                false
            }
        };
        let options = WriteOptions::internal(MANAGER);
        for key in candidates {
            // What the pod waited for before; what it still waits for is recorded again below.
            let bound_seen = self.bound_seen.remove(&key);
            let deletion_seen = self.deletion_seen.remove(&key);
            let orphan_seen = self.orphan_seen.remove(&key);
            let retry_at = self.retry_at.remove(&key);
            let exit_at = self.exit_at.remove(&key);
            self.evict_at.remove(&key);
            let Some(pod) = state.get(&pods(), &key).map(Arc::clone) else {
                continue;
            };
            let node_name = pod["spec"]["nodeName"].as_str().unwrap_or_default();
            if node_name.is_empty() {
                continue;
            }
            let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
            let node = state
                .get(&nodes(), &ObjectKey::new("", node_name))
                .map(Arc::clone);
            let Some(node) = node else {
                let seen = first_seen(orphan_seen, uid, now);
                if due(seen + config.orphan_gc_delay) {
                    wrote |= state.remove_object(&resource, &key).is_some();
                } else {
                    self.orphan_seen.insert(key, (uid.to_string(), seen));
                }
                continue;
            };
            let deleting = pod["metadata"].get("deletionTimestamp").is_some();
            if let Some(since) = unreachable::stopped_since(&node, now) {
                if let Some(after) = unreachable::toleration(&pod)
                    && !deleting
                    && !terminal(&pod)
                {
                    if due(since + after) {
                        wrote |= unreachable::delete(state, &resource, &key);
                    } else {
                        self.evict_at.insert(key, (uid.to_string(), since + after));
                    }
                }
                continue;
            }
            if deleting {
                let seen = first_seen(deletion_seen, uid, now);
                let grace = Duration::from_secs(
                    pod["metadata"]["deletionGracePeriodSeconds"]
                        .as_u64()
                        .unwrap_or(0),
                );
                if terminal(&pod) || due(seen + config.termination_delay.min(grace)) {
                    wrote |= state.remove_object(&resource, &key).is_some();
                } else {
                    self.deletion_seen.insert(key, (uid.to_string(), seen));
                }
                continue;
            }
            if let Some((exit_uid, at, exit)) = exit_at.filter(|(exit_uid, ..)| exit_uid == uid) {
                if pod["status"]["phase"].as_str() != Some("Running") {
                    continue;
                }
                if !due(at) {
                    self.exit_at.insert(key, (exit_uid, at, exit));
                    continue;
                }
                let termination = Termination {
                    exit_code: exit.exit_code,
                    reason: if exit.exit_code == 0 {
                        "Completed"
                    } else {
                        "Error"
                    }
                    .into(),
                    pod_reason: None,
                    message: None,
                    final_: false,
                    disruption: None,
                    crash_loop: true,
                    container_message: exit.message,
                };
                wrote |= terminate(state, &key.namespace, &key.name, &termination).is_ok();
                continue;
            }
            if pod["status"]["phase"].as_str() == Some("Pending") {
                let seen = first_seen(bound_seen, uid, now);
                if !due(seen + config.start_delay) {
                    self.bound_seen.insert(key, (uid.to_string(), seen));
                    continue;
                }
                let tried = retry_at
                    .as_ref()
                    .is_some_and(|(seen_uid, _)| seen_uid == uid);
                if let Some((_, at)) =
                    retry_at.filter(|(seen_uid, at)| seen_uid == uid && !due(*at))
                {
                    self.bound_seen.insert(key.clone(), (uid.to_string(), seen));
                    self.retry_at.insert(key, (uid.to_string(), at));
                    continue;
                }
                let exit = match containers::start(state, &pod, tried) {
                    Start::Runs => None,
                    Start::Exits(exit) => Some(exit),
                    Start::Waits {
                        container,
                        reason,
                        message,
                    } => {
                        let waiting =
                            containers::waiting_status(&pod, &container, &reason, &message);
                        if waiting["status"] != pod["status"] {
                            wrote |= state
                                .replace(
                                    &resource,
                                    &key.namespace,
                                    &key.name,
                                    waiting,
                                    Some(Subresource::Status),
                                    &options,
                                )
                                .is_ok();
                        }
                        let again = now + containers::RETRY;
                        due(again);
                        self.bound_seen.insert(key.clone(), (uid.to_string(), seen));
                        self.retry_at.insert(key, (uid.to_string(), again));
                        continue;
                    }
                };
                self.next_ip += 1;
                // Loopback (127.1.0.1 on): nothing in a test may dial a pod and leave the
                // machine; the pod proxy leads where a test says (see
                // crate::apiserver::pod_proxy).
                let ip = format!(
                    "127.{}.{}.{}",
                    1 + (self.next_ip / 65_025) % 254,
                    (self.next_ip / 255) % 255,
                    self.next_ip % 255 + 1
                );
                let running = running_status(&pod, &node, &ip);
                wrote |= state
                    .replace(
                        &resource,
                        &key.namespace,
                        &key.name,
                        running,
                        Some(Subresource::Status),
                        &options,
                    )
                    .is_ok();
                if let Some(exit) = exit {
                    // At least a moment later: the next pass ends it.
                    let at = now + exit.after.max(Duration::from_millis(1));
                    due(at);
                    self.exit_at.insert(key, (uid.to_string(), at, exit));
                }
            }
        }
        (wrote, next)
    }

    /// The pods waiting for a timed transition.
    fn waiting(&self) -> impl Iterator<Item = &ObjectKey> {
        self.bound_seen
            .keys()
            .chain(self.deletion_seen.keys())
            .chain(self.orphan_seen.keys())
            .chain(self.retry_at.keys())
            .chain(self.exit_at.keys())
            .chain(self.evict_at.keys())
    }
}

fn running_status(pod: &Value, node: &Value, ip: &str) -> Value {
    let now = timestamp_now();
    let host_ip = node["status"]["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["type"] == "InternalIP")
        .and_then(|a| a["address"].as_str())
        .unwrap_or("192.168.0.1")
        .to_string();
    let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
    let statuses: Vec<Value> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|container| {
            let name = container["name"].as_str().unwrap_or_default();
            json!({
                "name": name,
                "image": container["image"],
                "imageID": format!("sim://{}", container["image"].as_str().unwrap_or_default()),
                "containerID": format!("sim://{uid}/{name}"),
                "ready": true,
                "started": true,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            })
        })
        .collect();
    let mut running = pod.clone();
    running["status"]["phase"] = json!("Running");
    running["status"]["hostIP"] = json!(host_ip);
    running["status"]["hostIPs"] = json!([{"ip": host_ip}]);
    running["status"]["podIP"] = json!(ip);
    running["status"]["podIPs"] = json!([{"ip": ip}]);
    running["status"]["startTime"] = json!(now);
    running["status"]["containerStatuses"] = Value::Array(statuses);
    for type_ in [
        "PodReadyToStartContainers",
        "Initialized",
        "ContainersReady",
        "Ready",
        "PodScheduled",
    ] {
        set_condition(
            &mut running,
            json!({"type": type_, "status": "True", "lastTransitionTime": now}),
        );
    }
    running
}

/// How a pod's containers end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Termination {
    /// Exit code of the containers.
    pub exit_code: i32,
    /// Container termination reason, for example `Error`, `OOMKilled` or `Completed`.
    pub reason: String,
    /// Pod-level `status.reason`, for example `Evicted` or `Terminated`.
    pub pod_reason: Option<String>,
    /// Pod-level `status.message`.
    pub message: Option<String>,
    /// End the pod whatever its restart policy says (evictions, node loss).
    pub final_: bool,
    /// The reason of the `DisruptionTarget=True` condition the kubelet sets on a pod it ends
    /// for its node's sake (`TerminationByKubelet`: node-pressure eviction, node shutdown).
    pub disruption: Option<String>,
    /// The containers keep failing: a container the restart policy restarts is held back
    /// (`CrashLoopBackOff`: waiting, not ready) instead of running again. A real kubelet starts
    /// it again after each back-off, and it fails again; here it waits until the pod is ended
    /// or deleted.
    pub crash_loop: bool,
    /// The containers' termination message (their termination log, or the last lines of
    /// their output).
    pub container_message: Option<String>,
}

/// Ends the containers of a running pod. With `restartPolicy: Never` (or a final
/// termination) the pod becomes `Failed` (non-zero exit) or `Succeeded`; `OnFailure` restarts
/// failed containers and `Always` every container, bumping `restartCount` and keeping the pod
/// Running (a crash loop leaves them waiting, and the pod not Ready).
///
/// # Errors
/// NotFound for a missing pod; BadRequest for one that is not bound to a node.
pub fn terminate(
    state: &mut State,
    namespace: &str,
    name: &str,
    termination: &Termination,
) -> Result<(), ApiError> {
    let resource = state.resource(&pods())?;
    let pod = state.fetch(&resource, namespace, name)?;
    if pod["spec"]["nodeName"]
        .as_str()
        .unwrap_or_default()
        .is_empty()
    {
        return Err(ApiError::BadRequest(format!(
            "pod {namespace}/{name} is not running on a node"
        )));
    }
    let now = timestamp_now();
    let restart = !termination.final_
        && match pod["spec"]["restartPolicy"].as_str() {
            Some("Always") => true,
            Some("OnFailure") => termination.exit_code != 0,
            _ => false,
        };
    let mut terminated = json!({
        "exitCode": termination.exit_code,
        "reason": termination.reason,
        "startedAt": pod["status"]["startTime"],
        "finishedAt": now,
    });
    if let Some(message) = &termination.container_message {
        terminated["message"] = json!(message);
    }
    let mut ended = (*pod).clone();
    for status in ended["status"]["containerStatuses"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        if restart && termination.crash_loop {
            let container = status["name"].as_str().unwrap_or_default().to_string();
            status["lastState"] = json!({"terminated": terminated});
            status["restartCount"] = json!(status["restartCount"].as_i64().unwrap_or(0) + 1);
            status["state"] = json!({"waiting": {"reason": "CrashLoopBackOff",
                "message": format!("back-off 10s restarting failed container={container} pod={name}_{namespace}")}});
            status["ready"] = json!(false);
            status["started"] = json!(false);
        } else if restart {
            status["lastState"] = json!({"terminated": terminated});
            status["restartCount"] = json!(status["restartCount"].as_i64().unwrap_or(0) + 1);
            status["state"] = json!({"running": {"startedAt": now}});
        } else {
            status["state"] = json!({"terminated": terminated});
            status["ready"] = json!(false);
            status["started"] = json!(false);
        }
    }
    if restart && termination.crash_loop {
        for type_ in ["Ready", "ContainersReady"] {
            set_condition(
                &mut ended,
                json!({"type": type_, "status": "False", "reason": "ContainersNotReady", "lastTransitionTime": now}),
            );
        }
    }
    if !restart {
        let (phase, condition_reason) = if termination.exit_code == 0 {
            ("Succeeded", "PodCompleted")
        } else {
            ("Failed", "PodFailed")
        };
        ended["status"]["phase"] = json!(phase);
        for type_ in ["Ready", "ContainersReady"] {
            set_condition(
                &mut ended,
                json!({"type": type_, "status": "False", "reason": condition_reason, "lastTransitionTime": now}),
            );
        }
        if let Some(reason) = &termination.pod_reason {
            ended["status"]["reason"] = json!(reason);
        }
        if let Some(message) = &termination.message {
            ended["status"]["message"] = json!(message);
        }
        if let Some(reason) = &termination.disruption {
            let message = termination.message.clone().unwrap_or_default();
            ended = crate::nodes::conditions::disruption_target(&ended, reason, &message);
        }
    }
    state.replace(
        &resource,
        namespace,
        name,
        ended,
        Some(Subresource::Status),
        &WriteOptions::internal(MANAGER),
    )?;
    Ok(())
}

/// Marks every pod on `node` with `DisruptionTarget=True` (they are about to be terminated).
pub fn mark_disruption(state: &mut State, node: &str, reason: &str, message: &str) {
    let Ok(resource) = state.resource(&pods()) else {
        return;
    };
    let targets: Vec<(ObjectKey, Arc<Value>)> = pods_on(state, node);
    for (key, pod) in targets {
        let marked = disruption_target(&pod, reason, message);
        let _ = state.replace(
            &resource,
            &key.namespace,
            &key.name,
            marked,
            Some(Subresource::Status),
            &WriteOptions::internal(MANAGER),
        );
    }
}

/// The unfinished pods bound to `node`.
pub fn pods_on(state: &State, node: &str) -> Vec<(ObjectKey, Arc<Value>)> {
    state
        .list(&pods(), None)
        .filter(|(_, pod)| pod["spec"]["nodeName"].as_str() == Some(node) && !terminal(pod))
        .map(|(key, pod)| (key.clone(), Arc::clone(pod)))
        .collect()
}

/// The type of nodes, for callers that write nodes directly.
pub fn node_resource(state: &State) -> Result<Arc<ResourceType>, ApiError> {
    state.resource(&ResourceId::new("", "nodes"))
}
