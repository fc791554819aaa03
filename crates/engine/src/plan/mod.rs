//! The decision function: from a job, of any kind eto serves, and its observed children to what
//! should be written.
//!
//! [`plan`] is pure: it reads the job, its children as the controller's caches hold them, and
//! the time, and returns a [`Plan`]: the children to apply (only those that differ from what
//! is observed), the SSH Secret to create, the children to delete, the new status (only when
//! it changed), the events to record and when to look again. A reconcile with nothing to
//! change gets an empty plan.
//!
//! # Life of a job
//! - An invalid spec creates nothing; `Ready=False` and `Stalled=True` (reason `InvalidSpec`)
//!   and a Warning event name the field. Fixing the spec resumes the job.
//! - Workers are created at once (see [`crate::target_workers`]); the launcher once at least
//!   `minReplicas` of them are ready (an MPIJob with `launcherCreationPolicy: AtStartup`: at
//!   once). Its host discovery lists exactly the ready workers that are not being deleted,
//!   disrupted or lost.
//! - An MPIJob's launcher is a batch Job that runs one pod; its outcome is the Job's.
//! - The launcher succeeding makes the job `Succeeded`. Its training code failing makes the
//!   job `Failed`, unless `restartPolicy: OnFailure` and fewer than `backoffLimit` restarts
//!   were made: then every pod of the run is deleted, `restartCount` grows, and a new run
//!   starts with new workers and, once the old launcher is gone, a new launcher.
//! - A launcher the platform takes (a reclaim, a preemption, an eviction, a deletion, its
//!   node's loss) or that disappears is no failure: the job is suspended and resumes from its
//!   checkpoint in a new run (see `run/launcher_loss.rs`).
//! - `activeDeadlineSeconds` after `startTime`, the job fails with reason `DeadlineExceeded`
//!   and its unfinished pods are deleted.
//! - A finished job applies `cleanPodPolicy` (`Running` and `All` delete the workers and their
//!   Service; the launcher stays), and is deleted `ttlSecondsAfterFinished` after it finished.
//! - A job whose kind builds it a HorizontalPodAutoscaler (a PyTorchJob that sets
//!   `elasticPolicy.metrics`) has it while its run goes on (see `autoscaler.rs`).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::status::JobStatus;
use eto_api::common::{CleanPodPolicy, ReplicaType};
use eto_api::job_status::{JobPhase, WarnedNode};
use eto_api::well_known::WORKER_ROLE;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::Job as BatchJob;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::applied::is_applied;
use crate::builders::JobContext;
pub use crate::child::{Child, ChildKind, Deletion};
use crate::conditions::{self, Observation};
use crate::effective_spec::EffectiveSpec;
use crate::gang::{self, Gang, PodGroup};
use crate::group_report::GroupReport;
use crate::kind::{Coordinator, JobRef, Kind};
use crate::kubeai::{self, Stop};
use crate::loss::Loss;
use crate::node_warnings::{self, NodeWarning};
use crate::pods;
use crate::scaling::{self, Scaler, ScalerUpdate};
use crate::validation::FieldError;

/// Whether the job's SSH Secret exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretPresence {
    /// It exists.
    Present,
    /// It does not.
    Missing,
}

/// The name of one of a job's children, held by an object the job does not control: one
/// eto did not create (made by hand, by another tool, left behind by a deleted job of the
/// same name, or orphaned). eto never adopts or overwrites such an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TakenName {
    /// The kind of the object, for example `ConfigMap`.
    pub kind: &'static str,
    /// Its name, in the job's namespace.
    pub name: String,
    /// Who controls it, as people read it: `Deployment/web`, or `nobody`.
    pub holder: String,
}

/// The reason of the condition and the event of a job one of whose children's names is taken
/// (see [`TakenName`]).
pub const NAME_TAKEN: &str = "NameTaken";

