//! The kinds of job eto serves, and what differs between them.
//!
//! One engine plans every kind: workers, discovery, losses, restarts, suspension and deadlines
//! are decided once, in [`crate::plan()`]. What a kind contributes lives in its own module
//! ([`training_job`], [`mpi_job`], [`pytorch_job`]): its [`Vocabulary`] (names, fields and
//! labels as its users and their tools know them, and the shape of its runs: what runs the
//! launcher, how workers are named, how a worker pod is built), its validation and defaults
//! (`validation`), its objects (`objects`), and its status document: the engine plans a
//! status in its own shape ([`crate::status::JobStatus`]), and [`ApiStatus`] converts it for
//! the kind's API, which holds only what means something for the kind (the Kubeflow kinds
//! share [`kubeflow_status`]).
//!
//! This module is the one place that names every kind: [`Kind`], [`OwnedJob`] and [`JobRef`]
//! dispatch to the kind's module (its [`Vocabulary`], and its API type's [`ServedJob`]), and
//! everything else (the engine's rules, the controller, `kubectl eto`) asks them. A fourth
//! kind is a module beside the others, a variant in each of those three types and in
//! [`ApiStatus`], and its entry in [`Kind::ALL`].

pub mod kubeflow_status;
pub mod launcher;
pub mod mpi_job;
pub mod pytorch_job;
pub mod served_job;
pub mod training_job;

use crate::status::JobStatus;
use eto_api::TrainingJobStatus;
use eto_api::common::ReplicaRestartPolicy;
use eto_api::job_status::NodeCooldown;
use eto_api::well_known::WORKER_ROLE;
use eto_api::{MPIJob, MPIJobStatus, PyTorchJob, PyTorchJobStatus, TrainingJob};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::core::ApiResource;
use serde::Serialize;

use crate::builders::JobContext;
use crate::child::Child;
use crate::discovery::Host;
use crate::effective_spec::EffectiveSpec;
use crate::parse::parse;
use crate::validation::{FieldError, InvalidSpec};
use launcher::{LauncherInputs, LauncherObjects};
pub use served_job::ServedJob;

/// A kind of job.
// The variants are the kinds' own names, which all end in `Job`.
#[allow(clippy::enum_variant_names)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `TrainingJob` (`kai.alibabacloud.com/v1alpha1`).
    TrainingJob,
    /// `MPIJob` (`kubeflow.org/v2beta1`).
    MpiJob,
    /// `PyTorchJob` (`kubeflow.org/v1`).
    PyTorchJob,
}

/// How a kind names the workers of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerNames {
    /// A name is never used twice in a job's life: Horovod and MPI blacklist hosts by name,
    /// so a replacement, and every worker of a new run, takes a new index.
    NeverReused,
    /// Each run numbers its workers from 0, once the earlier run's pods are gone: a worker's
    /// index is its rank (a static torchrun job's `RANK` is `index + 1`). A worker lost in a
    /// run is not replaced within it.
    PerRun,
}

/// The pod that coordinates a run, besides its workers: the run cannot lose it, and for most
/// kinds its end is the run's. What its users call it is [`Vocabulary::launcher_called`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coordinator {
    /// A launcher pod the job controls, with a ServiceAccount, Role and RoleBinding of its own
    /// (`<job>-launcher`) that let it read its ConfigMap (et-operator's launcher).
    LauncherPod,
    /// A launcher pod run by a batch Job the job controls (mpi-operator's launcher).
    LauncherJob,
    /// The job's Master pod, which trains as rank 0 beside the workers (training-operator
    /// v1's Master): no RBAC, no SSH, no discovery ConfigMap.
    Master,
    /// A pod serving the run's torchrun rendezvous (an elastic PyTorchJob's store, see
    /// [`pytorch_job::rendezvous`]): it trains nothing and launches nothing, and the workers
    /// decide the run's outcome.
    RendezvousStore,
    /// A pod serving the TorchFT quorum of the run's replica groups (a PyTorchJob's
    /// Lighthouse, see [`pytorch_job::replica_groups`]): it trains nothing and launches
    /// nothing, the workers decide the run's outcome, and each group of workers (one pod or
    /// several) comes and goes alone.
    Lighthouse,
}

