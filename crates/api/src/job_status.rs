//! The parts of a job's status that every kind eto serves shares: where the job is in its
//! life, its workers at a glance, the workers it lost, the nodes it avoids or was warned of,
//! and the notices its training reads.
//
// Doc comments on items in this module become CRD descriptions and so `kubectl explain`
// text: they are written for users. Developer notes belong in `//` comments.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::without_description;

/// Most entries `status.blacklist` holds; the oldest are dropped first.
pub const BLACKLIST_LIMIT: usize = 64;

/// Most entries `status.nodesInCooldown` holds; those whose cooldown ends first are dropped
/// first.
pub const COOLDOWN_LIMIT: usize = 64;

/// Most entries `status.nodeWarnings` holds; those ending first are kept.
pub const NODE_WARNINGS_LIMIT: usize = 64;

/// Most pods one entry of `status.backoff` holds back.
pub const BACKOFF_WAITING_LIMIT: usize = 1024;

/// Where a job is in its life.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq, Hash)]
#[schemars(transform = without_description)]
pub enum JobPhase {
    /// Accepted; workers are being created or are not ready yet.
    Created,
    /// The training runs.
    Running,
    /// A ScaleIn or ScaleOut request is being carried out.
    Scaling,
    /// The job is being restarted after its training failed.
    Restarting,
    /// Suspended: its pods are deleted (by its suspend field), or it waits for the minimum of
    /// new workers to resume (after too few were left).
    Suspended,
    /// The training finished successfully.
    Succeeded,
    /// The job failed and will not be restarted.
    Failed,
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
    /// Spare workers kept beside the group, counted in `ready` and `pending` (a
    /// PyTorchJob's `elasticPolicy.spareReplicas`, while the group holds `max` workers; for
    /// replica groups at every size, with one more for each group on a warned node that
    /// trains on until a spare waits to take its place); absent for a job without spares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spares: Option<i32>,
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

/// Pods of one role that keep failing on their own (their code, their image, their
/// configuration), and when eto creates the next: as the kubelet backs off a container that
/// keeps failing, eto backs off the pods it creates to replace them.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RoleBackoff {
    /// The role: `Worker`, or the pod that coordinates the job's runs (`Launcher`, `Master`,
    /// `RendezvousStore`, `Lighthouse`).
    pub role: String,
    /// The role's failures in a row. Pods created before the latest failure that fail too
    /// failed with it and are not counted again; a pod of the role created after it that runs
    /// for 10 minutes ends the back-off, and so does a new pod template.
    pub failures: i32,
    /// When eto saw the latest failure.
    pub since: Time,
    /// New pods that replace the failed ones wait until then: at once after a first failure,
    /// then 10 seconds, doubling with each failure in a row up to 5 minutes. Pods that
    /// replace what the platform took (a reclaim, an eviction, a node's loss) never wait.
    pub retry_at: Time,
    /// The latest failure, as the kubelet reported it.
    pub cause: String,
    /// The pods whose creation waits until `retryAt`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = BACKOFF_WAITING_LIMIT))]
    pub waiting: Vec<String>,
    /// Workers of this index and above were created after the latest failure: their failures
    /// are failures of their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_index: Option<i32>,
    /// The latest failure counted (the pod's uid): it counts once.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub counted: String,
    /// A digest of the role's pod template when the failures were counted.
    pub template: String,
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
/// `/etc/edl/notice` of its pods (an empty file: no notice). Training
/// code polls it, for example before each batch: the `eto_notice.py` helper in eto's
/// repository reads it.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Notice {
    /// What is happening.
    pub kind: NoticeKind,
    /// Why: `BelowMinWorkers`, `LauncherDisrupted` (the platform takes the launcher),
    /// `WorkerDisrupted` or `GroupLost` (the training did not survive a worker's loss) or
    /// `Suspended` (asked for) for the job; `Disrupted` or `NodeWarning` for a pod whose node
    /// is going away; `WorkersLeaving` before a group of workers re-forms without one.
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
    /// so, then wait; the re-formed group resumes from it. Training goes on if the notice is
    /// withdrawn.
    Checkpoint,
}

/// A time the group of a run re-formed: a member left it or one joined, the agents left the
/// round that trained, and a new round formed.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Reformation {
    /// The round that formed.
    pub round: i64,
    /// When the group that trained before it broke up, as the store saw it: a member taken
    /// out of it (eto does so as soon as its pod goes), the round left, or an agent waiting to
    /// join.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
    /// When the new round formed.
    pub formed: Time,
    /// How long the run had no formed group: from `since` to `formed`, as `<seconds>s`. The
    /// training pauses longer, by the time its processes take to start again (import, process
    /// group, checkpoint load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<String>,
    /// The pods whose agents the new round lacks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left: Vec<String>,
    /// The pods whose agents are new in it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub joined: Vec<String>,
}

