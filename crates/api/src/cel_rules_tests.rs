//! The CEL rules of the CRDs, evaluated as the API server evaluates them at admission.

use kube::CustomResourceExt;
use serde_json::{Value, json};

use crate::testing::{crd, schema};
use crate::{MPIJob, PyTorchJob, ScaleIn, TrainingJob};

/// The messages of the CEL rules that reject `object`.
fn cel_rejections<K: CustomResourceExt>(object: &Value) -> Vec<String> {
    match kube_cel::Validator::new().validate(&schema(&crd::<K>()), object, None) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.iter().map(|error| error.message.clone()).collect(),
    }
}

fn job(launcher_replicas: Option<i32>, worker: Value) -> Value {
    let pod = json!({"spec": {"containers": [{"name": "main", "image": "horovod"}]}});
    let mut launcher = json!({"template": pod});
    if let Some(replicas) = launcher_replicas {
        launcher["replicas"] = json!(replicas);
    }
    let mut worker = worker;
    worker["template"] = pod;
    json!({
        "apiVersion": "kai.alibabacloud.com/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": "mnist"},
        "spec": {"etReplicaSpecs": {"launcher": launcher, "worker": worker}}
    })
}

#[test]
fn worker_counts_are_ordered_where_set() {
    let accepted = [
        json!({}),
        json!({"replicas": 4}),
        json!({"minReplicas": 2}),
        json!({"maxReplicas": 2}),
        json!({"replicas": 4, "minReplicas": 4, "maxReplicas": 4}),
        json!({"replicas": 8, "minReplicas": 1, "maxReplicas": 128}),
    ];
    for worker in accepted {
        assert_eq!(
            cel_rejections::<TrainingJob>(&job(None, worker.clone())),
            Vec::<String>::new(),
            "{worker}"
        );
    }
    let rejected = [
        (
            json!({"replicas": 2, "minReplicas": 3}),
            "spec.etReplicaSpecs.worker.minReplicas must not be greater than replicas",
        ),
        (
            json!({"replicas": 5, "maxReplicas": 4}),
            "spec.etReplicaSpecs.worker.replicas must not be greater than maxReplicas",
        ),
        (
            json!({"minReplicas": 5, "maxReplicas": 4}),
            "spec.etReplicaSpecs.worker.minReplicas must not be greater than maxReplicas",
        ),
    ];
    for (worker, message) in rejected {
        assert_eq!(
            cel_rejections::<TrainingJob>(&job(None, worker.clone())),
            vec![message.to_string()],
            "{worker}"
        );
    }
}

#[test]
fn the_launcher_has_exactly_one_replica() {
    assert!(cel_rejections::<TrainingJob>(&job(Some(1), json!({}))).is_empty());
    assert_eq!(
        cel_rejections::<TrainingJob>(&job(Some(2), json!({}))),
        vec!["spec.etReplicaSpecs.launcher.replicas must be 1".to_string()]
    );
}

#[test]
fn a_scale_in_names_either_a_count_or_pods() {
    let scale_in = |to_delete: Value| {
        json!({
            "apiVersion": "kai.alibabacloud.com/v1alpha1",
            "kind": "ScaleIn",
            "metadata": {"name": "shrink"},
            "spec": {"selector": {"name": "mnist"}, "toDelete": to_delete}
        })
    };
    assert!(cel_rejections::<ScaleIn>(&scale_in(json!({"count": 1}))).is_empty());
    assert!(
        cel_rejections::<ScaleIn>(&scale_in(json!({"podNames": ["mnist-worker-1"]}))).is_empty()
    );
    let message = "set exactly one of spec.toDelete.count and spec.toDelete.podNames".to_string();
    assert_eq!(
        cel_rejections::<ScaleIn>(&scale_in(json!({}))),
        vec![message.clone()]
    );
    assert_eq!(
        cel_rejections::<ScaleIn>(&scale_in(
            json!({"count": 1, "podNames": ["mnist-worker-1"]})
        )),
        vec![message]
    );
}

fn cel_rejections_of_update<K: CustomResourceExt>(object: &Value, old: &Value) -> Vec<String> {
    match kube_cel::Validator::new().validate(&schema(&crd::<K>()), object, Some(old)) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.iter().map(|error| error.message.clone()).collect(),
    }
}

fn mpi_job(extra: Value) -> Value {
    let pod = json!({"spec": {"containers": [{"name": "main", "image": "mpi"}]}});
    let mut job = json!({
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi"},
        "spec": {"mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": pod},
            "Worker": {"replicas": 2, "template": pod}
        }}
    });
    json_patch::merge(&mut job, &extra);
    job
}

