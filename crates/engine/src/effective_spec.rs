//! A job's spec after validation, with every default applied.

use std::time::Duration;

use eto_api::common::CleanPodPolicy;
use eto_api::common::ReplicaRestartPolicy;
use eto_api::kubeflow::SchedulingPolicy;
use eto_api::mpi_job::MpiImplementation;
use eto_api::training_job::JobRestartPolicy;

/// What a job asks for, validated and with every default applied.
///
/// Only [`crate::validation`] builds one, so holding an `EffectiveSpec` means the spec passed
/// every rule. The pod templates are not copied here: planners read them from the job itself.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectiveSpec {
    /// Worker counts.
    pub workers: WorkerCounts,
    /// Processes per worker, the `slots` of each host line.
    pub slots_per_worker: u32,
    /// Which pods go when the job succeeds (`Running` when unset, as in et-operator).
    pub clean_pod_policy: CleanPodPolicy,
    /// What a launcher failure does to the job.
    pub job_restart_policy: JobRestartPolicy,
    /// Job restarts allowed with [`JobRestartPolicy::OnFailure`].
    pub backoff_limit: u32,
    /// When stopped workers are replaced (`Never` when unset).
    pub worker_restart_policy: ReplicaRestartPolicy,
    /// Whether the job is to be suspended (`spec.suspend`, or the annotation
    /// `job-supervisor.kube-ai.io/job-suspended: "true"`).
    pub suspend: bool,
    /// How long the job may run from its start time.
    pub active_deadline: Option<Duration>,
    /// How long a finished job is kept.
    pub ttl_after_finished: Option<Duration>,
    /// Waiting, suspend and blacklist settings.
    pub elastic: ElasticSettings,
    /// The SSH key pair mounted into launcher and workers.
    pub ssh_secret: SshSecretSource,
    /// When the launcher of a run is created.
    pub launcher_start: LauncherStart,
    /// An MPIJob's settings; `None` for the other kinds.
    pub mpi: Option<MpiSettings>,
    /// A Kubeflow job's `spec.runPolicy.schedulingPolicy`, read when a gang scheduler is
    /// configured.
    pub scheduling_policy: Option<SchedulingPolicy>,
}

/// When the launcher of a run is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LauncherStart {
    /// Once the minimum of workers is ready (a TrainingJob; an MPIJob with
    /// `launcherCreationPolicy: WaitForWorkersReady`).
    WhenMinReady,
    /// With the workers (an MPIJob with `launcherCreationPolicy: AtStartup`).
    AtStartup,
}

/// What only an MPIJob has.
#[derive(Clone, Debug, PartialEq)]
pub struct MpiSettings {
    /// The MPI implementation: the hostfile format and the launcher's environment.
    pub implementation: MpiImplementation,
    /// Where the SSH key pair is mounted.
    pub ssh_auth_mount_path: String,
    /// Whether the launcher also runs training processes.
    pub run_launcher_as_worker: bool,
}

/// Desired, minimum and maximum worker counts; `min <= desired <= max` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkerCounts {
    /// Workers the job asks for.
    pub desired: u32,
    /// Fewest workers the training runs with.
    pub min: u32,
    /// Most workers the job may have; `None` is unbounded.
    pub max: Option<u32>,
    /// Spare workers kept started beside a group at `max`, out of it (a PyTorchJob's
    /// `elasticPolicy.spareReplicas`, see [`crate::spares`]); 0 for the other kinds.
    pub spares: u32,
}

/// `spec.elasticPolicy` with defaults applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElasticSettings {
    /// How long a run may wait for `min` ready workers before its launcher starts; `None`
    /// waits forever.
    pub max_wait: Option<Duration>,
    /// Whether a running job is suspended when its ready workers stay below `min`.
    pub suspend_below_min_workers: bool,
    /// How long ready workers may stay below `min` before a running job is suspended.
    pub below_min: Duration,
    /// Time the workers get to checkpoint before a suspend deletes them.
    pub checkpoint_grace: Duration,
    /// Time they get when the job's spec asks for the suspend: `checkpoint_grace`, or none
    /// for an MPIJob without `elasticPolicy`, which suspends at once as mpi-operator does.
    pub spec_suspend_grace: Duration,
    /// How long a node where a worker failed is avoided.
    pub blacklist_cooldown: Duration,
    /// How long a removed worker stays out of host discovery before its pod is deleted.
    pub drain: Duration,
    /// The `kubeai` SDK's stop signal (see [`crate::kubeai`]).
    pub kubeai: KubeaiStop,
    /// Whether the launcher prefers nodes that are not spot capacity (see
    /// [`crate::spot_capacity`]).
    pub launcher_avoids_spot: bool,
    /// Whether the pods' commands run under eto's PID 1, which keeps the training through a
    /// SIGTERM until it has checkpointed (see [`crate::builders::termination`]).
    pub checkpoint_on_termination: bool,
}

/// Whether the job's pods get the `kubeai` SDK's stop signal with their notices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KubeaiStop {
    /// Every pod of the job gets it (`elasticPolicy.kubeaiStop`); otherwise only pods that
    /// opt in with their annotation.
    pub every_pod: bool,
    /// Where the SDK listens.
    pub port: u16,
}

/// Where the job's SSH key pair comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SshSecretSource {
    /// eto generates a key pair into a Secret named after the job.
    Generated,
    /// The user provides the Secret named here (annotation `arena.kubeflow.org/ssh-secret`).
    Provided(String),
    /// The job's pods need no SSH (a PyTorchJob's: torchrun starts the training on each).
    Unused,
}

impl ElasticSettings {
    /// Default of `belowMinSeconds`.
    pub const DEFAULT_BELOW_MIN: Duration = Duration::from_secs(30);
    /// Default of `checkpointGraceSeconds`.
    pub const DEFAULT_CHECKPOINT_GRACE: Duration = Duration::from_secs(300);
    /// Default of `blacklistCooldownSeconds`.
    pub const DEFAULT_BLACKLIST_COOLDOWN: Duration = Duration::from_secs(600);
    /// Default of `drainSeconds`.
    pub const DEFAULT_DRAIN: Duration = Duration::from_secs(30);
}

impl EffectiveSpec {
    /// Default of `spec.backoffLimit`, as in et-operator's CRD (and of an MPIJob's
    /// `runPolicy.backoffLimit`, as in a batch Job).
    pub const DEFAULT_BACKOFF_LIMIT: u32 = 6;
}
