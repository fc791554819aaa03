//! The run of a job that is not finished: its workers, its launcher, its discovery data, its
//! phase. A run lasts from the job's start (or restart) to its end; the workers of a run are
//! decided in [`crate::target_workers`] and applied in `workers.rs`.

mod collateral_launcher_failure;
mod coordinator_replacement;
mod failing_pods;
mod launcher;
mod launcher_loss;
mod lost_group;
mod notices;
mod outcome;
mod phase;
mod rank_loss;
mod restart_backoff;
mod silent_workers;
mod stalls;
mod state;
mod survivor_failure;
mod suspending_group;
mod suspension;
mod template_change;
mod worker_backoff;
mod worker_cooldown;
mod worker_creation;
mod worker_failure;
mod worker_losses;
mod worker_removal;
mod worker_renewal;
mod worker_return;
mod worker_status;
mod workers;

use eto_api::job_status::{Notice, NoticeKind};
use eto_api::well_known::{RESTART_LABEL, RUN_LABEL};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::{Observed, Planner, SecretPresence};
use crate::conditions;
use crate::effective_spec::SshSecretSource;
use crate::gang::Gang;
use crate::job::JobContext;
use crate::{pods, scaling};

pub(super) use failing_pods::PODS_FAILING;
use launcher::Launcher;
use phase::WAITING_FOR_WORKERS;
use state::{Fact, RunState, Seen};

/// The current run of a job: its workers, its launcher, its discovery data; of a finished job
/// (see [`RunState::Finished`]), only what its end leaves to do.
pub(super) struct Run<'p, 'o> {
    planner: &'p mut Planner,
    observed: &'p Observed<'o>,
    /// The job, its spec and the gang scheduler, as the run started planning.
    context: JobContext<'p>,
    /// The number of the current run (`status.run`).
    number: i32,
    /// The notice the pods of the run show (`status.notice`), as decided by this plan.
    notice: Option<Notice>,
    /// Whether a ScaleIn or ScaleOut is under way after this plan.
    scaling: bool,
    /// Whether this plan restarts the job (its requests are then abandoned, not carried on).
    restarted: bool,
    /// Where the run stands (see [`state`]): as the last reconcile left it, then as this
    /// plan's transitions move it.
    state: RunState,
    /// The draining workers whose group waits for their save before it lets them go, as
    /// this plan's drains decided (see [`crate::saving_on_termination`]).
    saving_workers: Vec<String>,
}

impl<'p, 'o> Run<'p, 'o> {
    pub(super) fn new(
        planner: &'p mut Planner,
        observed: &'p Observed<'o>,
        context: JobContext<'p>,
    ) -> Self {
        let number = planner.status_before.current_run();
        let notice = planner.status_before.notice.clone();
        let mut created = Self {
            planner,
            observed,
            context,
            number,
            notice,
            scaling: false,
            restarted: false,
            state: RunState::WaitingForMinimum,
            saving_workers: Vec::new(),
        };
        let seen = Seen {
            launcher_waited: created.launcher_waited(),
            earlier_run_remains: created.earlier_run_remains(),
        };
        created.state = RunState::of(&created.planner.status_before, seen);
        created
    }

    /// Moves the run on `fact` (see [`RunState::step`]); the rule that found it writes what
    /// reports the move.
    fn step(&mut self, fact: Fact) {
        let earlier_run_remains = self.earlier_run_remains();
        let state = std::mem::replace(&mut self.state, RunState::WaitingForMinimum);
        self.state = state.step(fact, earlier_run_remains);
    }

    /// Whether pods or the launcher Job of an earlier run still exist.
    fn earlier_run_remains(&self) -> bool {
        self.observed.pods.iter().any(|p| self.is_stale(p))
            || self
                .observed
                .launcher_job
                .is_some_and(|job| self.is_of_earlier_run(&job.metadata))
    }

    /// Ready and pending workers of the run's target (`status.targetWorkers` as this plan has
    /// it so far): a worker counts as ready while its pod is ready and not being disrupted.
    fn counts(&self) -> Counts {
        let (mut ready, mut pending) = (0, 0);
        for (_, pod) in self.target_pods() {
            let is_ready = pod.is_some_and(|p| pods::is_ready(p) && !pods::is_disrupted(p));
            if is_ready {
                ready += 1;
            } else {
                pending += 1;
            }
        }
        Counts { ready, pending }
    }

