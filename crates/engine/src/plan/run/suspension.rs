//! Suspending a job, and resuming it from its checkpoint.
//!
//! # States
//! The run's states are [`RunState`]'s (see [`super::state`]); this module carries the
//! transitions into and out of the suspending and suspended ones, and writes what reports
//! them: the `Suspended` condition, `status.notice`, the events.
//! - **Suspending** ([`RunState::Suspending`]): every pod of the run shows the `Suspend`
//!   notice in `/etc/edl/notice` (see [`crate::notice`]); the training processes save a
//!   checkpoint and exit. The job waits until the notice's deadline
//!   (`elasticPolicy.checkpointGraceSeconds` after it) or until the launcher has exited,
//!   whichever comes first. A launcher exiting now, with success or failure, is part of the
//!   suspend: it neither ends the job, nor counts against `backoffLimit`, nor triggers
//!   `cleanPodPolicy`.
//! - **Suspended by spec** ([`RunState::SuspendedBySpec`], condition reason `Suspended`): the
//!   job has no pod at all.
//! - **Suspended after a loss** ([`RunState::SuspendedAfterLoss`], reason `BelowMinWorkers`;
//!   `LauncherDisrupted` when the platform took the launcher, see `launcher_loss.rs`;
//!   `WorkerDisrupted` when the launcher failed after the platform took a worker, see
//!   `collateral.rs`): the
//!   job has started a new run: its workers are created at once (pending pods are what a
//!   cluster autoscaler adds nodes for), and once `minReplicas` of them are ready a new
//!   launcher resumes the training.
//!
//! # Transitions
//! - Running to suspending: `spec.suspend` is set while the launcher runs; or ready workers
//!   stayed below `minReplicas` for `elasticPolicy.belowMinSeconds` while the launcher runs
//!   and `elasticPolicy.suspendBelowMinWorkers` holds. The wait is for losses that may come
//!   back (a failed worker being replaced, a node that is NotReady): when a worker is lost for
//!   certain (its pod disrupted, deleted, or gone with its node) and the ready workers, with
//!   those that were ready and may come back, are fewer than `minReplicas`, the notice goes
//!   out at once, so that the training code gets the whole grace period. New workers that were
//!   never ready (replacements) do not count: the notice does not wait for capacity. With no
//!   launcher running (nothing trains, nothing to checkpoint), a group too small to form
//!   where its launcher forms it from host discovery (see `suspending_group.rs`), or no
//!   grace period, the job is suspended at once instead, its pods shown the notice before
//!   they are deleted.
//! - Running to suspended: the launcher fails while the run, having had its minimum, has
//!   fewer than `minReplicas` ready workers and `suspendBelowMinWorkers` holds. Training code
//!   often sees a loss before eto does (Horovod's ring breaks at once) and exits after saving
//!   a checkpoint: that exit completes a suspend below the minimum, as a notice would have,
//!   rather than failing the job. A launcher that fails with at least `minReplicas` ready
//!   workers fails the job (or restarts it) as before; one that succeeds before any notice
//!   finished the training.
//! - Suspending to suspended, before the deadline, once nothing of the run can save any
//!   more: the launcher exited, or every worker's training did; a spare waiting for a replica
//!   group's place trains nothing, and replica groups that all wait in a quorum their
//!   Lighthouse cannot form without the groups that are gone are stuck inside a step, deaf to
//!   the notice, as are the survivors of a group its launcher forms from host discovery once
//!   they are fewer than the minimum (see `suspending_group.rs`). Where the run's store
//!   reports which agents train, eto reads it again every
//!   [`FORMING_POLL`](crate::group_report::FORMING_POLL) while it waits: agents that stop
//!   training to re-form the group, or wait in a round that cannot form, change no pod.
//! - Suspending to suspended: the pods of the run are deleted; after a loss (below the
//!   minimum, the launcher taken), a new run starts, whose pods show a `Resume` notice and
//!   whose launcher gets `ETO_RESUME=true`.
//! - Suspended by spec to running: `spec.suspend` is cleared: a new run, resumed the same way.
//! - Suspended after a loss to running: the new run's launcher is created.
//! - Suspended after a loss, then `spec.suspend` set: the waiting workers are deleted and the
//!   job is suspended by spec.
//!
//! A suspend asked for by the spec gives the pods `checkpointGraceSeconds`, except for an
//! MPIJob without `elasticPolicy`: it suspends as mpi-operator does (Kueue preempts by
//! suspending and admits the preemptor only once the pods are gone), its pods deleted at once
//! after they are shown the notice; the kubelet still gives them their termination grace
//! period.
//!
//! A posted notice is a promise: the suspend completes even if capacity returns meanwhile.
//! `activeDeadlineSeconds` does not run while the job is suspended: `startTime` is set again
//! when it resumes. A resume is no restart: `restartCount` does not move.