/// How often a job blocked by a taken name looks again: the object that holds the name is not
/// eto's, so no watch tells eto when it goes.
pub const NAME_TAKEN_RECHECK: Duration = Duration::from_secs(15);

/// A pod of the job that the API server refused to create for a reason that retrying at once
/// does not change: the pod is invalid (for example a template field the CRD accepts and pod
/// validation does not), or an admission check forbids it (a ResourceQuota, Pod Security).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RejectedPod {
    /// The pod's name.
    pub name: String,
    /// The API server's message.
    pub message: String,
}

/// The reason of the condition and the event of a job whose pod the API server rejected (see
/// [`RejectedPod`]).
pub const POD_REJECTED: &str = "PodRejected";

/// How often a job whose pod was rejected tries again: a quota may grow, a webhook change.
pub const POD_REJECTED_RECHECK: Duration = Duration::from_secs(30);

/// A job and its children, as observed.
#[derive(Clone, Debug)]
pub struct Observed<'a> {
    /// The job.
    pub job: JobRef<'a>,
    /// The pods the job controls, and those its launcher Job controls.
    pub pods: Vec<&'a Pod>,
    /// The headless Service of the workers, named by the kind ([`crate::kind::Kind::service_name`]).
    pub worker_service: Option<&'a Service>,
    /// The headless Services a kind has one per pod (see
    /// [`crate::kind::ServedJob::pod_service_names`]).
    pub pod_services: Vec<&'a Service>,
    /// `<job>-config`.
    pub config_map: Option<&'a ConfigMap>,
    /// `<job>-launcher`.
    pub service_account: Option<&'a ServiceAccount>,
    /// `<job>-launcher`.
    pub role: Option<&'a Role>,
    /// `<job>-launcher`.
    pub role_binding: Option<&'a RoleBinding>,
    /// The job's SSH Secret, generated or provided.
    pub ssh_secret: SecretPresence,
    /// The ScaleIn and ScaleOut requests of the job's namespace that name it.
    pub scalers: &'a [Scaler],
    /// The launcher's batch Job, for a kind whose launcher is one
    /// ([`crate::kind::Coordinator::LauncherJob`]).
    pub launcher_job: Option<&'a BatchJob>,
    /// Names of the job's children found held by objects it does not control.
    pub taken: &'a [TakenName],
    /// A pod the API server refused to create during this reconcile: the job is planned
    /// again, creating no pod.
    pub rejected_pod: Option<&'a RejectedPod>,
    /// The operator's gang scheduling (see [`crate::gang`]).
    pub gang: Gang<'a>,
    /// The job's PodGroup, read when the operator uses a gang scheduler.
    pub pod_group: Option<&'a PodGroup>,
    /// The nodes of the cluster that announced they go away soon (see
    /// [`crate::node_warnings`]): the job's workers on them count as disrupted.
    pub node_warnings: &'a [NodeWarning],
    /// What the run's coordinator reports, read while it runs, for a kind whose runs have one
    /// (see [`crate::group_report`]).
    pub group_report: Option<&'a GroupReport>,
    /// The job's HorizontalPodAutoscaler, for a kind whose jobs may have one (see
    /// [`crate::kind::Vocabulary::autoscaler`]).
    pub autoscaler: Option<&'a HorizontalPodAutoscaler>,
}

impl<'a> Observed<'a> {
    /// `job` before any of its children exists: the view of a job just created.
    pub fn without_children(job: JobRef<'a>) -> Self {
        Self {
            job,
            pods: Vec::new(),
            worker_service: None,
            pod_services: Vec::new(),
            config_map: None,
            service_account: None,
            role: None,
            role_binding: None,
            ssh_secret: SecretPresence::Missing,
            scalers: &[],
            launcher_job: None,
            taken: &[],
            rejected_pod: None,
            gang: Gang::Off,
            pod_group: None,
            node_warnings: &[],
            group_report: None,
            autoscaler: None,
        }
    }

