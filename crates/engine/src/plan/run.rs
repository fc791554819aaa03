//! The run of a job that is not finished: its workers, its launcher, its discovery data, its
//! phase. A run lasts from the job's start (or restart) to its end; the workers of a run are
//! decided in [`workers`].

mod collateral;
mod launcher_loss;
mod lost_group;
mod rank_loss;
mod state;
mod suspension;
mod worker_failure;
mod workers;

use state::{RunState, Seen};

use std::collections::BTreeMap;

use eto_api::job_status::JobPhase;
use eto_api::job_status::{Notice, NoticeKind};
use eto_api::training_job::JobRestartPolicy;
use eto_api::well_known::{HOSTFILE_ANNOTATION, NOTICE_ANNOTATION, RESTART_LABEL, RUN_LABEL};
use k8s_openapi::api::batch::v1::Job as BatchJob;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::{
    Child, NAME_TAKEN, NAME_TAKEN_RECHECK, Observed, POD_REJECTED, POD_REJECTED_RECHECK, Planner,
    RejectedPod, SameStall, SecretPresence, WAITING_RESOURCE_TIMEOUT, current_run, needs_apply,
};
use crate::build::{self, Job};
use crate::conditions as c;
use crate::discovery::{self, Host};
use crate::disruption::{self, Disruption};
use crate::effective_spec::{LauncherStart, SshSecretSource};
use crate::gang::{GANG_SCHEDULER_MISSING, GANG_SCHEDULER_RECHECK, Gang, GangScheduler};
use crate::joining;
use crate::kind::launcher::{LauncherInputs, RunningLauncher};
use crate::kind::{LauncherObject, pytorch_job};
use crate::loss::Loss;
use crate::pod_metadata::PodMetadata;
use crate::{names, node_warnings, notice, pods, scaling};

/// The launcher of the current run, as observed.
#[derive(Clone, Debug)]
pub(super) struct Launcher<'o> {
    /// Its pod: a TrainingJob's launcher pod, the newest pod of an MPIJob's launcher Job.
    pod: Option<&'o Pod>,
    /// `Pending`, `Running`, `Succeeded` or `Failed`: the pod's phase, or the outcome of the
    /// launcher Job.
    phase: &'o str,
    /// Why the launcher Job failed, when it says so.
    job_failure: Option<&'o str>,
    /// How the platform took the launcher, or is taking it (see [`crate::disruption`]): its
    /// pod (of an MPIJob, any pod of its launcher Job in this run) is disrupted, was ended by
    /// its node, or is being deleted, as is an MPIJob's launcher Job.
    disruption: Option<Disruption>,
}

impl Launcher<'_> {
    /// Whether it runs (being deleted or not: until it exits, its training can checkpoint).
    fn is_running(&self) -> bool {
        self.phase == "Running"
    }
}

/// Whether the condition `type_` of a batch Job holds.
fn job_condition(job: &BatchJob, type_: &str) -> bool {
    job.status
        .iter()
        .flat_map(|status| status.conditions.iter().flatten())
        .any(|condition| condition.type_ == type_ && condition.status == "True")
}

/// The current run of a job: its workers, its launcher, its discovery data; of a finished job
/// (see [`RunState::Finished`]), only what its end leaves to do.
pub(super) struct Run<'p, 'o> {
    planner: &'p mut Planner,
    observed: &'p Observed<'o>,
    job: Job<'p>,
    /// The current run (`status.run`).
    run: i32,
    /// The notice the pods of the run show (`status.notice`), as decided by this plan.
    notice: Option<Notice>,
    /// Whether a ScaleIn or ScaleOut is under way after this plan.
    scaling: bool,
    /// Whether this plan restarts the job (its requests are then abandoned, not carried on).
    restarted: bool,
    /// Where the run stands (see [`state`]): as the last reconcile left it, then as this
    /// plan's transitions move it.
    state: RunState,
}

impl<'p, 'o> Run<'p, 'o> {
    pub(super) fn new(planner: &'p mut Planner, observed: &'p Observed<'o>, job: Job<'p>) -> Self {
        let run = current_run(&planner.old);
        let notice = planner.old.notice.clone();
        let mut created = Self {
            planner,
            observed,
            job,
            run,
            notice,
            scaling: false,
            restarted: false,
            state: RunState::WaitingForMinimum,
        };
        let seen = Seen {
            launcher_waited: created.launcher_waited(),
            earlier_run_remains: created.earlier_run_remains(),
        };
        created.state = RunState::of(&created.planner.old, seen);
        created
    }

