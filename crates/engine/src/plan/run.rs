//! The run of a job that is not finished: its workers, its launcher, its discovery data, its
//! phase. A run lasts from the job's start (or restart) to its end; the workers of a run are
//! decided in [`workers`].

mod suspension;
mod workers;

use eto_api::common::ReplicaRestartPolicy;
use eto_api::training_job::{JobPhase, JobRestartPolicy};
use eto_api::training_job::{Notice, NoticeKind};
use eto_api::well_known::{NOTICE_ANNOTATION, RESTART_LABEL, RUN_LABEL};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{
    Child, Observed, Planner, SecretPresence, WAITING_RESOURCE_TIMEOUT, current_run, needs_apply,
};
use crate::applied::is_applied;
use crate::build::{self, Job};
use crate::conditions as c;
use crate::discovery::{self, Host};
use crate::effective_spec::SshSecretSource;
use crate::loss::Loss;
use crate::{names, notice, pods, scaling};

/// The run of a job that is not finished: its workers, its launcher, its discovery data.
pub(super) struct Run<'p, 'o> {
    planner: &'p mut Planner,
    observed: &'p Observed<'o>,
    job: Job<'p>,
    /// The current run (`status.run`).
    run: i32,
    /// The notice the pods of the run show (`status.notice`), as decided by this plan.
    notice: Option<Notice>,
    /// Whether this plan creates the launcher.
    creates_launcher: bool,
    /// Whether a ScaleIn or ScaleOut is under way after this plan.
    scaling: bool,
    /// Whether this plan restarts the job (its requests are then abandoned, not carried on).
    restarted: bool,
}

impl<'p, 'o> Run<'p, 'o> {
    pub(super) fn new(planner: &'p mut Planner, observed: &'p Observed<'o>, job: Job<'p>) -> Self {
        let run = current_run(&planner.old);
        let notice = planner.old.notice.clone();
        Self {
            planner,
            observed,
            job,
            run,
            notice,
            creates_launcher: false,
            scaling: false,
            restarted: false,
        }
    }

    fn name(&self) -> &str {
        self.job.name()
    }

