//! `TrainJob`, `TrainingRuntime` and `ClusterTrainingRuntime` (`trainer.kubeflow.org/v1alpha1`):
//! Kubeflow Trainer v2's API, served by eto.
//!
//! A TrainJob names a runtime (`spec.runtimeRef`): a TrainingRuntime of its namespace or a
//! ClusterTrainingRuntime, which holds an `mlPolicy` and a JobSet template. The fields of
//! Trainer's API are here with their JSON names, so the runtimes of Trainer's chart, TrainJobs
//! written for them and what the `kubeflow` SDK and Kueue write are accepted unchanged. eto
//! adds elastic training (`elasticPolicy`, the shape of Kubeflow's KEP-2903), hot spares and
//! TorchFT replica groups; YAML that sets none of them runs as Trainer runs it.
//
// Doc comments on items in this module become CRD descriptions and so `kubectl explain`
// text: they are written for users. Developer notes belong in `//` comments.
//
// Differences from Trainer's CRDs, all of them more permissive: `spec.trainer` may change
// (the scale subresource and an autoscaler set `numNodes`), and the JobSet fields eto does not
// read (`network`, `successPolicy`, `failurePolicy`, `startupPolicy`, ...) are kept as written
// (`x-kubernetes-preserve-unknown-fields`) rather than typed.

use k8s_openapi::api::autoscaling::v2::MetricSpec;
use k8s_openapi::api::batch::v1::JobTemplateSpec;
use k8s_openapi::api::core::v1::{
    Affinity, EnvVar, LocalObjectReference, PodSchedulingGate, PodSecurityContext,
    ResourceRequirements, SecurityContext, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::common::{JobCondition, conditions_schema};
use crate::elastic::ElasticPolicy;
use crate::job_status::ReplicaGroupsStatus;
use crate::kubeflow::{EtoJobStatus, KubeflowReplicaStatus};
use crate::pytorch_job::{RendezvousStatus, ReplicaGroups};

/// The value of `spec.managedBy` that names Trainer's controller, in whose place eto runs
/// the job.
pub const TRAINJOB_CONTROLLER: &str = "trainer.kubeflow.org/trainjob-controller";

/// The label of a replicated job's template that says which step of a TrainJob it runs:
/// `trainer`, `dataset-initializer` or `model-initializer`.
pub const ANCESTOR_LABEL: &str = "trainer.kubeflow.org/trainjob-ancestor-step";

/// The ancestor step of the replicated job whose pods train.
pub const TRAINER_STEP: &str = "trainer";

/// The name of the container that trains, in Trainer's runtimes.
pub const NODE_CONTAINER: &str = "node";

/// The label naming a runtime's framework (`torch`, `mpi`, ...), which the SDK reads.
pub const FRAMEWORK_LABEL: &str = "trainer.kubeflow.org/framework";

/// The desired state of a TrainJob.
// The printer columns repeat keys such as `type_`, which clippy mistakes for duplicated
// attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "trainer.kubeflow.org",
    version = "v1alpha1",
    kind = "TrainJob",
    plural = "trainjobs",
    singular = "trainjob",
    namespaced,
    status = "TrainJobStatus",
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
        description = "Training nodes that are running and ready"
    ),
    printcolumn(
        name = "Desired",
        type_ = "integer",
        json_path = ".status.workers.desired",
        description = "Training nodes the job asks for"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    scale(
        spec_replicas_path = ".spec.trainer.numNodes",
        status_replicas_path = ".status.replicaStatuses.Worker.active",
        label_selector_path = ".status.replicaStatuses.Worker.selector"
    ),
    doc = "A training job in Kubeflow Trainer v2's API, run by eto from the runtime it names: its training nodes get the environment Trainer's torch runtime gives them (PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT); with an elasticPolicy they train elastically on eto's engine."
)]
#[serde(rename_all = "camelCase")]
pub struct TrainJobSpec {
    /// The runtime the job runs from: a ClusterTrainingRuntime (the default kind) or a
    /// TrainingRuntime of the job's namespace. Cannot be changed.
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self == oldSelf", "message": "spec.runtimeRef cannot be changed"}
    ]))]
    pub runtime_ref: RuntimeRef,

    /// The dataset and model initializers, for runtimes with those steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initializer: Option<Initializer>,

    /// The training nodes: what overrides the runtime's trainer step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trainer: Option<Trainer>,

    /// Patches of the runtime's templates, one entry per manager (Kueue writes its own).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["manager"]))]
    pub runtime_patches: Vec<RuntimePatch>,

    /// While true the job is suspended: its pods are deleted at once and recreated when it is
    /// set back to false, with the templates as they are then. A job created suspended
    /// creates nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub suspend: Option<bool>,

    /// Seconds the job may run, counted from its start (again from a resume), before it fails
    /// with reason `DeadlineExceeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub active_deadline_seconds: Option<i64>,

    /// The controller that runs the job: unset or `trainer.kubeflow.org/trainjob-controller`
    /// means eto (in Trainer's place); `kueue.x-k8s.io/multikueue` makes eto leave the job
    /// alone. Cannot be changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {
            "rule": "self in ['trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue']",
            "message": "spec.managedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue"
        },
        {"rule": "self == oldSelf", "message": "spec.managedBy cannot be changed"}
    ]))]
    pub managed_by: Option<String>,
}

