//! The workers of a run: losses, replacements, requests, resizes, drains, node cooldowns. The
//! rules each follows live in their own modules: [`crate::target_workers`] decides the target,
//! [`crate::blacklist`] records losses and keeps indices unused, [`crate::cooldown`] and
//! [`crate::drain`] their parts; this module applies them to the run.

use std::collections::{BTreeMap, BTreeSet};

use eto_api::common::ReplicaRestartPolicy;
use eto_api::well_known::WORKER_ROLE;
use k8s_openapi::api::core::v1::Pod;

use super::{Run, RunState};
use crate::discovery::Host;
use crate::job::WorkerNames;
use crate::loss::Loss;
use crate::scaling;
use crate::target_workers::{self, WorkerInput};
use crate::{blacklist, joining, names, node_warnings, pods, spares, warned_handover};

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

impl<'o> Run<'_, 'o> {
    /// Decides the workers, creates and deletes their pods, records losses; returns the hosts
    /// of host discovery.
    pub(super) fn workers(&mut self) -> Vec<Host> {
        let name = self.name().to_string();
        let per_run = self.context.job_ref.worker_names() == WorkerNames::PerRun;
        if per_run && self.earlier_run_remains() {
            // The earlier run's pods still hold the names this run's workers take.
            return Vec::new();
        }
        let worker_pods: Vec<&'o Pod> = self
            .observed
            .pods
            .iter()
            .copied()
            .filter(|p| {
                pods::label(p, self.context.kind().vocabulary().role_label) == Some(WORKER_ROLE)
            })
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
        let departed: BTreeMap<u32, &Pod> = self
            .departed_workers()
            .into_iter()
            .filter(|(index, _)| !current.contains_key(index))
            .collect();
        let blacklisted = blacklist::indices(&name, &self.planner.status_before.blacklist);
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
        let next_index = if per_run {
            // Indices are ranks: the run's own workers decide the next one.
            blacklist::after(0, current.keys().copied().chain(previous_target.clone()))
        } else {
            blacklist::next_index(used, self.planner.status_before.next_worker_index)
        };
        let spec = self.context.spec;
        let draining: BTreeSet<u32> = self
            .planner
            .status_before
            .draining_workers
            .iter()
            .filter_map(|d| names::worker_index(&name, &d.pod))
            .collect();
        // Workers lost to a node's warning that was withdrawn while they run (see
        // crate::target_workers).
        let returning: BTreeSet<u32> = self
            .planner
            .status_before
            .blacklist
            .iter()
            .filter(|entry| entry.reason == node_warnings::NODE_WARNING)
            .filter_map(|entry| names::worker_index(&name, &entry.pod))
            .filter(|index| {
                current
                    .get(index)
                    .is_some_and(|pod| pods::is_ready(pod) && Loss::of(Some(pod)).is_none())
            })
            .collect();
        // Workers waiting at a shut gate to join a group that re-forms: their training has
        // not started.
        let unstarted: BTreeSet<u32> = current
            .iter()
            .filter(|_| self.context.job_ref.coordinator().group_reforms)
            .filter(|(_, pod)| joining::waits_at_gate(pod))
            .map(|(index, _)| *index)
            .collect();
        // Workers held back while they regroup (see crate::reforming_group) or back off (see
        // worker_backoff.rs).
        let held: BTreeSet<u32> = self
            .planner
            .status_before
            .held_workers
            .iter()
            .filter_map(|w| names::worker_index(&name, w))
            .chain(self.workers_held_back())
            .collect();
        let desired = self.desired_workers();
        let mut step = if self.restarted {
            scaling::Step::default()
        } else {
            let launcher_running = self.launcher().is_some_and(|l| l.is_running());
            let restarting = self.state.is_restarting();
            scaling::step(
                &scaling::JobSide {
                    name: &name,
                    uid: self.context.job_ref.uid(),
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
        let next_index = blacklist::after(next_index, step.add.iter().copied());
        // A run that is suspending ends for certain (a posted notice is a promise): a worker
        // it loses now is not replaced, since the run that resumes creates its own.
        let suspending = matches!(self.state, RunState::Suspending(_));
        let policy = if suspending {
            ReplicaRestartPolicy::Never
        } else {
            spec.worker_restart_policy
        };
        // Spares are Workers too, beside a full group or at every size (see crate::spares),
        // and one more for each warned group that trains on until a spare waits to take its
        // place (see crate::warned_handover); those of a hold that ended go.
        let kept_when = self.context.job_ref.spares_kept();
        let surge = self.handover_spares(suspending);
        let surge_before = self.handover_spares_before(desired.previous, kept_when);
        let spares = spares::kept(&spec.workers, desired.now, kept_when) + surge;
        let with_spares = |group: u32| group + spares::kept(&spec.workers, group, kept_when);
        let groups = self.context.job_ref.worker_groups(&current);
        let mut waiting_spares = self.context.job_ref.waiting_spares(&current);
        waiting_spares.extend(handover_stand_ins(
            &unstarted,
            &previous_target,
            surge_before,
        ));
        // Workers waiting on an old template, and Workers out of their group, are replaced
        // whatever their restart policy.
        let silent = if suspending {
            BTreeMap::new()
        } else {
            self.silent_workers(&current)
        };
        let renew: BTreeSet<u32> = if suspending {
            BTreeSet::new()
        } else {
            self.workers_to_renew(&current)
                .into_iter()
                .chain(silent.keys().copied())
                .collect()
        };
        let decision = target_workers::decide(&WorkerInput {
            policy,
            desired: with_spares(desired.now) + surge,
            previous_desired: desired
                .previous
                .map(|previous| with_spares(previous) + surge_before),
            kept_spares: spares,
            previous_target: &previous_target,
            pods: &current,
            departed: &departed,
            blacklisted: &blacklisted,
            returning: &returning,
            unstarted: &unstarted,
            draining: &draining,
            held: &held,
            add: &step.add,
            remove: &step.remove,
            next_index,
            groups: &groups,
            group_size: self.context.job_ref.pods_per_group(),
            spares: &waiting_spares,
            renew: &renew,
        });
        for lost in &decision.lost {
            if let Some(replacement) = lost.replacement {
                step.replaced(self.observed.scalers, &name, lost.index, replacement);
            }
        }
        let next_unused = blacklist::after(next_index, decision.target.iter().copied());
        // Replica groups whose training failed after another group's loss (see
        // survivor_failure.rs): replaced at once, their nodes not cooled down.
        let survivors_failed = self.survivors_failed(&decision);
        let backed_off = self.back_off_workers(&decision, &current, next_index, &survivors_failed);
        // A request that succeeded leaves the job holding to its new size.
        let holds_to = match &step.finished {
            Some(finished) if finished.succeeded => u32::try_from(decision.target.len())
                .unwrap_or(u32::MAX)
                .saturating_sub(spares),
            _ => desired.now,
        };
        self.scaling = step.under_way.is_some();
        if !self.restarted {
            self.planner.scaling(step);
        }

        self.record_lost_workers(
            &decision,
            &current,
            &departed,
            &backed_off,
            suspending,
            policy,
        );
        self.report_lost_groups(&decision, &current, &survivors_failed);
        self.record_workers_left_with_group(&decision);
        self.record_renewed_workers(&decision, &current, &silent);
        self.record_returned_workers(&decision);
        self.cool_down_failed_nodes(&decision, &survivors_failed, &silent, &current);

        // The spares of a hold come and go without a change of the job's size.
        let resized = decision
            .resized
            .map(|(from, to)| (from.saturating_sub(surge_before), to.saturating_sub(surge)))
            .filter(|(from, to)| from != to);
        if let Some((from, to)) = resized {
            self.planner.event(
                false,
                "WorkersScaled",
                "Scale",
                format!("worker replicas changed from {from} to {to}"),
            );
        }
        if surge > 0 && surge_before == 0 {
            self.say_handing_over();
        }
        let holds = self.remove_workers(&decision, &current);
        self.create_workers(&decision, &current, &backed_off, holds, spares);

        self.show_workers(&decision, &current, next_unused, holds_to, surge)
    }

    /// The run's workers whose pods are gone, by index, each as its watch showed it when it
    /// was deleted (a pod that went and came back under its name is among them too).
    pub(super) fn departed_workers(&self) -> BTreeMap<u32, &'o Pod> {
        let name = self.name();
        self.observed
            .departed
            .iter()
            .copied()
            .filter(|p| {
                pods::label(p, self.context.kind().vocabulary().role_label) == Some(WORKER_ROLE)
                    && !self.is_stale(p)
            })
            .filter_map(|p| Some((names::worker_index(name, p.metadata.name.as_deref()?)?, p)))
            .collect()
    }

    /// The spares started for the warned groups held now (see [`crate::warned_handover`]):
    /// none while the run suspends.
    fn handover_spares(&self, suspending: bool) -> u32 {
        if suspending {
            return 0;
        }
        u32::try_from(self.planner.held_warned.workers.len()).unwrap_or(u32::MAX)
    }

    /// The spares started for held warned groups at the last reconcile: those the status
    /// showed beyond the spares a job that held `previous` groups keeps.
    fn handover_spares_before(&self, previous: Option<u32>, kept_when: spares::KeptWhen) -> u32 {
        let Some(previous) = previous else {
            return 0;
        };
        let shown = self
            .planner
            .status_before
            .workers
            .as_ref()
            .and_then(|workers| workers.spares)
            .and_then(|spares| u32::try_from(spares).ok())
            .unwrap_or(0);
        shown.saturating_sub(spares::kept(
            &self.context.spec.workers,
            previous,
            kept_when,
        ))
    }

    /// Says that warned groups train on while their spares start.
    fn say_handing_over(&mut self) {
        let hold = &self.planner.held_warned;
        let Some(until) = hold.until else {
            return;
        };
        let reforms = self.context.job_ref.coordinator().group_reforms;
        let note = warned_handover::describe(&hold.workers, until, reforms);
        self.planner
            .event(false, warned_handover::HANDING_OVER, "Hold", note);
    }

    /// The number of workers the job holds to; see [`Desired`].
    fn desired_workers(&self) -> Desired {
        let counts = self.context.spec.workers;
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
}

/// Of the Workers that wait at their shut gate to join a group that re-forms (`unstarted`, see
/// [`crate::joining`]), those started for a hold at the last reconcile (`started` of them), the
/// newest of `previous_target` first: they stand in for the warned Workers they were started
/// for (see [`crate::warned_handover::hold_reforming`]). Elsewhere none wait at a gate: eto
/// seats the spares of replica groups itself.
fn handover_stand_ins(
    unstarted: &BTreeSet<u32>,
    previous_target: &[u32],
    started: u32,
) -> Vec<u32> {
    unstarted
        .iter()
        .rev()
        .copied()
        .filter(|index| previous_target.contains(index))
        .take(started as usize)
        .collect()
}