use eto_api::job_status::{JobPhase, Notice, NoticeKind, WorkerSummary};
use eto_api::well_known::NOTICE_ANNOTATION;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::{Counts, Fact, Launcher, Run, RunState, WAITING_FOR_WORKERS};
use crate::conditions;
use crate::effective_spec::LauncherStart;
use crate::loss::Loss;
use crate::plan::{Child, ChildKind};
use crate::pod_metadata::PodMetadata;
use crate::{notice, pods, scaling};

/// Reason of the `Suspended` condition and of the notices when too few workers stayed ready.
pub const BELOW_MIN_WORKERS: &str = "BelowMinWorkers";
/// Reason of the `Suspended` condition and of the notices when `spec.suspend` asks for it.
pub const SUSPENDED: &str = "Suspended";

/// Whether a job suspended for `reason` resumes by itself, in a new run, once its minimum of
/// workers is ready: it lost what it trains with (too few workers, its launcher, a run that
/// did not survive a worker's loss), rather than being asked to stop.
pub fn resumes_by_itself(reason: &str) -> bool {
    [
        BELOW_MIN_WORKERS,
        super::launcher_loss::LAUNCHER_DISRUPTED,
        super::collateral_launcher_failure::WORKER_DISRUPTED,
        super::lost_group::GROUP_LOST,
    ]
    .contains(&reason)
}

impl Run<'_, '_> {
    /// Carries the job's suspension one step (see the module documentation). Returns whether
    /// the run goes on in this reconcile: its workers and launcher are planned as usual.
    pub(super) fn suspension(&mut self) -> bool {
        let requested = self.context.spec.suspend;
        let kind = self.context.kind();
        match (self.state.clone(), requested) {
            (RunState::Suspending(notice), _) => self.checkpointing(&notice, requested),
            (RunState::SuspendedBySpec { .. }, true) => {
                self.hold();
                false
            }
            (RunState::SuspendedBySpec { ran }, false) => {
                self.resume_by_spec(ran);
                true
            }
            (RunState::SuspendedAfterLoss { .. }, true) => {
                self.suspend(SUSPENDED, None);
                false
            }
            // After a loss: the new run waits for its workers.
            (RunState::SuspendedAfterLoss { .. }, false) => true,
            (_, true) => self.start_suspending(
                SUSPENDED,
                format!("{} asks for it", kind.vocabulary().suspend_field),
                self.context.spec.elastic.spec_suspend_grace,
            ),
            (_, false) => {
                let grace = self.context.spec.elastic.checkpoint_grace;
                if let Some(why) = self.launcher_threatened() {
                    return self.start_suspending(
                        super::launcher_loss::LAUNCHER_DISRUPTED,
                        why,
                        grace,
                    );
                }
                match self.below_min_for_too_long() {
                    Some(why) => self.start_suspending(BELOW_MIN_WORKERS, why, grace),
                    None => true,
                }
            }
        }
    }