    /// Moves the run to `state` (inside [`RunState::Restarting`] while an earlier run's pods
    /// remain); the transition that calls it writes what reports the move.
    fn enter(&mut self, state: RunState) {
        self.state = state.restarting_if(self.earlier_run_remains());
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
        for worker in &self.planner.status.target_workers {
            let is_ready = self
                .observed
                .pods
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(worker.as_str()))
                .is_some_and(|p| pods::is_ready(p) && !pods::is_disrupted(p));
            if is_ready {
                ready += 1;
            } else {
                pending += 1;
            }
        }
        Counts { ready, pending }
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

    /// Whether the run's launcher, which starts only once the run has its minimum, runs.
    fn launcher_waited(&self) -> bool {
        self.job.spec.launcher_start == LauncherStart::WhenMinReady
            && self.launcher().is_some_and(|l| l.is_running())
    }

    fn name(&self) -> &str {
        self.job.name()
    }

    /// Whether the workers, not a launcher, decide the run's outcome: a PyTorchJob without a
    /// Master (see [`LauncherObject::Master`]), or whose rendezvous store eto runs (see
    /// [`LauncherObject::RendezvousStore`]).
    fn workers_decide(&self) -> bool {
        match self.job.job.launcher() {
            LauncherObject::Master => self.job.job.launcher_template().is_none(),
            LauncherObject::RendezvousStore => true,
            LauncherObject::Pod | LauncherObject::Job => false,
        }
    }

    /// Whether the workers of a run they decide finished successfully: every worker of the
    /// run's target, or for an elastic PyTorchJob any one, as v1 decides.
    fn every_worker_succeeded(&self) -> bool {
        let target = &self.planner.old.target_workers;
        let succeeded = |worker: &String| {
            self.observed.pods.iter().any(|pod| {
                pod.metadata.name.as_deref() == Some(worker.as_str())
                    && !self.is_stale(pod)
                    && pods::phase(pod) == "Succeeded"
            })
        };
        self.workers_decide()
            && !target.is_empty()
            && if self.job.job.first_worker_success_decides() {
                target.iter().any(succeeded)
            } else {
                target.iter().all(succeeded)
            }
    }

    /// The job as the builders of its pods need it now: its run and its notice.
    fn job(&self) -> Job<'_> {
        Job {
            job: self.job.job,
            spec: self.job.spec,
            run: self.run,
            notice: self.notice.as_ref(),
            gang: self.job.gang,
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
            .is_some_and(|r| r < self.run)
    }

