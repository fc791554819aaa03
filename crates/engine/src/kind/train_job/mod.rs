//! `TrainJob` (`trainer.kubeflow.org/v1alpha1`), Kubeflow Trainer v2's kind: what it
//! contributes to the engine.
//!
//! A TrainJob is planned with the runtime it names ([`ResolvedTrainJob`]): the two resolve
//! ([`resolve`]) into the torch job shapes of [`crate::kind::pytorch_job`] (a static group of
//! `numNodes` whose node 0 coordinates the run, an elastic group whose rendezvous eto hosts,
//! or TorchFT replica groups), which the engine runs as it runs a PyTorchJob of that shape.
//! What a TrainJob's users and tools see is Trainer's: JobSet's labels on the pods
//! ([`labels`], [`objects`]) and Trainer's status ([`status`]).

pub mod initializers;
pub mod labels;
pub mod objects;
pub mod resolve;
pub mod status;

use std::collections::BTreeMap;

use eto_api::common::ReplicaRestartPolicy;
use eto_api::train_job::{NODE_CONTAINER, TRAINJOB_CONTROLLER, TrainJobStatus};
use eto_api::{PyTorchJob, PyTorchJobStatus, TrainJob};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::effective_spec::EffectiveSpec;
use crate::field_error::FieldError;
use crate::job::{
    Coordinator, GroupedWorkers, InvalidSpec, JobContext, Kind, Preparation, PreparationStep,
    Reference, Referenced, ReportingCoordinator, ServedJob, Vocabulary, WorkerNames,
};
use crate::kind::pytorch_job::{self, MASTER_POD};
use crate::names;
use crate::status::JobStatus;

/// Its names, fields and labels.
pub const VOCABULARY: Vocabulary = Vocabulary {
    name: "TrainJob",
    original_operator: "Kubeflow Trainer v2",
    resource: "trainjobs.trainer.kubeflow.org",
    aliases: &["trainjob", "trainjobs"],
    min_field: "Worker nodes",
    bound_paths: (
        "spec.trainer.elasticPolicy.minNodes",
        "spec.trainer.elasticPolicy.maxNodes",
    ),
    suspend_keys: &["spec", "suspend"],
    suspend_field: "spec.suspend",
    suspended_reason: "Suspended",
    resumed_reason: "Resumed",
    operator_label: (labels::KIND_LABEL, "trainjob"),
    job_name_label: labels::JOBSET_NAME_LABEL,
    role_label: labels::ROLE_LABEL,
    launcher_role: "master",
    launcher_called: "first node",
    launcher_name: |job| {
        pytorch_job::pod_name(job, eto_api::pytorch_job::PyTorchReplicaType::Master, 0)
    },
    index_label: labels::INDEX_LABEL,
    service_name: |job| {
        pytorch_job::pod_name(job, eto_api::pytorch_job::PyTorchReplicaType::Master, 0)
    },
    worker_host: |job, _, index| names::worker(job, index),
    coordinator: MASTER_POD,
    worker_names: WorkerNames::PerRun,
    ssh_secret_type: "Opaque",
    worker_pod: objects::worker_pod,
    supporting_objects: objects::supporting_objects,
    launcher_objects: objects::launcher_objects,
    launcher_host: |_| None,
    autoscaler: Some(pytorch_job::v1_autoscaler::autoscaler),
    training_container: Some(NODE_CONTAINER),
    api_resource: || kube::core::ApiResource::erase::<TrainJob>(&()),
    reference: Some(runtime_reference),
    managed_by_eto,
    stored_status,
    scaled_by_requests: false,
    served_by_default: false,
};

/// A TrainJob with the runtime it names: what the engine plans.
#[derive(Clone, Debug)]
pub struct ResolvedTrainJob {
    /// The job, as stored.
    pub job: TrainJob,
    /// What it resolves to with its runtime (the torch job it runs as, its initializer
    /// steps), or why it does not.
    pub resolved: Result<resolve::Resolution, Vec<FieldError>>,
}