    /// Whether something of the run trains, and can checkpoint, even if it is being taken
    /// away: its launcher, or where the workers decide the run (torchrun's agents), one of
    /// its workers whose training container runs a process. Until they exit, their training
    /// can save a checkpoint; a worker whose container is failing (`CrashLoopBackOff`) or has
    /// not started has no process to hear a notice, and nothing waits for it. Where the
    /// rendezvous's store reports its round, a worker of a group that re-forms trains only
    /// while its agent is a living member of a round that formed: an agent that left to
    /// re-form the group, waits to join one, or met a closed rendezvous runs no training; nor
    /// does a spare that waits for a replica group's place.
    pub(super) fn training(&self) -> bool {
        if self.workers_decide() {
            let target = &self.planner.status.target_workers;
            let in_group = self.training_hosts();
            let waiting_spare = |pod: &Pod| {
                let alone = std::collections::BTreeMap::from([(0, pod)]);
                !self.context.job_ref.waiting_spares(&alone).is_empty()
            };
            self.observed.pods.iter().any(|pod| {
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                target.iter().any(|worker| worker == name)
                    && self.may_run_its_training(pod)
                    && in_group.as_ref().is_none_or(|hosts| hosts.contains(&name))
                    && !waiting_spare(pod)
            })
        } else {
            self.launcher().is_some_and(|l| l.is_running())
        }
    }

    /// Whether `pod`, of this run, runs and its training container may run a process (it
    /// runs, or nothing says it does not): a process that may still hear a notice and save.
    pub(super) fn may_run_its_training(&self, pod: &Pod) -> bool {
        !self.is_stale(pod)
            && pods::phase(pod) == "Running"
            && self.context.kind().training_activity(pod).may_run()
    }

    /// The pods whose agents train in the group of the run's store, as it reports it (see
    /// [`crate::group_report::GroupState::training_hosts`]); `None`
    /// without a report of this run.
    fn training_hosts(&self) -> Option<Vec<&str>> {
        let dead_after = self.context.job_ref.heartbeat_timeout()?;
        if self.number != self.planner.status_before.current_run() {
            return None;
        }
        let group = self.observed.group_report?.group.as_ref()?;
        Some(group.training_hosts(dead_after))
    }

    /// The workers of the run's target lost for certain: their pods are disrupted
    /// (`DisruptionTarget`: reclaimed, preempted, drained, or gone with their nodes), being
    /// deleted, or gone. A worker eto holds back (while a group re-forms, or its replacements
    /// back off) has no pod yet, and is not lost.
    fn lost_for_certain(&self) -> u32 {
        let held = self.held_back();
        let lost = self
            .target_pods()
            .into_iter()
            .filter(|(worker, pod)| match pod {
                Some(p) => pods::is_disrupted(p) || pods::is_terminating(p),
                None => !held.contains(&worker),
            })
            .count();
        u32::try_from(lost).unwrap_or(u32::MAX)
    }

    /// The workers of the run's target that eto holds back, without pods: while a group
    /// re-forms, or their replacements back off.
    pub(super) fn held_back(&self) -> Vec<&String> {
        self.planner
            .status
            .held_workers
            .iter()
            .chain(self.worker_backoff().into_iter().flat_map(|b| &b.waiting))
            .collect()
    }

    /// The workers of the run's target that were ready at the last reconcile and are not now,
    /// without being lost for certain: a pod whose node is NotReady, one that failed and is
    /// about to be replaced. These may come back; new workers that were never ready are not
    /// counted (they are what a cluster autoscaler may or may not add nodes for).
    fn may_come_back(&self) -> u32 {
        let back = self
            .planner
            .status
            .target_workers
            .iter()
            .filter(|worker| self.planner.status_before.current_workers.contains(worker))
            .filter_map(|worker| {
                self.observed
                    .pods
                    .iter()
                    .find(|p| p.metadata.name.as_deref() == Some(worker.as_str()))
            })
            .filter(|p| !pods::is_disrupted(p) && !pods::is_terminating(p))
            .filter(|p| !pods::is_ready(p))
            .count();
        u32::try_from(back).unwrap_or(u32::MAX)
    }

