//! A node that stopped reporting, and the taint manager's deletion of its pods.
//!
//! [`stop`] leaves a node as the node controller leaves one whose kubelet fell silent, once
//! its grace period passed (which the simulation does not wait): `Ready=Unknown`, tainted
//! [`UNREACHABLE`] (`NoExecute`), its pods `Ready=False`. The node stays in the API. Its
//! kubelet is gone, so nothing of its pods moves (a pod being deleted is never removed, a
//! pending one never starts) but for the taint manager: it deletes each pod once the pod's
//! toleration of the taint runs out, marked `DisruptionTarget` (`DeletionByTaintManager`).
//! A pod without such a toleration gets [`DEFAULT_TOLERATION`], as the
//! `DefaultTolerationSeconds` admission plugin gives it; one whose toleration has no
//! `tolerationSeconds` stays for good.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::conditions::{delete_disrupted, set_condition};
use super::placement::toleration_of;
use crate::options::{WriteOptions, timestamp_now};
use crate::resources::ResourceType;
use crate::store::{ObjectKey, State};

/// The taint of a node whose kubelet stopped reporting.
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";

/// How long a pod that names no toleration of [`UNREACHABLE`] stays on such a node.
pub const DEFAULT_TOLERATION: Duration = Duration::from_secs(300);

const MANAGER: &str = "node-controller";

/// Marks `node` as stopped at `now` (RFC 3339): `Ready=Unknown` and the [`UNREACHABLE`]
/// taints, `NoSchedule` (no new pod goes there) and `NoExecute`.
pub fn stop(node: &mut Value, now: &str) {
    let mut taints = node["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    taints.retain(|taint| taint["key"] != UNREACHABLE);
    taints.push(json!({"key": UNREACHABLE, "effect": "NoSchedule"}));
    taints.push(json!({"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": now}));
    node["spec"]["taints"] = Value::Array(taints);
    let mut conditions = node["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    conditions.retain(|condition| condition["type"] != "Ready");
    conditions.push(
        json!({"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
        "message": "Kubelet stopped posting node status.", "lastTransitionTime": now,
        "lastHeartbeatTime": now}),
    );
    node["status"]["conditions"] = Value::Array(conditions);
}

/// `pod` as the node controller marks the pods of a node that stopped reporting.
pub fn not_ready(pod: &Value) -> Value {
    let mut marked = pod.clone();
    set_condition(
        &mut marked,
        json!({"type": "Ready", "status": "False", "lastTransitionTime": timestamp_now()}),
    );
    marked
}

/// When `node` stopped reporting (its [`UNREACHABLE`] taint was added), as an instant of this
/// process; `None` while it reports.
pub fn stopped_since(node: &Value, now: Instant) -> Option<Instant> {
    let taint = node["spec"]["taints"]
        .as_array()?
        .iter()
        .find(|taint| taint["key"] == UNREACHABLE && taint["effect"] == "NoExecute")?;
    let added: jiff::Timestamp = taint["timeAdded"].as_str()?.parse().ok()?;
    let ago = Duration::try_from(jiff::Timestamp::now().duration_since(added)).unwrap_or_default();
    Some(now.checked_sub(ago).unwrap_or(now))
}

/// How long `pod` tolerates [`UNREACHABLE`]; `None`: for good.
pub fn toleration(pod: &Value) -> Option<Duration> {
    let taint = json!({"key": UNREACHABLE, "effect": "NoExecute"});
    let Some(toleration) = toleration_of(pod, &taint) else {
        return Some(DEFAULT_TOLERATION);
    };
    let seconds = toleration["tolerationSeconds"].as_i64()?;
    Some(Duration::from_secs(u64::try_from(seconds).unwrap_or(0)))
}

/// Deletes pod `key` as the taint manager does; whether it wrote.
pub fn delete(state: &mut State, resource: &ResourceType, key: &ObjectKey) -> bool {
    delete_disrupted(
        state,
        resource,
        key,
        (
            "DeletionByTaintManager",
            "Taint manager: deleting due to NoExecute taint",
        ),
        &WriteOptions::internal(MANAGER),
    )
}
