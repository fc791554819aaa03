//! `PyTorchJob` (`kubeflow.org/v1`): Kubeflow training-operator v1's PyTorch job, served by
//! eto.
//!
//! Every field of training-operator v1's API is here with its JSON name, so YAML written for
//! it, what `arena submit pytorchjob` renders and what Kueue writes into it are accepted
//! unchanged. Defaults are applied as v1 applies them: in memory, never written back, since
//! Kueue and Arena read the spec as it was written.
//
// Doc comments on items in this module become CRD descriptions and so `kubectl explain`
// text: they are written for users. Developer notes belong in `//` comments.
//
// v1's CRD declares `restartPolicy`, `cleanPodPolicy`, `rdzvBackend` and `nprocPerNode` as
// free strings, so the schema here does too: eto reports a value it does not know as a status
// condition and an event naming the field. v1's validating webhook refused replica types other
// than `Master` and `Worker`, a Master without `replicas: 1`, fewer than one Worker, an
// `elasticPolicy` without Workers, both `nProcPerNode` fields, and `managedBy` values other
// than v1's and MultiKueue's; eto installs no webhook, so those rules are CEL rules of the
// schema. The rules about containers (a `pytorch` container with an image) need the pod
// template's lists, whose CEL cost the API server refuses to budget; eto checks them itself.

use std::collections::BTreeMap;

use k8s_openapi::api::autoscaling::v2::MetricSpec;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::CleanPodPolicy;
use crate::common::{
    JobCondition, ReplicaRestartPolicy, conditions_schema, open_string, without_description,
};
use crate::elastic::ElasticPolicy;
pub use crate::job_status::Reformation;
pub use crate::job_status::ReplicaGroupsStatus;
use crate::kubeflow::{EtoJobStatus, KubeflowReplicaStatus, SchedulingPolicy};

/// The value of `runPolicy.managedBy` that names training-operator v1, whose jobs eto runs in
/// its place. A PyTorchJob without `managedBy`, or with this value, is eto's; one with
/// MultiKueue's `kueue.x-k8s.io/multikueue` is left alone entirely.
pub const TRAINING_OPERATOR: &str = "kubeflow.org/training-operator";

/// The value of `runPolicy.managedBy` with which Kueue's MultiKueue runs a job on another
/// cluster.
pub const MULTIKUEUE: &str = "kueue.x-k8s.io/multikueue";

/// The key of the master in `pytorchReplicaSpecs` and `replicaStatuses`.
pub const MASTER: &str = "Master";
/// The key of the workers in `pytorchReplicaSpecs` and `replicaStatuses`.
pub const WORKER: &str = "Worker";

/// The name of the container training-operator v1 reads and configures in every pod.
pub const PYTORCH_CONTAINER: &str = "pytorch";

/// The name of the port of the `pytorch` container that the master listens on.
pub const PORT_NAME: &str = "pytorchjob-port";

/// The port the master listens on when the `pytorch` container names none.
pub const DEFAULT_PORT: i32 = 23456;

/// Desired state of a PyTorchJob.
// The printer columns repeat keys such as `type_`, which clippy mistakes for duplicated
// attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "kubeflow.org",
    version = "v1",
    kind = "PyTorchJob",
    plural = "pytorchjobs",
    singular = "pytorchjob",
    namespaced,
    status = "PyTorchJobStatus",
    derive = "PartialEq",
    printcolumn(
        name = "State",
        type_ = "string",
        json_path = ".status.conditions[-1:].type"
    ),
    printcolumn(
        name = "Ready",
        type_ = "integer",
        json_path = ".status.workers.ready",
        description = "Workers that are running and ready"
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
        name = "Quorum",
        type_ = "integer",
        json_path = ".status.replicaGroups.quorum",
        description = "Replica groups in the latest TorchFT quorum"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    scale(
        spec_replicas_path = ".spec.pytorchReplicaSpecs.Worker.replicas",
        status_replicas_path = ".status.replicaStatuses.Worker.active",
        label_selector_path = ".status.replicaStatuses.Worker.selector"
    ),
    doc = "A PyTorch job in Kubeflow training-operator v1's API, run by eto: an optional Master and a set of Workers, each pod running the training code (usually torchrun), with the environment v1 gives them (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK and torchrun's PET_ variables) and a headless Service per pod."
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!has(self.elasticPolicy) || 'Worker' in self.pytorchReplicaSpecs",
        "message": "spec.elasticPolicy needs a Worker in spec.pytorchReplicaSpecs",
        "fieldPath": ".elasticPolicy"
    },
    {
        "rule": "!has(self.elasticPolicy) || !has(self.elasticPolicy.nProcPerNode) || !has(self.nprocPerNode)",
        "message": "spec.elasticPolicy.nProcPerNode (deprecated) and spec.nprocPerNode cannot both be set; keep spec.nprocPerNode",
        "fieldPath": ".nprocPerNode"
    }
]))]
pub struct PyTorchJobSpec {
    /// Clean-up, deadlines, retries, scheduling and suspension of the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<RunPolicy>,

