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
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    CleanPodPolicy, JobCondition, ReplicaRestartPolicy, ReplicaStatus, ReplicaType,
    conditions_schema, without_description,
};
use crate::elastic::ElasticPolicy;
use crate::job_status::{
    BLACKLIST_LIMIT, BlacklistEntry, COOLDOWN_LIMIT, DrainingWorker, Goodput, JobPhase,
    NODE_WARNINGS_LIMIT, NodeCooldown, Notice, RoleBackoff, WarnedNode, WorkerSummary,
};

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

    /// roles whose pods keep failing on their own, and when eto creates their next
    /// pods; absent while none does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backoff: Vec<RoleBackoff>,

    /// How much of the job's time trained, and where the rest went (its goodput ledger).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput: Option<Goodput>,

    /// Label selector of the job's worker pods, used by the scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
}
