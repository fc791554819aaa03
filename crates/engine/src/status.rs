//! A job's status in the engine's shape: what [`crate::plan`] reads from the last reconcile
//! and writes for the next, whatever the kind. Each kind converts it from and to the status
//! its own API has (its module's `status`), writing only the fields that mean something for
//! it: a TrainingJob's status has no rendezvous, for example.

use std::collections::BTreeMap;

use eto_api::common::{JobCondition, ReplicaStatus, ReplicaType};
use eto_api::job_status::{
    BlacklistEntry, DrainingWorker, Goodput, JobPhase, NodeCooldown, Notice, RoleBackoff,
    WarnedNode, WorkerSummary,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// A job's status in the engine's shape (see the module documentation); the fields mean what
/// the APIs' fields of the same names mean.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobStatus {
    /// Where the job is in its life.
    pub phase: Option<JobPhase>,
    /// Observations about the job, one per type.
    pub conditions: Vec<JobCondition>,
    /// Pod counts of the launcher and of the workers.
    pub replica_statuses: BTreeMap<ReplicaType, ReplicaStatus>,
    /// When the job started (reset when a suspended job resumes).
    pub start_time: Option<Time>,
    /// When the job succeeded or failed.
    pub completion_time: Option<Time>,
    /// The scaling request in progress (`ScaleIn:<namespace>/<name>`).
    pub current_scaler: Option<String>,
    /// How many times the whole job was restarted after its training failed.
    pub restart_count: i32,
    /// The worker pods the job should have now.
    pub target_workers: Vec<String>,
    /// The worker pods that run and are listed by host discovery.
    pub current_workers: Vec<String>,
    /// The index the job's next new worker gets.
    pub next_worker_index: Option<i32>,
    /// The current run.
    pub run: Option<i32>,
    /// What the job's pods show their training processes.
    pub notice: Option<Notice>,
    /// The `metadata.generation` of the spec this status describes.
    pub observed_generation: Option<i64>,
    /// Worker counts at a glance.
    pub workers: Option<WorkerSummary>,
    /// Workers lost so far, newest last.
    pub blacklist: Vec<BlacklistEntry>,
    /// Workers removed from the job, draining.
    pub draining_workers: Vec<DrainingWorker>,
    /// Workers of the target not created yet: they wait while workers drain out of the group
    /// they join (see [`crate::reforming_group`]).
    pub held_workers: Vec<String>,
    /// The training group of the current run, as the pod that coordinates it last reported it
    /// (a PyTorchJob's rendezvous).
    pub group: Option<GroupStatus>,
    /// The replica groups of the current run, as their Lighthouse last reported them (a
    /// PyTorchJob of replica groups).
    pub replica_groups: Option<eto_api::job_status::ReplicaGroupsStatus>,
    /// Nodes the job's new workers avoid.
    pub nodes_in_cooldown: Vec<NodeCooldown>,
    /// Nodes running the job's workers that announced they go away.
    pub node_warnings: Vec<WarnedNode>,
    /// Roles whose pods keep failing on their own (see [`crate::backoff`]).
    pub backoff: Vec<RoleBackoff>,
    /// Label selector of the job's worker pods, for the scale subresource.
    pub selector: Option<String>,
    /// The steps run before its first run (see [`crate::job::Preparation`]), as their pods
    /// were when last seen, by step.
    pub steps: BTreeMap<String, StepState>,
    /// Where the job's time went (see [`crate::goodput`]).
    pub goodput: Option<Goodput>,
}

/// What a step run before a job's first run has come to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepState {
    /// Its pod runs or waits to.
    pub active: bool,
    /// Its pod is ready.
    pub ready: bool,
    /// Its pod succeeded.
    pub succeeded: bool,
    /// Its pod failed.
    pub failed: bool,
}

impl JobStatus {
    /// The run it describes: `run`, or for statuses written before it existed, the restart
    /// count (runs were counted by restarts then).
    pub fn current_run(&self) -> i32 {
        self.run.unwrap_or(self.restart_count)
    }

    /// Forgets what the run's workers were doing as a group: the workers draining out of it or
    /// held back, and the group and the replica groups' quorum its coordinator reported. A run
    /// that ends, is suspended or starts again keeps none of it.
    pub fn forget_the_runs_group(&mut self) {
        self.draining_workers.clear();
        self.held_workers.clear();
        self.group = None;
        self.replica_groups = None;
    }
}

pub use eto_api::job_status::Reformation;

/// The training group of a run whose workers form one group that re-forms as they come and
/// go (torchrun's rendezvous), as the pod that coordinates it reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupStatus {
    /// The round: one more each time the group re-formed.
    pub round: i64,
    /// The members (pods) of the round's group.
    pub members: i64,
    /// Members waiting to join at the next round.
    pub waiting: i64,
    /// Members waiting beside a full group as spares.
    pub spares: i64,
    /// Whether the round's group has formed.
    pub complete: bool,
    /// Whether it was closed: no group forms in it again.
    pub closed: bool,
    /// The latest time the group re-formed in the run.
    pub last_reformation: Option<Reformation>,
}
