//! The headless Service of each pod of a PyTorchJob, as training-operator v1 creates it: named
//! like its pod, so that `MASTER_ADDR=<job>-master-0` and `<job>-worker-0` resolve, selecting
//! that one pod, with the ports of its `pytorch` container.

use std::collections::BTreeMap;

use eto_api::PyTorchJob;
use eto_api::pytorch_job::{PORT_NAME, PyTorchReplicaType};
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{
    Defaulted, JOB_NAME_LABEL, OPERATOR_NAME, OPERATOR_NAME_LABEL, REPLICA_INDEX_LABEL,
    REPLICA_TYPE_LABEL, pod_name, pytorch_container, type_label,
};
use crate::job::JobRef;

/// The labels that select pod `index` of `type_` of `job`, as v1 labels it (its Service
/// selects it with them).
pub fn pod_selector(job: &str, type_: PyTorchReplicaType, index: u32) -> BTreeMap<String, String> {
    BTreeMap::from([
        (OPERATOR_NAME_LABEL.to_string(), OPERATOR_NAME.to_string()),
        (JOB_NAME_LABEL.to_string(), job.to_string()),
        (
            REPLICA_TYPE_LABEL.to_string(),
            type_label(type_).to_string(),
        ),
        (REPLICA_INDEX_LABEL.to_string(), index.to_string()),
    ])
}

/// The Service of pod `index` of `type_`, or `None` when the spec has no such replica type.
///
/// One departure from v1: the Service publishes its pod's address before the pod is ready,
/// so that the other pods reach the Master's rendezvous as soon as it listens, whatever
/// readiness probe its template has.
pub fn service(
    job: &PyTorchJob,
    defaulted: &Defaulted<'_>,
    type_: PyTorchReplicaType,
    index: u32,
) -> Option<Service> {
    let replica = defaulted.replica(type_)?;
    let name = job.metadata.name.as_deref().unwrap_or_default();
    let mut ports: Vec<ServicePort> = replica
        .template
        .and_then(pytorch_container)
        .into_iter()
        .flat_map(|container| container.ports.iter().flatten())
        .map(|port| ServicePort {
            name: port.name.clone(),
            port: port.container_port,
            protocol: port.protocol.clone(),
            ..ServicePort::default()
        })
        .collect();
    if !ports.iter().any(|p| p.name.as_deref() == Some(PORT_NAME)) {
        ports.push(ServicePort {
            name: Some(PORT_NAME.into()),
            port: replica.port,
            ..ServicePort::default()
        });
    }
    let selector = pod_selector(name, type_, index);
    Some(Service {
        metadata: ObjectMeta {
            name: Some(pod_name(name, type_, index)),
            namespace: job.metadata.namespace.clone(),
            labels: Some(selector.clone()),
            owner_references: Some(vec![JobRef::new(job).owner_reference()]),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: Some(selector),
            ports: Some(ports),
            publish_not_ready_addresses: Some(true),
            ..ServiceSpec::default()
        }),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::super::tests::job;
    use super::*;

    #[test]
    fn each_pod_gets_a_headless_service_of_its_name_selecting_it_alone() {
        let job = job(json!({"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "pytorch", "image": "torch", "ports": [{"name": "metrics", "containerPort": 9090, "protocol": "TCP"}]}
            ]}}},
            "Worker": {"replicas": 2}
        }}));
        let defaulted = Defaulted::of(&job);
        let master = service(&job, &defaulted, PyTorchReplicaType::Master, 0).unwrap();
        assert_eq!(
            serde_json::to_value(&master).unwrap(),
            json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {
                    "name": "ddp-master-0",
                    "namespace": "team",
                    "labels": {
                        "training.kubeflow.org/job-name": "ddp",
                        "training.kubeflow.org/operator-name": "pytorchjob-controller",
                        "training.kubeflow.org/replica-index": "0",
                        "training.kubeflow.org/replica-type": "master"
                    },
                    "ownerReferences": [{
                        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "ddp",
                        "uid": "u-1", "controller": true, "blockOwnerDeletion": true
                    }]
                },
                "spec": {
                    "clusterIP": "None",
                    "publishNotReadyAddresses": true,
                    "selector": {
                        "training.kubeflow.org/job-name": "ddp",
                        "training.kubeflow.org/operator-name": "pytorchjob-controller",
                        "training.kubeflow.org/replica-index": "0",
                        "training.kubeflow.org/replica-type": "master"
                    },
                    "ports": [
                        {"name": "metrics", "port": 9090, "protocol": "TCP"},
                        {"name": "pytorchjob-port", "port": 23456}
                    ]
                }
            })
        );
        let worker = service(&job, &defaulted, PyTorchReplicaType::Worker, 1).unwrap();
        assert_eq!(worker.metadata.name.as_deref(), Some("ddp-worker-1"));
        assert_eq!(
            worker.spec.unwrap().selector.unwrap()[REPLICA_TYPE_LABEL],
            "worker"
        );
        let workers_only = super::super::tests::job(json!({"pytorchReplicaSpecs": {"Worker": {}}}));
        let defaulted = Defaulted::of(&workers_only);
        assert_eq!(
            service(&workers_only, &defaulted, PyTorchReplicaType::Master, 0),
            None
        );
    }
}
