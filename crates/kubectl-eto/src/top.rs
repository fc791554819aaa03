//! `kubectl eto top node`: GPUs per node and in the cluster, and eto's jobs on each node.

use std::collections::{BTreeMap, BTreeSet};

use eto_api::well_known::{JOB_NAME_LABEL, MANAGED_BY_LABEL, MANAGER, MPI_JOB_NAME_LABEL};
use eto_engine::pods;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Client;
use kube::api::{Api, ListParams};
use serde::Serialize;

use crate::error::{Error, Request};
use crate::jobs::{self, Job};
use crate::table::Table;

/// Whole GPUs.
const GPU: &str = "nvidia.com/gpu";
/// Shared-GPU memory (GiB), as Alibaba Cloud's cGPU reports it.
const GPU_MEMORY: &str = "aliyun.com/gpu-mem";
/// The node label holding the GPU model (NVIDIA's GPU feature discovery).
const GPU_PRODUCT_LABEL: &str = "nvidia.com/gpu.product";

/// One node's GPUs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeGpus {
    /// Node name.
    pub node: String,
    /// GPU model, from the node's labels.
    pub model: Option<String>,
    /// Allocatable GPUs.
    pub allocatable: u64,
    /// GPUs requested by unfinished pods bound to the node.
    pub allocated: u64,
    /// Allocatable shared-GPU memory, when the node reports it.
    pub memory_allocatable: Option<u64>,
    /// Shared-GPU memory requested by unfinished pods on the node.
    pub memory_allocated: u64,
    /// eto's jobs with pods on the node, as `namespace/name`, with their pod counts.
    pub jobs: BTreeMap<String, u32>,
    /// Jobs that keep new workers off the node for now (their blacklist cooldown).
    pub cooldown: BTreeSet<String>,
}

impl NodeGpus {
    /// GPUs not requested by any pod.
    pub fn free(&self) -> u64 {
        self.allocatable.saturating_sub(self.allocated)
    }
}

fn amount(resources: Option<&BTreeMap<String, Quantity>>, name: &str) -> Option<u64> {
    resources?.get(name)?.0.parse().ok()
}

/// What `pod` asks of `resource`: its containers' requests (else limits), summed.
fn requested(pod: &Pod, resource: &str) -> u64 {
    pod.spec
        .iter()
        .flat_map(|spec| &spec.containers)
        .map(|container| {
            let resources = container.resources.as_ref();
            amount(resources.and_then(|r| r.requests.as_ref()), resource)
                .or_else(|| amount(resources.and_then(|r| r.limits.as_ref()), resource))
                .unwrap_or(0)
        })
        .sum()
}

/// The eto job a pod belongs to, as `namespace/name`.
fn eto_job(pod: &Pod) -> Option<String> {
    let labels = pod.metadata.labels.as_ref()?;
    if labels.get(MANAGED_BY_LABEL).map(String::as_str) != Some(MANAGER) {
        return None;
    }
    let name = labels
        .get(JOB_NAME_LABEL)
        .or_else(|| labels.get(MPI_JOB_NAME_LABEL))?;
    Some(format!(
        "{}/{name}",
        pod.metadata.namespace.as_deref().unwrap_or_default()
    ))
}

/// The GPUs of every node, from nodes, pods and jobs as listed.
pub fn tally(nodes: &[Node], pods: &[Pod], jobs: &[Job]) -> Vec<NodeGpus> {
    let mut by_node: BTreeMap<String, NodeGpus> = nodes
        .iter()
        .map(|node| {
            let name = node.metadata.name.clone().unwrap_or_default();
            let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
            let gpus = NodeGpus {
                node: name.clone(),
                model: node
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|labels| labels.get(GPU_PRODUCT_LABEL).cloned()),
                allocatable: amount(allocatable, GPU).unwrap_or(0),
                memory_allocatable: amount(allocatable, GPU_MEMORY),
                ..NodeGpus::default()
            };
            (name, gpus)
        })
        .collect();
    for pod in pods.iter().filter(|pod| !pods::is_finished(pod)) {
        let Some(node) = pods::node(pod).and_then(|node| by_node.get_mut(node)) else {
            continue;
        };
        node.allocated += requested(pod, GPU);
        node.memory_allocated += requested(pod, GPU_MEMORY);
        if let Some(job) = eto_job(pod) {
            *node.jobs.entry(job).or_default() += 1;
        }
    }
    for job in jobs {
        let job = job.as_ref();
        for cooldown in job.status().nodes_in_cooldown {
            if let Some(node) = by_node.get_mut(&cooldown.node) {
                node.cooldown
                    .insert(format!("{}/{}", job.namespace(), job.name()));
            }
        }
    }
    by_node.into_values().collect()
}

