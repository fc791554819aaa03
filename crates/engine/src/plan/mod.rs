//! The decision function: from a job and its observed children to what should be written.
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
//! - Workers are created at once (see [`crate::workers`]); the launcher once at least
//!   `minReplicas` of them are ready, never before. Its host discovery lists exactly the ready
//!   workers that are not being deleted, disrupted or lost.
//! - The launcher succeeding makes the job `Succeeded`. Its failing makes the job `Failed`,
//!   unless `restartPolicy: OnFailure` and fewer than `backoffLimit` restarts were made: then
//!   every pod of the run is deleted, `restartCount` grows, and a new run starts with new
//!   workers and, once the old launcher is gone, a new launcher.
//! - A launcher that disappears is recreated under `restartPolicy: Always`, fails the job
//!   under `Never`, and otherwise only raises a Warning.
//! - `activeDeadlineSeconds` after `startTime`, the job fails with reason `DeadlineExceeded`
//!   and its unfinished pods are deleted.
//! - A finished job applies `cleanPodPolicy` (`Running` and `All` delete the workers and their
//!   Service; the launcher stays), and is deleted `ttlSecondsAfterFinished` after it finished.

use std::collections::BTreeMap;
use std::time::Duration;

use eto_api::TrainingJob;
use eto_api::training_job::{CleanPodPolicy, JobPhase, ReplicaType, TrainingJobStatus};
use eto_api::well_known::{JOB_ROLE_LABEL, LAUNCHER_ROLE, WORKER_ROLE};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::applied::is_applied;
use crate::build::Job;
use crate::conditions::{self as c, Observation};
use crate::effective_spec::EffectiveSpec;
use crate::scaling::{self, Scaler, ScalerUpdate};
use crate::validation::{FieldError, validate};
use crate::{names, pods};

/// Whether the job's SSH Secret exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretPresence {
    /// It exists.
    Present,
    /// It does not.
    Missing,
}

/// A job and its children, as observed.
#[derive(Clone, Debug)]
pub struct Observed<'a> {
    /// The job.
    pub job: &'a TrainingJob,
    /// The pods the job controls.
    pub pods: Vec<&'a Pod>,
    /// `<job>-workers`.
    pub worker_service: Option<&'a Service>,
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
}

/// An object to apply.
#[derive(Clone, Debug, PartialEq)]
pub enum Child {
    /// A pod.
    Pod(Box<Pod>),
    /// The headless Service.
    Service(Box<Service>),
    /// The discovery ConfigMap.
    ConfigMap(Box<ConfigMap>),
    /// The launcher's ServiceAccount.
    ServiceAccount(Box<ServiceAccount>),
    /// The launcher's Role.
    Role(Box<Role>),
    /// The launcher's RoleBinding.
    RoleBinding(Box<RoleBinding>),
}

/// The kind of a child to delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildKind {
    /// A pod.
    Pod,
    /// A Service.
    Service,
}

/// A child to delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deletion {
    /// Its kind.
    pub kind: ChildKind,
    /// Its name, in the job's namespace.
    pub name: String,
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
    pub status: Option<TrainingJobStatus>,
    /// Events to record.
    pub events: Vec<EventSpec>,
    /// When to look again although nothing changes (deadlines).
    pub requeue_after: Option<Duration>,
    /// Delete the job itself (its time to live ran out).
    pub delete_job: bool,
    /// Writes to the job's ScaleIn and ScaleOut requests.
    pub scalers: Vec<ScalerUpdate>,
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
    }
}

/// Plans the reconcile of `observed` at `now`; see the module documentation.
pub fn plan(observed: &Observed<'_>, now: jiff::Timestamp) -> Plan {
    // Caches return pods in any order; plans do not depend on it.
    let mut sorted = observed.clone();
    sorted
        .pods
        .sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let observed = &sorted;
    let old = observed.job.status.clone().unwrap_or_default();
    let mut planner = Planner::new(observed.job.metadata.generation, old, now);
    match validate(observed.job) {
        Err(invalid) => {
            planner.invalid(&invalid.to_string());
            let (name, uid) = identity(observed.job);
            let idle = scaling::JobSide::idle(name, uid, now);
            planner.scaling(scaling::step(&idle, observed.scalers));
        }
        Ok(spec) => planner.valid(observed, &spec),
    }
    planner.finish()
}