#[test]
fn mpi_job_elastic_bounds_are_ordered() {
    assert!(
        cel_rejections::<MPIJob>(&mpi_job(
            json!({"spec": {"elasticPolicy": {"minReplicas": 1, "maxReplicas": 4}}})
        ))
        .is_empty()
    );
    assert_eq!(
        cel_rejections::<MPIJob>(&mpi_job(
            json!({"spec": {"elasticPolicy": {"minReplicas": 5, "maxReplicas": 4}}})
        )),
        vec!["spec.elasticPolicy.minReplicas must not be greater than maxReplicas".to_string()]
    );
}

#[test]
fn mpi_job_managed_by_cannot_change() {
    let ours = mpi_job(json!({"spec": {"runPolicy": {"managedBy": "eto.dev/operator"}}}));
    let theirs =
        mpi_job(json!({"spec": {"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}}}));
    assert!(cel_rejections_of_update::<MPIJob>(&ours, &ours).is_empty());
    assert_eq!(
        cel_rejections_of_update::<MPIJob>(&theirs, &ours),
        vec!["spec.runPolicy.managedBy cannot be changed".to_string()]
    );
}

fn pytorch_job(extra: Value) -> Value {
    let pod = json!({"spec": {"containers": [{"name": "pytorch", "image": "torch"}]}});
    let mut job = json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "ddp"},
        "spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": pod},
            "Worker": {"replicas": 2, "template": pod}
        }}
    });
    json_patch::merge(&mut job, &extra);
    job
}

#[test]
fn pytorch_job_rules_are_training_operator_v1s_webhook_rules() {
    let accepted = [
        json!({}),
        json!({"spec": {"pytorchReplicaSpecs": {"Master": null}}}),
        json!({"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": null}}}}),
        json!({"spec": {"nprocPerNode": "4"}}),
        json!({"spec": {"elasticPolicy": {"minReplicas": 1, "maxReplicas": 4, "nProcPerNode": 2}}}),
        json!({"spec": {"runPolicy": {"managedBy": "kubeflow.org/training-operator"}}}),
        json!({"spec": {"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}}}),
    ];
    for extra in accepted {
        assert_eq!(
            cel_rejections::<PyTorchJob>(&pytorch_job(extra.clone())),
            Vec::<String>::new(),
            "{extra}"
        );
    }
    let rejected = [
        (
            json!({"spec": {"pytorchReplicaSpecs": {"worker": {"replicas": 1}}}}),
            "spec.pytorchReplicaSpecs: the replica types are Master and Worker",
        ),
        (
            json!({"spec": {"pytorchReplicaSpecs": {"Master": {"replicas": null}}}}),
            "spec.pytorchReplicaSpecs.Master.replicas must be set to 1",
        ),
        (
            json!({"spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 2}}}}),
            "spec.pytorchReplicaSpecs.Master.replicas must be set to 1",
        ),
        (
            json!({"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 0}}}}),
            "spec.pytorchReplicaSpecs.Worker.replicas must be at least 1",
        ),
        (
            json!({"spec": {"pytorchReplicaSpecs": {"Worker": null}, "elasticPolicy": {}}}),
            "spec.elasticPolicy needs a Worker in spec.pytorchReplicaSpecs",
        ),
        (
            json!({"spec": {"nprocPerNode": "2", "elasticPolicy": {"nProcPerNode": 2}}}),
            "spec.elasticPolicy.nProcPerNode (deprecated) and spec.nprocPerNode cannot both be set; keep spec.nprocPerNode",
        ),
        (
            json!({"spec": {"elasticPolicy": {"minReplicas": 3, "maxReplicas": 2}}}),
            "spec.elasticPolicy.minReplicas must not be greater than maxReplicas",
        ),
        (
            json!({"spec": {"runPolicy": {"managedBy": "kubeflow.org/mpi-operator"}}}),
            "spec.runPolicy.managedBy must be kubeflow.org/training-operator or kueue.x-k8s.io/multikueue",
        ),
    ];
    for (extra, message) in rejected {
        assert_eq!(
            cel_rejections::<PyTorchJob>(&pytorch_job(extra.clone())),
            vec![message.to_string()],
            "{extra}"
        );
    }
}

#[test]
fn pytorch_job_managed_by_cannot_change() {
    let ours = pytorch_job(
        json!({"spec": {"runPolicy": {"managedBy": "kubeflow.org/training-operator"}}}),
    );
    let theirs =
        pytorch_job(json!({"spec": {"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}}}));
    assert!(cel_rejections_of_update::<PyTorchJob>(&ours, &ours).is_empty());
    assert_eq!(
        cel_rejections_of_update::<PyTorchJob>(&theirs, &ours),
        vec!["spec.runPolicy.managedBy cannot be changed".to_string()]
    );
}