/// The replica groups of a run, as their Lighthouse reports them.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaGroupsStatus {
    /// The latest quorum's id: one more each time the quorum's groups changed.
    pub quorum_id: i64,
    /// Groups in the latest quorum: those that trained its step together.
    pub quorum: i64,
    /// The step the latest quorum trained.
    pub step: i64,
    /// Groups whose Manager heartbeats the Lighthouse.
    pub heartbeating: i64,
    /// Groups that heartbeat but are not in the quorum yet: new or replaced groups joining,
    /// which heal from a live group as they do.
    pub healing: i64,
    /// Groups the job holds that do not heartbeat: starting, or lost and not yet replaced.
    pub missing: i64,
    /// Groups of this run whose training failed soon after the platform took another group
    /// (the survivors of a loss that did not survive it), each replaced at once to heal from
    /// a live group: neither backed off nor counted against `backoffLimit`.
    #[serde(default, skip_serializing_if = "none_counted")]
    pub survivor_restarts: i64,
    /// The latest time no group of this run was left alive to heal from, so that the groups'
    /// state was lost: the step they had reached, and the step at which the new groups were
    /// seen training again (their newest checkpoint's, or near 0 without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_lost: Option<GroupStateLoss>,
}

/// Whether a count is still zero (and left out of the status).
fn none_counted(count: &i64) -> bool {
    *count == 0
}

/// When every replica group of a run was lost at once (see
/// [`ReplicaGroupsStatus::state_lost`]).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GroupStateLoss {
    /// When eto saw the last group go.
    pub time: Time,
    /// The step the groups' latest quorum had trained.
    pub step: i64,
    /// The Lighthouse's quorum id then: a quorum of another id is the new groups'.
    pub quorum_id: i64,
    /// The step of the new groups' first quorum eto read from the Lighthouse (read every
    /// second until then): the checkpoint they loaded, or a few steps past it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_at: Option<i64>,
}

/// How much of a job's time trained, and where the rest went: its goodput ledger.
///
/// Every moment since the job was created lands in exactly one bucket. Totals move when the
/// bucket changes (or when a step report is recorded): the time since `currentSince` belongs
/// to `current` and is added to it by whoever reads the ledger later (`kubectl eto get`,
/// eto's metrics).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Goodput {
    /// Where eto learns the training's steps: `TrainingReports` (the training code reports
    /// each step with eto's helper, `eto_notice.progress(step)`), `Lighthouse` (the step of
    /// the replica groups' quorum), or `PodStates` (nothing reports steps: the time counts as
    /// productive while the run's pods run and its group is formed, so a stalled training
    /// and steps trained twice cannot be told apart).
    pub source: ProgressSource,
    /// When the ledger begins: the job's creation.
    pub since: MicroTime,
    /// Seconds accounted up to `currentSince`, by bucket.
    pub seconds: GoodputSeconds,
    /// The bucket the time since `currentSince` goes to; absent once the job finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<GoodputBucket>,
    /// Since when time goes to `current` (for a finished job: when it finished).
    pub current_since: MicroTime,
    /// The share of the time accounted (up to `currentSince`) that was productive, in
    /// percent: `97.2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent: Option<String>,
    /// The highest step the training reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub highest_step: Option<i64>,
    /// Steps trained a second time (after a restore from a checkpoint older than the
    /// highest step).
    #[serde(default, skip_serializing_if = "none_counted")]
    pub retrained_steps: i64,
    /// The latest step report eto recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest: Option<StepReport>,
    /// The latest run seen training: time before its next step is its group's re-formation,
    /// in another run the run's start-up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trained_run: Option<i32>,
    /// Time counted as productive from the pods' states alone while the training had a place
    /// to report its steps and had reported none yet: once it reports its first step, the
    /// part of it before that step moves to `startUp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreported: Option<UnreportedTime>,
}

/// Productive time the training has not confirmed by a step report yet.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UnreportedTime {
    /// Its seconds.
    pub seconds: f64,
    /// The moment it was counted up to.
    pub until: MicroTime,
}

/// Where a job's goodput ledger learns the training's steps.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[schemars(transform = without_description)]
pub enum ProgressSource {
    /// The training code reports its steps (eto's helper, `eto_notice.progress(step)`).
    TrainingReports,
    /// The replica groups' Lighthouse reports its quorum's step.
    Lighthouse,
    /// Nothing reports steps: the pods' and the group's states tell when the job trains.
    PodStates,
}