/// The run `status` describes: `status.run`, or for statuses written before it existed, the
/// restart count (runs were counted by restarts then).
fn current_run(status: &TrainingJobStatus) -> i32 {
    status.run.unwrap_or(status.restart_count)
}

fn identity(job: &TrainingJob) -> (&str, &str) {
    (
        job.metadata.name.as_deref().unwrap_or_default(),
        job.metadata.uid.as_deref().unwrap_or_default(),
    )
}

/// Plans the reconcile of a job that does not even decode (a value outside an enum, a string
/// where a number belongs): only its status changes, naming the field.
pub fn plan_undecodable(
    metadata: &ObjectMeta,
    status: Option<TrainingJobStatus>,
    error: &FieldError,
    now: jiff::Timestamp,
) -> Plan {
    let mut planner = Planner::new(metadata.generation, status.unwrap_or_default(), now);
    planner.invalid(&format!("invalid TrainingJob: {error}"));
    planner.finish()
}

struct Planner {
    generation: Option<i64>,
    old: TrainingJobStatus,
    status: TrainingJobStatus,
    plan: Plan,
    now: jiff::Timestamp,
}

impl Planner {
    fn new(generation: Option<i64>, old: TrainingJobStatus, now: jiff::Timestamp) -> Self {
        let mut status = old.clone();
        status.observed_generation = generation;
        Self {
            generation,
            old,
            status,
            plan: Plan::default(),
            now,
        }
    }