    /// Whether `child` differs from the object of its kind and name that the job has, or the
    /// job has none: a Service, a ServiceAccount, a Role, a RoleBinding or a ConfigMap.
    /// Children of other kinds are found elsewhere, and always need applying here.
    pub fn needs_apply(&self, child: &Child) -> bool {
        match child {
            Child::Service(service) => needs_apply(service.as_ref(), self.service(child.name())),
            Child::ServiceAccount(account) => needs_apply(account.as_ref(), self.service_account),
            Child::Role(role) => needs_apply(role.as_ref(), self.role),
            Child::RoleBinding(binding) => needs_apply(binding.as_ref(), self.role_binding),
            Child::ConfigMap(config_map) => needs_apply(config_map.as_ref(), self.config_map),
            Child::Pod(_)
            | Child::PodMetadata(_)
            | Child::LauncherJob(_)
            | Child::PodGroup(_)
            | Child::Autoscaler(_) => true,
        }
    }

    /// The Service named `name` that the job has.
    fn service(&self, name: &str) -> Option<&'a Service> {
        self.worker_service
            .into_iter()
            .chain(self.pod_services.iter().copied())
            .find(|service| service.metadata.name.as_deref() == Some(name))
    }

    /// Whether the name `name` of a child of `kind` is held by an object the job does not
    /// control ([`Observed::taken`]).
    pub fn is_taken(&self, kind: &str, name: &str) -> bool {
        self.taken
            .iter()
            .any(|held| held.kind == kind && held.name == name)
    }
}

/// The reason of the Warning event recorded for each worker that left host discovery because
/// it failed, was evicted or disappeared.
pub const WORKER_LOST: &str = "WorkerLost";

/// The reason a job fails with when `elasticPolicy.maxWaitSeconds` ran out before
/// `minReplicas` workers were ready (et-operator's name for it).
pub const WAITING_RESOURCE_TIMEOUT: &str = "WaitingResourceTimeout";

/// An event about the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventSpec {
    /// Warning rather than Normal.
    pub warning: bool,
    /// CamelCase reason.
    pub reason: String,
    /// What eto did: `Create`, `Delete`, `Restart`, `Fail`, `Validate`, ...
    pub action: String,
    /// Human-readable note.
    pub note: String,
}

/// What a reconcile decided, in the form metrics count it. Every entry comes with an event
/// of the same decision; these carry its category as data.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tallies {
    /// Workers lost, by kind of loss: `Failed`, `Evicted`, `Disrupted`, `Completed` or
    /// `Deleted`.
    pub lost: Vec<&'static str>,
    /// Replacement workers decided on.
    pub replacements: u32,
    /// Suspends carried out, by reason: `BelowMinWorkers`, `LauncherDisrupted` or `Suspended`
    /// (asked for).
    pub suspends: Vec<String>,
    /// Resumes, by the reason of the suspend they end.
    pub resumes: Vec<String>,
    /// ScaleIn and ScaleOut requests finished: the request's kind and whether it succeeded.
    pub scaling: Vec<(String, bool)>,
    /// Workers told that their node announced it goes away (see [`crate::node_warnings`]).
    pub warned: u32,
}

/// What a reconcile should do.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// Children to apply, in order.
    pub apply: Vec<Child>,
    /// The generated SSH Secret to create (the controller adds the key pair).
    pub create_ssh_secret: Option<Secret>,
    /// Children to delete.
    pub delete: Vec<Deletion>,
    /// The new status, when it changed.
    pub status: Option<JobStatus>,
    /// Events to record.
    pub events: Vec<EventSpec>,
    /// When to look again although nothing changes (deadlines).
    pub requeue_after: Option<Duration>,
    /// Delete the job itself (its time to live ran out).
    pub delete_job: bool,
    /// Writes to the job's ScaleIn and ScaleOut requests.
    pub scalers: Vec<ScalerUpdate>,
    /// What this reconcile decided, counted for metrics once the plan is carried out.
    pub tallies: Tallies,
    /// The `kubeai` SDK's stop signals that go with the notices this plan posts (see
    /// [`crate::kubeai`]).
    pub stops: Vec<Stop>,
}

