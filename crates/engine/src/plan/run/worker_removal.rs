//! How the Workers a run removes go: with their group within seconds, at once when renewed,
//! drained out of host discovery otherwise (see [`crate::drain`]); a group that re-forms
//! lets a Worker lost to its node's warning drain too, and holds its new Workers until the
//! draining ones are out (see [`crate::reforming_group`]).

use std::collections::{BTreeMap, BTreeSet};

use eto_api::job_status::{DrainingWorker, NoticeKind};
use k8s_openapi::api::core::v1::Pod;

use super::{Run, RunState};
use crate::group_report::{GroupReport, GroupState};
use crate::target_workers::{self, WorkerDecision};
use crate::{drain, joining, names, pods, reforming_group, saving_on_termination};

impl<'o> Run<'_, 'o> {
    /// Deletes or drains the Workers `decision` removes from `current`, and returns whether
    /// the Workers it creates are held until the draining ones are out.
    pub(super) fn remove_workers(
        &mut self,
        decision: &WorkerDecision,
        current: &BTreeMap<u32, &'o Pod>,
    ) -> bool {
        let name = self.name().to_string();
        // A worker that leaves with its group goes within seconds, neither drained nor given
        // its own grace period (see target_workers::LEFT_WITH_GROUP_GRACE_SECONDS).
        let left_with_group: BTreeSet<u32> = decision
            .left_with_group
            .iter()
            .map(|left| left.index)
            .collect();
        for index in &left_with_group {
            if let Some(pod) = current.get(index).filter(|pod| !pods::is_terminating(pod)) {
                self.planner
                    .delete_pod_with_grace(pod, target_workers::LEFT_WITH_GROUP_GRACE_SECONDS);
            }
        }
        // A renewed Worker has nothing to drain: it waits on an old template, or is out of
        // its group already. It goes at once.
        let renewed: BTreeSet<u32> = decision.renewed.iter().map(|(index, _)| *index).collect();
        for index in &renewed {
            if let Some(pod) = current.get(index).filter(|pod| !pods::is_terminating(pod)) {
                self.planner.delete_pod(pod);
            }
        }
        // Replica groups have no host discovery to leave: theirs go at once.
        let drains = self.context.job_ref.coordinator().removed_workers_drain();
        let was_in_discovery = |pod: &Pod| {
            drains
                && self
                    .planner
                    .status_before
                    .current_workers
                    .iter()
                    .any(|w| Some(w.as_str()) == pod.metadata.name.as_deref())
        };
        // A group that re-forms lets a worker lost to its node's warning leave by draining
        // too, once the group saved (see crate::reforming_group), and one the platform takes
        // with a grace period (see crate::saving_on_termination).
        let reforms = self.context.job_ref.coordinator().group_reforms;
        let now = self.planner.now;
        let members = self.round_members();
        let member = |pod: &Pod| {
            pod.metadata
                .name
                .as_deref()
                .is_some_and(|name| members.contains(&name))
        };
        let warned_leaving = decision
            .lost
            .iter()
            .filter(|_| reforms)
            .filter_map(|lost| current.get(&lost.index))
            .filter(|pod| {
                reforming_group::leaves_by_draining(pod)
                    || (saving_on_termination::saves_before_going(pod, now) && member(pod))
            });
        let removed: Vec<drain::Removed<'_>> = decision
            .delete
            .iter()
            .filter(|index| !left_with_group.contains(index) && !renewed.contains(index))
            .filter_map(|index| current.get(index))
            .filter(|pod| !pods::is_terminating(pod))
            .chain(warned_leaving)
            .map(|pod| drain::Removed {
                pod,
                was_in_discovery: was_in_discovery(pod),
            })
            .collect();
        // A worker that returned to the job drains no more.
        let returned: Vec<String> = decision
            .returned
            .iter()
            .map(|(index, _)| names::worker(&name, *index))
            .collect();
        let draining: Vec<DrainingWorker> = self
            .planner
            .status_before
            .draining_workers
            .iter()
            .filter(|worker| !returned.contains(&worker.pod))
            .cloned()
            .collect();
        self.drain(&draining, removed, current);
        if reforms {
            self.checkpoint_before_leaving();
        }
        // New workers of a group that re-forms wait for the workers eto drains out of it, to
        // join the group that re-forms without them; those replacing a worker the platform
        // takes start at once and wait at their shut gate (see crate::reforming_group).
        let pods: Vec<&Pod> = current.values().copied().collect();
        let holds = reforms
            && reforming_group::holds_new_workers(&self.planner.status.draining_workers, &pods);
        self.planner.status.held_workers = if holds {
            decision
                .create
                .iter()
                .map(|index| names::worker(&name, *index))
                .collect()
        } else {
            Vec::new()
        };
        holds
    }

    fn checkpoint_before_leaving(&mut self) {
        if matches!(self.state, RunState::Suspending(_)) {
            return;
        }
        let draining = &self.planner.status.draining_workers;
        match reforming_group::notice(draining, self.context.spec.elastic.drain) {
            Some(notice) => {
                self.set_notice(Some(notice));
                let poll = crate::time::after(self.planner.now, reforming_group::POLL);
                self.planner.requeue_at(poll);
            }
            None if self
                .notice
                .as_ref()
                .is_some_and(|notice| notice.kind == NoticeKind::Checkpoint) =>
            {
                self.set_notice(None);
            }
            None => {}
        }
    }

    /// The workers whose agents the store reports as members of the group's round, in a
    /// group that re-forms: only they have a part in the group's save (see
    /// [`crate::saving_on_termination`]).
    fn round_members(&self) -> Vec<&'o str> {
        let reforms = self.context.job_ref.coordinator().group_reforms;
        self.observed
            .group_report
            .and_then(|report| report.group.as_ref())
            .filter(|_| reforms)
            .map(GroupState::member_hosts)
            .unwrap_or_default()
    }

    /// Drains the workers `removed` now and those `draining` since earlier (see
    /// [`crate::drain`]): records them, deletes the pods whose drain is over.
    fn drain(
        &mut self,
        draining: &[DrainingWorker],
        removed: Vec<drain::Removed<'_>>,
        current: &BTreeMap<u32, &'o Pod>,
    ) {
        let newly: Vec<String> = removed
            .iter()
            .filter(|r| r.was_in_discovery)
            .filter_map(|r| r.pod.metadata.name.clone())
            .collect();
        // Those the platform takes (an eviction), not eto after a node's warning.
        let now = self.planner.now;
        let taken: Vec<String> = removed
            .iter()
            .filter(|r| {
                saving_on_termination::saves_before_going(r.pod, now)
                    && !reforming_group::leaves_by_draining(r.pod)
            })
            .filter_map(|r| r.pod.metadata.name.clone())
            .collect();
        let launcher_running = self.launcher().is_some_and(|l| l.is_running());
        let reforms = self.context.job_ref.coordinator().group_reforms;
        let saved = self
            .observed
            .group_report
            .and_then(GroupReport::latest_saved);
        // A worker beside the formed round (a spare, or waiting) has nothing to save, nor
        // one whose training waits behind its shut gate (see crate::joining).
        let at_gate = current
            .values()
            .filter(|pod| reforms && !joining::is_open(pod))
            .filter_map(|pod| pod.metadata.name.as_deref());
        let beside_group: Vec<&str> = self
            .observed
            .group_report
            .and_then(|report| report.group.as_ref())
            .filter(|group| reforms && group.complete)
            .into_iter()
            .flat_map(|group| group.others.iter().map(|other| other.host.as_str()))
            .chain(at_gate)
            .collect();
        let members = self.round_members();
        let decision = drain::decide(&drain::DrainInput {
            draining,
            removed,
            pods: current.values().copied().collect(),
            launcher_running,
            drain: self.context.spec.elastic.drain,
            saved,
            keep_until_gone: reforms,
            beside_group: &beside_group,
            members: &members,
            now,
        });
        for pod in current.values() {
            if decision
                .delete
                .iter()
                .any(|d| Some(d.as_str()) == pod.metadata.name.as_deref())
            {
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                if reforms && beside_group.contains(&name) {
                    // Its agent, left to run its grace period, would come back to the
                    // rendezvous and into the round the group re-forms.
                    self.planner
                        .delete_pod_with_grace(pod, reforming_group::BESIDE_GROUP_GRACE_SECONDS);
                } else if reforms {
                    // The group saved or had its time: the worker goes at once, its PID 1
                    // holding its training no longer.
                    self.planner
                        .delete_pod_with_grace(pod, reforming_group::LEAVING_GRACE_SECONDS);
                } else {
                    self.planner.delete_pod(pod);
                }
            }
        }
        let started: Vec<&str> = newly
            .iter()
            .map(String::as_str)
            .filter(|pod| !decision.delete.iter().any(|d| d == pod))
            .filter(|pod| !taken.iter().any(|t| t == pod))
            .collect();
        let terminated: Vec<&str> = newly
            .iter()
            .map(String::as_str)
            .filter(|pod| taken.iter().any(|t| t == pod))
            .filter(|pod| decision.saving.iter().any(|s| s == pod))
            .collect();
        if !terminated.is_empty() {
            let workers = terminated.join(", ");
            let seconds = self.context.spec.elastic.drain.as_secs();
            self.planner.event(
                false,
                "WorkersDraining",
                "Drain",
                format!(
                    "workers {workers} are being terminated by the platform (DisruptionTarget, in their grace period): every worker is asked to save a checkpoint, and the group lets them go when the training code says it saved, their containers stop, or in {seconds}s (elasticPolicy.drainSeconds)"
                ),
            );
        }
        if !started.is_empty() {
            let workers = started.join(", ");
            let seconds = self.context.spec.elastic.drain.as_secs();
            let note = if reforms {
                format!(
                    "workers {workers} leave the group once it saved a checkpoint: every worker is asked to, and they go when the training code says it saved or in {seconds}s (elasticPolicy.drainSeconds)"
                )
            } else {
                format!(
                    "workers {workers} left host discovery; their pods are deleted in {seconds}s (elasticPolicy.drainSeconds) or once the launcher or the pod stops"
                )
            };
            self.planner.event(false, "WorkersDraining", "Drain", note);
        }
        if let Some(end) = decision.next_end {
            self.planner.requeue_at(end);
        }
        self.planner.status.draining_workers = decision.draining;
        self.saving_workers = decision.saving;
    }
}