    fn condition(&mut self, type_: &str, holds: bool, reason: &str, message: &str) {
        c::set(
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

    fn event(&mut self, warning: bool, reason: &str, action: &str, note: String) {
        self.plan.events.push(EventSpec {
            warning,
            reason: reason.into(),
            action: action.into(),
            note,
        });
    }

    fn finish(mut self) -> Plan {
        if self.status != self.old {
            self.plan.status = Some(self.status);
        }
        self.plan
    }

    fn invalid(&mut self, message: &str) {
        let already_reported = c::find(&self.old.conditions, c::STALLED).is_some_and(|s| {
            s.reason.as_deref() == Some("InvalidSpec") && s.message.as_deref() == Some(message)
        });
        self.condition(c::READY, false, "InvalidSpec", message);
        self.condition(c::STALLED, true, "InvalidSpec", message);
        if !already_reported {
            self.event(
                true,
                "InvalidSpec",
                "Validate",
                format!("{message}; nothing is created or changed until the spec is fixed"),
            );
        }
    }

    fn valid(&mut self, observed: &Observed<'_>, spec: &EffectiveSpec) {
        let job = Job {
            job: observed.job,
            spec,
            run: current_run(&self.old),
            notice: None,
        };
        if !c::is_true(&self.status.conditions, c::CREATED) {
            self.condition(
                c::CREATED,
                true,
                "TrainingJobCreated",
                &format!("TrainingJob {} is created.", job.name()),
            );
        }
        self.status.selector = Some(format!(
            "training-job-name={},training-job-role={WORKER_ROLE}",
            job.name()
        ));
        if matches!(self.old.phase, Some(JobPhase::Succeeded | JobPhase::Failed)) {
            self.finished(observed, job);
            return;
        }
        let start = self.status.start_time.get_or_insert(Time(self.now)).0;
        // The deadline does not run while the job is suspended.
        let suspended = c::is_true(&self.status.conditions, c::SUSPENDED);
        if let Some(deadline) = spec.active_deadline.filter(|_| !suspended) {
            let due = start
                + jiff::SignedDuration::try_from(deadline).unwrap_or(jiff::SignedDuration::MAX);
            if self.now >= due {
                let seconds = deadline.as_secs();
                self.fail(
                    observed,
                    job,
                    "DeadlineExceeded",
                    &format!("the job ran longer than activeDeadlineSeconds ({seconds}s)"),
                    true,
                );
                return;
            }
            self.requeue_at(due);
        }
        Run::new(self, observed, job).reconcile();
    }

    /// Takes what the job's requests decided into the plan: their writes, the job's events,
    /// `currentScaler` and `Scaling` condition.
    fn scaling(&mut self, step: scaling::Step) {
        for event in &step.events {
            self.event(event.warning, event.reason, "Scale", event.note.clone());
        }
        if let Some((holds, reason, message)) = scaling::job_condition(&step) {
            self.condition(c::SCALING, holds, reason, &message);
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
        job: Job<'_>,
        reason: &str,
        message: &str,
        kill: bool,
    ) {
        self.status.phase = Some(JobPhase::Failed);
        self.status.completion_time = Some(Time(self.now));
        self.condition(c::FAILED, true, reason, message);
        self.condition(c::RUNNING, false, reason, message);
        self.event(
            true,
            reason,
            "Fail",
            format!("TrainingJob {} failed: {message}", job.name()),
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

    fn delete_pod(&mut self, pod: &Pod) {
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
            });
        }
    }

    /// A finished job: health conditions, `cleanPodPolicy`, time to live.
    fn finished(&mut self, observed: &Observed<'_>, job: Job<'_>) {
        let succeeded = self.status.phase == Some(JobPhase::Succeeded);
        let (reason, message) = c::find(
            &self.status.conditions,
            if succeeded { c::SUCCEEDED } else { c::FAILED },
        )
        .map(|cond| {
            (
                cond.reason.clone().unwrap_or_default(),
                cond.message.clone().unwrap_or_default(),
            )
        })
        .unwrap_or_default();
        self.condition(c::READY, succeeded, &reason, &message);
        self.condition(c::STALLED, !succeeded, &reason, &message);
        let ended = format!(
            "TrainingJob {} {}",
            job.name(),
            if succeeded { "succeeded" } else { "failed" }
        );
        let uid = job.job.metadata.uid.as_deref().unwrap_or_default();
        self.scaling(scaling::abandon(
            job.name(),
            uid,
            observed.scalers,
            &ended,
            self.now,
        ));
        self.status.replica_statuses = replica_statuses(&observed.pods);
        if let Some(workers) = self.status.workers.as_mut() {
            workers.ready = 0;
            workers.pending = 0;
        }
        self.status.current_workers.clear();
        // Nothing trains any more: no drain is worth waiting for (cleanPodPolicy decides), and
        // no notice is worth showing.
        self.status.draining_workers.clear();
        self.status.notice = None;
        if job.spec.clean_pod_policy != CleanPodPolicy::None {
            let workers = observed
                .pods
                .iter()
                .filter(|p| pods::label(p, JOB_ROLE_LABEL) == Some(WORKER_ROLE));
            for pod in workers.filter(|p| !pods::is_terminating(p)) {
                self.delete_pod(pod);
            }
            if observed.worker_service.is_some() {
                self.plan.delete.push(Deletion {
                    kind: ChildKind::Service,
                    name: names::worker_service(job.name()),
                });
            }
        }
        if let (Some(ttl), Some(Time(completion))) = (
            job.spec.ttl_after_finished,
            self.status.completion_time.as_ref(),
        ) {
            let due = *completion
                + jiff::SignedDuration::try_from(ttl).unwrap_or(jiff::SignedDuration::MAX);
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

fn replica_statuses(pods: &[&Pod]) -> BTreeMap<ReplicaType, eto_api::common::ReplicaStatus> {
    let mut statuses = BTreeMap::new();
    for (replica, role) in [
        (ReplicaType::Launcher, LAUNCHER_ROLE),
        (ReplicaType::Worker, WORKER_ROLE),
    ] {
        let of_role = pods
            .iter()
            .filter(|p| pods::label(p, JOB_ROLE_LABEL) == Some(role));
        let mut status = eto_api::common::ReplicaStatus::default();
        for pod in of_role {
            match pods::phase(pod) {
                "Running" if !pods::is_terminating(pod) => status.active += 1,
                "Succeeded" => status.succeeded += 1,
                "Failed" => status.failed += 1,
                _ => {}
            }
        }
        statuses.insert(replica, status);
    }
    statuses
}

mod run;

use run::Run;

#[cfg(test)]
mod scaling_tests;
#[cfg(test)]
mod suspension_tests;
#[cfg(test)]
mod tests;