impl Plan {
    /// Whether the plan writes nothing.
    pub fn is_empty(&self) -> bool {
        self.apply.is_empty()
            && self.create_ssh_secret.is_none()
            && self.delete.is_empty()
            && self.status.is_none()
            && self.events.is_empty()
            && !self.delete_job
            && self.scalers.is_empty()
            && self.stops.is_empty()
    }
}

/// Plans the reconcile of `observed` at `now`; see the module documentation.
pub fn plan(observed: &Observed<'_>, now: jiff::Timestamp) -> Plan {
    // Workers on nodes that announced they go away are seen as disrupted (see
    // crate::node_warnings).
    let old = observed.job.status();
    let resolved = node_warnings::resolve(observed.node_warnings, &old.node_warnings, now);
    let warnings = node_warnings::by_node(&resolved);
    let role_label = observed.job.kind().vocabulary().role_label;
    let warned: Vec<Pod> = observed
        .pods
        .iter()
        .filter(|pod| pods::label(pod, role_label) == Some(WORKER_ROLE))
        .filter_map(|pod| node_warnings::as_disrupted(pod, &warnings))
        .collect();
    let mut sorted: Observed<'_> = observed.clone();
    for pod in &mut sorted.pods {
        if let Some(seen) = warned.iter().find(|w| w.metadata.name == pod.metadata.name) {
            *pod = seen;
        }
    }
    // Caches return pods in any order; plans do not depend on it.
    sorted
        .pods
        .sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let observed = &sorted;
    let job = observed.job;
    let mut planner = Planner::new(job.kind(), job.metadata().generation, old, now);
    let live_workers: Vec<&Pod> = observed
        .pods
        .iter()
        .copied()
        .filter(|pod| pods::label(pod, role_label) == Some(WORKER_ROLE))
        .filter(|pod| !pods::is_terminating(pod) && !pods::is_finished(pod))
        .collect();
    planner.status.node_warnings = node_warnings::recorded(&resolved, &live_workers);
    planner.warned = resolved;
    planner.foreign = job.started_by_another_operator();
    let finished = matches!(
        planner.old.phase,
        Some(JobPhase::Succeeded | JobPhase::Failed)
    );
    if planner.foreign && !finished {
        planner.started_elsewhere(job);
        return planner.finish();
    }
    match job.validate() {
        Err(invalid) => {
            planner.invalid(&invalid.to_string());
            let idle = scaling::JobSide::idle(job.name(), job.uid(), now);
            planner.scaling(scaling::step(&idle, observed.scalers));
        }
        Ok(spec) => {
            planner.valid(observed, &spec);
            planner.pod_group(observed, &spec);
            planner.autoscaler(observed, &spec);
            let changes = planner.plan.apply.iter().filter_map(|child| match child {
                Child::PodMetadata(change) => Some(change),
                _ => None,
            });
            planner.plan.stops =
                kubeai::stops(changes, &observed.pods, spec.elastic.kubeai, planner.now);
        }
    }
    planner.finish()
}

/// Plans the reconcile of a job of `kind` that does not even decode (a value outside an enum,
/// a string where a number belongs): only its status changes, naming the field. `status` is
/// the job's status in the engine's shape, if it decodes.
pub fn plan_undecodable(
    kind: Kind,
    metadata: &ObjectMeta,
    status: Option<JobStatus>,
    error: &FieldError,
    now: jiff::Timestamp,
) -> Plan {
    let mut planner = Planner::new(kind, metadata.generation, status.unwrap_or_default(), now);
    planner.invalid(&format!("invalid {}: {error}", kind.vocabulary().name));
    planner.finish()
}

/// When a stall counts as reported already (see `Planner::stall`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum SameStall {
    /// It had the same reason.
    Reason,
    /// It had the same reason and message.
    Message,
}

