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
//! - A job with steps to run before its first run (a TrainJob's initializers) runs them first,
//!   each as its own pod, in the order they wait for each other (see `preparation.rs`).
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
//! - Every reconcile moves the job's goodput ledger on: where its time went (see
//!   `goodput.rs`).
//! - A job whose kind builds it a HorizontalPodAutoscaler (a PyTorchJob that sets
//!   `elasticPolicy.metrics`) has it while its run goes on (see `autoscaler.rs`).

use std::time::Duration;

use crate::status::JobStatus;
use eto_api::job_status::{JobPhase, WarnedNode};
use eto_api::well_known::WORKER_ROLE;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

pub use crate::child::{Child, ChildKind, Deletion};
use crate::conditions::{self, Observation};
use crate::effective_spec::EffectiveSpec;
pub use crate::event_spec::EventSpec;
use crate::field_error::FieldError;
use crate::group_report::{GroupOrders, GroupState};
use crate::job::JobContext;
use crate::job::{JobRef, Kind};
use crate::kubeai::{self, Stop};
use crate::node_warnings;
use crate::pods;
use crate::scaling::{self, ScalerUpdate};
use crate::warned_handover;

mod autoscaler;
mod finished;
mod goodput;
mod observed;
mod pod_group;
mod preparation;
mod replica_statuses;
mod run;

pub use observed::{
    NAME_TAKEN, NAME_TAKEN_RECHECK, Observed, POD_REJECTED, POD_REJECTED_RECHECK, RejectedPod,
    SecretPresence, TakenName,
};
use replica_statuses::replica_statuses;
use run::Run;

/// The reason of the Warning event recorded for each worker that left host discovery because
/// it failed, was evicted or disappeared.
pub const WORKER_LOST: &str = "WorkerLost";

/// The reason of the Event that says a waiting spare took a place in the job (a spare replica
/// group took a group's id).
pub const SPARE_TAKES_PLACE: &str = "SpareTakesPlace";

/// The reason a job fails with when `elasticPolicy.maxWaitSeconds` ran out before
/// `minReplicas` workers were ready (et-operator's name for it).
pub const WAITING_RESOURCE_TIMEOUT: &str = "WaitingResourceTimeout";

/// What a reconcile decided, in the form metrics count it. Every entry comes with an event
/// of the same decision; these carry its category as data.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tallies {
    /// Workers lost, by kind of loss: `Failed`, `Evicted`, `Disrupted`, `Completed`,
    /// `Deleted`, or `Silent` (out of its group while its pod ran).
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
    /// Pods that failed on their own (see [`crate::own_failure`]), by role and the
    /// kubelet's reason.
    pub pod_failures: Vec<(&'static str, String)>,
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
    /// Orders for the coordinator of the run's group, when they change (see
    /// [`crate::group_orders`]): sent where its report was read.
    pub group_orders: Option<GroupOrders>,
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
            && self.group_orders.is_none()
    }
}

/// Plans the reconcile of `observed` at `now`; see the module documentation.
pub fn plan(observed: &Observed<'_>, now: jiff::Timestamp) -> Plan {
    // Workers on nodes that announced they go away are seen as disrupted (see
    // crate::node_warnings), but replica groups held until spares wait to take their places
    // (see crate::warned_handover).
    let old = observed.job.status();
    let resolved = node_warnings::resolve(observed.node_warnings, &old.node_warnings, now);
    let warnings = node_warnings::by_node(&resolved);
    let validated = observed.job.validate();
    let hold = warned_hold(observed, validated.as_ref().ok(), &old, &warnings, now);
    let role_label = observed.job.kind().vocabulary().role_label;
    let warned: Vec<Pod> = observed
        .pods
        .iter()
        .filter(|pod| pods::label(pod, role_label) == Some(WORKER_ROLE))
        .filter(|pod| {
            !pod.metadata
                .name
                .as_ref()
                .is_some_and(|name| hold.workers.contains(name))
        })
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
    let live_workers = live_workers(observed);
    planner.status.node_warnings = node_warnings::recorded(&resolved, &live_workers);
    planner.warned = resolved;
    if let Some(until) = hold.until {
        planner.requeue_at(until);
    }
    planner.held_warned = hold;
    planner.foreign = job.started_by_another_operator();
    let finished = matches!(
        planner.status_before.phase,
        Some(JobPhase::Succeeded | JobPhase::Failed)
    );
    if planner.foreign && !finished {
        planner.started_elsewhere(job);
        return planner.finish();
    }
    match &validated {
        Err(invalid) => {
            planner.invalid(&invalid.to_string());
            let idle = scaling::JobSide::idle(job.name(), job.uid(), now);
            planner.scaling(scaling::step(&idle, observed.scalers));
        }
        Ok(spec) => {
            planner.valid(observed, spec);
            planner.pod_group(observed, spec);
            planner.autoscaler(observed, spec);
            let changes = planner.plan.apply.iter().filter_map(|child| match child {
                Child::PodMetadata(change) => Some(change),
                _ => None,
            });
            planner.plan.stops =
                kubeai::stops(changes, &observed.pods, spec.elastic.kubeai, planner.now);
        }
    }
    planner.goodput(observed, validated.is_ok());
    planner.finish()
}