    /// Elastic training: the bounds of the Worker count and torchrun's rendezvous settings.
    /// With it the pods get torchrun's elastic configuration (`PET_NNODES=<min>:<max>`,
    /// `PET_RDZV_ENDPOINT`, `PET_RDZV_BACKEND`) instead of a fixed world size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elastic_policy: Option<PyTorchElasticPolicy>,

    /// The replicas of the job, by type: `Master` (optional; exactly one, rank 0, whose
    /// success is the job's) and `Worker`.
    #[schemars(extend("x-kubernetes-validations" = [
        {
            "rule": "self.all(type, type == 'Master' || type == 'Worker')",
            "message": "spec.pytorchReplicaSpecs: the replica types are Master and Worker"
        },
        {
            "rule": "!('Master' in self) || (has(self.Master.replicas) && self.Master.replicas == 1)",
            "message": "spec.pytorchReplicaSpecs.Master.replicas must be set to 1"
        },
        {
            "rule": "!('Worker' in self) || !has(self.Worker.replicas) || self.Worker.replicas >= 1",
            "message": "spec.pytorchReplicaSpecs.Worker.replicas must be at least 1"
        }
    ]))]
    pub pytorch_replica_specs: BTreeMap<String, PyTorchReplicaSpec>,

    /// Processes per pod, as torchrun's `--nproc-per-node`: `auto` (one per GPU, else one
    /// per CPU), `cpu`, `gpu` or a number. Defaults to `auto`. Given to the pods as
    /// `PET_NPROC_PER_NODE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nproc_per_node: Option<String>,
}

/// One replica type of a PyTorchJob.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PyTorchReplicaSpec {
    /// Number of pods. Defaults to 1. The Master's must be set to 1; the Workers' is what
    /// `kubectl scale pytorchjob` sets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,

    /// Pod template of the replicas. It needs a container named `pytorch`, which gets the
    /// port `pytorchjob-port` (23456) unless it names one; every container gets the job's
    /// environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<PodTemplateSpec>,

    /// What happens when a pod of this type stops (default `OnFailure`), as with
    /// training-operator v1: `OnFailure` and `Always` are the pod's own restart policy (the
    /// kubelet restarts its containers in the pod); under `ExitCode` and `Never` the pod's is
    /// `Never`. A failed Worker pod ends the run: `ExitCode` after a kill by a signal (exit
    /// codes 129 to 254) restarts the job, up to `runPolicy.backoffLimit` times, `Never` and
    /// other codes fail it. A failed Master restarts the job unless its policy is `Never`. A
    /// pod the platform took (a preemption, an eviction, its node's loss) starts a new run,
    /// under the same pod names, and counts as no failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "open_string")]
    pub restart_policy: Option<ReplicaRestartPolicy>,
}