struct Planner {
    kind: Kind,
    /// Whether another operator started the job (see [`JobRef::started_by_another_operator`]).
    foreign: bool,
    generation: Option<i64>,
    old: JobStatus,
    status: JobStatus,
    plan: Plan,
    now: jiff::Timestamp,
    /// Set by a run that goes on: whether its launcher exists (see [`crate::gang`]). A job
    /// that does not go on (suspending, suspended, finished) holds no PodGroup and no
    /// autoscaler.
    going_on_with_launcher: Option<bool>,
    /// The nodes that announced they go away, with their times (see
    /// [`crate::node_warnings`]).
    warned: Vec<WarnedNode>,
}

impl Planner {
    fn new(kind: Kind, generation: Option<i64>, old: JobStatus, now: jiff::Timestamp) -> Self {
        let mut status = old.clone();
        status.observed_generation = generation;
        Self {
            kind,
            foreign: false,
            generation,
            old,
            status,
            plan: Plan::default(),
            now,
            going_on_with_launcher: None,
            warned: Vec::new(),
        }
    }

    fn condition(&mut self, type_: &str, holds: bool, reason: &str, message: &str) {
        conditions::set(
            &mut self.status.conditions,
            type_,
            Observation {
                holds,
                reason,
                message,
            },
            self.generation,
            self.now,
        );
    }

    /// Reports the job stalled: `Ready=False` and `Stalled=True` with `reason` and `message`,
    /// and a Warning event (`action`, `note`) unless the last status already reported the same
    /// stall, which `same` tells: the same reason, or the same reason and message.
    fn stall(&mut self, reason: &str, message: &str, same: SameStall, action: &str, note: String) {
        let reported =
            conditions::find(&self.old.conditions, conditions::STALLED).is_some_and(|stalled| {
                stalled.reason.as_deref() == Some(reason)
                    && (same == SameStall::Reason || stalled.message.as_deref() == Some(message))
            });
        self.condition(conditions::READY, false, reason, message);
        self.condition(conditions::STALLED, true, reason, message);
        if !reported {
            self.event(true, reason, action, note);
        }
    }

    fn event(&mut self, warning: bool, reason: &str, action: &str, note: String) {
        self.plan.events.push(EventSpec {
            warning,
            reason: reason.into(),
            action: action.into(),
            note,
        });
    }

    fn finish(mut self) -> Plan {
        if matches!(
            self.status.phase,
            Some(JobPhase::Succeeded | JobPhase::Failed)
        ) {
            // A finished job's pods train no more: no warning concerns it.
            self.status.node_warnings.clear();
        }
        if self.foreign {
            // What marks the job as another operator's stays as that operator wrote it: no
            // phase (read from its conditions), no observed generation.
            for status in [&mut self.status, &mut self.old] {
                status.phase = None;
                status.observed_generation = None;
            }
        }
        if self.status != self.old {
            self.plan.status = Some(self.status);
        }
        self.plan
    }

    fn invalid(&mut self, message: &str) {
        self.stall(
            "InvalidSpec",
            message,
            SameStall::Message,
            "Validate",
            format!("{message}; nothing is created or changed until the spec is fixed"),
        );
    }

    /// A job another operator started, whose pods eto cannot see: eto changes nothing but its
    /// health conditions, and says how to run it under eto.
    fn started_elsewhere(&mut self, job: JobRef<'_>) {
        const REASON: &str = "StartedByAnotherOperator";
        let message = format!(
            "{} {} was started by another operator ({}), whose pods eto does not take over; delete and re-create it to run it under eto",
            self.kind.vocabulary().name,
            job.name(),
            self.kind.vocabulary().original_operator
        );
        self.stall(
            REASON,
            &message,
            SameStall::Reason,
            "Observe",
            message.clone(),
        );
    }

