//! A kind of job as the engine knows it: its [`Vocabulary`] (names, fields and labels as its
//! users and their tools know them, and the shape of its runs), what [`Coordinator`] its runs
//! have and how it names its workers. Each kind's module defines its vocabulary; the
//! registry (`crate::kind`) lists the kinds.

use eto_api::job_status::NodeCooldown;
use eto_api::well_known::WORKER_ROLE;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use kube::core::ApiResource;

use super::context::JobContext;
use super::launcher::{LauncherInputs, LauncherObjects};
use crate::child::Child;
use crate::discovery::Host;
use crate::status::JobStatus;

/// A kind of job: the vocabulary its module defines. Two kinds are the same when their names
/// are.
#[derive(Clone, Copy)]
pub struct Kind {
    vocabulary: &'static Vocabulary,
}

impl PartialEq for Kind {
    fn eq(&self, other: &Self) -> bool {
        self.vocabulary.name == other.vocabulary.name
    }
}

impl Eq for Kind {}

impl std::hash::Hash for Kind {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.vocabulary.name.hash(state);
    }
}

impl std::fmt::Debug for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.vocabulary.name)
    }
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
/// kinds its end is the run's. What its users call it is [`Vocabulary::launcher_called`]. A
/// kind's module defines its coordinators as constants; shared code asks only what it does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coordinator {
    /// Its role, as `status.backoff` and the metrics name it (`Launcher`, `Master`, ...).
    pub role: &'static str,
    /// Whether it is a launcher pod with a ServiceAccount, Role and RoleBinding of its own
    /// (`<job>-launcher`) that let it read its ConfigMap.
    pub has_own_rbac: bool,
    /// Whether its pod runs under a batch Job the job controls.
    pub runs_in_a_batch_job: bool,
    /// Whether it trains as rank 0 beside the workers: then it needs no RBAC, no SSH and no
    /// discovery ConfigMap.
    pub trains: bool,
    /// Whether it is a pod that only serves the workers: it trains nothing and launches
    /// nothing, never ends by itself, serves no one once the job ended, and the workers decide
    /// the run's outcome.
    pub only_serves: bool,
    /// Whether it is a launcher that finds its workers in host discovery (a hostfile and
    /// `discover_hosts.sh`); the workers of the others find each other by themselves.
    pub reads_host_discovery: bool,
    /// Whether the workers train as one group that stops and re-forms whenever a worker
    /// joins or leaves, at a store the coordinator serves: a worker then leaves only once the
    /// group saved (see [`crate::reforming_group`]).
    pub group_reforms: bool,
    /// Whether the workers train as groups that each come and go alone, the others training
    /// on, and the coordinator is replaced within the run when it is lost: its end is no
    /// outcome of the run.
    pub groups_stand_alone: bool,
}

impl Coordinator {
    /// A coordinator that does none of what the fields name, with role `role`: the base the
    /// kinds' constants start from.
    pub const fn plain(role: &'static str) -> Self {
        Self {
            role,
            has_own_rbac: false,
            runs_in_a_batch_job: false,
            trains: false,
            only_serves: false,
            reads_host_discovery: false,
            group_reforms: false,
            groups_stand_alone: false,
        }
    }

    /// Whether a worker removed from a running job drains first (see [`crate::drain`]). A
    /// group that stands alone does not: it leaves by itself when its training stops, so its
    /// pod is deleted at once, and its training hears of it through the SIGTERM, with the
    /// pod's grace period to leave between two steps.
    pub fn removed_workers_drain(self) -> bool {
        !self.groups_stand_alone
    }
}

/// An object a job names whose content its plan reads (a TrainJob's runtime): the controller
/// reads it with the job (see [`Vocabulary::reference`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Reference {
    /// Its API resource.
    pub resource: ApiResource,
    /// Its namespace; `None` for a cluster-scoped object.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

/// What the controller found of the object a job names (see [`Reference`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Referenced {
    /// The object, as JSON.
    Found(serde_json::Value),
    /// It does not exist.
    Missing,
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
    /// [`crate::job::launcher`]).
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
    /// Its API resource, for untyped requests.
    pub api_resource: fn() -> ApiResource,
    /// The object job `job` (as JSON) names whose content its plan reads, if the kind's jobs
    /// name one (a TrainJob's runtime): read with the job, it is given to
    /// `crate::kind::OwnedJob::parse`.
    pub reference: Option<fn(job: &serde_json::Value) -> Option<Reference>>,
    /// Whether eto runs a job of the kind, as JSON, or leaves it to the controller its spec
    /// names (a Kubeflow job's `spec.runPolicy.managedBy`).
    pub managed_by_eto: fn(job: &serde_json::Value) -> bool,
    /// The stored `status` of a job of the kind that does not decode, in the engine's shape,
    /// when the status itself does.
    pub stored_status: fn(status: serde_json::Value) -> Option<JobStatus>,
    /// Whether `ScaleIn` and `ScaleOut` requests (et-operator's, which name a job of their
    /// namespace) scale its jobs.
    pub scaled_by_requests: bool,
    /// Whether the operator serves it when its `--kinds` names none: a kind whose original
    /// operator is usually not installed beside eto.
    pub served_by_default: bool,
}

impl Kind {
    /// The kind whose names, fields and labels are `vocabulary`.
    pub const fn new(vocabulary: &'static Vocabulary) -> Self {
        Self { vocabulary }
    }

    /// Its names, fields and labels.
    pub fn vocabulary(self) -> &'static Vocabulary {
        self.vocabulary
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

    /// Its API resource, for untyped requests.
    pub fn api_resource(self) -> ApiResource {
        (self.vocabulary.api_resource)()
    }

    /// Whether `ScaleIn` and `ScaleOut` requests scale its jobs.
    pub fn scaled_by_requests(self) -> bool {
        self.vocabulary.scaled_by_requests
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
        if self.vocabulary().coordinator.reads_host_discovery {
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

    /// The object `job` (as JSON) names whose content its plan reads (see
    /// [`Vocabulary::reference`]).
    pub fn reference(self, job: &serde_json::Value) -> Option<Reference> {
        self.vocabulary()
            .reference
            .and_then(|reference| reference(job))
    }

    /// Whether eto runs `job`, an object of this kind as JSON, or leaves it to the controller
    /// its spec names (a Kubeflow job's `spec.runPolicy.managedBy`).
    pub fn managed_by_eto(self, job: &serde_json::Value) -> bool {
        (self.vocabulary.managed_by_eto)(job)
    }

    /// What the training container of a worker's pod `pod` is doing (see
    /// [`Vocabulary::training_container`]).
    pub fn training_activity(self, pod: &Pod) -> crate::pods::Activity {
        crate::pods::activity(pod, self.vocabulary().training_container)
    }

    /// The stored `status` of a job of this kind that does not decode, in the engine's shape,
    /// when the status itself does.
    pub fn stored_status(self, status: serde_json::Value) -> Option<JobStatus> {
        (self.vocabulary.stored_status)(status)
    }
}