impl Coordinator {
    /// Whether the workers train as one group that stops and re-forms whenever a worker
    /// joins or leaves (torchrun's agents at a store eto hosts): a worker then leaves only
    /// once the group saved (see [`crate::regroup`]).
    pub fn group_reforms(self) -> bool {
        self == Self::RendezvousStore
    }

    /// Whether a worker removed from a running job drains first (see [`crate::drain`]). A
    /// replica group does not: it leaves the quorum by itself when its training stops, so its
    /// pod is deleted at once, and its training hears of it through the SIGTERM torchrun
    /// forwards, with the pod's grace period to leave between two steps.
    pub fn removed_workers_drain(self) -> bool {
        self != Self::Lighthouse
    }

    /// Whether it is a pod that only serves the workers (a rendezvous store, a Lighthouse):
    /// it never ends by itself, and it serves no one once the job ended.
    pub fn only_serves(self) -> bool {
        matches!(self, Self::RendezvousStore | Self::Lighthouse)
    }

    /// Whether it is a launcher that finds its workers in host discovery (a hostfile and
    /// `discover_hosts.sh`); the workers of the others find each other through torchrun.
    pub fn reads_host_discovery(self) -> bool {
        matches!(self, Self::LauncherPod | Self::LauncherJob)
    }

    /// Its role, as `status.backoff` and the metrics name it: `Launcher`, `Master`,
    /// `RendezvousStore` or `Lighthouse`.
    pub fn role(self) -> &'static str {
        match self {
            Self::LauncherPod | Self::LauncherJob => "Launcher",
            Self::Master => "Master",
            Self::RendezvousStore => "RendezvousStore",
            Self::Lighthouse => "Lighthouse",
        }
    }
}