    fn valid(&mut self, observed: &Observed<'_>, spec: &EffectiveSpec) {
        let job = JobContext {
            job_ref: observed.job,
            spec,
            run: self.old.current_run(),
            notice: None,
            gang: observed.gang.ready(),
        };
        let kind = self.kind;
        if !conditions::is_true(&self.status.conditions, conditions::CREATED) {
            self.condition(
                conditions::CREATED,
                true,
                &kind.reason("Created"),
                &format!("{} {} is created.", kind.vocabulary().name, job.name()),
            );
        }
        self.status.selector = Some(kind.worker_selector(job.name()));
        Run::new(self, observed, job).reconcile();
    }

    /// Keeps the job's PodGroup as its run needs it, when the operator uses a gang scheduler:
    /// applied (before the pods that belong to it) while the run goes on, deleted once it does
    /// not (a suspended or finished job reserves nothing).
    fn pod_group(&mut self, observed: &Observed<'_>, spec: &EffectiveSpec) {
        let Some(scheduler) = observed.gang.ready() else {
            return;
        };
        let Some(launcher_exists) = self.going_on_with_launcher else {
            if let Some(existing) = observed.pod_group {
                self.plan.delete.push(Deletion {
                    kind: ChildKind::PodGroup,
                    name: existing.metadata.name.clone().unwrap_or_default(),
                    grace_seconds: None,
                });
            }
            return;
        };
        let job = JobContext {
            job_ref: observed.job,
            spec,
            run: self.status.current_run(),
            notice: None,
            gang: Some(scheduler),
        };
        let desired = gang::pod_group(job, scheduler, launcher_exists);
        let taken = observed.is_taken("PodGroup", gang::pod_group_name(observed.job));
        if taken
            || observed
                .pod_group
                .is_some_and(|existing| is_applied(&desired, existing))
        {
            return;
        }
        let first_member = self
            .plan
            .apply
            .iter()
            .position(|child| matches!(child, Child::Pod(_) | Child::LauncherJob(_)))
            .unwrap_or(self.plan.apply.len());
        self.plan
            .apply
            .insert(first_member, Child::PodGroup(Box::new(desired)));
    }

    /// Takes what the job's requests decided into the plan: their writes, the job's events,
    /// `currentScaler` and `Scaling` condition.
    fn scaling(&mut self, step: scaling::Step) {
        for event in &step.events {
            self.event(event.warning, event.reason, "Scale", event.note.clone());
        }
        if let Some(finished) = &step.finished {
            let kind = finished.reference.split(':').next().unwrap_or_default();
            self.plan
                .tallies
                .scaling
                .push((kind.to_string(), finished.succeeded));
        }
        if let Some((holds, reason, message)) = scaling::job_condition(&step) {
            self.condition(conditions::SCALING, holds, reason, &message);
        }
        self.status.current_scaler = step
            .under_way
            .as_ref()
            .map(|(reference, _)| reference.clone());
        if let Some(due) = step.requeue_at {
            self.requeue_at(due);
        }
        self.plan.scalers.extend(step.updates);
    }

    /// Makes the plan look again at `due` at the latest.
    fn requeue_at(&mut self, due: jiff::Timestamp) {
        let after = duration_until(self.now, due);
        self.plan.requeue_after = Some(self.plan.requeue_after.map_or(after, |a| a.min(after)));
    }

    /// Marks the job Failed; `kill` deletes its unfinished pods.
    fn fail(
        &mut self,
        observed: &Observed<'_>,
        job: JobContext<'_>,
        reason: &str,
        message: &str,
        kill: bool,
    ) {
        self.status.phase = Some(JobPhase::Failed);
        self.status.completion_time = Some(Time(self.now));
        self.condition(conditions::FAILED, true, reason, message);
        self.condition(conditions::RUNNING, false, reason, message);
        self.event(
            true,
            reason,
            "Fail",
            format!(
                "{} {} failed: {message}",
                self.kind.vocabulary().name,
                job.name()
            ),
        );
        if kill {
            for pod in observed
                .pods
                .iter()
                .filter(|p| !pods::is_finished(p) && !pods::is_terminating(p))
            {
                self.delete_pod(pod);
            }
        }
        self.finished(observed, job);
    }

