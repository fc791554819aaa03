//! What a job answers that depends on its kind.
//!
//! Each kind's module implements [`ServedJob`] for its API type; [`JobRef`] asks it,
//! so the engine's rules never learn which kind a job is. A method with a default is what
//! most kinds answer; a kind overrides it where its jobs differ (a PyTorchJob whose
//! rendezvous eto hosts has a rendezvous store for a launcher, for example).

use std::collections::BTreeMap;
use std::time::Duration;

use eto_api::common::ReplicaRestartPolicy;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::invalid_spec::InvalidSpec;
use super::kind::{Coordinator, Kind, WorkerNames};
use crate::effective_spec::EffectiveSpec;
use crate::event_spec::EventSpec;
use crate::group_report::{GroupReport, ReportSource};
use crate::spares::KeptWhen;
use crate::status::JobStatus;

/// A job of one of the kinds eto serves, as the engine reads it.
pub trait ServedJob: std::fmt::Debug + Sync {
    /// Its kind.
    fn kind(&self) -> Kind;

    /// Itself, for its kind's module to read it as its API type (see [`JobRef::downcast`]).
    fn as_any(&self) -> &dyn std::any::Any;

    /// Its metadata.
    fn metadata(&self) -> &ObjectMeta;

    /// The pod template of the pod that coordinates its runs, if the spec has one: a
    /// launcher's, a PyTorchJob's Master's.
    fn coordinator_template(&self) -> Option<&PodTemplateSpec>;

    /// The pod template of its workers, if the spec has one.
    fn worker_template(&self) -> Option<&PodTemplateSpec>;

    /// Its status in the engine's shape (see [`crate::status`]).
    fn engine_status(&self) -> JobStatus;

    /// Validates it and applies every default, by its kind's rules.
    ///
    /// # Errors
    /// [`InvalidSpec`] listing every rule the job breaks, each naming its field.
    fn validate(&self) -> Result<EffectiveSpec, InvalidSpec>;

    /// Whether another operator (the kind's original one) started it: a Kubeflow job whose
    /// status has conditions but nothing eto writes. eto leaves such a job to that operator.
    fn started_by_another_operator(&self) -> bool {
        false
    }

    /// The restart policy its users gave the worker replica, where it decides whether a run
    /// the training's own failure ended restarts (a PyTorchJob's: a lost rank of a static
    /// job, a lost group of an elastic one). `None` for kinds whose launcher's failure
    /// decides it.
    fn replica_restart_policy(&self) -> Option<ReplicaRestartPolicy> {
        None
    }

    /// Whether the first worker to succeed ends the run successfully, when the workers
    /// decide its outcome; otherwise every worker must.
    fn first_worker_success_decides(&self) -> bool {
        false
    }

    /// The names of the Services it has one per pod; empty for kinds with one Service for
    /// the job.
    fn pod_service_names(&self) -> Vec<String> {
        Vec::new()
    }

    /// The pod that coordinates its runs; its kind's unless the spec chooses another.
    fn coordinator(&self) -> Coordinator {
        self.kind().vocabulary().coordinator
    }