/// The names, fields and labels of a kind, as its users and their tools know them, and the
/// parts its jobs have.
#[derive(Debug)]
pub struct Vocabulary {
    /// The kind's name, as in `kind:`.
    pub name: &'static str,
    /// The operator whose API it is, as its users call it.
    pub original_operator: &'static str,
    /// `<plural>.<group>`, as RBAC and the API server's errors name the resource.
    pub resource: &'static str,
    /// What a person may write before `/NAME` to name the kind (`kubectl eto`), lower case.
    pub aliases: &'static [&'static str],
    /// The field holding the job's minimum number of workers, for messages.
    pub min_field: &'static str,
    /// The paths of the fields holding the job's minimum and maximum number of workers, for
    /// messages that tell a person what to change.
    pub bound_paths: (&'static str, &'static str),
    /// The keys leading to the job's suspend field, from the object's top.
    pub suspend_keys: &'static [&'static str],
    /// The field (or fields) that suspend a job, for messages.
    pub suspend_field: &'static str,
    /// Reason of the `Suspended` condition of a job suspended by its spec.
    pub suspended_reason: &'static str,
    /// Reason of the `Suspended` condition of a job that resumed.
    pub resumed_reason: &'static str,
    /// The label, and its value, naming the original operator on every object of a job.
    pub operator_label: (&'static str, &'static str),
    /// The label holding the job's name on its pods.
    pub job_name_label: &'static str,
    /// The label holding a pod's role: [`Vocabulary::launcher_role`] or `worker`.
    pub role_label: &'static str,
    /// The value of the role label on the launcher's pod.
    pub launcher_role: &'static str,
    /// What its users call the launcher, in messages: `launcher`, or a PyTorchJob's `Master`.
    pub launcher_called: &'static str,
    /// The name of the launcher (its pod, or the object that runs its pod) of job `job`.
    pub launcher_name: fn(job: &str) -> String,
    /// The label holding a worker's index.
    pub index_label: &'static str,
    /// The headless Service of job `job` that gives its pods their DNS names.
    pub service_name: fn(job: &str) -> String,
    /// The host name of worker `index` of job `job` in `namespace`, as its training reaches
    /// it.
    pub worker_host: fn(job: &str, namespace: &str, index: u32) -> String,
    /// The pod that coordinates its runs.
    pub coordinator: Coordinator,
    /// How it names the workers of a run.
    pub worker_names: WorkerNames,
    /// The type of the SSH Secret eto generates for its jobs.
    pub ssh_secret_type: &'static str,
    /// Worker `index` of a job of the kind, avoiding the nodes `in_cooldown`; `None` if the
    /// spec cannot give one (validation reports why).
    pub worker_pod:
        fn(job: JobContext<'_>, index: u32, in_cooldown: &[NodeCooldown]) -> Option<Pod>,
    /// The objects a run of job `job` needs beside its pods and its launcher, as they should
    /// be now (the Services that name its pods; a launcher's ServiceAccount, Role and
    /// RoleBinding): applied where they differ from what the job has.
    pub supporting_objects: fn(job: JobContext<'_>) -> Vec<Child>,
    /// The launcher of a run of job `job` as it would be now, with what it reads (see
    /// [`launcher`]).
    pub launcher_objects: fn(job: JobContext<'_>, inputs: LauncherInputs<'_>) -> LauncherObjects,
    /// The launcher as a host of discovery, when it trains beside the workers (an MPIJob's
    /// with `runLauncherAsWorker`).
    pub launcher_host: fn(job: JobContext<'_>) -> Option<Host>,
    /// The HorizontalPodAutoscaler job `job` should have now (see [`crate::names::autoscaler`]),
    /// for a kind whose jobs may have one (v1's PyTorchJob, from `elasticPolicy.metrics`).
    pub autoscaler: Option<fn(job: JobContext<'_>) -> Option<HorizontalPodAutoscaler>>,
    /// The container of a worker's pod that runs the training, by name; a pod without a
    /// container of that name (or a kind that names none) trains in its first.
    pub training_container: Option<&'static str>,
}

impl Kind {
    /// How many kinds eto serves.
    pub const COUNT: usize = 3;

    /// The kind whose jobs `ScaleIn` and `ScaleOut` requests (et-operator's, which name a
    /// job of their namespace) scale.
    pub const SCALED_BY_REQUESTS: Self = Self::TrainingJob;

    /// Every kind eto serves, in the order of [`Kind::index`].
    pub const ALL: [Self; Self::COUNT] = [Self::TrainingJob, Self::MpiJob, Self::PyTorchJob];

    /// Its position in [`Kind::ALL`], for tables with an entry per kind.
    pub const fn index(self) -> usize {
        match self {
            Self::TrainingJob => 0,
            Self::MpiJob => 1,
            Self::PyTorchJob => 2,
        }
    }

    /// Its names, fields and labels.
    pub fn vocabulary(self) -> &'static Vocabulary {
        match self {
            Self::TrainingJob => &training_job::VOCABULARY,
            Self::MpiJob => &mpi_job::VOCABULARY,
            Self::PyTorchJob => &pytorch_job::VOCABULARY,
        }
    }

    /// The kind of the API group `group` whose objects are of kind `kind`, if eto serves it.
    /// Cheap: every change of a job's child asks it.
    pub fn of_api(group: &str, kind: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|served| served.vocabulary().name == kind && served.group() == group)
    }

    /// Its API group, the part of [`Vocabulary::resource`] after the plural.
    pub fn group(self) -> &'static str {
        self.vocabulary()
            .resource
            .split_once('.')
            .map_or("", |(_, group)| group)
    }

    /// Its resource's plural name, the part of [`Vocabulary::resource`] before the group.
    pub fn plural(self) -> &'static str {
        self.vocabulary()
            .resource
            .split_once('.')
            .map_or(self.vocabulary().resource, |(plural, _)| plural)
    }

    /// The kind a person names with `alias` (`tj`, `mpijobs`, ...; any case).
    pub fn of_alias(alias: &str) -> Option<Self> {
        let alias = alias.to_ascii_lowercase();
        Self::ALL
            .into_iter()
            .find(|kind| kind.vocabulary().aliases.contains(&alias.as_str()))
    }

    /// Its API resource, for untyped requests.
    pub fn api_resource(self) -> ApiResource {
        match self {
            Self::TrainingJob => ApiResource::erase::<TrainingJob>(&()),
            Self::MpiJob => ApiResource::erase::<MPIJob>(&()),
            Self::PyTorchJob => ApiResource::erase::<PyTorchJob>(&()),
        }
    }

    /// Whether `ScaleIn` and `ScaleOut` requests scale its jobs.
    pub fn scaled_by_requests(self) -> bool {
        self == Self::SCALED_BY_REQUESTS
    }

    /// Whether its jobs may have a HorizontalPodAutoscaler of their own (see
    /// [`Vocabulary::autoscaler`]).
    pub fn autoscaled_by_metrics(self) -> bool {
        self.vocabulary().autoscaler.is_some()
    }

    /// A condition or event reason: the kind's name followed by `what`, as both et-operator
    /// (`TrainingJobSucceeded`) and mpi-operator (`MPIJobSucceeded`) spell them.
    pub fn reason(self, what: &str) -> String {
        format!("{}{what}", self.vocabulary().name)
    }

    /// The merge patch that sets a job's suspend field to `suspend`.
    pub fn suspend_patch(self, suspend: bool) -> serde_json::Value {
        self.vocabulary().suspend_keys.iter().rev().fold(
            serde_json::Value::Bool(suspend),
            |inner, key| serde_json::json!({ *key: inner }),
        )
    }

    /// The suffix of a message that counts workers, saying where they are listed: ` in host
    /// discovery` for the kinds whose launcher finds its workers there, nothing for a
    /// PyTorchJob's.
    pub fn hosts_listed_suffix(self) -> &'static str {
        if self.vocabulary().coordinator.reads_host_discovery() {
            " in host discovery"
        } else {
            ""
        }
    }

    /// The name of the launcher (its pod, or the object that runs its pod) of job `job`.
    pub fn launcher_name(self, job: &str) -> String {
        (self.vocabulary().launcher_name)(job)
    }

    /// The headless Service of job `job` that gives its pods their DNS names.
    pub fn service_name(self, job: &str) -> String {
        (self.vocabulary().service_name)(job)
    }

    /// The host name of worker `index` of job `job` in `namespace`, as its training reaches
    /// it.
    pub fn worker_host(self, job: &str, namespace: &str, index: u32) -> String {
        (self.vocabulary().worker_host)(job, namespace, index)
    }

    /// The label selector of the workers of job `name`, as the scale subresource reads it.
    pub fn worker_selector(self, name: &str) -> String {
        format!(
            "{}={name},{}={WORKER_ROLE}",
            self.vocabulary().job_name_label,
            self.vocabulary().role_label
        )
    }

    /// Whether eto runs `job`, an object of this kind as JSON, or leaves it to the controller
    /// its spec names (a Kubeflow job's `spec.runPolicy.managedBy`).
    pub fn managed_by_eto(self, job: &serde_json::Value) -> bool {
        match self {
            Self::TrainingJob => true,
            Self::MpiJob => mpi_job::managed_by_eto(job),
            Self::PyTorchJob => pytorch_job::managed_by_eto(job),
        }
    }

    /// What the training container of a worker's pod `pod` is doing (see
    /// [`Vocabulary::training_container`]).
    pub fn training_activity(self, pod: &Pod) -> crate::pods::Activity {
        crate::pods::activity(pod, self.vocabulary().training_container)
    }

    /// The stored `status` of a job of this kind that does not decode, in the engine's shape,
    /// when the status itself does.
    pub fn stored_status(self, status: serde_json::Value) -> Option<JobStatus> {
        match self {
            Self::TrainingJob => training_job::stored_status(status),
            Self::MpiJob => mpi_job::stored_status(status),
            Self::PyTorchJob => pytorch_job::stored_status(status),
        }
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
}

