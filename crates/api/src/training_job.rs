//! `TrainingJob` (`kai.alibabacloud.com/v1alpha1`): an elastic Horovod or MPI training job.
//!
//! Field names, enums and defaults follow et-operator's CRD, so YAML written for et-operator
//! and rendered by `arena submit etjob` is accepted unchanged. eto's additions are optional.
//
// Doc comments on items in this module become CRD descriptions and so `kubectl explain`
// text: they are written for users. Developer notes belong in `//` comments.
//
// Pod templates carry the full PodTemplateSpec schema rather than
// `x-kubernetes-preserve-unknown-fields`: the API server then rejects misspelt or mistyped
// template fields at `kubectl apply` time (instead of eto silently dropping them when it builds
// the pods), prunes unknown fields, and `kubectl explain` documents the template. The cost is
// size: the CRD exceeds the 262,144-byte limit of the `last-applied-configuration` annotation,
// so it must be installed with `kubectl apply --server-side` (docs/running-eto.md says so, as mpi-operator's
// does for the same reason).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    JobCondition, ReplicaRestartPolicy, ReplicaStatus, conditions_schema, without_description,
};

/// Most entries `status.blacklist` holds; the oldest are dropped first.
pub const BLACKLIST_LIMIT: usize = 64;

/// Most entries `status.nodesInCooldown` holds; those whose cooldown ends first are dropped
/// first.
pub const COOLDOWN_LIMIT: usize = 64;

/// Most entries `status.nodeWarnings` holds; those ending first are kept.
pub const NODE_WARNINGS_LIMIT: usize = 64;

/// Desired state of a TrainingJob.
// The printer columns repeat keys such as `type_`, which clippy mistakes for duplicated
// attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "kai.alibabacloud.com",
    version = "v1alpha1",
    kind = "TrainingJob",
    plural = "trainingjobs",
    singular = "trainingjob",
    namespaced,
    status = "TrainingJobStatus",
    derive = "PartialEq",
    shortname = "tj",
    shortname = "etjob",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Ready",
        type_ = "integer",
        json_path = ".status.workers.ready",
        description = "Workers that are ready and listed by host discovery"
    ),
    printcolumn(
        name = "Pending",
        type_ = "integer",
        json_path = ".status.workers.pending",
        description = "Workers that exist but are not ready yet, for example waiting for a GPU"
    ),
    printcolumn(
        name = "Desired",
        type_ = "integer",
        json_path = ".status.workers.desired",
        description = "Workers the job asks for"
    ),
    printcolumn(
        name = "Min",
        type_ = "integer",
        json_path = ".status.workers.min",
        description = "Fewest workers the job runs with"
    ),
    printcolumn(
        name = "Max",
        type_ = "integer",
        json_path = ".status.workers.max",
        description = "Most workers the job may have; empty when unbounded"
    ),
    printcolumn(
        name = "Restarts",
        type_ = "integer",
        json_path = ".status.restartCount"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    scale(
        spec_replicas_path = ".spec.etReplicaSpecs.worker.replicas",
        status_replicas_path = ".status.replicaStatuses.Worker.active",
        label_selector_path = ".status.selector"
    ),
    doc = "An elastic distributed training job: one launcher that runs horovodrun or mpirun, and a set of workers whose number eto keeps between worker.minReplicas and worker.maxReplicas as GPUs come and go."
)]
#[serde(rename_all = "camelCase")]
pub struct TrainingJobSpec {
    /// The launcher and the workers of the job.
    pub et_replica_specs: EtReplicaSpecs,

    /// Which pods are deleted when the job succeeds: `Running` (the default) and `All` delete
    /// the workers and their services; `None` keeps every pod. The launcher is always kept,
    /// so its logs stay readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clean_pod_policy: Option<CleanPodPolicy>,

    /// How the launcher starts processes on the workers. Only `ssh`, the default, is
    /// supported; `kubexec` is accepted for compatibility with et-operator and reported as an
    /// error on the job, because it needs `pods/exec` rights on every pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher_attach_mode: Option<LauncherAttachMode>,

    /// Processes per worker, written as the `slots` of each host in the hostfile and the
    /// discovery script. Defaults to the `nvidia.com/gpu` limit of the first worker
    /// container, or 1 when it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub slots_per_worker: Option<i32>,