    /// Why the job should suspend because too few workers are ready, if it should: its
    /// launcher runs, fewer than `minReplicas` workers are ready although the run had them,
    /// and either workers lost for certain now leave too few even if those that may come back
    /// did, or the `WorkersReady` condition has said so for `belowMinSeconds`.
    fn below_min_for_too_long(&mut self) -> Option<String> {
        let elastic = self.context.spec.elastic;
        if !elastic.suspend_below_min_workers || !self.training() {
            return None;
        }
        let min = self.context.spec.workers.min;
        let Counts { ready, pending } = self.counts();
        if ready >= min {
            return None;
        }
        let lost = self.lost_for_certain();
        if lost > 0 && ready + self.may_come_back() < min && self.state.had_minimum() {
            return Some(format!(
                "{} lost for certain (disrupted, deleted or gone with {}): only {ready} of the {min} workers it needs ({}) are ready, {} pending",
                workers(lost, "worker is", "workers are"),
                if lost == 1 { "its node" } else { "their nodes" },
                self.context.job_ref.min_field(),
                pending - lost.min(pending),
            ));
        }
        // A launcher started with the workers (an MPIJob's `AtStartup`) runs before the run
        // had its minimum; that is not a drop below it.
        let RunState::BelowMinimum { since } = *self.state.current_run() else {
            return None;
        };
        let due = crate::time::after(since, elastic.below_min);
        if self.planner.now < due {
            self.planner.requeue_at(due);
            return None;
        }
        Some(format!(
            "only {ready} of the {min} workers it needs ({}) were ready for {}s (elasticPolicy.belowMinSeconds), {pending} pending",
            self.context.job_ref.min_field(),
            elastic.below_min.as_secs()
        ))
    }

    /// Posts the `Suspend` notice, which gives the pods `grace` to checkpoint, or suspends at
    /// once when nothing trains or there is no grace period (the pods are shown the notice
    /// before they are deleted). Returns whether the run goes on.
    pub(super) fn start_suspending(
        &mut self,
        reason: &str,
        why: String,
        grace: std::time::Duration,
    ) -> bool {
        let training = self.training();
        let stuck = training && self.group_below_its_minimum();
        if !training || stuck || grace.is_zero() {
            self.show_before_deleting(reason, &why);
            // A loss below the minimum says itself in counts; any other loss says its cause.
            let cause =
                (resumes_by_itself(reason) && reason != BELOW_MIN_WORKERS).then_some(why.as_str());
            self.suspend(reason, cause);
            if stuck {
                self.stop_pods_now();
            }
            return false;
        }
        let now = self.planner.now;
        // A node of the run that announced it goes away ends the grace period no later than
        // it goes (see crate::node_warnings).
        let node_goes = self
            .observed
            .pods
            .iter()
            .filter_map(|pod| pods::node(pod))
            .filter_map(|node| {
                self.planner
                    .warned
                    .iter()
                    .find(|warning| warning.node == node)
            })
            .map(|warning| warning.deadline.0)
            .min();
        // A launcher being deleted (evicted, drained) goes when its deletion timestamp says:
        // the kubelet kills it then, whatever the grace period.
        let launcher_goes = self
            .launcher()
            .and_then(|launcher| launcher.pod)
            .and_then(|pod| pod.metadata.deletion_timestamp.as_ref())
            .map(|time| time.0);
        // Whole seconds, as the status stores times; rounded up, so that the processes get
        // at least the grace period.
        let full = crate::time::after(now, grace);
        let first_goes = node_goes.into_iter().chain(launcher_goes).min();
        let capped = first_goes.filter(|goes| *goes < full);
        let due = capped.map_or(full, |goes| goes.max(now));
        let deadline = due
            .round(
                jiff::TimestampRound::new()
                    .smallest(jiff::Unit::Second)
                    .mode(jiff::RoundMode::Ceil),
            )
            .unwrap_or(due);
        let exits = if self.workers_decide() {
            "every worker's training has exited"
        } else {
            "the launcher exits"
        };
        let message = format!(
            "{} {} is suspending: {why}{CHECKPOINT_ASK} at {deadline} ({}) or when {exits}",
            self.context.kind().vocabulary().name,
            self.name(),
            match capped {
                Some(goes) if Some(goes) == launcher_goes => "when the launcher's pod is killed",
                Some(_) => "when a node of the job goes, as announced",
                None => "elasticPolicy.checkpointGraceSeconds",
            }
        );
        let notice = Notice {
            kind: NoticeKind::Suspend,
            reason: reason.into(),
            since: Time(now),
            deadline: Some(Time(deadline)),
            message: message.clone(),
        };
        self.planner
            .event(false, "CheckpointNotice", "Suspend", message);
        self.set_notice(Some(notice.clone()));
        self.step(Fact::NoticeOut(notice));
        self.look_again_before(deadline);
        true
    }

