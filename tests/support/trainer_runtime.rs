//! Kubeflow Trainer's `torch-distributed` ClusterTrainingRuntime, as the TrainJob tests
//! install it: `examples/trainjob/torch-distributed.yaml`, the runtime of Trainer's chart.

use eto_api::ClusterTrainingRuntime;
use kube::api::{Api, Patch, PatchParams};

use crate::workspace_root;

/// Applies the `torch-distributed` ClusterTrainingRuntime of `examples/trainjob/` through
/// `client`, as `kubectl apply --server-side` would.
///
/// # Panics
/// When the example does not read or the API server refuses it.
pub async fn install_torch_distributed(client: &kube::Client) {
    let text =
        std::fs::read_to_string(workspace_root().join("examples/trainjob/torch-distributed.yaml"))
            .expect("the example reads");
    let runtime: ClusterTrainingRuntime =
        serde_saphyr::from_str(&text).expect("the example is a runtime");
    Api::<ClusterTrainingRuntime>::all(client.clone())
        .patch(
            "torch-distributed",
            &PatchParams::apply("eto-test").force(),
            &Patch::Apply(&runtime),
        )
        .await
        .expect("the runtime applies");
}