    /// What happens when the launcher's training code fails: `Never` fails the job;
    /// `OnFailure` restarts the whole job (every pod is recreated and `status.restartCount`
    /// grows) until `backoffLimit` restarts have been made. A launcher the platform took (a
    /// spot reclaim, a preemption, an eviction, its node's loss or shutdown, a deletion, as
    /// the pod's `DisruptionTarget` condition or status reason says) is no failure, whatever
    /// its exit code: the job is suspended with reason `LauncherDisrupted` and resumes from
    /// its checkpoint in a new run, with nothing counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Never"))]
    pub restart_policy: Option<JobRestartPolicy>,

    /// How many times a job with `restartPolicy: OnFailure` may be restarted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("default" = 6))]
    pub backoff_limit: Option<i32>,

    /// While true, the job is suspended: eto posts a checkpoint notice to the launcher and the
    /// workers (`/etc/edl/notice`), waits `elasticPolicy.checkpointGraceSeconds` or until the
    /// launcher exits, then deletes the launcher and the workers and keeps everything else.
    /// A job created suspended creates nothing. Setting it back to false resumes the job: a
    /// new run with new workers, whose launcher and notice tell the training script to load
    /// its latest checkpoint. A queue such as Kueue may set it; the annotation
    /// `job-supervisor.kube-ai.io/job-suspended: "true"` means the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,

    /// Seconds the job may run, counted from `status.startTime`, before eto fails it with
    /// reason `DeadlineExceeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub active_deadline_seconds: Option<i64>,

    /// Seconds after the job succeeded or failed at which eto deletes it together with all
    /// the objects it owns. Unset keeps finished jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i32>,

    /// How eto waits for, replaces, drains, suspends and resumes workers as capacity comes and
    /// goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elastic_policy: Option<ElasticPolicy>,
}

/// The launcher and the workers of a job.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct EtReplicaSpecs {
    /// The pod that runs the training command (`horovodrun` or `mpirun`). eto creates it once
    /// at least `worker.minReplicas` workers are ready.
    pub launcher: LauncherSpec,
    /// The pods that run the training processes, started by the launcher over SSH.
    pub worker: WorkerSpec,
}

/// The launcher of a job.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LauncherSpec {
    /// Number of launchers. Must be 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self == 1",
        "message": "spec.etReplicaSpecs.launcher.replicas must be 1"
    }]))]
    pub replicas: Option<i32>,

    /// Pod template of the launcher. eto adds the SSH key, the host files under `/etc/edl`
    /// and its labels; the pod itself never restarts in place. A changed template applies to
    /// launchers created afterwards (after a restart of the job).
    pub template: PodTemplateSpec,

    /// Accepted for compatibility with et-operator, and not needed: a launcher pod that
    /// disappears, or that the platform takes, ends its run whatever this says, and the job
    /// resumes from its checkpoint in a new run with a new launcher (reason
    /// `LauncherDisrupted`). A launcher whose training code fails is handled by
    /// `spec.restartPolicy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<ReplicaRestartPolicy>,
}

/// The workers of a job.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!has(self.minReplicas) || !has(self.replicas) || self.minReplicas <= self.replicas",
        "message": "spec.etReplicaSpecs.worker.minReplicas must not be greater than replicas",
        "fieldPath": ".minReplicas"
    },
    {
        "rule": "!has(self.maxReplicas) || !has(self.replicas) || self.replicas <= self.maxReplicas",
        "message": "spec.etReplicaSpecs.worker.replicas must not be greater than maxReplicas",
        "fieldPath": ".replicas"
    },
    {
        "rule": "!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",
        "message": "spec.etReplicaSpecs.worker.minReplicas must not be greater than maxReplicas",
        "fieldPath": ".minReplicas"
    }
]))]
pub struct WorkerSpec {
    /// Desired number of workers. eto creates this many at once, lists each in host discovery
    /// as soon as it is ready (however many are scheduled), and replaces lost ones as
    /// `restartPolicy` says. The scale subresource writes this field, so `kubectl scale` and a
    /// HorizontalPodAutoscaler resize the job. Defaults to `minReplicas`, or 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub replicas: Option<i32>,

    /// Fewest workers the training runs with: the launcher starts once this many workers are
    /// ready. Defaults to `replicas`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub min_replicas: Option<i32>,

    /// Most workers the job may have. Unset means no upper bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_replicas: Option<i32>,