    /// Plans the next look at a suspending run: at the notice's `deadline`, and every
    /// [`FORMING_POLL`](crate::group_report::FORMING_POLL) where the run's store reports which
    /// agents train, since they may stop training with no pod changing (they leave to re-form
    /// the group, or wait in a round that cannot form), and only the store's report shows it.
    fn look_again_before(&mut self, deadline: jiff::Timestamp) {
        self.planner.requeue_at(deadline);
        if self.training_hosts().is_some() {
            self.read_store_again_soon();
        }
    }

    /// Whether the run can still save what a notice asks: something of it trains (see
    /// [`Self::training`]), and its replica groups do not all wait, as their coordinator
    /// reports (see [`crate::group_report::QuorumReport::waiting_for_groups`]), for a quorum
    /// that cannot form without groups that are gone: such a group is stuck inside a step, and
    /// hears no notice until groups come; nor is a group its launcher forms from host
    /// discovery below its minimum (see [`Self::group_below_its_minimum`]).
    fn can_still_save(&self) -> bool {
        let stuck = self
            .observed
            .group_report
            .is_some_and(|report| report.groups_stuck());
        self.training() && !stuck && !self.group_below_its_minimum()
    }

    /// The `Suspend` notice is out: suspends once its deadline has come or nothing of the run
    /// can save any more (see [`Self::can_still_save`]: the launcher exited, every worker's
    /// training did, or the replica groups left are stuck). Returns whether the run goes on.
    fn checkpointing(&mut self, notice: &Notice, requested: bool) -> bool {
        let deadline = notice.deadline.as_ref().map_or(self.planner.now, |d| d.0);
        let window_over = self.planner.now >= deadline;
        if window_over || !self.can_still_save() {
            // Asked before the suspend: a suspend below the minimum starts a new run, whose
            // target has none of these workers.
            let still_running = self.training();
            if requested {
                self.suspend(SUSPENDED, None);
            } else if notice.reason == BELOW_MIN_WORKERS {
                // The counts now say more than the notice's reason of then.
                self.suspend(BELOW_MIN_WORKERS, None);
            } else {
                let why = why_suspending(notice).map(|why| {
                    let ended = if window_over {
                        "its grace period ended"
                    } else if still_running && self.group_below_its_minimum() {
                        "too few of its workers are left for its group to form and save"
                    } else if still_running {
                        "its replica groups wait for groups that are gone"
                    } else {
                        "the launcher exited"
                    };
                    format!("{why}; it was told to checkpoint, and {ended}")
                });
                self.suspend(&notice.reason, why.as_deref());
            }
            if still_running {
                // The training had its whole window, or its groups are stuck where they
                // cannot save.
                self.stop_pods_now();
            }
            return false;
        }
        self.look_again_before(deadline);
        self.planner
            .condition(conditions::READY, false, "Suspending", &notice.message);
        true
    }

