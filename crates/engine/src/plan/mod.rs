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

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use eto_api::TrainingJob;
use eto_api::common::ReplicaRestartPolicy;
use eto_api::training_job::{
    BLACKLIST_LIMIT, BlacklistEntry, CleanPodPolicy, JobPhase, JobRestartPolicy, ReplicaType,
    TrainingJobStatus, WorkerSummary,
};
use eto_api::well_known::{JOB_ROLE_LABEL, LAUNCHER_ROLE, RESTART_LABEL, WORKER_ROLE};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::applied::is_applied;
use crate::build::{self, Job};
use crate::conditions::{self as c, Observation};
use crate::discovery::{self, Host};
use crate::effective_spec::{EffectiveSpec, SshSecretSource};
use crate::loss::Loss;
use crate::scaling::{self, Scaler, ScalerUpdate};
use crate::validation::{FieldError, validate};
use crate::workers::{self, WorkerInput};
use crate::{cooldown, drain};
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
            restart: self.old.restart_count,
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
        if let Some(deadline) = spec.active_deadline {
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
        // Nothing trains any more: no drain is worth waiting for (cleanPodPolicy decides).
        self.status.draining_workers.clear();
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

/// The number of workers a job holds to.
struct Desired {
    /// At the last reconcile; `None` for a new run.
    previous: Option<u32>,
    /// Now: `worker.replicas` when it changed since eto last acted on it (or for a new run),
    /// else what the job held to (which a ScaleIn or ScaleOut may have moved), kept within the
    /// spec's minimum and maximum.
    now: u32,
    /// Whether `worker.replicas` changed since eto last acted on it.
    spec_changed: bool,
}

/// The run of a job that is not finished: its workers, its launcher, its discovery data.
struct Run<'p, 'o> {
    planner: &'p mut Planner,
    observed: &'p Observed<'o>,
    job: Job<'p>,
    /// `status.restartCount` of the current run.
    restart: i32,
    /// Whether this plan creates the launcher.
    creates_launcher: bool,
    /// Whether a ScaleIn or ScaleOut is under way after this plan.
    scaling: bool,
    /// Whether this plan restarts the job (its requests are then abandoned, not carried on).
    restarted: bool,
}

impl<'p, 'o> Run<'p, 'o> {
    fn new(planner: &'p mut Planner, observed: &'p Observed<'o>, job: Job<'p>) -> Self {
        let restart = planner.old.restart_count;
        Self {
            planner,
            observed,
            job,
            restart,
            creates_launcher: false,
            scaling: false,
            restarted: false,
        }
    }

    fn name(&self) -> &str {
        self.job.name()
    }

    /// Pods of earlier runs (before the last restart). Pods without the label predate eto's
    /// labels and are taken as part of the current run.
    fn is_stale(&self, pod: &Pod) -> bool {
        pods::label(pod, RESTART_LABEL)
            .and_then(|r| r.parse::<i32>().ok())
            .is_some_and(|r| r < self.restart)
    }

    fn launcher(&self) -> Option<&'o Pod> {
        let name = names::launcher(self.name());
        self.observed
            .pods
            .iter()
            .copied()
            .find(|p| p.metadata.name.as_deref() == Some(&name) && !self.is_stale(p))
    }

    fn reconcile(mut self) {
        for pod in self.observed.pods.clone() {
            if self.is_stale(pod) && !pods::is_terminating(pod) {
                self.planner.delete_pod(pod);
            }
        }
        let launcher = self.launcher();
        if launcher.is_some_and(|l| pods::phase(l) == "Succeeded") {
            return self.succeed();
        }
        let goes_on = match launcher {
            Some(launcher) if pods::phase(launcher) == "Failed" => {
                self.restart_after_failure(launcher)
            }
            None if c::is_true(&self.planner.status.conditions, c::LAUNCHER_CREATED) => {
                self.launcher_missing()
            }
            _ => true,
        };
        if !goes_on {
            return;
        }
        self.apply_supporting_objects();
        if self.observed.ssh_secret == SecretPresence::Missing
            && let SshSecretSource::Provided(secret) = &self.job.spec.ssh_secret
        {
            let message = format!(
                "metadata.annotations[arena.kubeflow.org/ssh-secret]: Secret {secret:?} does not exist; no pod is created until it does"
            );
            let reported = c::find(&self.planner.old.conditions, c::READY)
                .is_some_and(|r| r.reason.as_deref() == Some("SSHSecretNotFound"));
            self.planner
                .condition(c::READY, false, "SSHSecretNotFound", &message);
            if !reported {
                self.planner
                    .event(true, "SSHSecretNotFound", "Validate", message);
            }
            return;
        }
        if !self.still_worth_waiting() {
            return;
        }
        let hosts = self.workers();
        self.discovery_and_launcher(&hosts);
        self.phase(&hosts);
    }

    /// Applies `elasticPolicy.maxWaitSeconds`: a run whose launcher has not been created may
    /// wait that long, from the start of the job or of the run, for `minReplicas` ready
    /// workers; then the job fails and its pods are deleted. Returns whether the job goes on.
    fn still_worth_waiting(&mut self) -> bool {
        let Some(max_wait) = self.job.spec.elastic.max_wait else {
            return true;
        };
        let conditions = &self.planner.status.conditions;
        if self.launcher().is_some() || c::is_true(conditions, c::LAUNCHER_CREATED) {
            return true;
        }
        // The run began waiting when its launcher was last found missing or removed by a
        // restart, or else when the job started.
        let since = c::find(conditions, c::LAUNCHER_CREATED)
            .and_then(|launcher| launcher.last_transition_time.as_ref())
            .or(self.planner.status.start_time.as_ref())
            .map_or(self.planner.now, |time| time.0);
        let due =
            since + jiff::SignedDuration::try_from(max_wait).unwrap_or(jiff::SignedDuration::MAX);
        let name = self.name().to_string();
        let (ready, pending) = self
            .planner
            .status
            .target_workers
            .iter()
            .map(|worker| {
                self.observed
                    .pods
                    .iter()
                    .find(|p| p.metadata.name.as_deref() == Some(worker.as_str()))
                    .is_some_and(|p| pods::is_ready(p) && !pods::is_disrupted(p))
            })
            .fold(
                (0, 0),
                |(r, p), is_ready| if is_ready { (r + 1, p) } else { (r, p + 1) },
            );
        let min = self.job.spec.workers.min;
        if ready >= min || self.planner.now < due {
            self.planner.requeue_at(due);
            return true;
        }
        let message = format!(
            "waited {}s (elasticPolicy.maxWaitSeconds) for {min} ready workers (worker.minReplicas) before starting launcher {}: {ready} ready, {pending} pending",
            max_wait.as_secs(),
            names::launcher(&name),
        );
        self.planner.fail(
            self.observed,
            self.job,
            WAITING_RESOURCE_TIMEOUT,
            &message,
            true,
        );
        false
    }

    fn succeed(self) {
        let message = format!("launcher {} succeeded", names::launcher(self.name()));
        let planner = self.planner;
        planner.status.phase = Some(JobPhase::Succeeded);
        planner.status.completion_time = Some(Time(planner.now));
        planner.condition(c::SUCCEEDED, true, "TrainingJobSucceeded", &message);
        planner.condition(c::RUNNING, false, "TrainingJobSucceeded", &message);
        planner.event(
            false,
            "TrainingJobSucceeded",
            "Complete",
            format!("TrainingJob {} succeeded: {message}", self.job.name()),
        );
        planner.finished(self.observed, self.job);
    }

    /// Restarts the job after its launcher failed, if the restart policy and the backoff limit
    /// allow; fails it otherwise. Returns whether the job goes on.
    fn restart_after_failure(&mut self, launcher: &Pod) -> bool {
        let evicted = pods::reason(launcher) == Some("Evicted");
        let how = match (Loss::of(Some(launcher)), evicted) {
            (_, true) => "was evicted".to_string(),
            (Some(loss), false) => loss.describe(),
            (None, false) => "failed".to_string(),
        };
        let spec = self.job.spec;
        let restarts = self.planner.old.restart_count;
        if spec.job_restart_policy == JobRestartPolicy::OnFailure
            && u32::try_from(restarts).is_ok_and(|r| r < spec.backoff_limit)
        {
            let restart = restarts + 1;
            let message = format!(
                "the launcher {how}; restarting the job (restart {restart} of {})",
                spec.backoff_limit
            );
            for pod in self
                .observed
                .pods
                .iter()
                .filter(|p| !pods::is_terminating(p))
            {
                self.planner.delete_pod(pod);
            }
            let planner = &mut *self.planner;
            planner.status.restart_count = restart;
            planner.status.target_workers.clear();
            planner.status.draining_workers.clear();
            planner.status.workers = None;
            planner.condition(c::RESTARTING, true, "TrainingJobRestarting", &message);
            planner.condition(
                c::LAUNCHER_CREATED,
                false,
                "TrainingJobRestarting",
                &message,
            );
            planner.condition(c::RUNNING, false, "TrainingJobRestarting", &message);
            planner.event(true, "TrainingJobRestarting", "Restart", message);
            let ended = format!(
                "TrainingJob {} restarted after its launcher failed",
                self.job.name()
            );
            let uid = self.job.job.metadata.uid.as_deref().unwrap_or_default();
            let abandoned = scaling::abandon(
                self.job.name(),
                uid,
                self.observed.scalers,
                &ended,
                planner.now,
            );
            planner.scaling(abandoned);
            self.restart = restart;
            self.restarted = true;
            return true;
        }
        let limit = if spec.job_restart_policy == JobRestartPolicy::OnFailure {
            format!(
                "; the backoff limit of {} restarts is reached",
                spec.backoff_limit
            )
        } else {
            String::new()
        };
        let reason = if evicted {
            "TrainingJobEvicted"
        } else {
            "TrainingJobFailed"
        };
        self.planner.fail(
            self.observed,
            self.job,
            reason,
            &format!("the launcher {how}{limit}"),
            false,
        );
        false
    }

    /// The launcher of the current run is gone. Returns whether the job goes on: under
    /// `Always` it is recreated, under `Never` the job fails, otherwise the job keeps its
    /// workers and reports the missing launcher (see [`Run::phase`]).
    fn launcher_missing(&mut self) -> bool {
        let name = names::launcher(self.name());
        match self.job.spec.launcher_restart_policy {
            Some(ReplicaRestartPolicy::Always) => {
                let message =
                    format!("launcher {name} disappeared; recreating it (restartPolicy Always)");
                self.planner
                    .condition(c::LAUNCHER_CREATED, false, "LauncherMissing", &message);
                self.planner
                    .event(true, "LauncherMissing", "Create", message);
                true
            }
            Some(ReplicaRestartPolicy::Never) => {
                let message = format!("launcher {name} disappeared (restartPolicy Never)");
                self.planner
                    .fail(self.observed, self.job, "LauncherMissing", &message, false);
                false
            }
            _ => {
                let reported = c::find(&self.planner.old.conditions, c::READY)
                    .is_some_and(|r| r.reason.as_deref() == Some("LauncherMissing"));
                if !reported {
                    let message = format!(
                        "launcher {name} disappeared; set the launcher's restartPolicy to Always to have it recreated"
                    );
                    self.planner
                        .event(true, "LauncherMissing", "Observe", message);
                }
                true
            }
        }
    }

    fn apply_supporting_objects(&mut self) {
        let job = self.job;
        let observed = self.observed;
        let plan = &mut self.planner.plan;
        let account = build::launcher_service_account(job);
        if needs_apply(&account, observed.service_account) {
            plan.apply.push(Child::ServiceAccount(Box::new(account)));
        }
        let role = build::launcher_role(job);
        if needs_apply(&role, observed.role) {
            plan.apply.push(Child::Role(Box::new(role)));
        }
        let binding = build::launcher_role_binding(job);
        if needs_apply(&binding, observed.role_binding) {
            plan.apply.push(Child::RoleBinding(Box::new(binding)));
        }
        let service = build::worker_service(job);
        if needs_apply(&service, observed.worker_service) {
            plan.apply.push(Child::Service(Box::new(service)));
        }
        if observed.ssh_secret == SecretPresence::Missing
            && job.spec.ssh_secret == SshSecretSource::Generated
        {
            plan.create_ssh_secret = Some(build::ssh_secret(job));
        }
    }

    /// Decides the workers, creates and deletes their pods, records losses; returns the hosts
    /// of host discovery.
    fn workers(&mut self) -> Vec<Host> {
        let name = self.name().to_string();
        let worker_pods: Vec<&'o Pod> = self
            .observed
            .pods
            .iter()
            .copied()
            .filter(|p| pods::label(p, JOB_ROLE_LABEL) == Some(WORKER_ROLE))
            .collect();
        let index_of = |pod: &Pod| {
            pod.metadata
                .name
                .as_deref()
                .and_then(|n| names::worker_index(&name, n))
        };
        let current: BTreeMap<u32, &Pod> = worker_pods
            .iter()
            .filter(|p| !self.is_stale(p))
            .filter_map(|p| Some((index_of(p)?, *p)))
            .collect();
        let blacklisted: BTreeSet<u32> = self
            .planner
            .old
            .blacklist
            .iter()
            .filter_map(|e| names::worker_index(&name, &e.pod))
            .collect();
        let previous_target: Vec<u32> = self
            .planner
            .status
            .target_workers
            .iter()
            .filter_map(|w| names::worker_index(&name, w))
            .collect();
        let used = worker_pods
            .iter()
            .filter_map(|p| index_of(p))
            .chain(blacklisted.iter().copied())
            .chain(previous_target.iter().copied());
        let next_index = used.max().map_or(0, |max| max + 1);
        let spec = self.job.spec;
        let draining: BTreeSet<u32> = self
            .planner
            .old
            .draining_workers
            .iter()
            .filter_map(|d| names::worker_index(&name, &d.pod))
            .collect();
        let desired = self.desired_workers();
        let mut step = if self.restarted {
            scaling::Step::default()
        } else {
            let launcher_running = self
                .launcher()
                .is_some_and(|l| pods::phase(l) == "Running" && !pods::is_terminating(l));
            let restarting = self.observed.pods.iter().any(|p| self.is_stale(p));
            scaling::step(
                &scaling::JobSide {
                    name: &name,
                    uid: self.job.job.metadata.uid.as_deref().unwrap_or_default(),
                    target: &previous_target,
                    pods: &current,
                    blacklisted: &blacklisted,
                    next_index,
                    counts: spec.workers,
                    running: launcher_running && !restarting,
                    resizing: desired.spec_changed,
                    now: self.planner.now,
                },
                self.observed.scalers,
            )
        };
        // Indices a starting ScaleOut took are not used again for replacements or growth.
        let next_index = step.add.iter().map(|i| i + 1).fold(next_index, u32::max);
        let decision = workers::decide(&WorkerInput {
            policy: spec.worker_restart_policy,
            desired: desired.now,
            previous_desired: desired.previous,
            previous_target: &previous_target,
            pods: &current,
            blacklisted: &blacklisted,
            draining: &draining,
            add: &step.add,
            remove: &step.remove,
            next_index,
        });
        for lost in &decision.lost {
            if let Some(replacement) = lost.replacement {
                step.replaced(self.observed.scalers, &name, lost.index, replacement);
            }
        }
        // A request that succeeded leaves the job holding to its new size.
        let holds_to = match &step.finished {
            Some(finished) if finished.succeeded => {
                u32::try_from(decision.target.len()).unwrap_or(u32::MAX)
            }
            _ => desired.now,
        };
        self.scaling = step.under_way.is_some();
        if !self.restarted {
            self.planner.scaling(step);
        }

        for lost in &decision.lost {
            let pod_name = names::worker(&name, lost.index);
            let pod = current.get(&lost.index);
            let node = pod.and_then(|p| pods::node(p)).map(String::from);
            let on = node
                .as_deref()
                .map(|n| format!(" on node {n}"))
                .unwrap_or_default();
            let then = match lost.replacement {
                Some(replacement) => format!("replaced by {}", names::worker(&name, replacement)),
                None => format!(
                    "not replaced (worker restartPolicy {:?})",
                    spec.worker_restart_policy
                ),
            };
            self.planner.event(
                true,
                WORKER_LOST,
                "Replace",
                format!(
                    "worker {pod_name} {}{on}; it left host discovery and is {then}",
                    lost.loss.describe()
                ),
            );
            if !self
                .planner
                .status
                .blacklist
                .iter()
                .any(|e| e.pod == pod_name)
            {
                self.planner.status.blacklist.push(BlacklistEntry {
                    pod: pod_name,
                    node,
                    reason: lost.loss.reason().to_string(),
                    exit_code: lost.loss.exit_code(),
                    time: Time(self.planner.now),
                });
            }
        }
        let overflow = self
            .planner
            .status
            .blacklist
            .len()
            .saturating_sub(BLACKLIST_LIMIT);
        self.planner.status.blacklist.drain(..overflow);
        let failures: Vec<cooldown::Failure<'_>> = decision
            .lost
            .iter()
            .filter(|lost| matches!(lost.loss, Loss::Failed { .. }))
            .filter_map(|lost| {
                let pod = current.get(&lost.index)?;
                Some(cooldown::Failure {
                    node: pods::node(pod)?,
                    pod: pod.metadata.name.as_deref()?,
                })
            })
            .collect();
        let in_cooldown = cooldown::update(
            &self.planner.old.nodes_in_cooldown,
            &failures,
            spec.elastic.blacklist_cooldown,
            self.planner.now,
        );
        if let Some(end) = cooldown::next_end(&in_cooldown) {
            self.planner.requeue_at(end);
        }
        self.planner.status.nodes_in_cooldown = in_cooldown;

        if let Some((from, to)) = decision.resized {
            self.planner.event(
                false,
                "WorkersScaled",
                "Scale",
                format!("worker replicas changed from {from} to {to}"),
            );
        }
        let removed: Vec<drain::Removed<'_>> = decision
            .delete
            .iter()
            .filter_map(|index| current.get(index))
            .filter(|pod| !pods::is_terminating(pod))
            .map(|pod| drain::Removed {
                pod,
                was_in_discovery: self
                    .planner
                    .old
                    .current_workers
                    .iter()
                    .any(|w| Some(w.as_str()) == pod.metadata.name.as_deref()),
            })
            .collect();
        self.drain(removed, &current);
        if !decision.create.is_empty() {
            let created: Vec<String> = decision
                .create
                .iter()
                .map(|i| names::worker(&name, *i))
                .collect();
            for index in &decision.create {
                let pod = build::worker_pod(
                    Job {
                        restart: self.restart,
                        ..self.job
                    },
                    *index,
                    &self.planner.status.nodes_in_cooldown,
                );
                self.planner.plan.apply.push(Child::Pod(Box::new(pod)));
            }
            self.planner.event(
                false,
                "WorkersCreated",
                "Create",
                format!("created workers {}", created.join(", ")),
            );
        }

        self.planner.status.target_workers = decision
            .target
            .iter()
            .map(|i| names::worker(&name, *i))
            .collect();
        let ready: Vec<u32> = decision
            .target
            .iter()
            .copied()
            .filter(|i| {
                current
                    .get(i)
                    .is_some_and(|p| pods::is_ready(p) && !pods::is_disrupted(p))
            })
            .collect();
        self.planner.status.current_workers =
            ready.iter().map(|i| names::worker(&name, *i)).collect();
        let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
        let workers = &spec.workers;
        self.planner.status.workers = Some(WorkerSummary {
            ready: count(ready.len()),
            pending: count(decision.target.len() - ready.len()),
            desired: count(holds_to as usize),
            spec_replicas: Some(count(workers.desired as usize)),
            min: count(workers.min as usize),
            max: workers.max.map(|m| count(m as usize)),
        });
        self.planner.status.replica_statuses = replica_statuses(
            &self
                .observed
                .pods
                .iter()
                .copied()
                .filter(|p| !self.is_stale(p))
                .collect::<Vec<_>>(),
        );
        if !decision.target.is_empty() {
            self.planner.condition(
                c::WORKERS_CREATED,
                true,
                "TrainingJobWorkerCreated",
                &format!("{} workers created", decision.target.len()),
            );
        }
        ready
            .iter()
            .map(|index| Host {
                name: names::worker_host(&name, *index),
                slots: spec.slots_per_worker,
            })
            .collect()
    }

    /// The number of workers the job holds to; see [`Desired`].
    fn desired_workers(&self) -> Desired {
        let counts = self.job.spec.workers;
        let Some(previous) = self.planner.status.workers.as_ref() else {
            return Desired {
                previous: None,
                now: counts.desired,
                spec_changed: false,
            };
        };
        let unsigned = |n: i32| u32::try_from(n).unwrap_or_default();
        let held = unsigned(previous.desired);
        // Statuses written before `specReplicas` existed held to `worker.replicas` itself.
        let acted_on = previous.spec_replicas.map_or(held, unsigned);
        let spec_changed = acted_on != counts.desired;
        let now = if spec_changed {
            counts.desired
        } else {
            held.max(counts.min).min(counts.max.unwrap_or(u32::MAX))
        };
        Desired {
            previous: Some(held),
            now,
            spec_changed,
        }
    }

    /// Drains the workers `removed` now and those draining since earlier (see
    /// [`crate::drain`]): records them, deletes the pods whose drain is over.
    fn drain(&mut self, removed: Vec<drain::Removed<'_>>, current: &BTreeMap<u32, &'o Pod>) {
        let newly: Vec<String> = removed
            .iter()
            .filter(|r| r.was_in_discovery)
            .filter_map(|r| r.pod.metadata.name.clone())
            .collect();
        let launcher_running = self
            .launcher()
            .is_some_and(|l| pods::phase(l) == "Running" && !pods::is_terminating(l));
        let decision = drain::decide(&drain::DrainInput {
            draining: &self.planner.old.draining_workers,
            removed,
            pods: current.values().copied().collect(),
            launcher_running,
            drain: self.job.spec.elastic.drain,
            now: self.planner.now,
        });
        for pod in current.values() {
            if decision
                .delete
                .iter()
                .any(|d| Some(d.as_str()) == pod.metadata.name.as_deref())
            {
                self.planner.delete_pod(pod);
            }
        }
        let started: Vec<&str> = newly
            .iter()
            .map(String::as_str)
            .filter(|pod| !decision.delete.iter().any(|d| d == pod))
            .collect();
        if !started.is_empty() {
            self.planner.event(
                false,
                "WorkersDraining",
                "Drain",
                format!(
                    "workers {} left host discovery; their pods are deleted in {}s (elasticPolicy.drainSeconds) or once the launcher or the pod stops",
                    started.join(", "),
                    self.job.spec.elastic.drain.as_secs()
                ),
            );
        }
        if let Some(end) = decision.next_end {
            self.planner.requeue_at(end);
        }
        self.planner.status.draining_workers = decision.draining;
    }

    fn discovery_and_launcher(&mut self, hosts: &[Host]) {
        let hostfile = discovery::hostfile(hosts);
        let deepspeed = discovery::deepspeed_hostfile(hosts);
        let job = Job {
            restart: self.restart,
            ..self.job
        };
        let config_map = build::config_map(job, &hostfile, &deepspeed);
        if needs_apply(&config_map, self.observed.config_map) {
            self.planner
                .plan
                .apply
                .push(Child::ConfigMap(Box::new(config_map)));
        }
        let desired = build::launcher_pod(job, &hostfile, &deepspeed);
        let min = self.job.spec.workers.min as usize;
        match self.launcher() {
            Some(launcher) => {
                // A pod's spec is immutable: re-apply the spec it has, with the new metadata.
                let mut update = desired;
                update.spec = launcher.spec.clone();
                if !is_applied(&update.metadata, &launcher.metadata) {
                    self.planner.plan.apply.push(Child::Pod(Box::new(update)));
                }
            }
            None => {
                let name = names::launcher(self.name());
                let old_launcher_present = self
                    .observed
                    .pods
                    .iter()
                    .any(|p| p.metadata.name.as_deref() == Some(&name));
                let may_create = !c::is_true(&self.planner.status.conditions, c::LAUNCHER_CREATED);
                if may_create && hosts.len() >= min && !old_launcher_present {
                    self.planner.plan.apply.push(Child::Pod(Box::new(desired)));
                    self.creates_launcher = true;
                    let message = format!(
                        "launcher {name} created with {} workers in host discovery",
                        hosts.len()
                    );
                    self.planner
                        .condition(c::LAUNCHER_CREATED, true, "LauncherCreated", &message);
                    self.planner
                        .event(false, "LauncherCreated", "Create", message);
                }
            }
        }
    }

    fn phase(&mut self, hosts: &[Host]) {
        let name = self.name().to_string();
        let min = self.job.spec.workers.min as usize;
        let ready = hosts.len();
        let target = self.planner.status.target_workers.len();
        let restarting = self.observed.pods.iter().any(|p| self.is_stale(p));
        let launcher_running = self.launcher().is_some_and(|l| pods::phase(l) == "Running");
        let workers_ready = ready >= min;
        let workers_message = format!("{ready} of {target} workers ready (minReplicas {min})");
        let (reason, message) = if workers_ready {
            ("WorkersReady", workers_message.clone())
        } else {
            ("WaitingForWorkers", workers_message.clone())
        };
        self.planner
            .condition(c::WORKERS_READY, workers_ready, reason, &message);
        let phase = if restarting {
            JobPhase::Restarting
        } else if launcher_running && self.scaling {
            JobPhase::Scaling
        } else if launcher_running {
            JobPhase::Running
        } else {
            JobPhase::Created
        };
        if phase != JobPhase::Restarting
            && c::find(&self.planner.status.conditions, c::RESTARTING).is_some()
        {
            self.planner.condition(
                c::RESTARTING,
                false,
                "RestartDone",
                "the earlier run's pods are gone",
            );
        }
        match phase {
            JobPhase::Running | JobPhase::Scaling => {
                let message = format!("training runs with {ready} workers in host discovery");
                if !matches!(
                    self.planner.old.phase,
                    Some(JobPhase::Running | JobPhase::Scaling)
                ) {
                    self.planner.event(
                        false,
                        "TrainingJobRunning",
                        "Run",
                        format!("TrainingJob {name} is running: {message}"),
                    );
                }
                self.planner
                    .condition(c::RUNNING, true, "TrainingJobRunning", &message);
                self.planner
                    .condition(c::READY, true, "TrainingJobRunning", &message);
            }
            JobPhase::Restarting => {
                let message = "waiting for the pods of the failed run to go".to_string();
                self.planner
                    .condition(c::READY, false, "TrainingJobRestarting", &message);
            }
            _ => {
                let launcher_missing = self.launcher().is_none()
                    && !self.creates_launcher
                    && c::is_true(&self.planner.status.conditions, c::LAUNCHER_CREATED);
                let (reason, message) = if launcher_missing {
                    (
                        "LauncherMissing",
                        format!(
                            "launcher {} disappeared; set the launcher's restartPolicy to Always to have it recreated",
                            names::launcher(&name)
                        ),
                    )
                } else if !workers_ready {
                    (
                        "WaitingForWorkers",
                        format!("{workers_message}; the launcher starts once {min} are ready"),
                    )
                } else {
                    (
                        "LauncherPending",
                        format!("launcher {} is starting", names::launcher(&name)),
                    )
                };
                if c::find(&self.planner.status.conditions, c::RUNNING)
                    .is_some_and(|r| r.status == eto_api::common::ConditionStatus::True)
                {
                    self.planner.condition(c::RUNNING, false, reason, &message);
                }
                self.planner.condition(c::READY, false, reason, &message);
            }
        }
        self.planner
            .condition(c::STALLED, false, "Progressing", "the job makes progress");
        self.planner.status.phase = Some(phase);
    }
}

#[cfg(test)]
mod scaling_tests;
#[cfg(test)]
mod tests;