    /// The job as the builders of its pods need it now: its run and its notice.
    fn job(&self) -> Job<'_> {
        Job {
            job: self.job.job,
            spec: self.job.spec,
            run: self.run,
            notice: self.notice.as_ref(),
        }
    }

    /// Pods of earlier runs. Pods labelled before the run label existed carry their restart
    /// count instead, which counted runs then; pods without either predate eto's labels and
    /// are taken as part of the current run.
    fn is_stale(&self, pod: &Pod) -> bool {
        pods::label(pod, RUN_LABEL)
            .or_else(|| pods::label(pod, RESTART_LABEL))
            .and_then(|r| r.parse::<i32>().ok())
            .is_some_and(|r| r < self.run)
    }

    fn launcher(&self) -> Option<&'o Pod> {
        let name = names::launcher(self.name());
        self.observed
            .pods
            .iter()
            .copied()
            .find(|p| p.metadata.name.as_deref() == Some(&name) && !self.is_stale(p))
    }

    pub(super) fn reconcile(mut self) {
        for pod in self.observed.pods.clone() {
            if self.is_stale(pod) && !pods::is_terminating(pod) {
                self.planner.delete_pod(pod);
            }
        }
        // Before the launcher's own outcome: a launcher exiting while the job suspends is
        // part of the suspend.
        if !self.suspension() {
            return;
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
        self.show_notices();
        self.phase(&hosts);
    }

    /// Re-applies the workers of the run whose notice is not the one they should show (see
    /// [`crate::notice`]); the launcher's is kept current with its hostfile.
    fn show_notices(&mut self) {
        let name = self.name().to_string();
        let mut updates = Vec::new();
        for pod in &self.observed.pods {
            let Some(index) = pod
                .metadata
                .name
                .as_deref()
                .and_then(|n| names::worker_index(&name, n))
            else {
                continue;
            };
            if self.is_stale(pod) || pods::is_terminating(pod) || pods::is_finished(pod) {
                continue;
            }
            let wanted = notice::for_pod(pod, self.notice.as_ref(), self.planner.now);
            let mut update = build::worker_pod(self.job(), index, &[]);
            update.spec = pod.spec.clone();
            let mut annotations = update.metadata.annotations.take().unwrap_or_default();
            annotations.remove(NOTICE_ANNOTATION);
            annotations.extend(notice::annotations(wanted.as_ref()));
            update.metadata.annotations = Some(annotations).filter(|a| !a.is_empty());
            if metadata_differs(&update, pod) {
                updates.push(Child::Pod(Box::new(update)));
            }
        }
        self.planner.plan.apply.extend(updates);
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
            // A new run, which resumes nothing: the notice of the last one goes.
            self.run += 1;
            self.notice = None;
            let planner = &mut *self.planner;
            planner.status.restart_count = restart;
            planner.status.run = Some(self.run);
            planner.status.notice = None;
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

    fn discovery_and_launcher(&mut self, hosts: &[Host]) {
        let hostfile = discovery::hostfile(hosts);
        let deepspeed = discovery::deepspeed_hostfile(hosts);
        let config_map = build::config_map(self.job(), &hostfile, &deepspeed);
        let desired = build::launcher_pod(self.job(), &hostfile, &deepspeed);
        if needs_apply(&config_map, self.observed.config_map) {
            self.planner
                .plan
                .apply
                .push(Child::ConfigMap(Box::new(config_map)));
        }
        let min = self.job.spec.workers.min as usize;
        match self.launcher() {
            Some(launcher) => {
                // A pod's spec is immutable: re-apply the spec it has, with the new metadata.
                let mut update = desired;
                update.spec = launcher.spec.clone();
                if metadata_differs(&update, launcher) {
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
                    self.resumed_below_min(hosts.len());
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
        let suspended = c::is_true(&self.planner.status.conditions, c::SUSPENDED);
        let suspending = self
            .notice
            .as_ref()
            .is_some_and(|notice| notice.kind == NoticeKind::Suspend);
        let elastic = self.job.spec.elastic;
        let watch_minimum = elastic.suspend_below_min_workers && !suspended && !suspending;
        if !workers_ready && launcher_running && watch_minimum {
            // Looked at again when too few workers have been ready for too long.
            let since = c::find(&self.planner.status.conditions, c::WORKERS_READY)
                .and_then(|condition| condition.last_transition_time.as_ref())
                .map_or(self.planner.now, |time| time.0);
            let due = since
                + jiff::SignedDuration::try_from(elastic.below_min)
                    .unwrap_or(jiff::SignedDuration::MAX);
            self.planner.requeue_at(due);
        }
        let phase = if suspended {
            JobPhase::Suspended
        } else if restarting {
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
            JobPhase::Suspended => {
                let pending = target.saturating_sub(ready);
                let message = format!(
                    "suspended: it resumes from its checkpoint once {} ready ({ready} ready, {pending} pending)",
                    suspension::workers(self.job.spec.workers.min, "worker is", "workers are")
                );
                self.planner
                    .condition(c::READY, false, suspension::BELOW_MIN_WORKERS, &message);
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
        if let Some(notice) = self
            .notice
            .as_ref()
            .filter(|notice| notice.kind == NoticeKind::Suspend)
        {
            self.planner
                .condition(c::READY, false, "Suspending", &notice.message);
        }
        self.planner
            .condition(c::STALLED, false, "Progressing", "the job makes progress");
        self.planner.status.phase = Some(phase);
    }
}

/// Whether `desired` (eto's pod) differs from the metadata of `observed`: a value eto sets that
/// the pod lacks or has otherwise, or a notice the pod shows that eto no longer wants.
fn metadata_differs(desired: &Pod, observed: &Pod) -> bool {
    let notice = |pod: &Pod| {
        pod.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(NOTICE_ANNOTATION))
            .cloned()
    };
    !is_applied(&desired.metadata, &observed.metadata) || notice(desired) != notice(observed)
}