    /// Gives the pods this plan deletes [`WINDOW_OVER_GRACE_SECONDS`]: a training that had its
    /// whole window, or cannot save, stops now, without another grace period for eto's PID 1
    /// to wait out (see [`crate::builders::termination`]).
    fn stop_pods_now(&mut self) {
        for deletion in &mut self.planner.plan.delete {
            if deletion.kind == ChildKind::Pod {
                deletion.grace_seconds = Some(WINDOW_OVER_GRACE_SECONDS);
            }
        }
    }

    /// Whether the failure of `launcher` completes a suspend below the minimum (see the module
    /// documentation), and if so, what the suspend says of it.
    pub(super) fn launcher_left_below_min(&self, launcher: &Launcher<'_>) -> Option<String> {
        let min = self.context.spec.workers.min;
        let Counts { ready, pending } = self.counts();
        // The failed launcher ran: one that waits for the minimum means the run had it.
        let had_minimum = self.state.had_minimum()
            || self.context.spec.launcher_start == LauncherStart::WhenMinReady;
        let below =
            self.context.spec.elastic.suspend_below_min_workers && ready < min && had_minimum;
        if !below {
            return None;
        }
        let how = match (
            launcher.pod.and_then(|pod| Loss::of(Some(pod))),
            launcher.job_failure,
        ) {
            (Some(loss), _) => loss.describe(),
            (None, Some(why)) => format!("failed ({why})"),
            (None, None) => "failed".to_string(),
        };
        Some(format!(
            "the launcher {how} while only {ready} of the {min} workers it needs ({}) were ready, {pending} pending",
            self.context.job_ref.min_field()
        ))
    }

    /// Shows every running pod of the job a `Suspend` notice for `reason` that takes effect
    /// now, so that the pods a suspend deletes at once see it first (the kubelet gives them
    /// their termination grace period), those being disrupted too (see [`crate::notice`]).
    pub(super) fn show_before_deleting(&mut self, reason: &str, why: &str) {
        let now = self.planner.now;
        let notice = Notice {
            kind: NoticeKind::Suspend,
            reason: reason.into(),
            since: Time(now),
            deadline: Some(Time(now)),
            message: format!(
                "{} {} is suspending: {why}. Its pods are deleted now",
                self.context.kind().vocabulary().name,
                self.name()
            ),
        };
        let desired = ObjectMeta {
            annotations: Some(notice::annotations(Some(&notice))),
            ..ObjectMeta::default()
        };
        let changes = self
            .observed
            .pods
            .iter()
            .filter(|p| pods::phase(p) == "Running" && !pods::is_terminating(p))
            .filter_map(|pod| PodMetadata::change(&desired, &pod.metadata, &[NOTICE_ANNOTATION]))
            .map(Child::PodMetadata);
        self.planner.plan.apply.extend(changes);
    }