    /// The launcher of the current run, if it exists.
    fn launcher(&self) -> Option<Launcher<'o>> {
        match self.job.job.launcher() {
            LauncherObject::Pod | LauncherObject::Master | LauncherObject::RendezvousStore => {
                let name = self.job.job.launcher_name();
                let pod = self
                    .observed
                    .pods
                    .iter()
                    .copied()
                    .find(|p| p.metadata.name.as_deref() == Some(&name) && !self.is_stale(p))?;
                Some(Launcher {
                    pod: Some(pod),
                    phase: pods::phase(pod),
                    job_failure: None,
                    disruption: disruption::of(pod),
                })
            }
            LauncherObject::Job => {
                let job = self
                    .observed
                    .launcher_job
                    .filter(|job| !self.is_of_earlier_run(&job.metadata))?;
                let role_label = self.job.kind().role_label();
                let of_run = || {
                    self.observed
                        .pods
                        .iter()
                        .copied()
                        .filter(|p| {
                            pods::label(p, role_label) == Some(self.job.kind().launcher_role())
                        })
                        .filter(|p| !self.is_stale(p))
                };
                // The Job replaces a pod the platform took (its pod failure policy ignores
                // the loss): the loss still ends the run.
                let disruption = if job.metadata.deletion_timestamp.is_some() {
                    Some(Disruption {
                        reason: "Deleted".into(),
                        node: None,
                        ended: false,
                    })
                } else {
                    of_run().find_map(disruption::of)
                };
                let pod = of_run().max_by(|a, b| {
                    let created = |p: &Pod| p.metadata.creation_timestamp.clone();
                    created(a)
                        .cmp(&created(b))
                        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
                });
                let failure = job
                    .status
                    .iter()
                    .flat_map(|status| status.conditions.iter().flatten())
                    .find(|condition| condition.type_ == "Failed" && condition.status == "True");
                let phase = if job_condition(job, "Complete") {
                    "Succeeded"
                } else if failure.is_some() {
                    "Failed"
                } else {
                    pod.map_or("Pending", pods::phase)
                };
                Some(Launcher {
                    pod,
                    phase,
                    job_failure: failure.and_then(|f| f.message.as_deref().or(f.reason.as_deref())),
                    disruption,
                })
            }
        }
    }

    pub(super) fn reconcile(mut self) {
        if let RunState::Finished { .. } = self.state {
            return self.planner.finished(self.observed, self.job);
        }
        self.planner
            .status
            .start_time
            .get_or_insert(Time(self.planner.now));
        if !self.within_deadline() {
            return;
        }
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
        // Before the launcher's own outcome: the platform taking it ends the run, not the job
        // (see launcher_loss.rs).
        if self.launcher_lost(launcher.as_ref()) {
            return;
        }
        if launcher.as_ref().is_some_and(|l| l.phase == "Succeeded") {
            let message = format!(
                "{} {} succeeded",
                self.job.job.launcher_called(),
                self.job.job.launcher_name()
            );
            return self.succeed(&message);
        }
        // A worker that exits after a `Suspend` or `Checkpoint` notice did what the notice
        // asked: that is the suspend's end, or the group's change, not the training's.
        let suspending = matches!(self.state, RunState::Suspending(_));
        let regrouping = self
            .planner
            .old
            .notice
            .as_ref()
            .is_some_and(|notice| notice.kind == NoticeKind::Checkpoint);
        if !suspending && !regrouping && self.every_worker_succeeded() {
            return self.succeed("its Workers succeeded");
        }
        // Before the launcher's failure: a lost rank makes every other rank fail too, a
        // torchrun group whose rendezvous closed never forms again, and a new run leaves the
        // old launcher behind.
        if !self.ranks_kept() || !self.group_kept() {
            return;
        }
        let launcher = launcher.filter(|_| !self.restarted);
        if let Some(launcher) = launcher.filter(|l| l.phase == "Failed") {
            if let Some(cause) = self.launcher_left_below_min(&launcher) {
                self.suspend(suspension::BELOW_MIN_WORKERS, Some(&cause));
                return;
            }
            if let Some(cause) = self.collateral_of(&launcher) {
                self.suspend(collateral::WORKER_DISRUPTED, Some(&cause));
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
        if let Gang::Missing(scheduler) = self.observed.gang {
            return self.gang_scheduler_missing(scheduler);
        }
        if !self.still_worth_waiting() {
            return;
        }
        let hosts = self.workers();
        self.show_rendezvous();
        let hosts = self.with_launcher_as_worker(hosts);
        self.discovery_and_launcher(&hosts);
        self.show_notices();
        self.phase(&hosts);
        if let Some(rejected) = self.observed.rejected_pod {
            self.pod_rejected(rejected);
        }
    }

    /// Shows the rendezvous the run's store reports in the status (see
    /// [`crate::kind::pytorch_job::store_report`]), and reads it again soon while the group
    /// forms; without a report, or once this reconcile started a new run, the status keeps
    /// what it showed.
    fn show_rendezvous(&mut self) {
        // The report was read from the store of the run the reconcile began in.
        if self.run != current_run(&self.planner.old) {
            return;
        }
        let Some(state) = self
            .observed
            .store_report
            .and_then(|report| report.rendezvous.as_ref())
        else {
            return;
        };
        self.planner.status.group = Some(state.status());
        if state.forming() {
            let again =
                crate::time::after(self.planner.now, pytorch_job::store_report::FORMING_POLL);
            self.planner.requeue_at(again);
        }
    }

    /// Ends the run, deleting every pod of it, and starts a new one with new workers and,
    /// once the old launcher is gone, a new launcher; `message` says why. A
    /// [`Restart::Counted`] restart adds to `restartCount`, which `backoffLimit` bounds.
    fn start_new_run(&mut self, message: &str, restart: Restart) {
        let kind = self.job.kind();
        self.delete_every_pod();
        // A new run, which resumes nothing: the notice of the last one goes.
        self.run += 1;
        self.notice = None;
        self.enter(RunState::WaitingForMinimum);
        let planner = &mut *self.planner;
        if restart == Restart::Counted {
            planner.status.restart_count = planner.old.restart_count + 1;
        }
        planner.status.run = Some(self.run);
        planner.status.notice = None;
        planner.status.target_workers.clear();
        planner.status.draining_workers.clear();
        planner.status.held_workers.clear();
        planner.status.group = None;
        planner.status.workers = None;
        let reason = kind.reason("Restarting");
        planner.condition(c::RESTARTING, true, &reason, message);
        planner.condition(c::LAUNCHER_CREATED, false, &reason, message);
        planner.condition(c::RUNNING, false, &reason, message);
        planner.condition(
            c::WORKERS_READY,
            false,
            WAITING_FOR_WORKERS,
            "a new run starts with new workers",
        );
        planner.event(true, &reason, "Restart", message.to_string());
        let ended = format!("{} {} restarted: {message}", kind.name(), self.job.name());
        let abandoned = scaling::abandon(
            self.job.name(),
            self.job.job.uid(),
            self.observed.scalers,
            &ended,
            planner.now,
        );
        planner.scaling(abandoned);
        self.restarted = true;
    }

    /// Applies `activeDeadlineSeconds`, which does not run while the job is suspended: the
    /// job fails with reason `DeadlineExceeded` once that long has passed since `startTime`,
    /// and its unfinished pods are deleted. Returns whether the job goes on.
    fn within_deadline(&mut self) -> bool {
        let Some(deadline) = self
            .job
            .spec
            .active_deadline
            .filter(|_| !self.state.is_suspended())
        else {
            return true;
        };
        let start = self
            .planner
            .status
            .start_time
            .as_ref()
            .map_or(self.planner.now, |time| time.0);
        let due = crate::time::after(start, deadline);
        if self.planner.now >= due {
            let seconds = deadline.as_secs();
            self.planner.fail(
                self.observed,
                self.job,
                "DeadlineExceeded",
                &format!("the job ran longer than activeDeadlineSeconds ({seconds}s)"),
                true,
            );
            return false;
        }
        self.planner.requeue_at(due);
        true
    }

    /// The API server refused to create a pod of the job (see [`RejectedPod`]). Like a
    /// failed write, the refusal leaves the job as it was, so that the next reconcile decides
    /// again from the same state: this plan creates no pod and no launcher Job, deletes
    /// nothing, leaves the ScaleIn and ScaleOut requests alone and keeps the job's status but
    /// for its conditions (`Ready=False`, `Stalled=True`, reason `PodRejected`) and one
    /// Warning event per message. It still writes host discovery and notices for the pods
    /// that exist, so that a lost worker leaves the hostfile at once. The job tries again
    /// every [`POD_REJECTED_RECHECK`].
    fn pod_rejected(self, rejected: &RejectedPod) {
        let message = format!(
            "the API server rejected pod {}: {}; no pod of {} {} is created until it accepts them",
            rejected.name,
            rejected.message,
            self.job.kind().name(),
            self.job.name(),
        );
        let planner = self.planner;
        let plan = &mut planner.plan;
        plan.apply
            .retain(|child| !matches!(child, Child::Pod(_) | Child::LauncherJob(_)));
        plan.delete.clear();
        plan.scalers.clear();
        plan.events.clear();
        planner.status = planner.old.clone();
        let note = message.clone();
        planner.stall(POD_REJECTED, &message, SameStall::Message, "Create", note);
        let recheck = crate::time::after(planner.now, POD_REJECTED_RECHECK);
        planner.requeue_at(recheck);
    }

    /// The operator is set to use a gang scheduler whose PodGroup API the cluster does not
    /// serve: no pod is created, since none would be scheduled; the job says so
    /// (`Ready=False`, `Stalled=True`, reason [`GANG_SCHEDULER_MISSING`], one Warning event)
    /// and looks again every [`GANG_SCHEDULER_RECHECK`].
    fn gang_scheduler_missing(self, scheduler: &GangScheduler) {
        let message = format!(
            "eto is set to gang-schedule with {}, but the cluster does not serve its PodGroup API ({}/{}, CustomResourceDefinition {}); no pod is created until it does (install the scheduler, or run eto without a gang scheduler)",
            scheduler.display_name(),
            scheduler.group(),
            scheduler.version(),
            scheduler.crd_name(),
        );
        let planner = self.planner;
        let note = message.clone();
        planner.stall(
            GANG_SCHEDULER_MISSING,
            &message,
            SameStall::Reason,
            "Schedule",
            note,
        );
        let recheck = crate::time::after(planner.now, GANG_SCHEDULER_RECHECK);
        planner.requeue_at(recheck);
    }

    /// Some of the job's children's names are held by objects it does not control: those
    /// objects are not written, no pod is created, and the job says which names are taken
    /// (`Ready=False`, `Stalled=True`, reason `NameTaken`, one Warning event) until they are
    /// free; it looks again every [`NAME_TAKEN_RECHECK`].
    fn names_taken(self) {
        let observed = self.observed;
        let taken = observed.taken;
        let plan = &mut self.planner.plan;
        plan.apply
            .retain(|child| !observed.is_taken(child.kind(), child.name()));
        if plan.create_ssh_secret.as_ref().is_some_and(|secret| {
            observed.is_taken(
                "Secret",
                secret.metadata.name.as_deref().unwrap_or_default(),
            )
        }) {
            plan.create_ssh_secret = None;
        }
        let held: Vec<String> = taken
            .iter()
            .map(|held| {
                format!(
                    "{} {} (controlled by {})",
                    held.kind, held.name, held.holder
                )
            })
            .collect();
        let message = format!(
            "{} {} needs the name of {}, which eto did not create; eto neither adopts nor overwrites it, and creates no pod until the name is free: delete or rename that object",
            self.job.kind().name(),
            self.job.name(),
            held.join(", "),
        );
        let planner = self.planner;
        let note = message.clone();
        planner.stall(NAME_TAKEN, &message, SameStall::Message, "Create", note);
        let recheck = crate::time::after(planner.now, NAME_TAKEN_RECHECK);
        planner.requeue_at(recheck);
    }

    /// Changes the metadata of the workers of the run whose notice is not the one they should
    /// show (see [`crate::notice`]); the launcher's is kept current with its hostfile.
    fn show_notices(&mut self) {
        let name = self.name().to_string();
        let mut updates = Vec::new();
        let opening = self.gates_to_open();
        for pod in &self.observed.pods {
            let Some(index) = pod
                .metadata
                .name
                .as_deref()
                .and_then(|n| names::worker_index(&name, n))
            else {
                continue;
            };
            // A pod being deleted still hears the job's notices while it runs (eto's PID 1
            // keeps its training running through its grace period).
            if self.is_stale(pod) || !pods::runs_at(pod, self.planner.now) {
                continue;
            }
            let wanted = notice::for_pod(
                pod,
                self.notice.as_ref(),
                &self.planner.warned,
                self.planner.now,
            );
            let warned = wanted
                .as_ref()
                .filter(|notice| notice.reason == node_warnings::NODE_WARNING);
            let shown_warned =
                notice::shown(pod).is_some_and(|shown| shown.reason == node_warnings::NODE_WARNING);
            // The warning's first showing is reported once, with which node and why.
            if let Some(notice) = warned.filter(|_| !shown_warned) {
                self.planner.event(
                    true,
                    node_warnings::NODE_WARNING,
                    "Reclaim",
                    notice.message.clone(),
                );
                self.planner.plan.tallies.warned += 1;
            }
            let mut desired = build::worker_metadata(self.job(), index);
            let mut annotations = desired.annotations.take().unwrap_or_default();
            annotations.remove(NOTICE_ANNOTATION);
            annotations.extend(notice::annotations(wanted.as_ref()));
            if pod
                .metadata
                .name
                .as_ref()
                .is_some_and(|n| opening.contains(n))
            {
                annotations.insert(joining::START_ANNOTATION.into(), joining::GO.into());
            }
            desired.annotations = Some(annotations).filter(|a| !a.is_empty());
            if let Some(change) = metadata_change(&desired, pod) {
                updates.push(change);
            }
        }
        self.planner.plan.apply.extend(updates);
    }

    /// The workers of a group that re-forms whose gate opens now (see [`crate::joining`]);
    /// looks again when the next waiting worker's batch wait ends.
    fn gates_to_open(&mut self) -> Vec<String> {
        if !self.job.job.launcher().group_reforms() {
            return Vec::new();
        }
        let name = self.name().to_string();
        let waiting: Vec<&Pod> = self
            .observed
            .pods
            .iter()
            .copied()
            .filter(|pod| {
                pod.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| names::worker_index(&name, n).is_some())
            })
            .filter(|pod| !self.is_stale(pod) && !joining::is_open(pod))
            .filter(|pod| !pods::is_terminating(pod) && !pods::is_finished(pod))
            .collect();
        let (opened, next) = joining::opened(&waiting, self.planner.now);
        if let Some(next) = next {
            self.planner.requeue_at(next);
        }
        opened
            .into_iter()
            .filter_map(|pod| pod.metadata.name.clone())
            .collect()
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
        let due = crate::time::after(since, max_wait);
        let Counts { ready, pending } = self.counts();
        let min = self.job.spec.workers.min;
        if ready >= min || self.planner.now < due {
            self.planner.requeue_at(due);
            return true;
        }
        let message = format!(
            "waited {}s (elasticPolicy.maxWaitSeconds) for {min} ready workers ({}) before starting launcher {}: {ready} ready, {pending} pending",
            max_wait.as_secs(),
            self.job.job.min_field(),
            self.job.job.launcher_name(),
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

    /// The job succeeded; `message` says how.
    fn succeed(self, message: &str) {
        let planner = self.planner;
        let kind = planner.kind;
        let reason = kind.reason("Succeeded");
        planner.status.phase = Some(JobPhase::Succeeded);
        planner.status.completion_time = Some(Time(planner.now));
        planner.condition(c::SUCCEEDED, true, &reason, message);
        planner.condition(c::RUNNING, false, &reason, message);
        planner.event(
            false,
            &reason,
            "Complete",
            format!("{} {} succeeded: {message}", kind.name(), self.job.name()),
        );
        planner.finished(self.observed, self.job);
    }

    /// Restarts the job after its launcher failed, if the restart policy and the backoff limit
    /// allow; fails it otherwise. Returns whether the job goes on.
    /// The platform's losses of the launcher never come here (see `launcher_loss.rs`): this
    /// is the training code's failure.
    fn restart_after_failure(&mut self, launcher: &Launcher<'_>) -> bool {
        let how = match launcher.pod.and_then(|pod| Loss::of(Some(pod))) {
            Some(loss) => loss.describe(),
            None => match launcher.job_failure {
                Some(why) => format!("failed ({why})"),
                None => "failed".to_string(),
            },
        };
        let kind = self.job.kind();
        let spec = self.job.spec;
        let restarts = self.planner.old.restart_count;
        if spec.job_restart_policy == JobRestartPolicy::OnFailure
            && u32::try_from(restarts).is_ok_and(|r| r < spec.backoff_limit)
        {
            let message = format!(
                "the {} {how}; restarting the job (restart {} of {})",
                self.job.job.launcher_called(),
                restarts + 1,
                spec.backoff_limit
            );
            self.start_new_run(&message, Restart::Counted);
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
        let reason = kind.reason("Failed");
        self.planner.fail(
            self.observed,
            self.job,
            &reason,
            &format!("the {} {how}{limit}", self.job.job.launcher_called()),
            false,
        );
        false
    }

    fn apply_supporting_objects(&mut self) {
        let job = self.job;
        let observed = self.observed;
        let plan = &mut self.planner.plan;
        for child in (job.job.kind().vocabulary().supporting_objects)(job) {
            if observed.needs_apply(&child) {
                plan.apply.push(child);
            }
        }
        if observed.ssh_secret == SecretPresence::Missing
            && job.spec.ssh_secret == SshSecretSource::Generated
        {
            plan.create_ssh_secret = Some(build::ssh_secret(job));
        }
    }

    /// The ready workers `hosts`, after the launcher when it trains too.
    fn with_launcher_as_worker(&self, hosts: Vec<Host>) -> Vec<Host> {
        let launcher = (self.job.kind().vocabulary().launcher_host)(self.job());
        launcher.into_iter().chain(hosts).collect()
    }

    /// Every worker of the target as a host, ready or not, after the launcher when it trains
    /// too.
    fn target_hosts(&self) -> Vec<Host> {
        let name = self.name();
        let workers = self
            .planner
            .status
            .target_workers
            .iter()
            .filter_map(|worker| names::worker_index(name, worker))
            .map(|index| Host {
                name: self.job.worker_host(index),
                slots: self.job.spec.slots_per_worker,
            })
            .collect();
        self.with_launcher_as_worker(workers)
    }

    /// Whether a pod named `name` exists, of any run.
    fn pod_exists(&self, name: &str) -> bool {
        self.observed
            .pods
            .iter()
            .any(|p| p.metadata.name.as_deref() == Some(name))
    }

    fn discovery_and_launcher(&mut self, hosts: &[Host]) {
        let min = self.job.spec.workers.min as usize;
        let name = self.job.job.launcher_name();
        if self.launcher().is_some()
            && !c::is_true(&self.planner.status.conditions, c::LAUNCHER_CREATED)
        {
            // Created by an operator that stopped before recording it.
            let message = format!("{} {name} exists", self.job.job.launcher_called());
            self.planner
                .condition(c::LAUNCHER_CREATED, true, "LauncherCreated", &message);
        }
        // What the launcher would be if created now, and whether an earlier one (of any run)
        // still holds its name.
        let avoided = node_warnings::avoided(&self.planner.warned);
        let target = self.target_hosts();
        let inputs = LauncherInputs {
            ready: hosts,
            target: &target,
            avoided: &avoided,
        };
        let built = (self.job.kind().vocabulary().launcher_objects)(self.job(), inputs);
        if let Some(config_map) = built.config_map {
            self.apply_config_map(config_map);
        }
        let Some(desired) = built.launcher else {
            return;
        };
        if let Some(launcher) = self.launcher() {
            if let Some(pod) = launcher.pod.filter(|p| !pods::is_finished(p)) {
                self.update_running_launcher(pod, &desired, built.running, hosts);
            }
            return;
        }
        let old_launcher_present = match desired {
            Child::LauncherJob(_) => self.observed.launcher_job.is_some(),
            _ => self.pod_exists(&name),
        };
        let may_create = !c::is_true(&self.planner.status.conditions, c::LAUNCHER_CREATED);
        let workers_allow = match self.job.spec.launcher_start {
            LauncherStart::WhenMinReady => hosts.len() >= min,
            LauncherStart::AtStartup => true,
        };
        if may_create && workers_allow && !old_launcher_present {
            self.planner.plan.apply.push(desired);
            self.resumed_after_loss(hosts.len());
            let message = format!(
                "{} {name} created with {}{}",
                self.job.job.launcher_called(),
                suspension::workers(
                    u32::try_from(hosts.len()).unwrap_or(u32::MAX),
                    "worker",
                    "workers"
                ),
                self.job.kind().in_discovery()
            );
            self.planner
                .condition(c::LAUNCHER_CREATED, true, "LauncherCreated", &message);
            self.planner
                .event(false, "LauncherCreated", "Create", message);
        }
    }

    fn apply_config_map(&mut self, config_map: k8s_openapi::api::core::v1::ConfigMap) {
        if needs_apply(&config_map, self.observed.config_map) {
            self.planner
                .plan
                .apply
                .push(Child::ConfigMap(Box::new(config_map)));
        }
    }

    /// Changes the launcher pod `pod`, which runs, as its kind says (`running`): toward the
    /// launcher as it would be created now (`desired`), or only the annotations of the ready
    /// `hosts` and the job's notice.
    fn update_running_launcher(
        &mut self,
        pod: &Pod,
        desired: &Child,
        running: RunningLauncher,
        hosts: &[Host],
    ) {
        match (running, desired) {
            (RunningLauncher::Relabelled, Child::Pod(desired)) => {
                if let Some(change) = metadata_change(&desired.metadata, pod) {
                    self.planner.plan.apply.push(change);
                }
            }
            (RunningLauncher::Annotated, _) => {
                self.annotate_launcher_pod(pod, &discovery::hostfile(hosts));
            }
            _ => {}
        }
    }

    /// Shows the ready hosts and the job's notice on a launcher pod the job does not control
    /// (an MPIJob's launcher Job's), applying only these annotations to it.
    fn annotate_launcher_pod(&mut self, pod: &Pod, ready_hosts: &str) {
        let mut annotations =
            BTreeMap::from([(HOSTFILE_ANNOTATION.to_string(), ready_hosts.to_string())]);
        annotations.extend(notice::annotations(
            notice::for_pod(
                pod,
                self.notice.as_ref(),
                &self.planner.warned,
                self.planner.now,
            )
            .as_ref(),
        ));
        let desired = ObjectMeta {
            annotations: Some(annotations),
            ..ObjectMeta::default()
        };
        if let Some(change) = metadata_change(&desired, pod) {
            self.planner.plan.apply.push(change);
        }
    }

    fn phase(&mut self, hosts: &[Host]) {
        let name = self.name().to_string();
        let min = self.job.spec.workers.min as usize;
        // What the run trains with: the hosts of discovery, which include an MPIJob's launcher
        // when it trains too ([`Run::counts`] counts the target's workers only).
        let ready = hosts.len();
        let target = self.planner.status.target_workers.len();
        let kind = self.job.kind();
        let restarting = self.state.is_restarting();
        // A job whose workers decide its outcome trains while its workers run (out of host
        // discovery too, when told to checkpoint).
        let launcher_running = if self.workers_decide() {
            ready > 0 || self.training()
        } else {
            self.launcher().is_some_and(|l| l.is_running())
        };
        let workers_ready = ready >= min;
        let workers_message = format!(
            "{ready} of {target} workers ready ({} {min})",
            self.job.job.min_field()
        );
        // Below the minimum after having reached it in this run, as opposed to not there yet:
        // only the former may suspend a running job.
        // A run told to checkpoint had it too.
        let dropped = self.state.had_minimum()
            || self.launcher_waited()
            || matches!(self.state, RunState::Suspending(_));
        // The training runs: its launcher runs and the run has had its minimum.
        let training = launcher_running && (workers_ready || dropped);
        let reason = if workers_ready {
            "WorkersReady"
        } else if dropped {
            suspension::BELOW_MIN_WORKERS
        } else {
            WAITING_FOR_WORKERS
        };
        self.planner
            .condition(c::WORKERS_READY, workers_ready, reason, &workers_message);
        let suspended = self.state.is_suspended();
        let suspending = matches!(self.state, RunState::Suspending(_));
        let elastic = self.job.spec.elastic;
        let watch_minimum = elastic.suspend_below_min_workers && !suspended && !suspending;
        if !workers_ready && training && watch_minimum {
            // Looked at again when too few workers have been ready for too long.
            let since = match *self.state.current_run() {
                RunState::BelowMinimum { since } => since,
                _ => self.planner.now,
            };
            let due = crate::time::after(since, elastic.below_min);
            self.planner.requeue_at(due);
        }
        let phase = if suspended {
            JobPhase::Suspended
        } else if restarting {
            JobPhase::Restarting
        } else if training && self.scaling {
            JobPhase::Scaling
        } else if training {
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
                let message = format!("training runs with {ready} workers{}", kind.in_discovery());
                let reason = kind.reason("Running");
                if !matches!(
                    self.planner.old.phase,
                    Some(JobPhase::Running | JobPhase::Scaling)
                ) {
                    self.planner.event(
                        false,
                        &reason,
                        "Run",
                        format!("{} {name} is running: {message}", kind.name()),
                    );
                }
                self.planner.condition(c::RUNNING, true, &reason, &message);
                self.planner.condition(c::READY, true, &reason, &message);
            }
            JobPhase::Restarting => {
                let message = "waiting for the pods of the failed run to go".to_string();
                self.planner
                    .condition(c::READY, false, &kind.reason("Restarting"), &message);
            }
            JobPhase::Suspended => {
                let pending = target.saturating_sub(ready);
                let message = format!(
                    "suspended: it resumes from its checkpoint once {} ready ({ready} ready, {pending} pending)",
                    suspension::workers(self.job.spec.workers.min, "worker is", "workers are")
                );
                let reason = match self.state.current_run() {
                    RunState::SuspendedAfterLoss { reason } => reason.clone(),
                    _ => suspension::BELOW_MIN_WORKERS.to_string(),
                };
                self.planner.condition(c::READY, false, &reason, &message);
            }
            _ => {
                let (reason, message) = if !workers_ready && !launcher_running {
                    let when = match self.job.spec.launcher_start {
                        LauncherStart::WhenMinReady => "the launcher starts",
                        LauncherStart::AtStartup => "training starts",
                    };
                    (
                        WAITING_FOR_WORKERS,
                        format!("{workers_message}; {when} once {min} are ready"),
                    )
                } else {
                    (
                        "LauncherPending",
                        format!(
                            "{} {} is starting",
                            self.job.job.launcher_called(),
                            self.job.job.launcher_name()
                        ),
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
        if let RunState::Suspending(notice) = &self.state {
            self.planner
                .condition(c::READY, false, "Suspending", &notice.message);
        }
        self.planner
            .condition(c::STALLED, false, "Progressing", "the job makes progress");
        self.planner.status.phase = Some(phase);
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

/// Reason of `WorkersReady=False` while a run waits for its first `minReplicas` ready workers
/// (after it had them, the reason is `BelowMinWorkers`).
const WAITING_FOR_WORKERS: &str = "WaitingForWorkers";

/// The change that makes `observed` show the labels and annotations of `desired` (eto's pod):
/// a value eto sets that the pod lacks or has otherwise, or a notice the pod shows that eto no
/// longer wants. `None` when it shows them already.
fn metadata_change(desired: &ObjectMeta, observed: &Pod) -> Option<Child> {
    PodMetadata::change(desired, &observed.metadata, &[NOTICE_ANNOTATION]).map(Child::PodMetadata)
}