    /// Deletes an MPIJob's launcher Job (its pods go with it), unless it is already going.
    fn delete_launcher_job(&mut self, observed: &Observed<'_>) {
        let Some(launcher) = observed
            .launcher_job
            .filter(|job| job.metadata.deletion_timestamp.is_none())
        else {
            return;
        };
        let name = launcher.metadata.name.clone().unwrap_or_default();
        if !self
            .plan
            .delete
            .iter()
            .any(|d| d.kind == ChildKind::Job && d.name == name)
        {
            self.plan.delete.push(Deletion {
                kind: ChildKind::Job,
                name,
                grace_seconds: None,
            });
        }
    }

    fn delete_pod(&mut self, pod: &Pod) {
        self.delete_pod_as(pod, None);
    }

    /// Deletes `pod` with a grace period of `seconds` instead of its own.
    fn delete_pod_with_grace(&mut self, pod: &Pod, seconds: i64) {
        self.delete_pod_as(pod, Some(seconds));
    }

    fn delete_pod_as(&mut self, pod: &Pod, grace_seconds: Option<i64>) {
        let name = pod.metadata.name.clone().unwrap_or_default();
        if !self
            .plan
            .delete
            .iter()
            .any(|d| d.kind == ChildKind::Pod && d.name == name)
        {
            self.plan.delete.push(Deletion {
                kind: ChildKind::Pod,
                name,
                grace_seconds,
            });
        }
    }

    /// A finished job: health conditions, `cleanPodPolicy`, time to live.
    fn finished(&mut self, observed: &Observed<'_>, job: JobContext<'_>) {
        let succeeded = self.status.phase == Some(JobPhase::Succeeded);
        let (reason, message) = conditions::find(
            &self.status.conditions,
            if succeeded {
                conditions::SUCCEEDED
            } else {
                conditions::FAILED
            },
        )
        .map(|cond| {
            (
                cond.reason.clone().unwrap_or_default(),
                cond.message.clone().unwrap_or_default(),
            )
        })
        .unwrap_or_default();
        self.condition(conditions::READY, succeeded, &reason, &message);
        self.condition(conditions::STALLED, !succeeded, &reason, &message);
        let ended = format!(
            "{} {} {}",
            self.kind.vocabulary().name,
            job.name(),
            if succeeded { "succeeded" } else { "failed" }
        );
        self.scaling(scaling::abandon(
            job.name(),
            job.job_ref.uid(),
            observed.scalers,
            &ended,
            self.now,
        ));
        if self.foreign {
            // The pods are another operator's, which eto does not see: its counts stand.
            self.apply_ttl(job);
            return;
        }
        self.status.replica_statuses = replica_statuses(self.kind, &observed.pods);
        if let Some(workers) = self.status.workers.as_mut() {
            workers.ready = 0;
            workers.pending = 0;
        }
        self.status.current_workers.clear();
        // Nothing trains any more: no drain is worth waiting for (cleanPodPolicy decides), and
        // no notice is worth showing.
        self.status.draining_workers.clear();
        self.status.held_workers.clear();
        self.status.group = None;
        self.status.notice = None;
        if job.job_ref.coordinator() == Coordinator::RendezvousStore {
            // The store serves no one once the job ended, whatever cleanPodPolicy keeps.
            let store = job.job_ref.launcher_name();
            let running = observed.pods.iter().filter(|p| {
                p.metadata.name.as_deref() == Some(store.as_str()) && !pods::is_terminating(p)
            });
            for pod in running {
                self.delete_pod(pod);
            }
        }
        if job.spec.clean_pod_policy != CleanPodPolicy::None
            && self.kind.vocabulary().coordinator == Coordinator::Master
        {
            self.clean_as_v1(observed, job.spec.clean_pod_policy);
        } else if job.spec.clean_pod_policy != CleanPodPolicy::None {
            let role_label = self.kind.vocabulary().role_label;
            let workers = observed
                .pods
                .iter()
                .filter(|p| pods::label(p, role_label) == Some(WORKER_ROLE));
            for pod in workers.filter(|p| !pods::is_terminating(p)) {
                self.delete_pod(pod);
            }
            if observed.worker_service.is_some() {
                self.plan.delete.push(Deletion {
                    kind: ChildKind::Service,
                    name: self.kind.service_name(job.name()),
                    grace_seconds: None,
                });
            }
        }
        self.apply_ttl(job);
    }