    /// Suspends the job now: deletes every pod, and after a loss (see [`resumes_by_itself`])
    /// records the workers a running run lost with it and starts the run that will resume
    /// it. `cause`, when given, says what ended the run (a launcher that exited, or that the
    /// platform took).
    pub(super) fn suspend(&mut self, reason: &str, cause: Option<&str>) {
        self.planner.plan.tallies.suspends.push(reason.to_string());
        let Counts { ready, pending } = self.counts();
        let min = self.context.spec.workers.min;
        let name = self.name().to_string();
        let kind = self.context.kind();
        let after_loss = resumes_by_itself(reason);
        let was_running = matches!(
            self.state,
            RunState::WaitingForMinimum | RunState::AtMinimum | RunState::BelowMinimum { .. }
        );
        if after_loss && was_running {
            // Without a notice, no reconcile of a suspending run records them.
            self.record_workers_lost_with_the_run();
        }
        self.delete_every_pod();
        let (message, warning) = if after_loss {
            let state = match cause {
                Some(cause) => format!("suspended: {cause}"),
                None if reason == BELOW_MIN_WORKERS => format!(
                    "suspended with {ready} of the {min} workers it needs ready ({pending} pending)"
                ),
                None if reason == super::launcher_loss::LAUNCHER_DISRUPTED => {
                    "suspended: the platform took its launcher".to_string()
                }
                None => format!("suspended ({reason})"),
            };
            (
                format!(
                    "{state}; its pods are deleted, and it resumes from its checkpoint once {} ready",
                    workers(min, "new worker is", "new workers are")
                ),
                true,
            )
        } else {
            (
                format!(
                    "suspended by {}; its pods are deleted until it is unsuspended",
                    kind.vocabulary().suspend_field
                ),
                false,
            )
        };
        self.planner.event(
            warning,
            &kind.reason("Suspended"),
            "Suspend",
            format!("{} {name} {message}", kind.vocabulary().name),
        );
        let ended = format!("{} {name} was suspended", kind.vocabulary().name);
        let abandoned = scaling::abandon(
            &name,
            self.context.job_ref.uid(),
            self.observed.scalers,
            &ended,
            self.planner.now,
        );
        self.planner.scaling(abandoned);
        let reason = if after_loss {
            reason
        } else {
            kind.vocabulary().suspended_reason
        };
        let planner = &mut *self.planner;
        planner.condition(conditions::SUSPENDED, true, reason, &message);
        // Whether the job had a launcher is kept: a job that never ran starts afresh when it
        // is unsuspended, with nothing to resume.
        for type_ in [conditions::LAUNCHER_CREATED, conditions::RUNNING] {
            if conditions::find(&planner.status.conditions, type_).is_some() {
                planner.condition(type_, false, reason, &message);
            }
        }
        planner.condition(conditions::READY, false, reason, &message);
        planner.status.phase = Some(JobPhase::Suspended);
        planner.status.target_workers.clear();
        planner.status.current_workers.clear();
        planner.status.forget_the_runs_group();
        if let Some(workers) = planner.status.workers.as_mut() {
            *workers = WorkerSummary {
                ready: 0,
                pending: 0,
                spares: workers.spares.map(|_| 0),
                ..workers.clone()
            };
        }
        let ran =
            conditions::find(&planner.status.conditions, conditions::LAUNCHER_CREATED).is_some();
        self.set_notice(None);
        if after_loss {
            self.new_run(reason);
            self.step(Fact::SuspendedAfterLoss {
                reason: reason.to_string(),
            });
        } else {
            self.step(Fact::SuspendedBySpec { ran });
        }
    }

    /// Stays suspended by spec: no pod, requests wait.
    fn hold(&mut self) {
        self.delete_every_pod();
        let ran = matches!(self.state, RunState::SuspendedBySpec { ran: true });
        let kind = self.context.kind();
        let planner = &mut *self.planner;
        planner.status.phase = Some(JobPhase::Suspended);
        let message = format!(
            "suspended by {}; it {} once unsuspended",
            kind.vocabulary().suspend_field,
            if ran {
                "resumes from its checkpoint"
            } else {
                "starts"
            }
        );
        planner.condition(
            conditions::READY,
            false,
            kind.vocabulary().suspended_reason,
            &message,
        );
        let idle =
            scaling::JobSide::idle(self.context.name(), self.context.job_ref.uid(), planner.now);
        planner.scaling(scaling::step(&idle, self.observed.scalers));
    }