    /// The job's Worker pods (named `<job>-worker-<index>`), of this run or an earlier one.
    fn worker_pods(&self) -> Vec<&'o Pod> {
        let name = self.name();
        self.observed
            .pods
            .iter()
            .copied()
            .filter(|pod| {
                let pod = pod.metadata.name.as_deref().unwrap_or_default();
                crate::names::worker_index(name, pod).is_some()
            })
            .collect()
    }

    /// The workers of the run's target (`status.targetWorkers` as this plan has it so far),
    /// each with its pod, if it has one.
    fn target_pods(&self) -> Vec<(String, Option<&'o Pod>)> {
        self.planner
            .status
            .target_workers
            .iter()
            .map(|worker| {
                let pod = self
                    .observed
                    .pods
                    .iter()
                    .find(|p| p.metadata.name.as_deref() == Some(worker.as_str()))
                    .copied();
                (worker.clone(), pod)
            })
            .collect()
    }

    /// Deletes every pod of the job that is not going already, and an MPIJob's launcher Job:
    /// the end of a run (a restart, a suspend).
    fn delete_every_pod(&mut self) {
        for pod in self
            .observed
            .pods
            .iter()
            .filter(|p| !pods::is_terminating(p))
        {
            self.planner.delete_pod(pod);
        }
        self.planner.delete_launcher_job(self.observed);
    }

    fn name(&self) -> &str {
        self.context.name()
    }

    /// The job as the builders of its pods need it now: its run and its notice.
    fn job(&self) -> JobContext<'_> {
        JobContext {
            job_ref: self.context.job_ref,
            spec: self.context.spec,
            run: self.number,
            notice: self.notice.as_ref(),
            gang: self.context.gang,
        }
    }

    /// Pods of earlier runs. Pods labelled before the run label existed carry their restart
    /// count instead, which counted runs then; pods without either predate eto's labels and
    /// are taken as part of the current run.
    fn is_stale(&self, pod: &Pod) -> bool {
        self.is_of_earlier_run(&pod.metadata)
    }

    fn is_of_earlier_run(&self, metadata: &ObjectMeta) -> bool {
        let labels = metadata.labels.as_ref();
        let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
        label(RUN_LABEL)
            .or_else(|| label(RESTART_LABEL))
            .and_then(|r| r.parse::<i32>().ok())
            .is_some_and(|r| r < self.number)
    }

    pub(super) fn reconcile(mut self) {
        if let RunState::Finished { .. } = self.state {
            return self.planner.finished(self.observed, self.context);
        }
        self.planner
            .status
            .start_time
            .get_or_insert(Time(self.planner.now));
        if !self.within_deadline() {
            return;
        }
        self.end_coordinator_backoff();
        for pod in self.observed.pods.clone() {
            if self.is_stale(pod) && !pods::is_terminating(pod) {
                self.planner.delete_pod(pod);
            }
        }
        if self
            .observed
            .launcher_job
            .is_some_and(|job| self.is_of_earlier_run(&job.metadata))
        {
            self.planner.delete_launcher_job(self.observed);
        }
        // Before the launcher's own outcome: a launcher exiting while the job suspends is
        // part of the suspend.
        if !self.suspension() {
            return;
        }
        let launcher = self.launcher();
        let launcher = if self.context.job_ref.coordinator().groups_stand_alone {
            // A Lighthouse's end is no outcome of the run: it is replaced (see
            // coordinator_replacement.rs).
            let lost = self.coordinator_replaced(launcher.as_ref());
            launcher.filter(|_| !lost)
        } else if self.launcher_lost(launcher.as_ref()) {
            // Before the launcher's own outcome: the platform taking it ends the run, not the
            // job (see launcher_loss.rs).
            return;
        } else {
            launcher
        };
        if launcher.as_ref().is_some_and(|l| l.phase == "Succeeded") {
            let message = format!(
                "{} {} succeeded",
                self.context.job_ref.launcher_called(),
                self.context.job_ref.launcher_name()
            );
            return self.succeed(&message);
        }
        // A worker that exits after a `Suspend` or `Checkpoint` notice did what the notice
        // asked: that is the suspend's end, or the group's change, not the training's.
        let suspending = matches!(self.state, RunState::Suspending(_));
        let reforming = self
            .planner
            .status_before
            .notice
            .as_ref()
            .is_some_and(|notice| notice.kind == NoticeKind::Checkpoint);
        if !suspending && !reforming && self.every_worker_succeeded() {
            return self.succeed("its Workers succeeded");
        }
        // Before the launcher's failure: a lost rank makes every other rank fail too, a
        // torchrun group whose rendezvous closed never forms again, and a new run leaves the
        // old launcher behind.
        if !suspending {
            self.restart_on_new_template();
        }
        // A run that just ended is judged no more: its pods go with it.
        if !self.restarted && (!self.ranks_kept() || !self.group_kept()) {
            return;
        }
        let launcher = launcher.filter(|_| !self.restarted);
        if let Some(launcher) = launcher.filter(|l| l.phase == "Failed") {
            if let Some(cause) = self.launcher_left_below_min(&launcher) {
                self.suspend(suspension::BELOW_MIN_WORKERS, Some(&cause));
                return;
            }
            if let Some(cause) = self.collateral_of(&launcher) {
                self.suspend(collateral_launcher_failure::WORKER_DISRUPTED, Some(&cause));
                return;
            }
            if !self.restart_after_failure(&launcher) {
                return;
            }
        }
        self.planner.going_on_with_launcher = Some(self.launcher().is_some());
        self.apply_supporting_objects();
        if !self.observed.taken.is_empty() {
            return self.names_taken();
        }
        if self.observed.ssh_secret == SecretPresence::Missing
            && let SshSecretSource::Provided(secret) = &self.context.spec.ssh_secret
        {
            let message = format!(
                "metadata.annotations[arena.kubeflow.org/ssh-secret]: Secret {secret:?} does not exist; no pod is created until it does"
            );
            let reported =
                conditions::find(&self.planner.status_before.conditions, conditions::READY)
                    .is_some_and(|r| r.reason.as_deref() == Some("SSHSecretNotFound"));
            self.planner
                .condition(conditions::READY, false, "SSHSecretNotFound", &message);
            if !reported {
                self.planner
                    .event(true, "SSHSecretNotFound", "Validate", message);
            }
            return;
        }
        if let Gang::Missing(scheduler) = self.observed.gang {
            return self.gang_scheduler_missing(scheduler);
        }
        if !self.still_worth_waiting() || !self.within_backoff_limit() {
            return;
        }
        let hosts = self.workers();
        self.show_group();
        let hosts = self.with_launcher_as_worker(hosts);
        self.discovery_and_launcher(&hosts);
        self.show_notices();
        self.phase(&hosts);
        if let Some(rejected) = self.observed.rejected_pod {
            self.pod_rejected(rejected);
        }
    }

    /// Ends the run, deleting every pod of it, and starts a new one with new workers and,
    /// once the old launcher is gone, a new launcher; `message` says why. A
    /// [`Restart::Counted`] restart adds to `restartCount`, which `backoffLimit` bounds.
    fn start_new_run(&mut self, message: &str, restart: Restart) {
        let kind = self.context.kind();
        self.delete_every_pod();
        // A new run, which resumes nothing: the notice of the last one goes.
        self.number += 1;
        self.notice = None;
        self.step(Fact::RunStarted);
        let planner = &mut *self.planner;
        if restart == Restart::Counted {
            planner.status.restart_count = planner.status_before.restart_count + 1;
        }
        planner.status.run = Some(self.number);
        planner.status.notice = None;
        planner.status.target_workers.clear();
        planner.status.forget_the_runs_group();
        planner.status.workers = None;
        let reason = kind.reason("Restarting");
        planner.condition(conditions::RESTARTING, true, &reason, message);
        planner.condition(conditions::LAUNCHER_CREATED, false, &reason, message);
        planner.condition(conditions::RUNNING, false, &reason, message);
        planner.condition(
            conditions::WORKERS_READY,
            false,
            WAITING_FOR_WORKERS,
            "a new run starts with new workers",
        );
        planner.event(true, &reason, "Restart", message.to_string());
        let ended = format!(
            "{} {} restarted: {message}",
            kind.vocabulary().name,
            self.context.name()
        );
        let abandoned = scaling::abandon(
            self.context.name(),
            self.context.job_ref.uid(),
            self.observed.scalers,
            &ended,
            planner.now,
        );
        planner.scaling(abandoned);
        self.restarted = true;
    }
}

/// Whether a new run counts as a restart of the job (see [`Run::start_new_run`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Restart {
    /// The training code failed: `restartCount` grows.
    Counted,
    /// The platform took a pod the run cannot lose: nothing is counted.
    Uncounted,
}

/// Ready and pending workers of the run's target, as observed.
#[derive(Clone, Copy, Debug)]
struct Counts {
    ready: u32,
    pending: u32,
}