/// The runtime a TrainJob runs from.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeRef {
    /// The runtime's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,

    /// Its API group: `trainer.kubeflow.org` (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,

    /// Its kind: `ClusterTrainingRuntime` (the default) or `TrainingRuntime`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// A TrainJob's initializers.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Initializer {
    /// The dataset initializer: overrides the runtime's `dataset-initializer` step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<StepInitializer>,

    /// The model initializer: overrides the runtime's `model-initializer` step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<StepInitializer>,
}

/// What a TrainJob sets of one initializer step.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StepInitializer {
    /// Where the initializer reads from (`hf://...`, `s3://...`), given to it as
    /// `STORAGE_URI`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_uri: Option<String>,

    /// Environment variables for the initializer's container, over the runtime's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,

    /// A Secret of the job's namespace whose keys become the initializer's environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
}

/// What a TrainJob sets of its training nodes.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Trainer {
    /// The image of the training container (`node`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,

    /// The training container's command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,

    /// The training container's arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,

    /// Environment variables of the training container, over the runtime's. The variables
    /// torchrun's placement is given in (`PET_NNODES`, `PET_NPROC_PER_NODE`,
    /// `PET_NODE_RANK`, `PET_MASTER_ADDR`, `PET_MASTER_PORT`) cannot be set here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,

    /// The number of training nodes (pods); defaults to the runtime's `mlPolicy.numNodes`.
    /// With an `elasticPolicy`, the count eto grows toward, within its bounds: what `kubectl
    /// scale trainjob` and an autoscaler set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub num_nodes: Option<i32>,

    /// The compute resources of each training node's training container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources_per_node: Option<ResourceRequirements>,

    /// Processes per node, as torchrun's `--nproc-per-node`: a number, or `auto` (the
    /// default: one per GPU, else one per CPU the node requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_proc_per_node: Option<IntOrString>,

    /// eto: elastic training for this job, over the runtime's `mlPolicy.torch.elasticPolicy`
    /// (each field set here replaces the runtime's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elastic_policy: Option<TrainJobElasticPolicy>,
}

/// Elastic training of a TrainJob, in the shape of Kubeflow's KEP-2903 (`minNodes`,
/// `maxNodes`, `metrics`) with eto's additions. The training nodes run torchrun with an
/// elastic rendezvous that eto hosts in a pod of its own, off the nodes: the group re-forms
/// once per change, a lost node is replaced under a new name, the training is told to
/// checkpoint before a node leaves, and a job whose nodes drop below `minNodes` is suspended
/// and resumes from its checkpoint when capacity returns.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!has(self.minNodes) || !has(self.maxNodes) || self.minNodes <= self.maxNodes",
    "message": "elasticPolicy.minNodes must not be greater than maxNodes",
    "fieldPath": ".minNodes"
}]))]
pub struct TrainJobElasticPolicy {
    /// Fewest training nodes the job trains with. Defaults to `maxNodes`, or else to
    /// `numNodes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub min_nodes: Option<i32>,

    /// Most training nodes. Defaults to `minNodes`, or else to `numNodes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_nodes: Option<i32>,

    /// Metrics of a HorizontalPodAutoscaler (autoscaling/v2) that scales the job's
    /// `numNodes` between `minNodes` and `maxNodes` through its scale subresource. It exists
    /// while the job runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Vec<MetricSpec>>,

