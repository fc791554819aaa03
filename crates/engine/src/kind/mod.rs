//! The kinds of job eto serves: the registry.
//!
//! One engine plans every kind: workers, discovery, losses, restarts, suspension and deadlines
//! are decided once, in [`crate::plan()`]. What a kind contributes lives in its own module
//! ([`training_job`], [`mpi_job`], [`pytorch_job`]): its [`Vocabulary`] (names, fields and
//! labels as its users and their tools know them, and the shape of its runs: what runs the
//! launcher, how workers are named, how a worker pod is built), its [`ServedJob`], its
//! validation and defaults (`validation`), its objects (`objects`), and its status document:
//! the engine plans a status in its own shape ([`crate::status::JobStatus`]), and
//! [`ApiStatus`] converts it for the kind's API, which holds only what means something for the
//! kind (the Kubeflow kinds share [`kubeflow_status`]).
//!
//! This module is the one place that names every kind: [`Kind::ALL`] and the constants
//! naming each kind, [`OwnedJob`] (a job of any kind, owned, as it is decoded) and
//! [`ApiStatus`]. Everything else (the engine's rules, the controller, `kubectl eto`) asks a
//! [`Kind`] or a [`JobRef`] (see [`crate::job`]). A fourth kind is a module beside the
//! others, its constant and entry in [`Kind::ALL`], and a variant in [`OwnedJob`] and
//! [`ApiStatus`].

pub mod kubeflow_status;
pub mod mpi_job;
pub mod pytorch_job;
pub mod train_job;
pub mod training_job;

use eto_api::TrainingJobStatus;
use eto_api::train_job::TrainJobStatus;
use eto_api::{MPIJob, MPIJobStatus, PyTorchJob, PyTorchJobStatus, TrainingJob};
use serde::Serialize;

use crate::field_error::FieldError;
use crate::job::{JobRef, Kind, Referenced};
#[cfg(doc)]
use crate::job::{ServedJob, Vocabulary};
use crate::parse::parse;
use crate::status::JobStatus;

impl Kind {
    /// `TrainingJob` (`kai.alibabacloud.com/v1alpha1`).
    pub const TRAINING_JOB: Self = Self::new(&training_job::VOCABULARY);
    /// `MPIJob` (`kubeflow.org/v2beta1`).
    pub const MPI_JOB: Self = Self::new(&mpi_job::VOCABULARY);
    /// `PyTorchJob` (`kubeflow.org/v1`).
    pub const PYTORCH_JOB: Self = Self::new(&pytorch_job::VOCABULARY);

    /// `TrainJob` (`trainer.kubeflow.org/v1alpha1`).
    pub const TRAIN_JOB: Self = Self::new(&train_job::VOCABULARY);

    /// How many kinds eto serves.
    pub const COUNT: usize = 4;

    /// Every kind eto serves, in the order of [`Kind::index`].
    pub const ALL: [Self; Self::COUNT] = [
        Self::TRAINING_JOB,
        Self::MPI_JOB,
        Self::PYTORCH_JOB,
        Self::TRAIN_JOB,
    ];

    /// The kind whose jobs `ScaleIn` and `ScaleOut` requests (et-operator's, which name a
    /// job of their namespace) scale.
    pub const SCALED_BY_REQUESTS: Self = Self::TRAINING_JOB;

    /// Its position in [`Kind::ALL`], for tables with an entry per kind.
    pub fn index(self) -> usize {
        Self::ALL
            .iter()
            .position(|kind| *kind == self)
            .unwrap_or_default()
    }

    /// The kind of the API group `group` whose objects are of kind `kind`, if eto serves it.
    /// Cheap: every change of a job's child asks it.
    pub fn of_api(group: &str, kind: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|served| served.vocabulary().name == kind && served.group() == group)
    }

    /// The kind a person names with `alias` (`tj`, `mpijobs`, ...; any case).
    pub fn of_alias(alias: &str) -> Option<Self> {
        let alias = alias.to_ascii_lowercase();
        Self::ALL
            .into_iter()
            .find(|kind| kind.vocabulary().aliases.contains(&alias.as_str()))
    }
}

/// A job of any kind, owned (boxed: a TrainingJob is several times larger than an MPIJob).
#[derive(Clone, Debug)]
pub enum OwnedJob {
    /// A TrainingJob.
    Training(Box<TrainingJob>),
    /// An MPIJob.
    Mpi(Box<MPIJob>),
    /// A PyTorchJob.
    PyTorch(Box<PyTorchJob>),
    /// A TrainJob, with its runtime.
    Train(Box<train_job::ResolvedTrainJob>),
}