/// The table of `nodes`, with a total line.
pub fn render(nodes: &[NodeGpus]) -> String {
    let memory = nodes.iter().any(|n| n.memory_allocatable.is_some());
    let mut header = vec!["NODE", "GPU MODEL", "GPUS", "ALLOCATED", "FREE"];
    if memory {
        header.extend(["GPU MEM(GiB)", "MEM ALLOCATED"]);
    }
    header.extend(["JOBS", "NOTE"]);
    let mut table = Table::new(&header);
    let row = |name: String, model: String, n: &NodeGpus, jobs: String, note: String| {
        let mut cells = vec![
            name,
            model,
            n.allocatable.to_string(),
            n.allocated.to_string(),
            n.free().to_string(),
        ];
        if memory {
            cells.push(n.memory_allocatable.map_or("-".into(), |m| m.to_string()));
            cells.push(n.memory_allocated.to_string());
        }
        cells.extend([jobs, note]);
        cells
    };
    let mut total = NodeGpus::default();
    for node in nodes {
        total.allocatable += node.allocatable;
        total.allocated += node.allocated;
        total.memory_allocated += node.memory_allocated;
        if let Some(m) = node.memory_allocatable {
            total.memory_allocatable = Some(total.memory_allocatable.unwrap_or(0) + m);
        }
        let jobs: Vec<String> = node
            .jobs
            .iter()
            .map(|(job, pods)| format!("{job}({pods})"))
            .collect();
        let note = if node.cooldown.is_empty() {
            String::new()
        } else {
            let jobs: Vec<&str> = node.cooldown.iter().map(String::as_str).collect();
            format!("cooldown: {}", jobs.join(","))
        };
        table.row(row(
            node.node.clone(),
            node.model.clone().unwrap_or_else(|| "-".into()),
            node,
            jobs.join(","),
            note,
        ));
    }
    table.row(row(
        "TOTAL".into(),
        String::new(),
        &total,
        String::new(),
        String::new(),
    ));
    table.render()
}

/// Lists what `kubectl eto top node` needs.
pub async fn fetch(client: &Client) -> Result<Vec<NodeGpus>, Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let nodes = nodes
        .list(&ListParams::default())
        .await
        .map_err(|error| {
            Request {
                verb: "list",
                resource: "nodes",
                namespace: None,
            }
            .failed(error)
        })?
        .items;
    let pods: Api<Pod> = Api::all(client.clone());
    let pods = pods
        .list(&ListParams::default().fields("status.phase!=Succeeded,status.phase!=Failed"))
        .await
        .map_err(|error| {
            Request {
                verb: "list",
                resource: "pods",
                namespace: None,
            }
            .failed(error)
        })?
        .items;
    // Cooldowns are extra information: a cluster without eto's CRDs still gets its GPUs.
    let jobs = match jobs::list(client, None).await {
        Ok(jobs) => jobs,
        Err(Error::CrdMissing { .. } | Error::NoCrdInstalled) => Vec::new(),
        Err(error) => return Err(error),
    };
    Ok(tally(&nodes, &pods, &jobs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, allocatable: serde_json::Value) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {GPU_PRODUCT_LABEL: "Tesla-V100"}},
            "status": {"allocatable": allocatable},
        }))
        .unwrap_or_default()
    }

    fn pod(node: &str, phase: &str, resources: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "team-a",
                "labels": {MANAGED_BY_LABEL: MANAGER, JOB_NAME_LABEL: "bert"}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": resources}]},
            "status": {"phase": phase},
        }))
        .unwrap_or_default()
    }

    #[test]
    fn shared_gpu_memory_gets_its_columns_and_finished_pods_free_their_gpus() {
        let nodes = [
            node("cgpu-0", serde_json::json!({GPU: "2", GPU_MEMORY: "64"})),
            node("plain-0", serde_json::json!({GPU: "8"})),
        ];
        let pods = [
            pod(
                "cgpu-0",
                "Running",
                serde_json::json!({"limits": {GPU_MEMORY: "16"}}),
            ),
            pod(
                "plain-0",
                "Running",
                serde_json::json!({"requests": {GPU: "3"}}),
            ),
            pod(
                "plain-0",
                "Succeeded",
                serde_json::json!({"requests": {GPU: "4"}}),
            ),
        ];
        let tallied = tally(&nodes, &pods, &[]);
        assert_eq!(
            tallied
                .iter()
                .map(|n| (
                    n.node.as_str(),
                    n.allocated,
                    n.free(),
                    n.memory_allocatable,
                    n.memory_allocated
                ))
                .collect::<Vec<_>>(),
            [("cgpu-0", 0, 2, Some(64), 16), ("plain-0", 3, 5, None, 0)]
        );
        let table = render(&tallied);
        assert!(table.starts_with("NODE      GPU MODEL    GPUS   ALLOCATED   FREE   GPU MEM(GiB)   MEM ALLOCATED   JOBS"), "{table}");
        assert!(table.contains("team-a/bert(1)"), "{table}");
        assert!(
            table
                .lines()
                .last()
                .unwrap_or_default()
                .starts_with("TOTAL"),
            "{table}"
        );
    }
}