    /// Pod template of the workers. When the first container has no command, eto runs an SSH
    /// daemon in it so that the launcher can start the training processes there. A changed
    /// template applies to workers created afterwards; running workers are not restarted.
    pub template: PodTemplateSpec,

    /// When a stopped worker is replaced. A replacement gets a new index and so a new host
    /// name, because Horovod blacklists failed hosts by name. A worker the platform took (its
    /// pod `DisruptionTarget`, evicted, or ended by its node) counts as disrupted, not failed,
    /// whatever its exit code. Defaults to `Never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<ReplicaRestartPolicy>,
}

/// Which pods are deleted when a job succeeds.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[schemars(transform = without_description)]
pub enum CleanPodPolicy {
    /// Delete every worker.
    All,
    /// Delete the workers that are still running (in practice: every worker).
    Running,
    /// Keep every pod.
    None,
}

/// How the launcher starts processes on the workers.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
#[schemars(transform = without_description)]
pub enum LauncherAttachMode {
    /// Over SSH, with a per-job key pair.
    Ssh,
    /// Through `kubectl exec`; not supported by eto.
    Kubexec,
}

/// What happens to the whole job when its launcher fails.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[schemars(transform = without_description)]
pub enum JobRestartPolicy {
    /// The job fails.
    Never,
    /// The job restarts until `backoffLimit` restarts have been made.
    OnFailure,
}