impl OwnedJob {
    /// Decodes `value`, an object of `kind`, with what the controller found of the object it
    /// names, `referenced` (see [`crate::job::Vocabulary::reference`]; a TrainJob's runtime,
    /// missing when not given).
    ///
    /// # Errors
    /// A [`FieldError`] naming the first field that does not fit (see [`crate::parse`]).
    pub fn parse(
        kind: Kind,
        value: serde_json::Value,
        referenced: Option<&Referenced>,
    ) -> Result<Self, FieldError> {
        Ok(if kind == Kind::TRAINING_JOB {
            Self::Training(Box::new(parse(value)?))
        } else if kind == Kind::MPI_JOB {
            Self::Mpi(Box::new(parse(value)?))
        } else if kind == Kind::PYTORCH_JOB {
            Self::PyTorch(Box::new(parse(value)?))
        } else {
            let runtime = referenced.unwrap_or(&Referenced::Missing);
            Self::Train(Box::new(train_job::ResolvedTrainJob::new(
                parse(value)?,
                runtime,
            )))
        })
    }

    /// The job, borrowed as the engine takes it.
    pub fn as_ref(&self) -> JobRef<'_> {
        match self {
            Self::Training(job) => JobRef::new(job.as_ref()),
            Self::Mpi(job) => JobRef::new(job.as_ref()),
            Self::PyTorch(job) => JobRef::new(job.as_ref()),
            Self::Train(job) => JobRef::new(job.as_ref()),
        }
    }

    /// The job as its API has it.
    pub fn to_value(&self) -> serde_json::Value {
        let value = match self {
            Self::Training(job) => serde_json::to_value(job),
            Self::Mpi(job) => serde_json::to_value(job),
            Self::PyTorch(job) => serde_json::to_value(job),
            Self::Train(job) => serde_json::to_value(&job.job),
        };
        value.unwrap_or_default()
    }
}

/// A status as the job's API has it, ready to be written.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ApiStatus {
    /// A TrainingJob's.
    TrainingJob(TrainingJobStatus),
    /// An MPIJob's.
    MpiJob(MPIJobStatus),
    /// A PyTorchJob's.
    PyTorchJob(Box<PyTorchJobStatus>),
    /// A TrainJob's.
    TrainJob(Box<TrainJobStatus>),
}

