//! `MPIJob` (`kubeflow.org/v2beta1`): Kubeflow mpi-operator's MPI job, served by eto.
//!
//! Every field, default and status field of mpi-operator's v2beta1 API is here with its JSON
//! name, so YAML written for mpi-operator (and what Kueue writes into it) is accepted unchanged.
//! eto's additions are optional: `elasticPolicy`, and status fields that describe the
//! workers.
//
// Doc comments on items in this module become CRD descriptions and so `kubectl explain`
// text: they are written for users. Developer notes belong in `//` comments.
//
// mpi-operator's own CRD declares `cleanPodPolicy`, `restartPolicy` and
// `launcherCreationPolicy` as free strings and validates them in its controller, so the schema
// here does the same: a value its CRD accepted is never refused at admission. eto reports an
// unknown value as a status condition and an event naming the field. `mpiReplicaSpecs` stays a
// map for the same reason: a misspelt key is reported, not pruned.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{CleanPodPolicy, ReplicaType};
use crate::common::{
    JobCondition, ReplicaRestartPolicy, conditions_schema, open_string, without_description,
};
use crate::elastic::ElasticPolicy;
use crate::kubeflow::{EtoJobStatus, KubeflowReplicaStatus, SchedulingPolicy};

/// The value of `runPolicy.managedBy` that names eto. An MPIJob without `managedBy`, or with
/// this value, is eto's; one with any other value (mpi-operator's `kubeflow.org/mpi-operator`,
/// MultiKueue's `kueue.x-k8s.io/multikueue`) is left alone entirely.
pub const ETO_MANAGED_BY: &str = "eto.dev/operator";

/// The key of the launcher in `mpiReplicaSpecs` and `replicaStatuses`.
pub const LAUNCHER: &str = "Launcher";
/// The key of the workers in `mpiReplicaSpecs` and `replicaStatuses`.
pub const WORKER: &str = "Worker";

/// Desired state of an MPIJob.
// The printer columns repeat keys such as `type_`, which clippy mistakes for duplicated
// attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "kubeflow.org",
    version = "v2beta1",
    kind = "MPIJob",
    plural = "mpijobs",
    singular = "mpijob",
    namespaced,
    status = "MPIJobStatus",
    derive = "PartialEq",
    shortname = "mpij",
    printcolumn(name = "State", type_ = "string", json_path = ".status.phase"),
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
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    scale(
        spec_replicas_path = ".spec.mpiReplicaSpecs.Worker.replicas",
        status_replicas_path = ".status.replicaStatuses.Worker.active",
        label_selector_path = ".status.replicaStatuses.Worker.selector"
    ),
    doc = "An MPI job in Kubeflow mpi-operator's v2beta1 API, run by eto: a launcher Job that runs mpirun or horovodrun and a set of workers it reaches over SSH. eto adds a scale subresource, printer columns, host discovery that follows the workers within seconds, replacement of lost workers under new names, and optional elastic bounds (elasticPolicy)."
)]
#[serde(rename_all = "camelCase")]
pub struct MPIJobSpec {
    /// Processes per worker: the slots of each host in the hostfile and in host discovery.
    /// Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 1))]
    pub slots_per_worker: Option<i32>,

    /// Whether the launcher also runs training processes: it is then listed in the hostfile
    /// and host discovery before the workers, and keeps its GPUs visible. Defaults to false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub run_launcher_as_worker: Option<bool>,

    /// Clean-up, deadlines, retries, scheduling and suspension of the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<RunPolicy>,

    /// The replicas of the job, by type: `Launcher` (required, exactly one) and `Worker`
    /// (optional; a job without workers runs on its launcher alone).
    pub mpi_replica_specs: BTreeMap<String, MpiReplicaSpec>,

    /// Where the SSH key pair (Secret `<job>-ssh`) is mounted in the first container of the
    /// launcher and the workers, as `id_rsa`, `id_rsa.pub` and `authorized_keys`. The files
    /// are readable by their owner only when the path is `/root/.ssh`. Defaults to
    /// `/root/.ssh`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "/root/.ssh"))]
    pub ssh_auth_mount_path: Option<String>,

    /// When the launcher is created: `AtStartup` (the default) with the workers, or
    /// `WaitForWorkersReady`, once the minimum of workers (every worker, unless
    /// `elasticPolicy.minReplicas` says otherwise) is ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "open_string", extend("default" = "AtStartup"))]
    pub launcher_creation_policy: Option<LauncherCreationPolicy>,

    /// The MPI implementation of the images, which decides the hostfile format and the
    /// launcher's environment: `OpenMPI` (the default), `Intel` or `MPICH`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "OpenMPI"))]
    pub mpi_implementation: Option<MpiImplementation>,

    /// eto's addition: elastic bounds and eto's waiting, draining, suspend and resume
    /// settings. Without it the job needs all its workers (`minReplicas` defaults to the
    /// Worker replicas), has no upper bound for `kubectl scale`, and `runPolicy.suspend`
    /// deletes its pods at once, as mpi-operator does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elastic_policy: Option<MpiElasticPolicy>,
}