/// How eto waits for, replaces, suspends and resumes workers. "The minimum" below is the
/// fewest workers the job runs with: `worker.minReplicas` of a TrainingJob,
/// `elasticPolicy.minReplicas` of an MPIJob.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ElasticPolicy {
    /// Seconds the job may wait for the minimum of ready workers before its launcher
    /// starts (counted from the start of the job, or of the run after a restart). When they
    /// are not ready by then, the job fails with reason `WaitingResourceTimeout` and a message
    /// with the ready, pending and needed counts, and its pods are deleted. Workers above the
    /// minimum never count against it: they may stay pending, the job runs without them and
    /// they join as they become ready. Defaults to the value of the
    /// `job-supervisor.kube-ai.io/max-wait-time` annotation (Arena's `--max-wait-time`); when
    /// neither is set, or either is 0, the job waits as long as it takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_wait_seconds: Option<i32>,

    /// Whether a running job whose ready workers stay below the minimum for
    /// `belowMinSeconds` is suspended: eto posts a checkpoint notice, waits
    /// `checkpointGraceSeconds` or until the launcher exits, deletes the launcher and the
    /// workers (the launcher exiting meanwhile is part of the suspend, not a failure), and asks
    /// for new workers at once; once the minimum of them are ready a new launcher
    /// resumes the training from its checkpoint. Workers lost for certain (their pods
    /// disrupted, deleted, or gone with their nodes) that leave too few get the notice at
    /// once, without `belowMinSeconds`. A launcher that fails while the job is below its
    /// minimum, before or after the notice, completes the suspend too: no failure, no
    /// restart counted. When false the job keeps running with fewer workers, as Horovod
    /// allows, and a launcher failure is a failure. Defaults to true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend_below_min_workers: Option<bool>,

    /// Seconds ready workers may stay below the minimum (a flapping pod, a replacement
    /// about to start, a NotReady node) before a running job is suspended; not waited when
    /// workers lost for certain take it below. Defaults to 30.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub below_min_seconds: Option<i32>,

    /// Seconds the training processes get to write a checkpoint after eto posts a suspend
    /// notice, before their pods are deleted (earlier if the launcher exits). Defaults to 300.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub checkpoint_grace_seconds: Option<i32>,

    /// Whether eto also sends every pod of the job the stop signal of Alibaba's `kubeai` SDK
    /// when it posts the pod a `Suspend` or `Reclaim` notice: `GET /stop` on `kubeaiPort`,
    /// after which the SDK's `kubeai.check_alive()` returns false, so that training code
    /// written for ACK's elastic training checkpoints unchanged. Sent once per pod and notice,
    /// through the API server's pod proxy, to running pods only; the notice file is written
    /// either way, and the suspend never waits for an answer. A pod opts in by itself with
    /// the annotation `job-supervisor.kube-ai.io/managed-by-job-supervisor: "true"` on its
    /// template. Defaults to false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeai_stop: Option<bool>,

    /// The port the `kubeai` SDK listens on in the training processes, for its stop signal
    /// (see `kubeaiStop`). Defaults to 9009, the SDK's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub kubeai_port: Option<i32>,

    /// Seconds a worker removed from a running job (by a ScaleIn, or by lowering
    /// its replicas) is given to leave the training gracefully. It leaves host discovery
    /// at once, so Horovod takes it out at its next commit and re-forms the ring without it
    /// instead of seeing a crash; its pod is deleted when this time is over, when the pod has
    /// stopped by itself, or when the launcher is no longer running, whichever comes first.
    /// Workers that were not in host discovery yet are deleted at once. Defaults to 30.
    /// For a PyTorchJob whose rendezvous eto hosts, the time every worker is given to save a
    /// checkpoint (a `Checkpoint` notice) before a worker leaves and the group re-forms,
    /// cut short once the training code says it saved; a worker on a node that announced
    /// it goes away leaves the same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub drain_seconds: Option<i32>,

    /// Seconds during which a node where a worker of the job failed (its containers exited
    /// with an error; not an eviction, a disruption or a deletion) is avoided by the job's new
    /// workers. Each worker created while nodes are in cooldown gets a preferred node affinity
    /// term of weight 100 with `matchFields` `metadata.name NotIn [those nodes]`: the scheduler
    /// places it elsewhere when another node fits, and on a node in cooldown when none does, so
    /// a worker never waits only for a cooldown to end. Running workers are not moved. The
    /// nodes in cooldown are listed in `status.nodesInCooldown`. 0 turns the cooldown off.
    /// Defaults to 600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub blacklist_cooldown_seconds: Option<i32>,

    /// Whether the launcher prefers nodes that are not spot capacity. A launcher asks for no
    /// GPU, so a scheduler may place it on a spot node, and a run whose launcher is reclaimed
    /// must resume from its checkpoint. Unless the launcher's template sets a node affinity
    /// of its own, eto gives it a preferred (never required) node affinity term against the
    /// spot labels of Karpenter (`karpenter.sh/capacity-type: spot`), EKS
    /// (`eks.amazonaws.com/capacityType: SPOT`), GKE (`cloud.google.com/gke-spot: "true"`,
    /// `cloud.google.com/gke-preemptible: "true"`), AKS
    /// (`kubernetes.azure.com/scalesetpriority: spot`) and ACK
    /// (`node.alibabacloud.com/spot-strategy: SpotWithPriceLimit` or `SpotAsPriceGo`): where
    /// only spot nodes fit, the launcher still goes there. Defaults to true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher_avoids_spot: Option<bool>,

    /// Whether the first container of every pod runs its command under eto's PID 1, a small
    /// POSIX shell that keeps the training processes through a SIGTERM (an eviction, a drain,
    /// a node shutdown, a deletion) until they have checkpointed and exited: it writes a
    /// `Reclaim` notice (reason `Terminating`) to `/run/eto/notice` (or `/tmp/eto/notice`),
    /// which eto's notice helper reads, waits until nothing runs under the command any more
    /// (or the command exits), at most until 3 seconds before the grace period ends, then
    /// stops the command. Only a command eto knows is wrapped: the template's `command`, or
    /// the SSH daemon eto runs in a worker without one; the image needs `/bin/sh`. When the
    /// template leaves `terminationGracePeriodSeconds` unset, eto sets it to
    /// `checkpointGraceSeconds`. Defaults to true (for an MPIJob, only with `elasticPolicy`).
    /// A PyTorchJob's Workers run their command as written, since torchrun forwards SIGTERM
    /// to its training processes itself: eto gives it the time instead, the grace period as
    /// above and `TORCH_ELASTIC_SHUTDOWN_TIMEOUT` (torchrun's wait before it kills them, read
    /// by torchrun 2.12 and later) 10 seconds less.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_on_termination: Option<bool>,
}