    /// Unsuspended by spec: a new run, which resumes the training; or, for a job that never
    /// had a launcher (created suspended, as Kueue creates jobs), the job simply starts.
    fn resume_by_spec(&mut self, ran: bool) {
        self.planner
            .plan
            .tallies
            .resumes
            .push(SUSPENDED.to_string());
        let name = self.name().to_string();
        let kind = self.context.kind();
        let message = if ran {
            self.new_run(SUSPENDED);
            "unsuspended: a new run resumes from the checkpoint"
        } else {
            "unsuspended: the job starts"
        };
        self.step(Fact::RunStarted);
        let planner = &mut *self.planner;
        planner.condition(
            conditions::SUSPENDED,
            false,
            kind.vocabulary().resumed_reason,
            message,
        );
        if ran {
            planner.condition(
                conditions::LAUNCHER_CREATED,
                false,
                kind.vocabulary().resumed_reason,
                message,
            );
        } else {
            // The workers it had were deleted with the suspend: it asks for them afresh.
            planner.status.target_workers.clear();
            planner.status.workers = None;
        }
        planner.status.start_time = Some(Time(planner.now));
        planner.event(
            false,
            &kind.reason("Resumed"),
            "Resume",
            format!("{} {name} {message}", kind.vocabulary().name),
        );
    }

    /// The job was suspended after a loss and this plan creates the launcher of its new run:
    /// it resumes.
    pub(super) fn resumed_after_loss(&mut self, ready: usize) {
        let RunState::SuspendedAfterLoss { reason } = self.state.clone() else {
            return;
        };
        self.step(Fact::RunStarted);
        let name = self.name().to_string();
        let planner = &mut *self.planner;
        let message = format!(
            "resumed: {} ready; launcher {} starts with the resume notice",
            workers(
                u32::try_from(ready).unwrap_or(u32::MAX),
                "worker is",
                "workers are"
            ),
            self.context.job_ref.launcher_name()
        );
        let kind = planner.kind;
        planner.plan.tallies.resumes.push(reason);
        planner.condition(
            conditions::SUSPENDED,
            false,
            kind.vocabulary().resumed_reason,
            &message,
        );
        planner.status.start_time = Some(Time(planner.now));
        planner.event(
            false,
            &kind.reason("Resumed"),
            "Resume",
            format!("{} {name} {message}", kind.vocabulary().name),
        );
    }

    /// Starts a new run that resumes a job suspended for `reason`: its pods show a `Resume`
    /// notice, and its workers are those the spec asks for (the count a request left is
    /// forgotten with the run).
    fn new_run(&mut self, reason: &str) {
        self.number += 1;
        let now = self.planner.now;
        let notice = Notice {
            kind: NoticeKind::Resume,
            reason: reason.into(),
            since: Time(now),
            deadline: None,
            message: format!(
                "this run resumes {} {}, suspended ({reason}): load the latest checkpoint",
                self.context.kind().vocabulary().name,
                self.name()
            ),
        };
        self.set_notice(Some(notice));
        let status = &mut self.planner.status;
        status.run = Some(self.number);
        status.target_workers.clear();
        status.workers = None;
        self.planner.condition(
            conditions::WORKERS_READY,
            false,
            WAITING_FOR_WORKERS,
            "a new run starts with new workers",
        );
    }

    pub(super) fn set_notice(&mut self, notice: Option<Notice>) {
        self.planner.status.notice.clone_from(&notice);
        self.notice = notice;
    }
}

/// The grace period of the pods a suspend deletes once the checkpoint window is over.
pub const WINDOW_OVER_GRACE_SECONDS: i64 = 5;

/// What a `Suspend` notice asks of the training code, after why the job suspends.
const CHECKPOINT_ASK: &str = ". Save a checkpoint and exit: the pods are deleted";

/// Why the job suspends, as the `Suspend` notice eto posted says (see
/// [`Run::start_suspending`]).
fn why_suspending(notice: &Notice) -> Option<&str> {
    let (_, why) = notice.message.split_once(" is suspending: ")?;
    Some(why.split_once(CHECKPOINT_ASK).map_or(why, |(why, _)| why))
}

/// `count` and the noun (with its verb) in the right number: "1 new worker is".
pub(super) fn workers(count: u32, one: &str, many: &str) -> String {
    format!("{count} {}", if count == 1 { one } else { many })
}