    /// How many times torchrun restarts its worker group after a failure
    /// (`PET_MAX_RESTARTS`); 100 by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_restarts: Option<i32>,

    /// eto: hot spares, as a PyTorchJob's `elasticPolicy.spareReplicas`: while the job holds
    /// `maxNodes` nodes, this many more wait started beside the group and take a lost node's
    /// place at once. With `replicaGroups`, the count of spare groups, kept at every size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub spare_nodes: Option<i32>,

    /// eto: TorchFT replica groups, as a PyTorchJob's `elasticPolicy.replicaGroups`: each
    /// node (or `podsPerGroup` nodes) is a replica group that comes and goes alone through a
    /// TorchFT Lighthouse eto runs, the other groups training on. `minNodes`, `maxNodes` and
    /// `numNodes` then count groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_groups: Option<ReplicaGroups>,

    /// eto's waiting, suspend, drain and cooldown settings, as every kind eto serves has them.
    #[serde(flatten)]
    pub eto: ElasticPolicy,
}

/// One manager's patches of a TrainJob's runtime.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RuntimePatch {
    /// Who owns these patches (a user, Kueue's `kueue.x-k8s.io/manager`, ...).
    #[schemars(length(min = 1, max = 253))]
    pub manager: String,

    /// When the patch was last written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<Time>,

    /// The patches of the runtime's spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub training_runtime_spec: Option<TrainingRuntimeSpecPatch>,
}

/// Patches of a runtime's spec.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TrainingRuntimeSpecPatch {
    /// Patches of the JobSet template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<JobSetTemplatePatch>,
}

/// Patches of a runtime's JobSet template.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct JobSetTemplatePatch {
    /// Labels and annotations of the JobSet (eto creates none; kept as written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MetadataPatch>,

    /// Patches of the replicated jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<JobSetSpecPatch>,
}

/// Patches of the replicated jobs of a runtime's JobSet.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct JobSetSpecPatch {
    /// One entry per replicated job, by name; each must name one of the runtime's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub replicated_jobs: Vec<ReplicatedJobPatch>,
}

/// Patches of one replicated job.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicatedJobPatch {
    /// The replicated job's name, one of the runtime's (`node`, `dataset-initializer`, ...).
    #[schemars(length(min = 1, max = 253))]
    pub name: String,

    /// Patches of its Job template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<JobTemplatePatch>,
}

/// Patches of a replicated job's Job template.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct JobTemplatePatch {
    /// Labels and annotations of the Job (eto creates none; kept as written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MetadataPatch>,

    /// Patches of the Job's spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<JobSpecPatch>,
}

/// Patches of a Job's spec.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct JobSpecPatch {
    /// Patches of the pod template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<PodTemplatePatch>,
}

/// Patches of a pod template.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodTemplatePatch {
    /// Labels and annotations added to the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MetadataPatch>,

    /// Patches of the pod spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<PodSpecPatch>,
}

/// Labels and annotations a patch adds.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MetadataPatch {
    /// Labels to add.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,

    /// Annotations to add.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// The pod spec fields a patch may set. Lists keyed by name replace the runtime's entry of
/// the same name and add the others; `nodeSelector` entries are added; `affinity` replaces the
/// runtime's; `tolerations` and `schedulingGates` are added.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodSpecPatch {
    /// The pods' service account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,

    /// Volumes, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,

    /// Patches of init containers, by name; each must name one of the runtime's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<ContainerPatch>,

    /// Patches of containers, by name; each must name one of the runtime's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub containers: Vec<ContainerPatch>,

    /// Image pull secrets, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<LocalObjectReference>,

    /// The pods' security context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<PodSecurityContext>,

    /// Node selector entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,

    /// Scheduling affinity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,

    /// Tolerations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,

    /// Scheduling gates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scheduling_gates: Vec<PodSchedulingGate>,

    /// The pods' termination grace period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub termination_grace_period_seconds: Option<i64>,
}

/// Patches of one container.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerPatch {
    /// The container's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,

    /// Environment variables, by name (not for the `node` container: use `spec.trainer.env`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,

    /// Volume mounts, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_mounts: Vec<VolumeMount>,

    /// The container's security context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<SecurityContext>,
}