/// The warned replica groups of the job that train on until spares wait (see
/// [`crate::warned_handover`]): none for a job that is invalid, suspended, finished or asked
/// to suspend.
fn warned_hold(
    observed: &Observed<'_>,
    spec: Option<&EffectiveSpec>,
    old: &JobStatus,
    warnings: &std::collections::BTreeMap<&str, &WarnedNode>,
    now: jiff::Timestamp,
) -> warned_handover::Hold {
    let going_on = matches!(old.phase, Some(JobPhase::Running | JobPhase::Scaling));
    let round_members: Option<Vec<&str>> = observed
        .group_report
        .and_then(|report| report.group.as_ref())
        .map(GroupState::member_hosts);
    match spec {
        Some(spec) if going_on && !spec.suspend && !warnings.is_empty() => {
            warned_handover::hold(&warned_handover::HoldInput {
                round_members: round_members.as_deref(),
                job: observed.job,
                pods: &observed.pods,
                warnings,
                target: &old.target_workers,
                min: spec.workers.min,
                spares: spec.workers.spares,
                grace: spec.elastic.checkpoint_grace,
                now,
            })
        }
        _ => warned_handover::Hold::default(),
    }
}

/// The job's Worker pods that are neither finished nor being deleted.
fn live_workers<'a>(observed: &Observed<'a>) -> Vec<&'a Pod> {
    let role_label = observed.job.kind().vocabulary().role_label;
    observed
        .pods
        .iter()
        .copied()
        .filter(|pod| pods::label(pod, role_label) == Some(WORKER_ROLE))
        .filter(|pod| !pods::is_terminating(pod) && !pods::is_finished(pod))
        .collect()
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
    /// The job's status as the plan found it.
    status_before: JobStatus,
    /// The status the plan writes.
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
    /// The workers on those nodes that train on until spares wait to take their places (see
    /// [`crate::warned_handover`]).
    held_warned: warned_handover::Hold,
}

impl Planner {
    fn new(
        kind: Kind,
        generation: Option<i64>,
        status_before: JobStatus,
        now: jiff::Timestamp,
    ) -> Self {
        let mut status = status_before.clone();
        status.observed_generation = generation;
        Self {
            kind,
            foreign: false,
            generation,
            status_before,
            status,
            plan: Plan::default(),
            now,
            going_on_with_launcher: None,
            warned: Vec::new(),
            held_warned: warned_handover::Hold::default(),
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
        let reported = conditions::find(&self.status_before.conditions, conditions::STALLED)
            .is_some_and(|stalled| {
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
        self.plan
            .events
            .push(EventSpec::new(warning, reason, action, note));
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
            for status in [&mut self.status, &mut self.status_before] {
                status.phase = None;
                status.observed_generation = None;
            }
        }
        if self.status != self.status_before {
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
            run: self.status_before.current_run(),
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
        if spec.suspend || self.prepared(observed, job) {
            Run::new(self, observed, job).reconcile();
        }
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
}

fn duration_until(now: jiff::Timestamp, due: jiff::Timestamp) -> Duration {
    Duration::try_from(due.duration_since(now)).unwrap_or_default()
}

#[cfg(test)]
mod tests;