    /// The value of its kind's role label on the pod of [`ServedJob::coordinator`]; its
    /// kind's launcher role unless the spec chooses another coordinator.
    fn coordinator_role(&self) -> &'static str {
        self.kind().vocabulary().launcher_role
    }

    /// How it names the workers of a run; its kind's unless the spec chooses otherwise.
    fn worker_names(&self) -> WorkerNames {
        self.kind().vocabulary().worker_names
    }

    /// Its workers as groups eto seats, if its kind has them (see [`GroupedWorkers`]).
    fn grouped_workers(&self) -> Option<&dyn GroupedWorkers> {
        None
    }

    /// Its run's coordinator as one that reports on the workers' group, if its kind has one
    /// (see [`ReportingCoordinator`]).
    fn reporting_coordinator(&self) -> Option<&dyn ReportingCoordinator> {
        None
    }

    /// The name of its launcher (its pod, or the object that runs its pod).
    fn launcher_name(&self) -> String {
        let name = self.metadata().name.as_deref().unwrap_or_default();
        self.kind().launcher_name(name)
    }

    /// The field holding its minimum number of workers, for messages.
    fn min_field(&self) -> &'static str {
        self.kind().vocabulary().min_field
    }

    /// What its users call its launcher, in messages.
    fn launcher_called(&self) -> &'static str {
        self.kind().vocabulary().launcher_called
    }

    /// The steps it runs before its first run starts (a TrainJob's dataset and model
    /// initializers), as `job`, its context, builds them; none for most kinds.
    fn preparation(&self, job: super::JobContext<'_>) -> Preparation {
        let _ = job;
        Preparation::default()
    }
}

/// The steps a job runs before its first run starts, each a pod that runs to completion, and
/// what the run waits for (see [`ServedJob::preparation`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Preparation {
    /// The steps, in the order they are declared.
    pub steps: Vec<PreparationStep>,
    /// What the run's pods wait for: each step by name, and whether it must be complete or
    /// only ready.
    pub run_waits_for: Vec<(String, StepReached)>,
}

/// One step of a job's [`Preparation`].
#[derive(Clone, Debug, PartialEq)]
pub struct PreparationStep {
    /// Its name, as the job's users know it (`dataset-initializer`).
    pub name: String,
    /// Its pod, as it is created.
    pub pod: Pod,
    /// The steps it waits for, as the run does.
    pub waits_for: Vec<(String, StepReached)>,
}

/// How far a step must have come for what waits for it to start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepReached {
    /// Its pod is ready.
    Ready,
    /// Its pod succeeded.
    Complete,
}

/// What a kind whose workers train as groups eto seats answers (a PyTorchJob's replica
/// groups); a kind without them implements none of it, and [`JobRef`] answers for it.
pub trait GroupedWorkers {
    /// Seats the workers of the target `target`, holding `groups` groups beside its spares,
    /// whose pods are among `pods` (by index), the new ones in `new`: a PyTorchJob's replica
    /// groups give each group no live worker holds the lowest group id free, first to a
    /// waiting spare, then to new workers (see [`crate::kind::pytorch_job::replica_groups::seat`]).
    /// Returns the labels each waiting spare that takes a place now (by index) is to show.
    fn seat_workers(
        &self,
        groups: u32,
        target: &[u32],
        pods: &BTreeMap<u32, &Pod>,
        new: &mut BTreeMap<u32, Pod>,
    ) -> BTreeMap<u32, BTreeMap<String, String>>;

    /// When it keeps its spare workers (see [`crate::spares`]).
    fn spares_kept(&self) -> crate::spares::KeptWhen;

    /// The workers among `pods` (by index) that wait as spares with no place of their own,
    /// for eto to give one (a PyTorchJob's spare replica groups), which a shrink drops last.
    fn waiting_spares(&self, pods: &BTreeMap<u32, &Pod>) -> std::collections::BTreeSet<u32>;

    /// The workers among `pods` (by index) whose group has not been heard from by the run's
    /// coordinator for longer than `grace`, as its `report` shows it (a PyTorchJob's replica
    /// groups whose Manager stopped heartbeating the Lighthouse); `None` when the report
    /// tells nothing of the groups.
    fn silent_group_workers(
        &self,
        pods: &BTreeMap<u32, &Pod>,
        report: &GroupReport,
        grace: Duration,
    ) -> Option<SilentGroups>;

    /// The group of each worker among `pods` (by index) whose pod is one of several that
    /// train as one group (see [`crate::target_workers::WorkerInput::groups`]): a PyTorchJob's
    /// replica groups of several pods.
    fn worker_groups(&self, pods: &BTreeMap<u32, &Pod>) -> BTreeMap<u32, u32>;

