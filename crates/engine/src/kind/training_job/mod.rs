//! `TrainingJob` (`kai.alibabacloud.com/v1alpha1`), Alibaba et-operator's kind: what it
//! contributes to the engine.

pub mod launcher;
pub mod objects;
pub mod status;
pub mod validation;

#[cfg(test)]
mod objects_tests;

use crate::status::JobStatus;
use eto_api::TrainingJob;
use eto_api::training_job::TrainingJobStatus;
use eto_api::well_known::{
    GROUP_NAME, GROUP_NAME_LABEL, JOB_NAME_LABEL, JOB_ROLE_LABEL, LAUNCHER_ROLE,
    REPLICA_INDEX_LABEL,
};
use k8s_openapi::api::core::v1::PodTemplateSpec;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::effective_spec::EffectiveSpec;
use crate::job::InvalidSpec;
use crate::job::{Coordinator, Kind, ServedJob, Vocabulary, WorkerNames};
use crate::names;

/// et-operator's launcher: a pod the job controls, with a ServiceAccount, Role and
/// RoleBinding of its own that let it read its ConfigMap, finding its workers in host
/// discovery.
pub const LAUNCHER_POD: Coordinator = Coordinator {
    has_own_rbac: true,
    reads_host_discovery: true,
    ..Coordinator::plain("Launcher")
};

/// Its names, fields and labels.
pub const VOCABULARY: Vocabulary = Vocabulary {
    name: "TrainingJob",
    original_operator: "et-operator",
    resource: "trainingjobs.kai.alibabacloud.com",
    aliases: &["trainingjob", "trainingjobs", "tj"],
    min_field: "worker.minReplicas",
    bound_paths: (
        "spec.etReplicaSpecs.worker.minReplicas",
        "spec.etReplicaSpecs.worker.maxReplicas",
    ),
    suspend_keys: &["spec", "suspend"],
    suspend_field: "spec.suspend (or the job supervisor's annotation)",
    suspended_reason: "Suspended",
    resumed_reason: "Resumed",
    operator_label: (GROUP_NAME_LABEL, GROUP_NAME),
    job_name_label: JOB_NAME_LABEL,
    role_label: JOB_ROLE_LABEL,
    launcher_role: LAUNCHER_ROLE,
    launcher_called: "launcher",
    launcher_name: names::launcher,
    index_label: REPLICA_INDEX_LABEL,
    service_name: names::worker_service,
    worker_host: |job, _, index| names::worker_host(job, index),
    coordinator: LAUNCHER_POD,
    worker_names: WorkerNames::NeverReused,
    ssh_secret_type: "Opaque",
    worker_pod: objects::worker_pod,
    supporting_objects: objects::supporting_objects,
    launcher_objects: launcher::launcher_objects,
    launcher_host: |_| None,
    autoscaler: None,
    training_container: None,
    api_resource: || kube::core::ApiResource::erase::<TrainingJob>(&()),
    reference: None,
    managed_by_eto: |_| true,
    stored_status,
    scaled_by_requests: true,
    served_by_default: true,
};

impl ServedJob for TrainingJob {
    fn kind(&self) -> Kind {
        Kind::TRAINING_JOB
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn coordinator_template(&self) -> Option<&PodTemplateSpec> {
        Some(&self.spec.et_replica_specs.launcher.template)
    }

    fn worker_template(&self) -> Option<&PodTemplateSpec> {
        Some(&self.spec.et_replica_specs.worker.template)
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
}

/// A stored status read without the rest of the job (a job that does not decode), in the
/// engine's shape.
pub fn stored_status(value: serde_json::Value) -> Option<JobStatus> {
    serde_json::from_value::<TrainingJobStatus>(value)
        .ok()
        .map(|status| status::to_engine(&status))
}