/// Observed state of a TrainingJob, written by eto only.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TrainingJobStatus {
    /// Where the job is in its life: `Created`, `Running`, `Scaling`, `Restarting`,
    /// `Suspended`, `Succeeded` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<JobPhase>,

    /// Observations about the job, one per type: et-operator's `Created`, `WorkersCreated`,
    /// `WorkersReady`, `LauncherCreated`, `Running`, `Scaling`, `Suspended`, `Succeeded` and
    /// `Failed`, plus `Ready`, which GitOps tools read as the job's health.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<JobCondition>,

    /// Pod counts of the `Launcher` and of the `Worker` replicas.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub replica_statuses: BTreeMap<ReplicaType, ReplicaStatus>,

    /// When eto started the job (reset when a suspended job resumes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,

    /// When the job succeeded or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,

    /// The scaling request in progress, as `ScaleIn:<namespace>/<name>` or
    /// `ScaleOut:<namespace>/<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_scaler: Option<String>,

    /// How many times the whole job has been restarted after its launcher failed.
    #[serde(default)]
    pub restart_count: i32,

    /// Names of the worker pods the job should have now.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub target_workers: Vec<String>,

    /// Names of the worker pods that are running and listed by host discovery, by index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub current_workers: Vec<String>,

    /// The index the job's next new worker gets. Indices are never used twice, because
    /// Horovod blacklists hosts by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_worker_index: Option<i32>,

    /// The current run: 0 at first, one more after each restart and each resume. The job's
    /// pods carry it in the label `eto.dev/run`; pods of earlier runs are deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<i32>,

    /// What the job's pods show their training processes in `/etc/edl/notice`: a `Suspend`
    /// notice while the job is suspending, a `Resume` notice during a run that resumed a
    /// suspended job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<Notice>,

    /// The `metadata.generation` of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Worker counts at a glance, as `kubectl get trainingjobs` shows them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<WorkerSummary>,

    /// Workers lost so far (failed, evicted, disrupted, completed or deleted), newest last, at
    /// most 64: the oldest entries are dropped first. A lost worker leaves host discovery at
    /// once and does not return to it (one exception: a worker lost to a node's warning, reason
    /// `NodeWarning`, that still runs when the warning is withdrawn is taken back while its
    /// replacement is not ready yet); its index is never used again for another worker,
    /// because Horovod blacklists hosts by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = BLACKLIST_LIMIT))]
    pub blacklist: Vec<BlacklistEntry>,

    /// Workers removed from the job that have left host discovery and whose pods are deleted
    /// once their drain ends (see `elasticPolicy.drainSeconds`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub draining_workers: Vec<DrainingWorker>,

    /// Workers of `targetWorkers` not created yet: those of a PyTorchJob whose rendezvous eto
    /// hosts wait while workers drain out of its group, to join the group that re-forms
    /// without them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_workers: Vec<String>,

    /// torchrun's rendezvous of the current run of a PyTorchJob whose rendezvous eto hosts,
    /// as its store last reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rendezvous: Option<RendezvousStatus>,

    /// Nodes the job's new workers avoid, because a worker failed there within
    /// `elasticPolicy.blacklistCooldownSeconds`; at most 64, those whose cooldown ends first
    /// are dropped first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = COOLDOWN_LIMIT))]
    pub nodes_in_cooldown: Vec<NodeCooldown>,

    /// Nodes running the job's workers that announced they go away (a spot reclaim, a
    /// disruption; which announcements count is the operator's `--node-warnings`), at most
    /// 64. Their workers were told with a `Reclaim` notice and left host discovery; new
    /// workers avoid these nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = NODE_WARNINGS_LIMIT))]
    pub node_warnings: Vec<WarnedNode>,

    /// Label selector of the job's worker pods, used by the scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
}

/// Where a job is in its life.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq, Hash)]
#[schemars(transform = without_description)]
pub enum JobPhase {
    /// Accepted; workers are being created or are not ready yet.
    Created,
    /// The launcher is running.
    Running,
    /// A ScaleIn or ScaleOut request is being carried out.
    Scaling,
    /// The job is being restarted after its launcher failed.
    Restarting,
    /// Suspended: its launcher and workers are deleted (by `spec.suspend`), or it waits for
    /// `worker.minReplicas` new workers to resume (after too few were left).
    Suspended,
    /// The launcher finished successfully.
    Succeeded,
    /// The job failed and will not be restarted.
    Failed,
}

/// A replica type of a TrainingJob.
#[derive(
    Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq, PartialOrd, Ord,
)]
pub enum ReplicaType {
    /// The launcher pod.
    Launcher,
    /// The worker pods.
    Worker,
}

