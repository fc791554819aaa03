//! The custom resources of eto, the elastic training operator.
//!
//! eto serves the API of Alibaba's et-operator, `kai.alibabacloud.com/v1alpha1`:
//!
//! - [`TrainingJob`]: a launcher plus an elastic set of workers;
//! - [`ScaleIn`] and [`ScaleOut`]: requests to remove or add workers, as Arena renders them.
//!
//! and Kubeflow mpi-operator's `kubeflow.org/v2beta1`:
//!
//! - [`MPIJob`]: a launcher Job plus a set of workers, with eto's optional elastic bounds;
//!
//! and Kubeflow training-operator v1's `kubeflow.org/v1`:
//!
//! - [`PyTorchJob`]: an optional Master and a set of Workers, each running torchrun;
//!
//! and Kubeflow Trainer v2's `trainer.kubeflow.org/v1alpha1`:
//!
//! - [`TrainJob`], run from a [`TrainingRuntime`] or a [`ClusterTrainingRuntime`]: torchrun on
//!   a number of training nodes, elastic with eto's `elasticPolicy`.
//!
//! Field names, enums and defaults are those of the original projects, so that existing YAML and tools keep
//! working; eto's extensions are optional fields. This crate holds types only: it pulls in no
//! async runtime or HTTP client, so tools can depend on it cheaply.

pub mod common;
mod descriptions;
pub mod elastic;
pub mod job_status;
pub mod kubeflow;
pub mod mpi_job;
pub mod pytorch_job;
pub mod scale_in;
pub mod scale_out;
pub mod train_job;
pub mod training_job;
pub mod well_known;

#[cfg(test)]
mod cel_rules_tests;
#[cfg(test)]
mod crd_shape_tests;
#[cfg(test)]
mod testing;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

pub use mpi_job::{MPIJob, MPIJobSpec, MPIJobStatus};
pub use pytorch_job::{PyTorchJob, PyTorchJobSpec, PyTorchJobStatus};
pub use scale_in::{ScaleIn, ScaleInSpec, ScaleInStatus};
pub use scale_out::{ScaleOut, ScaleOutSpec, ScaleOutStatus};
pub use train_job::{
    ClusterTrainingRuntime, TrainJob, TrainJobSpec, TrainJobStatus, TrainingRuntime,
};
pub use training_job::{TrainingJob, TrainingJobSpec, TrainingJobStatus};

/// Every CustomResourceDefinition eto serves, in a stable order.
pub fn crds() -> Vec<CustomResourceDefinition> {
    [
        TrainingJob::crd(),
        ScaleIn::crd(),
        ScaleOut::crd(),
        MPIJob::crd(),
        PyTorchJob::crd(),
        TrainJob::crd(),
        TrainingRuntime::crd(),
        ClusterTrainingRuntime::crd(),
    ]
    .into_iter()
    .map(descriptions::reflow)
    .collect()
}

/// One CRD as the YAML document committed under `crds/`.
pub fn crd_yaml(crd: &CustomResourceDefinition) -> Result<String, serde_saphyr::SerializeError> {
    serde_saphyr::to_string(crd)
}

/// Every CRD as one multi-document YAML stream, as `eto-operator crd` prints it.
pub fn crds_yaml() -> Result<String, serde_saphyr::SerializeError> {
    let documents = crds().iter().map(crd_yaml).collect::<Result<Vec<_>, _>>()?;
    Ok(documents
        .iter()
        .map(|document| format!("---\n{document}"))
        .collect())
}

/// File name of a CRD under `crds/`: `<plural>.<group>.yaml`.
pub fn crd_file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}.yaml", crd.metadata.name.as_deref().unwrap_or_default())
}