impl ResolvedTrainJob {
    /// `job` with its runtime, as the controller found it.
    pub fn new(job: TrainJob, runtime: &Referenced) -> Self {
        let resolved = resolve::resolve(&job, runtime).map(|mut resolution| {
            resolution.torch.status = job.status.as_ref().map(|status| PyTorchJobStatus {
                eto: status.eto.clone(),
                ..PyTorchJobStatus::default()
            });
            resolution
        });
        Self { job, resolved }
    }

    fn torch(&self) -> Option<&PyTorchJob> {
        self.resolved
            .as_ref()
            .ok()
            .map(|resolution| &resolution.torch)
    }
}

/// The runtime job `job` (as JSON) names: a ClusterTrainingRuntime, or a TrainingRuntime of
/// its namespace; `None` when it names another kind (validation reports it).
fn runtime_reference(job: &serde_json::Value) -> Option<Reference> {
    let reference: eto_api::train_job::RuntimeRef =
        serde_json::from_value(job["spec"]["runtimeRef"].clone()).ok()?;
    let (kind, name) = resolve::runtime_ref(&reference).ok()?;
    let (resource, namespace) = if kind == resolve::CLUSTER_RUNTIME {
        (
            kube::core::ApiResource::erase::<eto_api::ClusterTrainingRuntime>(&()),
            None,
        )
    } else {
        (
            kube::core::ApiResource::erase::<eto_api::TrainingRuntime>(&()),
            Some(job["metadata"]["namespace"].as_str()?.to_string()),
        )
    };
    Some(Reference {
        resource,
        namespace,
        name: name.to_string(),
    })
}

impl ServedJob for ResolvedTrainJob {
    fn kind(&self) -> Kind {
        Kind::TRAIN_JOB
    }

    /// The torch job it resolves to, which the shapes it runs read.
    fn as_any(&self) -> &dyn std::any::Any {
        match &self.resolved {
            Ok(resolution) => &resolution.torch,
            Err(_) => self,
        }
    }

    fn metadata(&self) -> &ObjectMeta {
        &self.job.metadata
    }

    fn coordinator_template(&self) -> Option<&PodTemplateSpec> {
        self.torch()?.coordinator_template()
    }

    fn worker_template(&self) -> Option<&PodTemplateSpec> {
        self.torch()?.worker_template()
    }

    fn engine_status(&self) -> JobStatus {
        self.job
            .status
            .as_ref()
            .map(status::to_engine)
            .unwrap_or_default()
    }

    fn validate(&self) -> Result<EffectiveSpec, InvalidSpec> {
        let invalid = |errors| InvalidSpec {
            kind: Kind::TRAIN_JOB,
            errors,
        };
        let torch = self
            .resolved
            .as_ref()
            .map(|resolution| &resolution.torch)
            .map_err(|errors| invalid(errors.clone()))?;
        pytorch_job::validation::validate_with_container(torch, NODE_CONTAINER).map_err(
            |invalid_torch| {
                invalid(
                    invalid_torch
                        .errors
                        .into_iter()
                        .map(trainjob_field)
                        .collect(),
                )
            },
        )
    }

    /// A job Trainer's controller started: a status with Trainer's fields and none of eto's.
    fn started_by_another_operator(&self) -> bool {
        self.job.status.as_ref().is_some_and(started_elsewhere)
    }

    fn replica_restart_policy(&self) -> Option<ReplicaRestartPolicy> {
        self.torch()?.replica_restart_policy()
    }

    fn first_worker_success_decides(&self) -> bool {
        self.torch()
            .is_some_and(ServedJob::first_worker_success_decides)
    }

    fn pod_service_names(&self) -> Vec<String> {
        self.torch()
            .map(ServedJob::pod_service_names)
            .unwrap_or_default()
    }

    fn coordinator(&self) -> Coordinator {
        self.torch().map_or(MASTER_POD, ServedJob::coordinator)
    }

    fn worker_names(&self) -> WorkerNames {
        self.torch()
            .map_or(VOCABULARY.worker_names, ServedJob::worker_names)
    }

    fn grouped_workers(&self) -> Option<&dyn GroupedWorkers> {
        self.torch().map(|torch| torch as &dyn GroupedWorkers)
    }

    fn reporting_coordinator(&self) -> Option<&dyn ReportingCoordinator> {
        self.torch().map(|torch| torch as &dyn ReportingCoordinator)
    }