/// Observed state of a TrainJob: Trainer's fields, then eto's additions.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TrainJobStatus {
    /// Trainer's conditions: `Suspended` (reasons `Suspended`, `Resumed`, and eto's
    /// `SuspendedBelowMinimum`-style reasons when eto suspends a job below its minimum),
    /// `Complete` and `Failed` (reason `DeadlineExceeded` past `activeDeadlineSeconds`). A
    /// job that runs has none of the last two, as with Trainer, so the SDK reads it as
    /// running from its pods. eto's own conditions are in `etoConditions`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,

    /// The replicated jobs' counts, as JobSet reports them: each replicated job of the
    /// runtime counts as one job.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub jobs_status: Vec<ReplicatedJobStatus>,

    /// The trainer step's progress, where it is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trainer_status: Option<TrainerStatus>,

    /// eto: its observations of the job, one per type (`Created`, `Running`, `Restarting`,
    /// `WorkersCreated`, `WorkersReady`, `Ready`, `Stalled`, ...): GitOps tools read `Ready`
    /// and `Stalled` as the job's health.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub eto_conditions: Vec<JobCondition>,

    /// eto: pod counts of the coordinator (`Master`: node 0 of a static job) and of the
    /// `Worker`s (the other nodes; every node of an elastic job). The Workers' carry the
    /// label selector the scale subresource reads.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub replica_statuses: BTreeMap<String, KubeflowReplicaStatus>,

    /// eto: when the job started (set again when a suspended job resumes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,

    /// eto: when the job succeeded or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,

    /// eto's additions.
    #[serde(flatten)]
    pub eto: EtoJobStatus,

    /// eto: nodes not created yet because nodes that eto lets go once the group saved (a
    /// scale-in, a node's warning) drain out of the group they join.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_workers: Vec<String>,

    /// eto: torchrun's rendezvous of the current run, as the store eto hosts last reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rendezvous: Option<RendezvousStatus>,

    /// eto: the replica groups' quorum, as the Lighthouse last reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_groups: Option<ReplicaGroupsStatus>,
}

/// One replicated job's counts, as JobSet reports them.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicatedJobStatus {
    /// The replicated job's name.
    pub name: String,
    /// Jobs whose pods are all ready or done.
    pub ready: i32,
    /// Jobs that succeeded.
    pub succeeded: i32,
    /// Jobs that failed.
    pub failed: i32,
    /// Jobs with a pod running or pending.
    pub active: i32,
    /// Jobs suspended.
    pub suspended: i32,
}

/// The trainer step's progress.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TrainerStatus {
    /// How complete the training is, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub progress_percentage: Option<i32>,

    /// Seconds the training is expected to take still.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub estimated_remaining_seconds: Option<i32>,

    /// The model's latest metrics.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<TrainerMetric>,

    /// When this was observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated_time: Option<Time>,
}

/// One metric of the model.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct TrainerMetric {
    /// Its name (`loss`, ...).
    pub name: String,
    /// Its value.
    pub value: String,
}

/// A training runtime of one namespace: what a TrainJob of that namespace runs from.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "trainer.kubeflow.org",
    version = "v1alpha1",
    kind = "TrainingRuntime",
    plural = "trainingruntimes",
    singular = "trainingruntime",
    namespaced,
    derive = "PartialEq",
    doc = "A training runtime that the TrainJobs of its namespace name in spec.runtimeRef: an mlPolicy and a JobSet template."
)]
pub struct TrainingRuntimeSpec {
    /// The runtime's spec.
    #[serde(flatten)]
    pub runtime: RuntimeSpec,
}

/// A training runtime for the TrainJobs of every namespace.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "trainer.kubeflow.org",
    version = "v1alpha1",
    kind = "ClusterTrainingRuntime",
    plural = "clustertrainingruntimes",
    singular = "clustertrainingruntime",
    derive = "PartialEq",
    doc = "A training runtime that TrainJobs of any namespace name in spec.runtimeRef: an mlPolicy and a JobSet template."
)]
pub struct ClusterTrainingRuntimeSpec {
    /// The runtime's spec.
    #[serde(flatten)]
    pub runtime: RuntimeSpec,
}