impl ProgressSource {
    /// Where the steps come from, in words.
    pub fn describe(self) -> &'static str {
        match self {
            ProgressSource::TrainingReports => "steps reported by the training",
            ProgressSource::Lighthouse => "steps of the replica groups' quorum",
            ProgressSource::PodStates => "from pod states; the training reports no steps",
        }
    }
}

/// Where the time of a job went.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq, Hash)]
#[schemars(transform = without_description)]
pub enum GoodputBucket {
    /// Steps reached for the first time.
    Productive,
    /// Waiting for capacity or admission: pods pending, the job suspended (also below its
    /// minimum of workers).
    Waiting,
    /// From a run's pods created to its first step.
    StartUp,
    /// From a change of the training group (a worker lost or added) to its next step.
    Reformation,
    /// Saving a checkpoint a notice asked for, and loading one when the training says so.
    Checkpoint,
    /// Training steps already reached once.
    Retrained,
    /// Anything else: a failed run before its restart, a stalled group.
    Other,
}

impl GoodputBucket {
    /// Every bucket, productive first.
    pub const ALL: [GoodputBucket; 7] = [
        GoodputBucket::Productive,
        GoodputBucket::Waiting,
        GoodputBucket::StartUp,
        GoodputBucket::Reformation,
        GoodputBucket::Checkpoint,
        GoodputBucket::Retrained,
        GoodputBucket::Other,
    ];

    /// Its name as the status and metrics write it (`startUp`).
    pub fn name(self) -> &'static str {
        match self {
            GoodputBucket::Productive => "productive",
            GoodputBucket::Waiting => "waiting",
            GoodputBucket::StartUp => "startUp",
            GoodputBucket::Reformation => "reformation",
            GoodputBucket::Checkpoint => "checkpoint",
            GoodputBucket::Retrained => "retrained",
            GoodputBucket::Other => "other",
        }
    }
}

/// Seconds of a job's time by bucket (see [`GoodputBucket`]), to the millisecond.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GoodputSeconds {
    /// Steps reached for the first time.
    #[serde(default)]
    pub productive: f64,
    /// Waiting for capacity or admission.
    #[serde(default)]
    pub waiting: f64,
    /// From a run's pods created to its first step.
    #[serde(default)]
    pub start_up: f64,
    /// From a change of the training group to its next step.
    #[serde(default)]
    pub reformation: f64,
    /// Saving and loading checkpoints.
    #[serde(default)]
    pub checkpoint: f64,
    /// Training steps already reached once.
    #[serde(default)]
    pub retrained: f64,
    /// Anything else.
    #[serde(default)]
    pub other: f64,
}

impl GoodputSeconds {
    /// The seconds of `bucket`.
    pub fn get(&self, bucket: GoodputBucket) -> f64 {
        match bucket {
            GoodputBucket::Productive => self.productive,
            GoodputBucket::Waiting => self.waiting,
            GoodputBucket::StartUp => self.start_up,
            GoodputBucket::Reformation => self.reformation,
            GoodputBucket::Checkpoint => self.checkpoint,
            GoodputBucket::Retrained => self.retrained,
            GoodputBucket::Other => self.other,
        }
    }

    /// The seconds of `bucket`, to change.
    pub fn get_mut(&mut self, bucket: GoodputBucket) -> &mut f64 {
        match bucket {
            GoodputBucket::Productive => &mut self.productive,
            GoodputBucket::Waiting => &mut self.waiting,
            GoodputBucket::StartUp => &mut self.start_up,
            GoodputBucket::Reformation => &mut self.reformation,
            GoodputBucket::Checkpoint => &mut self.checkpoint,
            GoodputBucket::Retrained => &mut self.retrained,
            GoodputBucket::Other => &mut self.other,
        }
    }

    /// Every bucket's seconds added up.
    pub fn total(&self) -> f64 {
        GoodputBucket::ALL
            .iter()
            .map(|&bucket| self.get(bucket))
            .sum()
    }
}

/// A step the training reported, as eto recorded it.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct StepReport {
    /// The step.
    pub step: i64,
    /// When it was reached.
    pub at: MicroTime,
    /// The first step of the stretch of training it belongs to (since the training
    /// processes started or the steps went back to a checkpoint's).
    pub first_step: i64,
    /// When that first step was reached.
    pub first_at: MicroTime,
    /// The run it was reported in.
    pub run: i32,
    /// The total of steps the training will take, when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<i64>,
}