/// One replica type of an MPIJob.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MpiReplicaSpec {
    /// Number of pods. The launcher's must be 1 (its default). The workers' is what
    /// `kubectl scale mpijob` sets; it defaults to `elasticPolicy.minReplicas`, or 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,

    /// Pod template of the replicas. eto adds the SSH key pair, the MPI configuration and its
    /// labels. A changed template applies to pods created afterwards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<PodTemplateSpec>,

    /// For the launcher (default `OnFailure`): `OnFailure` and `Never` both restart the whole
    /// job after the launcher's training code failed, up to `runPolicy.backoffLimit` times; a
    /// launcher the platform took (a reclaim, a preemption, an eviction, its node's loss) is
    /// no failure: the job resumes from its checkpoint in a new run (reason
    /// `LauncherDisrupted`), counting nothing, and its launcher Job's `podFailurePolicy`
    /// does not count it against the Job's own backoff limit either. For the workers
    /// (default `Never`): when a stopped worker is replaced, under a new name: `Never` never,
    /// `OnFailure` after a failure, an eviction or a disruption; eto also accepts `ExitCode`
    /// (after a kill by a signal, an eviction or a disruption) and `Always`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "open_string")]
    pub restart_policy: Option<ReplicaRestartPolicy>,
}

/// Clean-up, deadlines, retries, scheduling and suspension of an MPIJob.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunPolicy {
    /// Which workers are deleted when the job finished: `None` (the default) keeps them,
    /// `Running` and `All` delete them. The launcher is always kept, so its logs stay
    /// readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "open_string")]
    pub clean_pod_policy: Option<CleanPodPolicy>,

    /// Seconds after the job finished at which eto deletes it, with everything it owns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,

    /// Seconds the job may run, counted from `status.startTime`, before it fails with reason
    /// `DeadlineExceeded`. It does not run while the job is suspended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,

    /// How many times the job is restarted after its launcher failed: every pod is
    /// recreated, workers under new names. Defaults to 6.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i32>,

    /// Gang-scheduling settings, as mpi-operator reads them; read when eto runs with a gang
    /// scheduler (`--gang-scheduler`), which gets a PodGroup named after the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling_policy: Option<SchedulingPolicy>,

    /// While true the job is suspended: eto shows the pods a checkpoint notice
    /// (`/etc/edl/notice`), then deletes the launcher and the workers: at once without
    /// `elasticPolicy`, as mpi-operator does (Kueue admits a preempting job only once these
    /// pods are gone; the kubelet still gives them their termination grace period), and with
    /// `elasticPolicy` once the launcher exits or `checkpointGraceSeconds` passed. A job
    /// created suspended creates nothing. Setting it back to false starts the job with its
    /// templates as they are then (Kueue writes its node selectors, tolerations and
    /// scheduling gates into them before it admits a job).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub suspend: Option<bool>,

    /// The controller that runs the job. Unset, or `eto.dev/operator`, means eto; any other
    /// value (`kubeflow.org/mpi-operator`, `kueue.x-k8s.io/multikueue`) makes eto leave the
    /// job alone entirely. Cannot be changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self == oldSelf",
        "message": "spec.runPolicy.managedBy cannot be changed"
    }]))]
    pub managed_by: Option<String>,
}

/// When the launcher of an MPIJob is created.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[schemars(transform = without_description)]
pub enum LauncherCreationPolicy {
    /// With the workers.
    AtStartup,
    /// Once the minimum of workers is ready.
    WaitForWorkersReady,
}

/// The MPI implementation of an MPIJob's images.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[schemars(transform = without_description)]
pub enum MpiImplementation {
    /// Open MPI: hostfile lines `host slots=N`.
    #[serde(rename = "OpenMPI")]
    OpenMpi,
    /// Intel MPI: hostfile lines `host:N`.
    Intel,
    /// MPICH: hostfile lines `host:N`.
    #[serde(rename = "MPICH")]
    Mpich,
}

/// eto's elastic bounds and settings of an MPIJob.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = elastic_texts)]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",
    "message": "spec.elasticPolicy.minReplicas must not be greater than maxReplicas",
    "fieldPath": ".minReplicas"
}]))]
pub struct MpiElasticPolicy {
    /// Fewest workers the training runs with: below it a running job is suspended (see
    /// `suspendBelowMinWorkers`), and with `launcherCreationPolicy: WaitForWorkersReady` the
    /// launcher starts once this many workers are ready. Defaults to the Worker replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub min_replicas: Option<i32>,

    /// Most workers the job may have; `kubectl scale` beyond it is reported as an error.
    /// Unset means no upper bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_replicas: Option<i32>,

    /// Waiting, suspend, drain and cooldown settings.
    #[serde(flatten)]
    pub policy: ElasticPolicy,
}

// What eto's shared elastic settings mean for an MPIJob beyond their own text.
fn elastic_texts(schema: &mut schemars::Schema) {
    crate::descriptions::extend(
        schema,
        "checkpointOnTermination",
        "An MPIJob without `elasticPolicy` runs its pods' commands as written.",
    );
}

/// Observed state of an MPIJob: mpi-operator's fields, then eto's additions.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MPIJobStatus {
    /// Observations about the job, one per type: mpi-operator's `Created`, `Running`,
    /// `Restarting`, `Succeeded`, `Failed` and `Suspended` (reasons `MPIJobCreated`,
    /// `MPIJobRunning`, `MPIJobSucceeded`, `MPIJobFailed`, `MPIJobSuspended`,
    /// `MPIJobResumed`, ...), and eto's `WorkersCreated`, `WorkersReady`, `LauncherCreated`,
    /// `Ready` and `Stalled` (which GitOps tools read as the job's health).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<JobCondition>,

    /// Pod counts of the `Launcher` and of the `Worker` replicas.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub replica_statuses: BTreeMap<ReplicaType, KubeflowReplicaStatus>,

    /// When the job started (set again when a suspended job resumes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,

    /// When the job succeeded or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,

    /// When mpi-operator last reconciled the job (eto does not set it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reconcile_time: Option<Time>,

    /// eto's additions.
    #[serde(flatten)]
    pub eto: EtoJobStatus,
}
