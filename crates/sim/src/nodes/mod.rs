//! Simulated nodes: what they offer, the scheduler that places pods on them, and the kubelets
//! that run (and stop) those pods.

pub mod conditions;
pub mod containers;
pub mod gang;
pub mod kubelet;
pub mod placement;
pub mod quantity;
pub mod scheduler;
pub mod unreachable;
pub mod warnings;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use scheduler::bind;

use crate::resources::ResourceId;
use crate::store::{Change, ObjectKey};

/// What changed since the last pass of the scheduler and kubelets: they look at those pods
/// only (and at the pods they are waiting on), so that a pass costs what changed, not what
/// exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Changed {
    /// Anything may have: a node changed (which can free or take capacity, or orphan pods), a
    /// PodGroup changed, the change log was compacted, or this is the first pass.
    Everything,
    /// These pods were created, changed or removed.
    Pods(BTreeSet<ObjectKey>),
}

impl Changed {
    /// What `changes` (committed in order) changed for the scheduler and kubelets.
    pub fn of(changes: &[Arc<Change>]) -> Self {
        let mut pods = BTreeSet::new();
        for change in changes {
            match (
                change.resource.group.as_str(),
                change.resource.plural.as_str(),
            ) {
                ("", "nodes") => return Self::Everything,
                // A group's minimum changed: its waiting members may now form it.
                _ if gang::is_pod_groups(&change.resource) => return Self::Everything,
                ("", "pods") => {
                    let metadata = &change.object["metadata"];
                    pods.insert(ObjectKey::new(
                        metadata["namespace"].as_str().unwrap_or_default(),
                        metadata["name"].as_str().unwrap_or_default(),
                    ));
                }
                _ => {}
            }
        }
        Self::Pods(pods)
    }

    /// Adds what `later` changed.
    pub fn absorb(&mut self, later: Self) {
        match (&mut *self, later) {
            (Self::Everything, _) => {}
            (_, Self::Everything) => *self = Self::Everything,
            (Self::Pods(pods), Self::Pods(more)) => pods.extend(more),
        }
    }

    /// The pods named, none for [`Changed::Everything`].
    fn pods(&self) -> impl Iterator<Item = &ObjectKey> {
        match self {
            Self::Everything => None,
            Self::Pods(pods) => Some(pods),
        }
        .into_iter()
        .flatten()
    }
}

/// The `pods` resource.
fn pods() -> ResourceId {
    ResourceId::new("", "pods")
}

/// The `nodes` resource.
fn nodes() -> ResourceId {
    ResourceId::new("", "nodes")
}

/// Whether a pod has finished (`Succeeded` or `Failed`).
fn terminal(pod: &Value) -> bool {
    matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    )
}

/// A node to add to the simulated cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSpec {
    /// Node name.
    pub name: String,
    /// Allocatable CPU cores.
    #[serde(default = "default_cpu")]
    pub cpu: String,
    /// Allocatable memory.
    #[serde(default = "default_memory")]
    pub memory: String,
    /// Most pods the node runs.
    #[serde(default = "default_pods")]
    pub pods: u32,
    /// `nvidia.com/gpu` count.
    #[serde(default)]
    pub gpus: u32,
    /// Other extended resources, for example `aliyun.com/gpu-mem: "32"`.
    #[serde(default)]
    pub extended: BTreeMap<String, String>,
    /// Labels, in addition to `kubernetes.io/hostname`.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Taints.
    #[serde(default)]
    pub taints: Vec<Taint>,
}

/// A node taint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Taint {
    /// Key.
    pub key: String,
    /// Value.
    #[serde(default)]
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

fn default_cpu() -> String {
    "32".into()
}

fn default_memory() -> String {
    "256Gi".into()
}

fn default_pods() -> u32 {
    110
}

impl NodeSpec {
    /// A node with `gpus` GPUs (`nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB` when it has
    /// any) and the default CPU, memory and pod capacity.
    pub fn gpu(name: impl Into<String>, gpus: u32) -> Self {
        let mut labels = BTreeMap::new();
        if gpus > 0 {
            labels.insert(
                "nvidia.com/gpu.product".into(),
                "NVIDIA-A100-SXM4-80GB".into(),
            );
            labels.insert("nvidia.com/gpu.count".into(), gpus.to_string());
        }
        Self {
            name: name.into(),
            cpu: default_cpu(),
            memory: default_memory(),
            pods: default_pods(),
            gpus,
            extended: BTreeMap::new(),
            labels,
            taints: Vec::new(),
        }
    }

    /// The same node with an extra label.
    #[must_use]
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// The same node with an extra taint.
    #[must_use]
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        self.taints.push(Taint {
            key: key.into(),
            value: value.into(),
            effect: effect.into(),
        });
        self
    }

    /// The Node object, Ready.
    pub fn to_object(&self, index: usize) -> Value {
        let mut resources = json!({"cpu": self.cpu, "memory": self.memory, "pods": self.pods.to_string(), "nvidia.com/gpu": self.gpus.to_string()});
        for (name, amount) in &self.extended {
            resources[name] = json!(amount);
        }
        let mut labels = self.labels.clone();
        labels.insert("kubernetes.io/hostname".into(), self.name.clone());
        labels.insert("kubernetes.io/os".into(), "linux".into());
        let now = crate::options::timestamp_now();
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": labels},
            "spec": {"taints": self.taints, "podCIDR": format!("10.244.{}.0/24", index % 250)},
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status (simulated)", "lastHeartbeatTime": now, "lastTransitionTime": now}],
                "addresses": [{"type": "InternalIP", "address": format!("192.168.{}.{}", index / 250, index % 250 + 1)}, {"type": "Hostname", "address": self.name}],
                "nodeInfo": {"kubeletVersion": "v1.33.0-eto-sim", "architecture": "amd64", "operatingSystem": "linux", "containerRuntimeVersion": "sim://1", "kernelVersion": "", "osImage": "eto-sim", "machineID": "", "systemUUID": "", "bootID": "", "kubeProxyVersion": ""},
            }
        })
    }
}