/// What a runtime holds.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeSpec {
    /// The framework and its settings. eto runs `torch`; a runtime with another policy is
    /// reported on the TrainJobs that name it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ml_policy: Option<MlPolicy>,

    /// Gang scheduling: with `coscheduling`, eto's PodGroup (when eto runs with a gang
    /// scheduler) waits `scheduleTimeoutSeconds` for every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_group_policy: Option<PodGroupPolicy>,

    /// The JobSet template: its replicated jobs are the job's steps.
    #[serde(default)]
    pub template: JobSetTemplate,
}

/// A runtime's framework and its settings; one of them is set.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost), has(self.flux)].filter(x, x).size() <= 1",
    "message": "only one of mlPolicy.torch, mpi, jax, xgboost and flux can be set"
}]))]
pub struct MlPolicy {
    /// Training nodes of a job that sets no `trainer.numNodes`. Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_nodes: Option<i32>,

    /// PyTorch: torchrun on every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<TorchPolicy>,

    /// MPI (Trainer's; eto does not run it for a TrainJob: use an MPIJob).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "kept_object")]
    pub mpi: Option<serde_json::Value>,

    /// JAX (Trainer's; eto does not run it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "kept_object")]
    pub jax: Option<serde_json::Value>,

    /// XGBoost (Trainer's; eto does not run it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "kept_object")]
    pub xgboost: Option<serde_json::Value>,

    /// Flux (Trainer's; eto does not run it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "kept_object")]
    pub flux: Option<serde_json::Value>,
}

/// The torch framework's settings.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TorchPolicy {
    /// Processes per node of jobs that set no `trainer.numProcPerNode` (Trainer's earlier
    /// API; `auto` where neither is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_proc_per_node: Option<IntOrString>,

    /// Other containers that get the `PET_` variables besides `node`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_injection: Option<EnvInjection>,

    /// eto: elastic training for every job of the runtime (see the TrainJob's
    /// `spec.trainer.elasticPolicy`, which overrides it field by field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elastic_policy: Option<TrainJobElasticPolicy>,
}

/// Containers that get the `PET_` variables besides `node`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct EnvInjection {
    /// By replicated job.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<EnvInjectionTarget>,
}

/// The containers of one replicated job that get the `PET_` variables.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct EnvInjectionTarget {
    /// The replicated job.
    pub job_name: String,
    /// Its containers.
    #[serde(default)]
    pub container_names: Vec<String>,
}

/// A runtime's gang scheduling.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupPolicy {
    /// The scheduler-plugins' coscheduling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coscheduling: Option<Coscheduling>,

    /// Volcano's (kept as written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "kept_object")]
    pub volcano: Option<serde_json::Value>,
}

/// Coscheduling settings.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Coscheduling {
    /// Seconds the gang may wait to be scheduled whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_timeout_seconds: Option<i32>,
}

/// A runtime's JobSet template.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct JobSetTemplate {
    /// Labels and annotations of the JobSet (eto creates none; kept as written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MetadataPatch>,

    /// The JobSet's spec.
    #[serde(default)]
    pub spec: JobSetSpec,
}

/// The parts of a JobSet's spec eto reads; the others are kept as written.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct JobSetSpec {
    /// The replicated jobs: the trainer step (the one labelled
    /// `trainer.kubeflow.org/trainjob-ancestor-step: trainer`, else the one named `node`)
    /// and the initializers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicated_jobs: Vec<ReplicatedJob>,

    /// JobSet's network settings (kept as written; eto gives the pods its own names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "kept_object")]
    pub network: Option<serde_json::Value>,

    /// JobSet's success policy (kept as written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "kept_object")]
    pub success_policy: Option<serde_json::Value>,

    /// JobSet's failure policy (kept as written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "kept_object")]
    pub failure_policy: Option<serde_json::Value>,

    /// JobSet's startup policy (kept as written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "kept_object")]
    pub startup_policy: Option<serde_json::Value>,
}

/// A replicated job of a runtime's JobSet: a step of the TrainJob.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicatedJob {
    /// Its name (`node`, `dataset-initializer`, `model-initializer`, ...).
    pub name: String,

    /// Jobs of this template (1 by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,

    /// The replicated jobs that must reach a status before this one starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<DependsOn>,

    /// Its Job template; the pod template is the step's.
    pub template: JobTemplateSpec,
}

/// A replicated job another waits for.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DependsOn {
    /// Its name.
    pub name: String,
    /// `Ready` or `Complete`.
    pub status: String,
}

// An object whose fields eto keeps as written and does not read.
fn kept_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}