/// Clean-up, deadlines, retries, scheduling and suspension of a PyTorchJob.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunPolicy {
    /// Which pods are deleted when the job finished: `None` (the default) keeps them,
    /// `Running` deletes those still running or pending, `All` deletes every pod. A deleted
    /// pod's Service goes with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "open_string")]
    pub clean_pod_policy: Option<CleanPodPolicy>,

    /// Seconds after the job finished (succeeded or failed) at which eto deletes it, with
    /// everything it owns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,

    /// Seconds the job may run, counted from `status.startTime`, before it fails with reason
    /// `DeadlineExceeded`. It does not run while the job is suspended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,

    /// How many times pods may be recreated after their training code failed, under every
    /// restart policy (`ExitCode` included) before the job fails. Pods the platform took do
    /// not count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i32>,

    /// Gang-scheduling settings, read when eto runs with a gang scheduler
    /// (`--gang-scheduler`), which gets a PodGroup named after the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling_policy: Option<SchedulingPolicy>,

    /// While true the job is suspended: its pods are deleted at once (the kubelet still gives
    /// them their termination grace period) and recreated when it is set back to false, with
    /// the templates as they are then (Kueue writes its node selectors and tolerations into
    /// them before it admits a job). A job created suspended creates nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub suspend: Option<bool>,

    /// The controller that runs the job: unset or `kubeflow.org/training-operator` means eto
    /// (in training-operator v1's place); `kueue.x-k8s.io/multikueue` makes eto leave the job
    /// alone entirely (MultiKueue runs it on another cluster). Cannot be changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {
            "rule": "self == 'kubeflow.org/training-operator' || self == 'kueue.x-k8s.io/multikueue'",
            "message": "spec.runPolicy.managedBy must be kubeflow.org/training-operator or kueue.x-k8s.io/multikueue"
        },
        {
            "rule": "self == oldSelf",
            "message": "spec.runPolicy.managedBy cannot be changed"
        }
    ]))]
    pub managed_by: Option<String>,
}

/// Elastic training settings of a PyTorchJob, as training-operator v1 names them.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = elastic_texts)]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",
    "message": "spec.elasticPolicy.minReplicas must not be greater than maxReplicas",
    "fieldPath": ".minReplicas"
}]))]
pub struct PyTorchElasticPolicy {
    /// Fewest Workers. Defaults to `maxReplicas`, or else to the Worker replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub min_replicas: Option<i32>,

    /// Most Workers. Defaults to `minReplicas`, or else to the Worker replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_replicas: Option<i32>,

    /// eto: hot spares. While the job holds `maxReplicas` Workers, eto keeps this many more
    /// started beside them, out of the group: torchrun (2.3 and later) keeps an agent that
    /// comes to a full group waiting as a spare, and that agent takes the place of a member
    /// that leaves at once, so a lost Worker costs the group no pod start (scheduling, image
    /// pull, the interpreter's start). A lost spare, or a member it replaced, is replaced in
    /// turn and becomes the next spare. Each spare holds a Worker's resources (its GPUs) idle.
    /// Below `maxReplicas` no spare is kept, since torchrun would take it into the group.
    /// Where set, eto prefers to place each Worker on a node without another of the job's,
    /// so that a node's loss takes a member or a spare, not both, and gives torchrun a
    /// `join_timeout` of a year where `rdzvConf` sets none: torch before 2.3 keeps a spare's
    /// agent waiting only that long. Applies to an elastic job whose rendezvous eto hosts.
    ///
    /// With `replicaGroups` (of one pod each), the count of spare groups, kept at every size:
    /// a spare's pod starts with no group id (`REPLICA_GROUP_ID=spare`, an empty
    /// `/etc/edl/replica-group`) and its training waits, built and ready, until a group is
    /// lost or added; then eto gives it that group's id (label `eto.dev/replica-group`, which
    /// the file shows within a second) and it joins the quorum and heals from a live group.
    /// A new spare starts in its place. The training code must read its id with
    /// `eto_notice.replica_group()` (or from that file). Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub spare_replicas: Option<i32>,

    /// eto: fault-tolerant replica groups (TorchFT). Where set, the Workers do not form one
    /// torchrun group: each Worker is a replica group of its own, a one-pod `torchrun
    /// --standalone`, and the groups train together step by step through a TorchFT
    /// Lighthouse that eto runs in a pod of its own. A lost group drops out of the next step's
    /// quorum and the other groups train on without a restart; eto replaces the lost group
    /// under a new pod name with the same `REPLICA_GROUP_ID`, and it heals from a live group.
    /// `minReplicas`, `maxReplicas` and the Worker replicas count groups. The training code
    /// must use TorchFT (its `Manager`); it reads `TORCHFT_LIGHTHOUSE`, `REPLICA_GROUP_ID` and
    /// `NUM_REPLICA_GROUPS` (`maxReplicas`, so that every group id has its own data shard).
    /// A Worker's pod never restarts in place (`restartPolicy: Never`): a pod whose training
    /// fails ends, and the Worker `restartPolicy` decides whether eto replaces its group
    /// (`OnFailure`, v1's default, always does), under new names, blacklisting the pods that
    /// failed and cooling their nodes down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_groups: Option<ReplicaGroups>,

