//! `MPIJob` (`kubeflow.org/v2beta1`), Kubeflow mpi-operator's kind: what it contributes to the
//! engine. Its status converts to and from the engine's shape in [`status`].

pub mod objects;
pub mod status;
pub mod validation;

#[cfg(test)]
mod objects_tests;

use crate::status::JobStatus;
use eto_api::mpi_job::{ETO_MANAGED_BY, LAUNCHER, WORKER};
use eto_api::well_known::{
    LAUNCHER_ROLE, MPI_JOB_NAME_LABEL, MPI_JOB_ROLE_LABEL, MPI_OPERATOR_NAME,
    MPI_OPERATOR_NAME_LABEL, MPI_REPLICA_INDEX_LABEL,
};
use eto_api::{MPIJob, MPIJobStatus};
use k8s_openapi::api::core::v1::PodTemplateSpec;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::builders::SSH_AUTH_SECRET_TYPE;
use crate::effective_spec::EffectiveSpec;
use crate::job::InvalidSpec;
use crate::job::{Coordinator, Kind, ServedJob, Vocabulary, WorkerNames};
use crate::names;

/// mpi-operator's launcher: a pod run by a batch Job the job controls, finding its workers in
/// host discovery.
pub const LAUNCHER_JOB_POD: Coordinator = Coordinator {
    runs_in_a_batch_job: true,
    reads_host_discovery: true,
    ..Coordinator::plain("Launcher")
};

/// Its names, fields and labels.
pub const VOCABULARY: Vocabulary = Vocabulary {
    name: "MPIJob",
    original_operator: "mpi-operator",
    resource: "mpijobs.kubeflow.org",
    aliases: &["mpijob", "mpijobs", "mpij"],
    min_field: "elasticPolicy.minReplicas",
    bound_paths: (
        "spec.elasticPolicy.minReplicas",
        "spec.elasticPolicy.maxReplicas",
    ),
    suspend_keys: &["spec", "runPolicy", "suspend"],
    suspend_field: "spec.runPolicy.suspend",
    suspended_reason: "MPIJobSuspended",
    resumed_reason: "MPIJobResumed",
    operator_label: (MPI_OPERATOR_NAME_LABEL, MPI_OPERATOR_NAME),
    job_name_label: MPI_JOB_NAME_LABEL,
    role_label: MPI_JOB_ROLE_LABEL,
    launcher_role: LAUNCHER_ROLE,
    launcher_called: "launcher",
    launcher_name: names::launcher,
    index_label: MPI_REPLICA_INDEX_LABEL,
    service_name: names::mpi_service,
    worker_host: names::mpi_worker_host,
    coordinator: LAUNCHER_JOB_POD,
    worker_names: WorkerNames::NeverReused,
    ssh_secret_type: SSH_AUTH_SECRET_TYPE,
    worker_pod: objects::worker_pod,
    supporting_objects: objects::supporting_objects,
    launcher_objects: objects::launcher_objects,
    launcher_host: objects::launcher_host,
    autoscaler: None,
    training_container: None,
    api_resource: || kube::core::ApiResource::erase::<MPIJob>(&()),
    reference: None,
    managed_by_eto,
    stored_status,
    scaled_by_requests: false,
    served_by_default: true,
};

impl ServedJob for MPIJob {
    fn kind(&self) -> Kind {
        Kind::MPI_JOB
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn coordinator_template(&self) -> Option<&PodTemplateSpec> {
        self.spec.mpi_replica_specs.get(LAUNCHER)?.template.as_ref()
    }

    fn worker_template(&self) -> Option<&PodTemplateSpec> {
        self.spec.mpi_replica_specs.get(WORKER)?.template.as_ref()
    }

    fn engine_status(&self) -> JobStatus {
        self.status
            .as_ref()
            .map(status::to_engine)
            .unwrap_or_default()
    }

    fn validate(&self) -> Result<EffectiveSpec, InvalidSpec> {
        validation::validate(self)
    }

    fn started_by_another_operator(&self) -> bool {
        self.status.as_ref().is_some_and(status::started_elsewhere)
    }
}

/// A stored status read without the rest of the job (a job that does not decode), in the
/// engine's shape.
pub fn stored_status(status: serde_json::Value) -> Option<JobStatus> {
    serde_json::from_value::<MPIJobStatus>(status)
        .ok()
        .map(|status| status::to_engine(&status))
}

/// Whether eto runs the job: `spec.runPolicy.managedBy` unset or eto's; a job another
/// controller manages (MultiKueue, mpi-operator) is left alone.
pub fn managed_by_eto(job: &serde_json::Value) -> bool {
    job["spec"]["runPolicy"]["managedBy"]
        .as_str()
        .is_none_or(|manager| manager == ETO_MANAGED_BY)
}
