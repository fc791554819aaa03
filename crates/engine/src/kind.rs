//! The kinds of job eto serves, and what differs between them.
//!
//! One engine plans every kind: workers, discovery, losses, restarts, suspension and deadlines
//! are decided once, in [`crate::plan()`]. A kind contributes its vocabulary (condition reasons,
//! field names, labels), its objects (see [`crate::build`]) and its status document: the engine
//! plans a status in TrainingJob's shape, the richest, and [`ApiStatus`] converts it for the
//! kind's API (see [`crate::mpi_status`]).

use eto_api::training_job::TrainingJobStatus;
use eto_api::well_known::{
    JOB_NAME_LABEL, JOB_ROLE_LABEL, MPI_JOB_NAME_LABEL, MPI_JOB_ROLE_LABEL,
    MPI_REPLICA_INDEX_LABEL, REPLICA_INDEX_LABEL, WORKER_ROLE,
};
use eto_api::{MPIJob, MPIJobStatus, TrainingJob};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;
use serde::Serialize;

use crate::mpi_status;

/// A kind of job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `TrainingJob` (`kai.alibabacloud.com/v1alpha1`).
    TrainingJob,
    /// `MPIJob` (`kubeflow.org/v2beta1`).
    MpiJob,
}

impl Kind {
    /// The kind's name, as in `kind:`.
    pub fn name(self) -> &'static str {
        match self {
            Self::TrainingJob => "TrainingJob",
            Self::MpiJob => "MPIJob",
        }
    }

    /// A condition or event reason: the kind's name followed by `what`, as both et-operator
    /// (`TrainingJobSucceeded`) and mpi-operator (`MPIJobSucceeded`) spell them.
    pub fn reason(self, what: &str) -> String {
        format!("{}{what}", self.name())
    }

    /// The field holding the job's minimum number of workers, for messages.
    pub fn min_field(self) -> &'static str {
        match self {
            Self::TrainingJob => "worker.minReplicas",
            Self::MpiJob => "elasticPolicy.minReplicas",
        }
    }

    /// The field (or fields) that suspend a job, for messages.
    pub fn suspend_field(self) -> &'static str {
        match self {
            Self::TrainingJob => "spec.suspend (or the job supervisor's annotation)",
            Self::MpiJob => "spec.runPolicy.suspend",
        }
    }

    /// Reason of the `Suspended` condition of a job suspended by its spec: `Suspended`, or
    /// mpi-operator's `MPIJobSuspended`.
    pub fn suspended_reason(self) -> &'static str {
        match self {
            Self::TrainingJob => "Suspended",
            Self::MpiJob => "MPIJobSuspended",
        }
    }

    /// Reason of the `Suspended` condition of a job that resumed: `Resumed`, or mpi-operator's
    /// `MPIJobResumed`.
    pub fn resumed_reason(self) -> &'static str {
        match self {
            Self::TrainingJob => "Resumed",
            Self::MpiJob => "MPIJobResumed",
        }
    }

    /// The label holding the job's name on its pods.
    pub fn job_name_label(self) -> &'static str {
        match self {
            Self::TrainingJob => JOB_NAME_LABEL,
            Self::MpiJob => MPI_JOB_NAME_LABEL,
        }
    }

    /// The label holding a pod's role (`launcher` or `worker`).
    pub fn role_label(self) -> &'static str {
        match self {
            Self::TrainingJob => JOB_ROLE_LABEL,
            Self::MpiJob => MPI_JOB_ROLE_LABEL,
        }
    }

    /// The label holding a worker's index.
    pub fn index_label(self) -> &'static str {
        match self {
            Self::TrainingJob => REPLICA_INDEX_LABEL,
            Self::MpiJob => MPI_REPLICA_INDEX_LABEL,
        }
    }

    /// The label selector of the workers of job `name`, as the scale subresource reads it.
    pub fn worker_selector(self, name: &str) -> String {
        format!(
            "{}={name},{}={WORKER_ROLE}",
            self.job_name_label(),
            self.role_label()
        )
    }
}