    /// How many worker pods make one group of those the job counts (a PyTorchJob's replica
    /// group of several pods).
    fn pods_per_group(&self) -> u32;

    /// Shows in `status` what the coordinator's `report` (if it answered) says of the run's
    /// groups, `groups` of them in the target (a PyTorchJob's replica groups' quorum): the
    /// events that say what changed, and when to read the report again.
    fn show_groups(
        &self,
        report: Option<&GroupReport>,
        groups: usize,
        status: &mut JobStatus,
    ) -> ShownGroups;

    /// Records in `status` what the run's groups lost in this reconcile (see [`GroupLosses`]),
    /// with the coordinator's `report` if it answered; returns the events that say so.
    fn record_group_losses(
        &self,
        losses: &GroupLosses<'_>,
        report: Option<&GroupReport>,
        status: &mut JobStatus,
    ) -> Vec<EventSpec>;
}

/// What the coordinator's report showed of a run's groups (see
/// [`GroupedWorkers::show_groups`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ShownGroups {
    /// The events that say what changed.
    pub events: Vec<EventSpec>,
    /// When to read the report again: the groups change without any pod changing.
    pub read_again: Duration,
}

/// What the run's groups lost in a reconcile that lost workers (see
/// [`GroupedWorkers::record_group_losses`]).
#[derive(Clone, Debug, PartialEq)]
pub struct GroupLosses<'a> {
    /// The reconcile's time.
    pub now: jiff::Timestamp,
    /// What took the groups, as a clause (`worker w-1 was evicted`).
    pub cause: &'a str,
    /// The workers whose training failed as survivors of another group's loss.
    pub survivors: Vec<FailedSurvivor>,
    /// Whether a group that ran before the loss is left alive.
    pub any_alive: bool,
}

/// A worker whose training failed as a survivor of another group's loss.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailedSurvivor {
    /// Its pod.
    pub worker: String,
    /// How it was lost (`failed (exit code 1)`).
    pub loss: String,
    /// The pod that replaces it, if one does.
    pub replacement: Option<String>,
}

/// The workers of groups their coordinator has not heard from (see
/// [`GroupedWorkers::silent_group_workers`]).
#[derive(Clone, Debug, PartialEq)]
pub struct SilentGroups {
    /// Each worker (by index) of a group silent for longer than the grace, with the seconds
    /// since the group was last heard from.
    pub workers: BTreeMap<u32, f64>,
    /// When to read the report again, at the latest: nothing but a read tells that a group
    /// went silent.
    pub read_again: Duration,
}

/// What a kind whose run's coordinator reports on its workers' group answers (a PyTorchJob's
/// rendezvous store and Lighthouse); [`JobRef`] answers for a kind without one.
pub trait ReportingCoordinator {
    /// Where eto reads the report of its run's coordinator (see [`crate::group_report`]) now,
    /// given the job's `pods`; `None` for jobs without one, or while it does not run.
    fn report_source(&self, pods: &[&Pod]) -> Option<ReportSource>;

    /// Where eto reads the training's own progress beside the coordinator's report, when the
    /// coordinator knows only a step it saw and not when it came (a Lighthouse's quorum
    /// step): a pod among `pods` that serves it (see
    /// [`crate::group_report::progress_source`]); `None` for a coordinator the training
    /// reports to, or where no pod serves its progress.
    fn progress_beside(&self, pods: &[&Pod]) -> Option<ReportSource>;

    /// How long the agents of a group that re-forms (see [`Coordinator::group_reforms`])
    /// go without a heartbeat before the others take them for dead; `None` for jobs without
    /// such a group.
    fn heartbeat_timeout(&self) -> Option<Duration>;
}

/// A job of any kind, borrowed: what the engine's rules take.
#[derive(Clone, Copy, Debug)]
pub struct JobRef<'a>(&'a dyn ServedJob);