    /// `cleanPodPolicy` of a finished PyTorchJob, as training-operator v1 applies it:
    /// `Running` deletes the pods still running or pending, `All` every pod, the Master
    /// included; each goes with its Service.
    fn clean_as_v1(&mut self, observed: &Observed<'_>, policy: CleanPodPolicy) {
        let goes = |pod: &Pod| policy == CleanPodPolicy::All || !pods::is_finished(pod);
        for pod in observed
            .pods
            .iter()
            .filter(|p| !pods::is_terminating(p) && goes(p))
        {
            self.delete_pod(pod);
        }
        for service in &observed.pod_services {
            let name = service.metadata.name.clone().unwrap_or_default();
            let pod = observed
                .pods
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(name.as_str()));
            if pod.is_none_or(|pod| pods::is_terminating(pod) || goes(pod)) {
                self.plan.delete.push(Deletion {
                    kind: ChildKind::Service,
                    name,
                    grace_seconds: None,
                });
            }
        }
    }

    /// Deletes a finished job whose time to live ran out, or looks again when it will have.
    fn apply_ttl(&mut self, job: JobContext<'_>) {
        if let (Some(ttl), Some(Time(completion))) = (
            job.spec.ttl_after_finished,
            self.status.completion_time.as_ref(),
        ) {
            let due = crate::time::after(*completion, ttl);
            if self.now >= due {
                self.plan.delete_job = true;
            } else {
                self.plan.requeue_after = Some(duration_until(self.now, due));
            }
        }
    }
}

/// Whether `desired` differs from what is `observed` (or nothing is).
fn needs_apply<T: serde::Serialize, U: serde::Serialize>(
    desired: &T,
    observed: Option<&U>,
) -> bool {
    !observed.is_some_and(|observed| is_applied(desired, observed))
}

fn duration_until(now: jiff::Timestamp, due: jiff::Timestamp) -> Duration {
    Duration::try_from(due.duration_since(now)).unwrap_or_default()
}

fn replica_statuses(
    kind: Kind,
    pods: &[&Pod],
) -> BTreeMap<ReplicaType, eto_api::common::ReplicaStatus> {
    let mut statuses = BTreeMap::new();
    for (replica, role) in [
        (ReplicaType::Launcher, kind.vocabulary().launcher_role),
        (ReplicaType::Worker, WORKER_ROLE),
    ] {
        let of_role = pods
            .iter()
            .filter(|p| pods::label(p, kind.vocabulary().role_label) == Some(role));
        let mut status = eto_api::common::ReplicaStatus::default();
        for pod in of_role {
            match pods::phase(pod) {
                "Running" if !pods::is_terminating(pod) => status.active += 1,
                "Succeeded" => status.succeeded += 1,
                // What the platform took is not the training's failure.
                "Failed"
                    if matches!(
                        Loss::of(Some(pod)),
                        Some(Loss::Evicted { .. } | Loss::Disrupted(_))
                    ) =>
                {
                    status.preempted += 1;
                }
                "Failed" => status.failed += 1,
                _ => {}
            }
        }
        statuses.insert(replica, status);
    }
    statuses
}

mod autoscaler;
mod run;

use run::Run;

#[cfg(test)]
mod tests;
