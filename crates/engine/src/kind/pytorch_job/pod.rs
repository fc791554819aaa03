//! A PyTorchJob's pods as training-operator v1 creates them, before eto's own additions (its
//! run label, notice volume and PID 1, added where every kind's pods get them).

use eto_api::PyTorchJob;
use eto_api::common::ReplicaRestartPolicy;
use eto_api::pytorch_job::{PORT_NAME, PyTorchReplicaType};
use k8s_openapi::api::core::v1::{ContainerPort, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::rendezvous::RunRendezvous;
use super::service::pod_selector;
use super::{Defaulted, JOB_ROLE_LABEL, env, pod_name};
use crate::job::JobRef;

/// Pod `index` of `type_`, or `None` when the spec has no such replica type: the replica's
/// template with v1's labels over its own (`training.kubeflow.org/operator-name`, `job-name`,
/// `replica-type`, `replica-index`, and `job-role: master` on the pod of rank 0: the Master,
/// or worker 0 of a job without one), the pod's restart policy from the replica's (`ExitCode`
/// is `Never`: the controller decides from the exit code), the port `pytorchjob-port` on the
/// `pytorch` container (the first, if none has that name) unless it names it, and the job's
/// environment in every container (see [`env`]; `hosted` is the rendezvous eto hosts for the
/// pod's run, if it does).
pub fn pod(
    job: &PyTorchJob,
    defaulted: &Defaulted<'_>,
    type_: PyTorchReplicaType,
    index: u32,
    hosted: Option<&RunRendezvous>,
) -> Option<Pod> {
    let replica = defaulted.replica(type_)?;
    let name = job.metadata.name.as_deref().unwrap_or_default();
    let template = replica.template.cloned().unwrap_or_default();
    let template_metadata = template.metadata.unwrap_or_default();
    let mut labels = template_metadata.labels.unwrap_or_default();
    labels.extend(pod_selector(name, type_, index));
    let rank_zero = match type_ {
        PyTorchReplicaType::Master => true,
        PyTorchReplicaType::Worker => defaulted.master.is_none() && index == 0,
    };
    if rank_zero {
        labels.insert(JOB_ROLE_LABEL.into(), "master".into());
    }
    let mut spec = template.spec.unwrap_or_default();
    spec.restart_policy = Some(
        match replica.restart_policy {
            ReplicaRestartPolicy::Always => "Always",
            ReplicaRestartPolicy::OnFailure => "OnFailure",
            ReplicaRestartPolicy::Never | ReplicaRestartPolicy::ExitCode => "Never",
        }
        .into(),
    );
    if let Some(container) = super::training_container(&mut spec) {
        let ports = container.ports.get_or_insert_default();
        if !ports.iter().any(|p| p.name.as_deref() == Some(PORT_NAME)) {
            ports.push(ContainerPort {
                name: Some(PORT_NAME.into()),
                container_port: replica.port,
                protocol: Some("TCP".into()),
                ..ContainerPort::default()
            });
        }
    }
    env::add_to(
        &mut spec,
        &env::variables(name, defaulted, type_, index, hosted),
    );
    Some(Pod {
        metadata: ObjectMeta {
            name: Some(pod_name(name, type_, index)),
            namespace: job.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: template_metadata.annotations,
            owner_references: Some(vec![JobRef::new(job).owner_reference()]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
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
    fn pods_carry_v1s_names_labels_port_restart_policy_and_environment() {
        let job = job(json!({"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "restartPolicy": "ExitCode", "template": {
                "metadata": {"labels": {"app": "ddp"}, "annotations": {"team": "vision"}},
                "spec": {"containers": [
                    {"name": "sidecar", "image": "proxy"},
                    {"name": "pytorch", "image": "torch"}
                ]}
            }},
            "Worker": {"replicas": 2, "template": {"spec": {"containers": [
                {"name": "pytorch", "image": "torch", "ports": [{"name": "pytorchjob-port", "containerPort": 29500}]}
            ]}}}
        }}));
        let defaulted = Defaulted::of(&job);
        let master = pod(&job, &defaulted, PyTorchReplicaType::Master, 0, None).unwrap();
        let value = serde_json::to_value(&master).unwrap();
        assert_eq!(value["metadata"]["name"], "ddp-master-0");
        assert_eq!(
            value["metadata"]["labels"],
            json!({
                "app": "ddp",
                "training.kubeflow.org/job-name": "ddp",
                "training.kubeflow.org/job-role": "master",
                "training.kubeflow.org/operator-name": "pytorchjob-controller",
                "training.kubeflow.org/replica-index": "0",
                "training.kubeflow.org/replica-type": "master"
            })
        );
        assert_eq!(value["metadata"]["annotations"], json!({"team": "vision"}));
        assert_eq!(value["spec"]["restartPolicy"], "Never");
        assert_eq!(value["spec"]["containers"][0].get("ports"), None);
        assert_eq!(
            value["spec"]["containers"][1]["ports"],
            json!([{"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}])
        );
        for container in value["spec"]["containers"].as_array().unwrap() {
            let rank = container["env"]
                .as_array()
                .unwrap()
                .iter()
                .find(|var| var["name"] == "RANK")
                .unwrap();
            assert_eq!(rank["value"], "0");
        }
        let worker = pod(&job, &defaulted, PyTorchReplicaType::Worker, 1, None).unwrap();
        let value = serde_json::to_value(&worker).unwrap();
        assert_eq!(value["metadata"]["name"], "ddp-worker-1");
        assert_eq!(
            value["metadata"]["labels"].get("training.kubeflow.org/job-role"),
            None
        );
        assert_eq!(value["spec"]["restartPolicy"], "OnFailure");
        assert_eq!(
            value["spec"]["containers"][0]["ports"],
            json!([{"name": "pytorchjob-port", "containerPort": 29500}])
        );
    }

    #[test]
    fn worker_zero_is_rank_zero_without_a_master() {
        let job = job(json!({"pytorchReplicaSpecs": {"Worker": {"replicas": 2}}}));
        let defaulted = Defaulted::of(&job);
        let role = |index| {
            pod(&job, &defaulted, PyTorchReplicaType::Worker, index, None)
                .unwrap()
                .metadata
                .labels
                .unwrap()
                .get(JOB_ROLE_LABEL)
                .cloned()
        };
        assert_eq!(role(0).as_deref(), Some("master"));
        assert_eq!(role(1), None);
        assert_eq!(
            pod(&job, &defaulted, PyTorchReplicaType::Master, 0, None),
            None
        );
    }
}