impl<'a> JobRef<'a> {
    /// `job`, as the engine takes it.
    pub fn new(job: &'a dyn ServedJob) -> Self {
        Self(job)
    }

    /// The job as its kind's API type `T`, if it is one: for the kind's own module.
    pub fn downcast<T: 'static>(self) -> Option<&'a T> {
        self.0.as_any().downcast_ref()
    }

    /// Its kind.
    pub fn kind(self) -> Kind {
        self.0.kind()
    }

    /// Its metadata.
    pub fn metadata(self) -> &'a ObjectMeta {
        self.0.metadata()
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

    /// See [`ServedJob::coordinator_template`].
    pub fn coordinator_template(self) -> Option<&'a PodTemplateSpec> {
        self.0.coordinator_template()
    }

    /// See [`ServedJob::worker_template`].
    pub fn worker_template(self) -> Option<&'a PodTemplateSpec> {
        self.0.worker_template()
    }

    /// See [`ServedJob::engine_status`].
    pub fn status(self) -> JobStatus {
        self.0.engine_status()
    }

    /// See [`ServedJob::started_by_another_operator`].
    pub fn started_by_another_operator(self) -> bool {
        self.0.started_by_another_operator()
    }

    /// See [`ServedJob::replica_restart_policy`].
    pub fn replica_restart_policy(self) -> Option<ReplicaRestartPolicy> {
        self.0.replica_restart_policy()
    }

    /// See [`ServedJob::first_worker_success_decides`].
    pub fn first_worker_success_decides(self) -> bool {
        self.0.first_worker_success_decides()
    }

    /// See [`ServedJob::pod_service_names`].
    pub fn pod_service_names(self) -> Vec<String> {
        self.0.pod_service_names()
    }

    /// See [`ServedJob::coordinator`].
    pub fn coordinator(self) -> Coordinator {
        self.0.coordinator()
    }

    /// See [`ReportingCoordinator::report_source`]; `None` for a kind without one.
    pub fn group_report_source(self, pods: &[&Pod]) -> Option<ReportSource> {
        self.0.reporting_coordinator()?.report_source(pods)
    }

    /// See [`ReportingCoordinator::progress_beside`]; `None` for a kind without a
    /// coordinator.
    pub fn progress_beside(self, pods: &[&Pod]) -> Option<ReportSource> {
        self.0.reporting_coordinator()?.progress_beside(pods)
    }

    /// Where eto reads what the job's training reports: its coordinator's report
    /// ([`Self::group_report_source`]), else a pod that serves its progress
    /// ([`crate::group_report::progress_source`]); `None` when nothing is there to read.
    pub fn report_source(self, pods: &[&Pod]) -> Option<ReportSource> {
        self.group_report_source(pods)
            .or_else(|| crate::group_report::progress_source(pods))
    }

    /// Whether the training's steps are read from its own pods (eto's helper serving them in
    /// a training pod: [`Self::report_source`] without a coordinator that takes them, or
    /// [`Self::progress_beside`] one), rather than from a coordinator of eto's, which outlives
    /// the Workers: every pod that serves them may then go at once.
    pub fn progress_served_by_pods(self, pods: &[&Pod]) -> bool {
        self.progress_beside(pods).is_some()
            || (self.group_report_source(pods).is_none()
                && crate::group_report::progress_source(pods).is_some())
    }

    /// See [`GroupedWorkers::seat_workers`]; nothing for a kind without grouped workers.
    pub fn seat_workers(
        self,
        groups: u32,
        target: &[u32],
        pods: &std::collections::BTreeMap<u32, &Pod>,
        new: &mut std::collections::BTreeMap<u32, Pod>,
    ) -> std::collections::BTreeMap<u32, std::collections::BTreeMap<String, String>> {
        self.0
            .grouped_workers()
            .map(|grouped| grouped.seat_workers(groups, target, pods, new))
            .unwrap_or_default()
    }

    /// See [`GroupedWorkers::spares_kept`]; beside a group at its maximum for a kind without
    /// grouped workers.
    pub fn spares_kept(self) -> KeptWhen {
        self.0
            .grouped_workers()
            .map_or(KeptWhen::AtMaximum, GroupedWorkers::spares_kept)
    }

    /// See [`GroupedWorkers::silent_group_workers`]; none for a kind without grouped workers.
    pub fn silent_group_workers(
        self,
        pods: &std::collections::BTreeMap<u32, &Pod>,
        report: &GroupReport,
        grace: std::time::Duration,
    ) -> Option<SilentGroups> {
        self.0
            .grouped_workers()?
            .silent_group_workers(pods, report, grace)
    }

    /// See [`GroupedWorkers::show_groups`]; `None` for a kind without grouped workers.
    pub fn show_groups(
        self,
        report: Option<&GroupReport>,
        groups: usize,
        status: &mut JobStatus,
    ) -> Option<ShownGroups> {
        Some(
            self.0
                .grouped_workers()?
                .show_groups(report, groups, status),
        )
    }

    /// See [`GroupedWorkers::record_group_losses`]; none for a kind without grouped workers.
    pub fn record_group_losses(
        self,
        losses: &GroupLosses<'_>,
        report: Option<&GroupReport>,
        status: &mut JobStatus,
    ) -> Vec<EventSpec> {
        self.0
            .grouped_workers()
            .map(|grouped| grouped.record_group_losses(losses, report, status))
            .unwrap_or_default()
    }

    /// See [`GroupedWorkers::waiting_spares`]; none for a kind without grouped workers.
    pub fn waiting_spares(
        self,
        pods: &std::collections::BTreeMap<u32, &Pod>,
    ) -> std::collections::BTreeSet<u32> {
        self.0
            .grouped_workers()
            .map(|grouped| grouped.waiting_spares(pods))
            .unwrap_or_default()
    }

    /// See [`GroupedWorkers::worker_groups`]; none for a kind without grouped workers.
    pub fn worker_groups(
        self,
        pods: &std::collections::BTreeMap<u32, &Pod>,
    ) -> std::collections::BTreeMap<u32, u32> {
        self.0
            .grouped_workers()
            .map(|grouped| grouped.worker_groups(pods))
            .unwrap_or_default()
    }

    /// See [`GroupedWorkers::pods_per_group`]; 1 for a kind without grouped workers.
    pub fn pods_per_group(self) -> u32 {
        self.0
            .grouped_workers()
            .map_or(1, GroupedWorkers::pods_per_group)
    }

    /// See [`ReportingCoordinator::heartbeat_timeout`]; `None` for a kind without one.
    pub fn heartbeat_timeout(self) -> Option<std::time::Duration> {
        self.0.reporting_coordinator()?.heartbeat_timeout()
    }

    /// See [`ServedJob::worker_names`].
    pub fn worker_names(self) -> WorkerNames {
        self.0.worker_names()
    }

    /// See [`ServedJob::coordinator_role`].
    pub fn coordinator_role(self) -> &'static str {
        self.0.coordinator_role()
    }

    /// See [`ServedJob::launcher_name`].
    pub fn launcher_name(self) -> String {
        self.0.launcher_name()
    }

    /// See [`ServedJob::min_field`].
    pub fn min_field(self) -> &'static str {
        self.0.min_field()
    }

    /// See [`ServedJob::launcher_called`].
    pub fn launcher_called(self) -> &'static str {
        self.0.launcher_called()
    }

    /// See [`ServedJob::preparation`].
    pub fn preparation(self, job: super::JobContext<'_>) -> Preparation {
        self.0.preparation(job)
    }

    /// See [`ServedJob::validate`].
    ///
    /// # Errors
    /// [`InvalidSpec`] listing every rule the job breaks, each naming its field.
    pub fn validate(self) -> Result<EffectiveSpec, InvalidSpec> {
        self.0.validate()
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