/// A job of any kind, borrowed.
#[derive(Clone, Copy, Debug)]
pub enum JobRef<'a> {
    /// A TrainingJob.
    Training(&'a TrainingJob),
    /// An MPIJob.
    Mpi(&'a MPIJob),
}

impl<'a> JobRef<'a> {
    /// Its kind.
    pub fn kind(self) -> Kind {
        match self {
            Self::Training(_) => Kind::TrainingJob,
            Self::Mpi(_) => Kind::MpiJob,
        }
    }

    /// Its metadata.
    pub fn metadata(self) -> &'a ObjectMeta {
        match self {
            Self::Training(job) => &job.metadata,
            Self::Mpi(job) => &job.metadata,
        }
    }

    /// Its name.
    pub fn name(self) -> &'a str {
        self.metadata().name.as_deref().unwrap_or_default()
    }

    /// Its namespace.
    pub fn namespace(self) -> &'a str {
        self.metadata().namespace.as_deref().unwrap_or("default")
    }

    /// Its uid.
    pub fn uid(self) -> &'a str {
        self.metadata().uid.as_deref().unwrap_or_default()
    }

    /// The pod template of its launcher, if the spec has one.
    pub fn launcher_template(self) -> Option<&'a PodTemplateSpec> {
        match self {
            Self::Training(job) => Some(&job.spec.et_replica_specs.launcher.template),
            Self::Mpi(job) => job
                .spec
                .mpi_replica_specs
                .get(eto_api::mpi_job::LAUNCHER)?
                .template
                .as_ref(),
        }
    }

    /// The pod template of its workers, if the spec has one.
    pub fn worker_template(self) -> Option<&'a PodTemplateSpec> {
        match self {
            Self::Training(job) => Some(&job.spec.et_replica_specs.worker.template),
            Self::Mpi(job) => job
                .spec
                .mpi_replica_specs
                .get(eto_api::mpi_job::WORKER)?
                .template
                .as_ref(),
        }
    }

    /// Its status in the engine's shape (see the module documentation).
    pub fn status(self) -> TrainingJobStatus {
        match self {
            Self::Training(job) => job.status.clone().unwrap_or_default(),
            Self::Mpi(job) => job
                .status
                .as_ref()
                .map(mpi_status::to_engine)
                .unwrap_or_default(),
        }
    }

    /// The owner reference its children carry: controller, blocking owner deletion.
    pub fn owner_reference(self) -> OwnerReference {
        let (api_version, kind) = match self {
            Self::Training(_) => (TrainingJob::api_version(&()), TrainingJob::kind(&())),
            Self::Mpi(_) => (MPIJob::api_version(&()), MPIJob::kind(&())),
        };
        OwnerReference {
            api_version: api_version.into_owned(),
            kind: kind.into_owned(),
            name: self.name().to_string(),
            uid: self.uid().to_string(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }
}

/// Whether the object with `metadata` is controlled by the object whose uid is `uid`: it has a
/// controller owner reference to it. eto's children are controlled by their job, the pods of
/// an MPIJob's launcher by the launcher Job.
pub fn controlled_by(metadata: &ObjectMeta, uid: &str) -> bool {
    metadata
        .owner_references
        .iter()
        .flatten()
        .any(|owner| owner.uid == uid && owner.controller == Some(true))
}

/// A status as the job's API has it, ready to be written.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ApiStatus {
    /// A TrainingJob's.
    TrainingJob(TrainingJobStatus),
    /// An MPIJob's.
    MpiJob(MPIJobStatus),
}

impl ApiStatus {
    /// `status`, planned in the engine's shape, as `kind`'s API has it.
    pub fn of(kind: Kind, status: TrainingJobStatus) -> Self {
        match kind {
            Kind::TrainingJob => Self::TrainingJob(status),
            Kind::MpiJob => Self::MpiJob(mpi_status::from_engine(status)),
        }
    }
}