impl ApiStatus {
    /// `status` of job `job`, planned in the engine's shape, as `kind`'s API has it.
    pub fn of(kind: Kind, job: &str, status: JobStatus) -> Self {
        if kind == Kind::TRAINING_JOB {
            Self::TrainingJob(training_job::status::from_engine(status))
        } else if kind == Kind::MPI_JOB {
            Self::MpiJob(mpi_job::status::from_engine(status))
        } else if kind == Kind::PYTORCH_JOB {
            Self::PyTorchJob(Box::new(pytorch_job::status::from_engine(job, status)))
        } else {
            Self::TrainJob(Box::new(train_job::status::from_engine(status)))
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[test]
    fn every_kind_is_found_by_its_api_and_by_its_aliases() {
        for (index, kind) in Kind::ALL.into_iter().enumerate() {
            assert_eq!(kind.index(), index);
            let resource = kind.api_resource();
            assert_eq!(Kind::of_api(&resource.group, &resource.kind), Some(kind));
            assert_eq!(kind.group(), resource.group);
            assert_eq!(
                kind.vocabulary().resource,
                format!("{}.{}", resource.plural, resource.group)
            );
            for alias in kind.vocabulary().aliases {
                assert_eq!(Kind::of_alias(alias), Some(kind));
                assert_eq!(Kind::of_alias(&alias.to_ascii_uppercase()), Some(kind));
            }
        }
        assert_eq!(Kind::of_api("batch", "Job"), None);
        assert_eq!(Kind::of_api("kubeflow.org", "TrainingJob"), None);
        assert_eq!(Kind::of_alias("tfjob"), None);
    }

    #[test]
    fn each_kind_has_its_launcher_and_only_training_jobs_take_scale_requests() {
        assert_eq!(
            Kind::TRAINING_JOB.vocabulary().coordinator,
            training_job::LAUNCHER_POD
        );
        assert_eq!(
            Kind::MPI_JOB.vocabulary().coordinator,
            mpi_job::LAUNCHER_JOB_POD
        );
        let scaled: Vec<Kind> = Kind::ALL
            .into_iter()
            .filter(|kind| kind.scaled_by_requests())
            .collect();
        assert_eq!(scaled, [Kind::TRAINING_JOB]);
    }

    #[test]
    fn the_suspend_patch_sets_the_kinds_own_field() {
        assert_eq!(
            Kind::TRAINING_JOB.suspend_patch(true),
            json!({"spec": {"suspend": true}})
        );
        assert_eq!(
            Kind::MPI_JOB.suspend_patch(false),
            json!({"spec": {"runPolicy": {"suspend": false}}})
        );
    }

    #[test]
    fn only_an_mpi_job_may_be_left_to_another_controller() {
        let managed_by = |manager: &str| json!({"spec": {"runPolicy": {"managedBy": manager}}});
        assert!(Kind::TRAINING_JOB.managed_by_eto(&managed_by("kubeflow.org/mpi-operator")));
        assert!(Kind::MPI_JOB.managed_by_eto(&json!({"spec": {}})));
        assert!(Kind::MPI_JOB.managed_by_eto(&managed_by("eto.dev/operator")));
        assert!(!Kind::MPI_JOB.managed_by_eto(&managed_by("kubeflow.org/mpi-operator")));
        assert!(!Kind::MPI_JOB.managed_by_eto(&managed_by("kueue.x-k8s.io/multikueue")));
    }

    #[test]
    fn a_stored_status_is_read_in_the_engines_shape() {
        let status = Kind::TRAINING_JOB
            .stored_status(json!({"phase": "Running", "restartCount": 2}))
            .unwrap();
        assert_eq!(status.restart_count, 2);
        let status = Kind::MPI_JOB
            .stored_status(json!({"restartCount": 3}))
            .unwrap();
        assert_eq!(status.restart_count, 3);
        assert_eq!(Kind::TRAINING_JOB.stored_status(json!("no status")), None);
    }

    /// The kind an [`ApiStatus`] is the status of.
    fn kind_of_status(status: &ApiStatus) -> Kind {
        match status {
            ApiStatus::TrainingJob(_) => Kind::TRAINING_JOB,
            ApiStatus::MpiJob(_) => Kind::MPI_JOB,
            ApiStatus::PyTorchJob(_) => Kind::PYTORCH_JOB,
            ApiStatus::TrainJob(_) => Kind::TRAIN_JOB,
        }
    }

    /// The registry's dispatches compare kinds one by one and give the last arm whatever is
    /// left: a kind added to `Kind::ALL` without its own arm fails here.
    #[test]
    fn every_registered_kind_decodes_and_reports_as_itself() {
        let fixtures = [
            serde_json::to_value(crate::testing::training_job()),
            serde_json::to_value(crate::testing::mpi_job()),
            serde_json::to_value(crate::testing::pytorch_job()),
            serde_json::to_value(crate::testing::train_job()),
        ]
        .map(Result::unwrap);
        for kind in Kind::ALL {
            let job = fixtures
                .iter()
                .find(|job| job["kind"] == kind.vocabulary().name)
                .unwrap_or_else(|| panic!("no test job of kind {kind:?}"))
                .clone();
            let runtime = Referenced::Found(crate::testing::torch_distributed());
            let parsed = OwnedJob::parse(kind, job, Some(&runtime)).unwrap();
            assert_eq!(parsed.as_ref().kind(), kind);
            let status = ApiStatus::of(kind, "j", JobStatus::default());
            assert_eq!(kind_of_status(&status), kind);
        }
    }

    #[test]
    fn an_owned_job_is_parsed_by_its_kind_and_names_a_field_that_does_not_fit() {
        let job = json!({
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": {"name": "pi", "namespace": "team"},
            "spec": {"mpiReplicaSpecs": {}}
        });
        let parsed = OwnedJob::parse(Kind::MPI_JOB, job.clone(), None).unwrap();
        assert_eq!(parsed.as_ref().kind(), Kind::MPI_JOB);
        assert_eq!(parsed.as_ref().name(), "pi");
        assert_eq!(parsed.to_value()["metadata"]["namespace"], "team");
        let error = OwnedJob::parse(Kind::TRAINING_JOB, job, None).unwrap_err();
        assert!(error.field.starts_with("spec"), "{error}");
    }
}
