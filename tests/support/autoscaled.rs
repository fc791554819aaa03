//! An elastic PyTorchJob with training-operator v1's autoscaling, as the autoscaler's tests
//! against eto-sim and a real cluster apply it.

use eto_api::PyTorchJob;
use serde_json::json;

/// PyTorchJob `name` of Workers only, between `min` and `max` of them, `replicas` asked for,
/// each asking for one GPU, with `elasticPolicy.metrics` of 80% CPU.
pub fn autoscaled_pytorch_job(name: &str, (min, max): (i32, i32), replicas: i32) -> PyTorchJob {
    serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {
            "elasticPolicy": {
                "minReplicas": min,
                "maxReplicas": max,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]
            },
            "pytorchReplicaSpecs": {"Worker": {
                "replicas": replicas,
                "template": {"spec": {"containers": [{
                    "name": "pytorch",
                    "image": "pytorch/pytorch:2.5.1",
                    "command": ["torchrun", "train.py"],
                    "resources": {"limits": {"nvidia.com/gpu": "1"}}
                }]}}
            }}
        }
    }))
    .expect("a PyTorchJob")
}