/// Worker counts of a job.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct WorkerSummary {
    /// Workers that are running, ready and listed by host discovery.
    pub ready: i32,
    /// Workers that exist but are not ready yet (waiting for a node, starting).
    pub pending: i32,
    /// Workers the job holds to: `worker.replicas` (with defaults applied), or the number a
    /// ScaleIn or ScaleOut left the job with since `worker.replicas` last changed.
    pub desired: i32,
    /// The value of `worker.replicas` eto last acted on. When `worker.replicas` changes
    /// (`kubectl scale`, an autoscaler, an edited spec), the job is resized to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_replicas: Option<i32>,
    /// Fewest workers the job runs with (`worker.minReplicas` with defaults applied).
    pub min: i32,
    /// Most workers the job may have; absent when unbounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<i32>,
}

/// A worker that failed or was lost, and why.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BlacklistEntry {
    /// Name of the worker pod.
    pub pod: String,
    /// Node the pod ran on, when it had been scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Why the worker was lost, for example `Error`, `Evicted`, `NodeReclaimed` or `Deleted`.
    pub reason: String,
    /// Exit code of the worker's main container, when it terminated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// When eto noticed the loss.
    pub time: Time,
}

/// A node the job's new workers avoid for a while.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeCooldown {
    /// Name of the node.
    pub node: String,
    /// The worker whose failure there started (or last renewed) the cooldown.
    pub pod: String,
    /// When the cooldown ends.
    pub until: Time,
}

/// A node that announced it goes away, with the job's workers on it.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WarnedNode {
    /// Name of the node.
    pub node: String,
    /// What announced it: `taint karpenter.sh/disrupted`, `condition InstanceExpired`.
    pub signal: String,
    /// When it was announced: the taint's or condition's time, else when eto first saw it.
    pub since: Time,
    /// When the node goes: the time the announcement carries, else `since` plus the
    /// operator's `--node-warning-lead-seconds`.
    pub deadline: Time,
    /// The job's worker pods on the node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workers: Vec<String>,
}

/// torchrun's rendezvous of a run, as its store reports it.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RendezvousStatus {
    /// The round: one more each time the group re-formed.
    pub round: i64,
    /// The agents (pods) of the round's group; the world size is this times the processes
    /// per pod.
    pub agents: i64,
    /// Agents waiting to join at the next round.
    pub waiting: i64,
    /// Whether the round's group has formed.
    pub complete: bool,
    /// Whether an agent closed the rendezvous: no group forms in it again. An agent closes it
    /// when it ends for any reason but a signal (its training done, or failed past
    /// `maxRestarts`); a run whose rendezvous is closed before it succeeded cannot go on, and
    /// eto starts the next one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub closed: bool,
}

/// A worker on its way out of the job.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DrainingWorker {
    /// Name of the worker pod.
    pub pod: String,
    /// When it left host discovery (to the microsecond: drains may be short).
    pub since: MicroTime,
}

/// A notice to the training processes of a job, written as one line of JSON to the file
/// `/etc/edl/notice` of the launcher and of every worker (an empty file: no notice). Training
/// code polls it, for example before each batch: the `eto_notice.py` helper in eto's
/// repository reads it.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Notice {
    /// What is happening.
    pub kind: NoticeKind,
    /// Why: `BelowMinWorkers`, `LauncherDisrupted` (the platform takes the launcher) or
    /// `Suspended` (by `spec.suspend`) for the job; `Disrupted` or `NodeWarning` for a pod
    /// whose node is going away; `WorkersLeaving` before a PyTorchJob's group re-forms.
    pub reason: String,
    /// When eto posted it.
    pub since: Time,
    /// When the pods go: save a checkpoint and exit before then. Absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Time>,
    /// What happens, in words.
    pub message: String,
}

/// What a notice announces.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[schemars(transform = without_description)]
pub enum NoticeKind {
    /// The job is being suspended: save a checkpoint and exit before the deadline.
    Suspend,
    /// This pod is going away (its node is reclaimed or drained): save what it must and exit
    /// before the deadline. Only in the pod's own file.
    Reclaim,
    /// This run resumes a suspended job: load the latest checkpoint.
    Resume,
    /// The group of workers re-forms soon (a worker leaves it): save a checkpoint now and say
    /// so, then wait; the re-formed group resumes from it. Shown to every worker of a
    /// PyTorchJob whose rendezvous eto hosts; training goes on if the notice is withdrawn.
    Checkpoint,
}