impl OwnedJob {
    /// Decodes `value`, an object of `kind`.
    ///
    /// # Errors
    /// A [`FieldError`] naming the first field that does not fit (see [`crate::parse`]).
    pub fn parse(kind: Kind, value: serde_json::Value) -> Result<Self, FieldError> {
        Ok(match kind {
            Kind::TrainingJob => Self::Training(Box::new(parse(value)?)),
            Kind::MpiJob => Self::Mpi(Box::new(parse(value)?)),
            Kind::PyTorchJob => Self::PyTorch(Box::new(parse(value)?)),
        })
    }

    /// The job, borrowed as the engine takes it.
    pub fn as_ref(&self) -> JobRef<'_> {
        match self {
            Self::Training(job) => JobRef::Training(job),
            Self::Mpi(job) => JobRef::Mpi(job),
            Self::PyTorch(job) => JobRef::PyTorch(job),
        }
    }

    /// The job as its API has it.
    pub fn to_value(&self) -> serde_json::Value {
        let value = match self {
            Self::Training(job) => serde_json::to_value(job),
            Self::Mpi(job) => serde_json::to_value(job),
            Self::PyTorch(job) => serde_json::to_value(job),
        };
        value.unwrap_or_default()
    }
}

/// A job of any kind, borrowed.
#[derive(Clone, Copy, Debug)]
pub enum JobRef<'a> {
    /// A TrainingJob.
    Training(&'a TrainingJob),
    /// An MPIJob.
    Mpi(&'a MPIJob),
    /// A PyTorchJob.
    PyTorch(&'a PyTorchJob),
}

impl<'a> JobRef<'a> {
    /// Its kind.
    pub fn kind(self) -> Kind {
        self.served().kind()
    }

    /// The job, as its kind answers for it.
    fn served(self) -> &'a dyn ServedJob {
        match self {
            Self::Training(job) => job,
            Self::Mpi(job) => job,
            Self::PyTorch(job) => job,
        }
    }

    /// Its metadata.
    pub fn metadata(self) -> &'a ObjectMeta {
        self.served().metadata()
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

    /// See [`ServedJob::launcher_template`].
    pub fn launcher_template(self) -> Option<&'a PodTemplateSpec> {
        self.served().launcher_template()
    }

    /// See [`ServedJob::worker_template`].
    pub fn worker_template(self) -> Option<&'a PodTemplateSpec> {
        self.served().worker_template()
    }

    /// See [`ServedJob::engine_status`].
    pub fn status(self) -> JobStatus {
        self.served().engine_status()
    }

    /// See [`ServedJob::started_by_another_operator`].
    pub fn started_by_another_operator(self) -> bool {
        self.served().started_by_another_operator()
    }

    /// See [`ServedJob::replica_restart_policy`].
    pub fn replica_restart_policy(self) -> Option<ReplicaRestartPolicy> {
        self.served().replica_restart_policy()
    }

    /// See [`ServedJob::first_worker_success_decides`].
    pub fn first_worker_success_decides(self) -> bool {
        self.served().first_worker_success_decides()
    }

    /// See [`ServedJob::pod_service_names`].
    pub fn pod_service_names(self) -> Vec<String> {
        self.served().pod_service_names()
    }

    /// See [`ServedJob::coordinator`].
    pub fn coordinator(self) -> Coordinator {
        self.served().coordinator()
    }

    /// See [`ServedJob::group_report_source`].
    pub fn group_report_source(self, pods: &[&Pod]) -> Option<crate::group_report::ReportSource> {
        self.served().group_report_source(pods)
    }

    /// See [`ServedJob::seat_workers`].
    pub fn seat_workers(
        self,
        groups: u32,
        target: &[u32],
        pods: &std::collections::BTreeMap<u32, &Pod>,
        new: &mut std::collections::BTreeMap<u32, Pod>,
    ) -> std::collections::BTreeMap<u32, std::collections::BTreeMap<String, String>> {
        self.served().seat_workers(groups, target, pods, new)
    }

    /// See [`ServedJob::spares_kept`].
    pub fn spares_kept(self) -> crate::spares::KeptWhen {
        self.served().spares_kept()
    }

    /// See [`ServedJob::silent_group_workers`].
    pub fn silent_group_workers(
        self,
        pods: &std::collections::BTreeMap<u32, &Pod>,
        quorum: &crate::quorum_report::QuorumReport,
        grace: std::time::Duration,
    ) -> std::collections::BTreeMap<u32, f64> {
        self.served().silent_group_workers(pods, quorum, grace)
    }

    /// See [`ServedJob::waiting_spares`].
    pub fn waiting_spares(
        self,
        pods: &std::collections::BTreeMap<u32, &Pod>,
    ) -> std::collections::BTreeSet<u32> {
        self.served().waiting_spares(pods)
    }

    /// See [`ServedJob::worker_groups`].
    pub fn worker_groups(
        self,
        pods: &std::collections::BTreeMap<u32, &Pod>,
    ) -> std::collections::BTreeMap<u32, u32> {
        self.served().worker_groups(pods)
    }

    /// See [`ServedJob::pods_per_group`].
    pub fn pods_per_group(self) -> u32 {
        self.served().pods_per_group()
    }

    /// See [`ServedJob::heartbeat_timeout`].
    pub fn heartbeat_timeout(self) -> Option<std::time::Duration> {
        self.served().heartbeat_timeout()
    }

    /// See [`ServedJob::worker_names`].
    pub fn worker_names(self) -> WorkerNames {
        self.served().worker_names()
    }

    /// See [`ServedJob::coordinator_role`].
    pub fn coordinator_role(self) -> &'static str {
        self.served().coordinator_role()
    }

    /// See [`ServedJob::launcher_name`].
    pub fn launcher_name(self) -> String {
        self.served().launcher_name()
    }

    /// See [`ServedJob::min_field`].
    pub fn min_field(self) -> &'static str {
        self.served().min_field()
    }

    /// See [`ServedJob::launcher_called`].
    pub fn launcher_called(self) -> &'static str {
        self.served().launcher_called()
    }

    /// See [`ServedJob::validate`].
    ///
    /// # Errors
    /// [`InvalidSpec`] listing every rule the job breaks, each naming its field.
    pub fn validate(self) -> Result<EffectiveSpec, InvalidSpec> {
        self.served().validate()
    }

    /// The owner reference its children carry: controller, blocking owner deletion.
    pub fn owner_reference(self) -> OwnerReference {
        let resource = self.kind().api_resource();
        OwnerReference {
            api_version: resource.api_version,
            kind: resource.kind,
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
    /// A PyTorchJob's.
    PyTorchJob(Box<PyTorchJobStatus>),
}

impl ApiStatus {
    /// `status` of job `job`, planned in the engine's shape, as `kind`'s API has it.
    pub fn of(kind: Kind, job: &str, status: JobStatus) -> Self {
        match kind {
            Kind::TrainingJob => Self::TrainingJob(training_job::status::from_engine(status)),
            Kind::MpiJob => Self::MpiJob(mpi_job::status::from_engine(status)),
            Kind::PyTorchJob => {
                Self::PyTorchJob(Box::new(pytorch_job::status::from_engine(job, status)))
            }
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
            Kind::TrainingJob.vocabulary().coordinator,
            Coordinator::LauncherPod
        );
        assert_eq!(
            Kind::MpiJob.vocabulary().coordinator,
            Coordinator::LauncherJob
        );
        let scaled: Vec<Kind> = Kind::ALL
            .into_iter()
            .filter(|kind| kind.scaled_by_requests())
            .collect();
        assert_eq!(scaled, [Kind::TrainingJob]);
    }

    #[test]
    fn the_suspend_patch_sets_the_kinds_own_field() {
        assert_eq!(
            Kind::TrainingJob.suspend_patch(true),
            json!({"spec": {"suspend": true}})
        );
        assert_eq!(
            Kind::MpiJob.suspend_patch(false),
            json!({"spec": {"runPolicy": {"suspend": false}}})
        );
    }

    #[test]
    fn only_an_mpi_job_may_be_left_to_another_controller() {
        let managed_by = |manager: &str| json!({"spec": {"runPolicy": {"managedBy": manager}}});
        assert!(Kind::TrainingJob.managed_by_eto(&managed_by("kubeflow.org/mpi-operator")));
        assert!(Kind::MpiJob.managed_by_eto(&json!({"spec": {}})));
        assert!(Kind::MpiJob.managed_by_eto(&managed_by("eto.dev/operator")));
        assert!(!Kind::MpiJob.managed_by_eto(&managed_by("kubeflow.org/mpi-operator")));
        assert!(!Kind::MpiJob.managed_by_eto(&managed_by("kueue.x-k8s.io/multikueue")));
    }

    #[test]
    fn a_stored_status_is_read_in_the_engines_shape() {
        let status = Kind::TrainingJob
            .stored_status(json!({"phase": "Running", "restartCount": 2}))
            .unwrap();
        assert_eq!(status.restart_count, 2);
        let status = Kind::MpiJob
            .stored_status(json!({"restartCount": 3}))
            .unwrap();
        assert_eq!(status.restart_count, 3);
        assert_eq!(Kind::TrainingJob.stored_status(json!("no status")), None);
    }

    #[test]
    fn an_owned_job_is_parsed_by_its_kind_and_names_a_field_that_does_not_fit() {
        let job = json!({
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": {"name": "pi", "namespace": "team"},
            "spec": {"mpiReplicaSpecs": {}}
        });
        let parsed = OwnedJob::parse(Kind::MpiJob, job.clone()).unwrap();
        assert_eq!(parsed.as_ref().kind(), Kind::MpiJob);
        assert_eq!(parsed.as_ref().name(), "pi");
        assert_eq!(parsed.to_value()["metadata"]["namespace"], "team");
        let error = OwnedJob::parse(Kind::TrainingJob, job).unwrap_err();
        assert!(error.field.starts_with("spec"), "{error}");
    }
}