    fn coordinator_role(&self) -> &'static str {
        self.torch()
            .map_or(VOCABULARY.launcher_role, ServedJob::coordinator_role)
    }

    fn launcher_name(&self) -> String {
        match self.torch() {
            Some(torch) => torch.launcher_name(),
            None => {
                Kind::TRAIN_JOB.launcher_name(self.job.metadata.name.as_deref().unwrap_or_default())
            }
        }
    }

    fn min_field(&self) -> &'static str {
        if self.coordinator().only_serves {
            "elasticPolicy.minNodes"
        } else {
            VOCABULARY.min_field
        }
    }

    fn launcher_called(&self) -> &'static str {
        match self.torch() {
            Some(torch) if torch.coordinator() != MASTER_POD => torch.launcher_called(),
            _ => VOCABULARY.launcher_called,
        }
    }

    /// Its initializer steps, each one pod `<job>-<step>-0` with JobSet's labels.
    fn preparation(&self, job: JobContext<'_>) -> Preparation {
        let Ok(resolution) = &self.resolved else {
            return Preparation::default();
        };
        let steps = resolution
            .initializers
            .iter()
            .map(|step| {
                let mut labels = job.labels();
                labels.insert(VOCABULARY.role_label.into(), step.name.clone());
                labels.insert(labels::INDEX_LABEL.into(), "0".into());
                let name = format!("{}-{}-0", job.name(), step.name);
                let mut metadata =
                    job.pod_metadata(name, Some(&step.template), labels, BTreeMap::new());
                labels::mark_step(&mut metadata, job.name(), &step.name, Some(0));
                PreparationStep {
                    name: step.name.clone(),
                    pod: Pod {
                        metadata,
                        spec: step.template.spec.clone(),
                        status: None,
                    },
                    waits_for: step.waits_for.clone(),
                }
            })
            .collect();
        Preparation {
            steps,
            run_waits_for: resolution.run_waits_for.clone(),
        }
    }
}

/// Whether `status` is one Trainer's controller wrote: Trainer's fields, none of eto's.
fn started_elsewhere(status: &TrainJobStatus) -> bool {
    let trainers = !status.conditions.is_empty() || !status.jobs_status.is_empty();
    trainers
        && status.eto_conditions.is_empty()
        && status.eto.phase.is_none()
        && status.eto.run.is_none()
        && status.eto.observed_generation.is_none()
}

/// A field of the torch job a TrainJob resolves to, as the TrainJob names it.
fn trainjob_field(error: FieldError) -> FieldError {
    const RENAMED: [(&str, &str); 6] = [
        (
            "spec.elasticPolicy.minReplicas",
            "spec.trainer.elasticPolicy.minNodes",
        ),
        (
            "spec.elasticPolicy.maxReplicas",
            "spec.trainer.elasticPolicy.maxNodes",
        ),
        (
            "spec.elasticPolicy.spareReplicas",
            "spec.trainer.elasticPolicy.spareNodes",
        ),
        ("spec.elasticPolicy", "spec.trainer.elasticPolicy"),
        (
            "spec.pytorchReplicaSpecs",
            "spec.runtimeRef (its trainer step)",
        ),
        ("spec.runPolicy", "spec"),
    ];
    let field = RENAMED
        .iter()
        .find_map(|(torch, trainjob)| {
            error
                .field
                .strip_prefix(torch)
                .map(|rest| format!("{trainjob}{rest}"))
        })
        .unwrap_or_else(|| error.field.clone());
    FieldError {
        field,
        message: error.message,
    }
}

/// Whether eto runs `job`: unless its `spec.managedBy` names another controller (MultiKueue).
pub fn managed_by_eto(job: &serde_json::Value) -> bool {
    job["spec"]["managedBy"]
        .as_str()
        .is_none_or(|manager| manager == TRAINJOB_CONTROLLER)
}

/// The stored `status` of a TrainJob that does not decode, in the engine's shape.
pub fn stored_status(value: serde_json::Value) -> Option<JobStatus> {
    serde_json::from_value::<TrainJobStatus>(value)
        .ok()
        .map(|status| status::to_engine(&status))
}