    /// torchrun's rendezvous backend (`PET_RDZV_BACKEND`): `c10d` (the default), `etcd` or
    /// `etcd-v2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdzv_backend: Option<String>,

    /// Host of the rendezvous endpoint (`PET_RDZV_ENDPOINT`). Defaults to the first Worker,
    /// `<job>-worker-0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdzv_host: Option<String>,

    /// Port of the rendezvous endpoint. Defaults to the Workers' `pytorchjob-port`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdzv_port: Option<i32>,

    /// The rendezvous id (`PET_RDZV_ID`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdzv_id: Option<String>,

    /// Rendezvous settings (`PET_RDZV_CONF`, joined as `key=value,key=value`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdzv_conf: Option<Vec<RdzvConf>>,

    /// torchrun's `--standalone`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standalone: Option<bool>,

    /// Deprecated: use `spec.nprocPerNode`. Processes per pod (`PET_NPROC_PER_NODE`).
    #[serde(
        default,
        rename = "nProcPerNode",
        skip_serializing_if = "Option::is_none"
    )]
    pub n_proc_per_node: Option<i32>,

    /// How many times torchrun restarts its worker group after a failure
    /// (`PET_MAX_RESTARTS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_restarts: Option<i32>,

    /// Metrics of a HorizontalPodAutoscaler (autoscaling/v2) that scales the Workers between
    /// `minReplicas` and `maxReplicas`, as training-operator v1 makes it: named like the job,
    /// owned by it, scaling it through its scale subresource (`Worker.replicas`). It exists
    /// while the job runs: not while it is suspended, nor once it finished. Each metric must
    /// be one kube-apiserver accepts; a job with one it would refuse is reported invalid,
    /// naming the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Vec<MetricSpec>>,

    /// eto's waiting, suspend, drain and cooldown settings. They apply to an elastic job
    /// whose rendezvous eto hosts (no Master, no `rdzvHost`, backend `c10d`, not
    /// `standalone`); a job that sets none of them suspends at once when its spec says so, as
    /// training-operator v1 does.
    #[serde(flatten)]
    pub eto: ElasticPolicy,
}

// What eto's shared elastic settings mean for a PyTorchJob beyond their own text.
fn elastic_texts(schema: &mut schemars::Schema) {
    use crate::descriptions::extend;
    extend(
        schema,
        "drainSeconds",
        "When eto hosts the rendezvous, the time every Worker is given to save a checkpoint \
         (a `Checkpoint` notice) before a Worker leaves and the group re-forms, cut short once \
         the training code says it saved; a Worker on a node that announced it goes away \
         leaves the same way.",
    );
    extend(
        schema,
        "checkpointOnTermination",
        "A PyTorchJob's Workers run their command as written, since torchrun forwards SIGTERM \
         to its training processes itself: eto gives it the time instead, the grace period as \
         above and `TORCH_ELASTIC_SHUTDOWN_TIMEOUT` (torchrun's wait before it kills them, \
         read by torchrun 2.12 and later) 10 seconds less.",
    );
    extend(
        schema,
        "checkpointGraceSeconds",
        "When eto hosts the rendezvous, the pods go as soon as no Worker's agent trains in a \
         formed group any more.",
    );
    extend(
        schema,
        "launcherAvoidsSpot",
        "For a PyTorchJob, the launcher is its Master, or the rendezvous store eto hosts.",
    );
}

/// A PyTorchJob's TorchFT replica groups (`elasticPolicy.replicaGroups`).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaGroups {
    /// Pods per replica group, 1 by default. A group of one pod runs `torchrun --standalone`;
    /// the pods of a larger group form a torchrun group of their own at their rank 0 pod
    /// (`<pod>.<job>-workers`, the Workers' port), each running `nprocPerNode` processes. A group comes and
    /// goes whole: a lost pod takes the others of its group with it, and all are replaced
    /// under new names with the group's id. The Worker replicas, `minReplicas` and
    /// `maxReplicas` count groups; `metrics` cannot scale groups of several pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1024))]
    pub pods_per_group: Option<i32>,

    /// The Lighthouse, which forms each step's quorum of groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lighthouse: Option<Lighthouse>,
}

