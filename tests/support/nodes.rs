//! Nodes of a real cluster made (un)schedulable, as `kubectl cordon` does: new pods wait, as on
//! a cluster out of capacity, while running ones stay; tainted, as a cloud announces a
//! reclaim; and a node's loss, as the pod garbage collector tells its pods of it.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams};

/// Marks every schedulable node unschedulable; returns their names, for [`uncordon`].
pub async fn cordon_every_node(client: &kube::Client) -> Vec<String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut cordoned = Vec::new();
    let listed = nodes.list(&Default::default()).await;
    for node in listed.expect("the API server lists nodes") {
        let name = node.metadata.name.clone().unwrap_or_default();
        if node.spec.and_then(|spec| spec.unschedulable) != Some(true) {
            cordoned.push(name);
        }
    }
    set_unschedulable(client, &cordoned, true).await;
    cordoned
}

/// Makes the nodes `names` schedulable again.
pub async fn uncordon(client: &kube::Client, names: &[String]) {
    set_unschedulable(client, names, false).await;
}

/// Sets `spec.unschedulable` of every node in `names`.
pub async fn set_unschedulable(client: &kube::Client, names: &[String], unschedulable: bool) {
    let nodes: Api<Node> = Api::all(client.clone());
    let patch = serde_json::json!({"spec": {"unschedulable": unschedulable}});
    for name in names {
        nodes
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("the API server patches the node");
    }
}

/// Puts a `NoSchedule` taint `key` on node `node` (or takes it off) by a merge patch of its
/// taints, keeping the others.
pub async fn set_taint(client: &kube::Client, node: &str, key: &str, on: bool) {
    let nodes: Api<Node> = Api::all(client.clone());
    let current = nodes.get(node).await.expect("the API server has the node");
    let mut taints: Vec<serde_json::Value> = current
        .spec
        .and_then(|spec| spec.taints)
        .unwrap_or_default()
        .into_iter()
        .filter(|taint| taint.key != key)
        .map(|taint| serde_json::to_value(taint).expect("a taint is JSON"))
        .collect();
    if on {
        taints.push(serde_json::json!({"key": key, "effect": "NoSchedule"}));
    }
    nodes
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"taints": taints}})),
        )
        .await
        .expect("the API server patches the node");
}

/// Takes pod `name` as Kubernetes' pod garbage collector does once the pod's node is gone: it
/// applies `DisruptionTarget=True` (reason `DeletionByPodGC`) and phase `Failed` to the pod's
/// status, as field manager `PodGC`, then deletes the pod at once (grace period 0). A pod
/// already gone is left so.
pub async fn delete_as_its_node_went(pods: &Api<Pod>, name: &str) {
    let status = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "status": {
            "phase": "Failed",
            "conditions": [{
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "DeletionByPodGC",
                "message": "PodGC: node no longer exists"
            }]
        }
    });
    let apply = PatchParams::apply("PodGC").force();
    if pods
        .patch_status(name, &apply, &Patch::Apply(&status))
        .await
        .is_ok()
    {
        let _ = pods
            .delete(name, &DeleteParams::default().grace_period(0))
            .await;
    }
}