/// The settings of a job's TorchFT Lighthouse (`torchft_lighthouse`, run from the Workers'
/// image); `--min_replicas` is the job's `minReplicas`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Lighthouse {
    /// The port it listens on (`--bind`). Defaults to 29510, TorchFT's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,

    /// How long a group goes without a heartbeat before the Lighthouse leaves it out of the
    /// quorum (`--heartbeat_timeout_ms`): the other groups' pause after a group's loss.
    /// Defaults to 1000 (TorchFT's own is 5000); groups heartbeat every 100 ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub heartbeat_timeout_ms: Option<i64>,

    /// How long a quorum waits for healthy groups that have not joined yet
    /// (`--join_timeout_ms`); it must exceed a group's healing time. TorchFT's default
    /// (60000) where unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub join_timeout_ms: Option<i64>,

    /// How often the Lighthouse looks at the quorum (`--quorum_tick_ms`). TorchFT's default
    /// (100) where unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub quorum_tick_ms: Option<i64>,
}

/// One rendezvous setting.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct RdzvConf {
    /// The setting's name, for example `join_timeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Its value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// The replica types of a PyTorchJob, as `replicaStatuses` keys them.
#[derive(
    Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq, PartialOrd, Ord, Hash,
)]
#[schemars(transform = without_description)]
pub enum PyTorchReplicaType {
    /// The master pod.
    Master,
    /// The worker pods.
    Worker,
}

/// Observed state of a PyTorchJob: training-operator v1's fields, then eto's additions.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PyTorchJobStatus {
    /// Observations about the job, one per type: v1's `Created`, `Running`, `Restarting`,
    /// `Suspended`, `Succeeded` and `Failed` (reasons `PyTorchJobCreated`,
    /// `PyTorchJobRunning`, ..., `PyTorchJobResumed`), the newest last, as the `State` column
    /// shows it; eto's `WorkersCreated`, `WorkersReady`, `Ready` and `Stalled` (which GitOps
    /// tools read as the job's health) come before them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<JobCondition>,

    /// Pod counts of the `Master` and of the `Worker` replicas.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub replica_statuses: BTreeMap<PyTorchReplicaType, KubeflowReplicaStatus>,

    /// When the job started (set again when a suspended job resumes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,

    /// When the job succeeded or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,

    /// When training-operator v1 last reconciled the job (eto does not set it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reconcile_time: Option<Time>,

    /// eto's additions.
    #[serde(flatten)]
    pub eto: EtoJobStatus,

    /// eto: Workers not created yet because Workers that eto lets go once the group saved
    /// (a scale-in, a node's warning) drain out of the group they join: they join the group
    /// that re-forms without them. A Worker the platform evicts holds none: its replacement
    /// starts at once and waits at its gate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_workers: Vec<String>,

    /// eto: torchrun's rendezvous of the current run, as the store eto hosts last reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rendezvous: Option<RendezvousStatus>,

    /// eto: the replica groups' quorum, as the Lighthouse last reported it (a job of
    /// `elasticPolicy.replicaGroups`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_groups: Option<ReplicaGroupsStatus>,
}

/// torchrun's rendezvous of a run, as its store reports it.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RendezvousStatus {
    /// The round: one more each time the group re-formed.
    pub round: i64,
    /// The agents (pods) of the round's group; the world size is this times the processes
    /// per pod.
    pub agents: i64,
    /// Agents waiting to join at the next round.
    pub waiting: i64,
    /// Agents waiting beside a full group as spares (`elasticPolicy.spareReplicas`): each
    /// takes a lost agent's place at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spares: Option<i64>,
    /// Whether the round's group has formed.
    pub complete: bool,
    /// Whether an agent closed the rendezvous: no group forms in it again. An agent closes it
    /// when it ends for any reason but a signal (its training done, or failed past
    /// `maxRestarts`); a run whose rendezvous is closed before it succeeded cannot go on, and
    /// eto starts the next one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub closed: bool,
    /// The latest time the group re-formed in this run, as the store saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reformation: Option<Reformation>,
}
