//! The workers of a run: losses, replacements, requests, resizes, drains, node cooldowns. The
//! rules each follows live in their own modules: [`crate::target_workers`] decides the target,
//! [`crate::blacklist`] records losses and keeps indices unused, [`crate::cooldown`] and
//! [`crate::drain`] their parts; this module applies them to the run.

use std::collections::{BTreeMap, BTreeSet};

use eto_api::common::ReplicaRestartPolicy;
use eto_api::job_status::{BlacklistEntry, WorkerSummary};
use eto_api::well_known::WORKER_ROLE;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::super::{Child, SPARE_TAKES_PLACE, WORKER_LOST, replica_statuses};
use super::{Run, RunState, silent_workers, template_change};
use crate::conditions;
use crate::discovery::Host;
use crate::job::WorkerNames;
use crate::loss::Loss;
use crate::pod_metadata::PodMetadata;
use crate::scaling;
use crate::target_workers::{self, WorkerInput};
use crate::{blacklist, joining, names, node_warnings, pods, spares};

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
        // Spares are Workers too, beside a full group or at every size (see crate::spares).
        let kept_when = self.context.job_ref.spares_kept();
        let spares = spares::kept(&spec.workers, desired.now, kept_when);
        let with_spares = |group: u32| group + spares::kept(&spec.workers, group, kept_when);
        let groups = self.context.job_ref.worker_groups(&current);
        let waiting_spares = self.context.job_ref.waiting_spares(&current);
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
            desired: with_spares(desired.now),
            previous_desired: desired.previous.map(with_spares),
            previous_target: &previous_target,
            pods: &current,
            blacklisted: &blacklisted,
            returning: &returning,
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

        for lost in &decision.lost {
            self.planner.plan.tallies.lost.push(lost.loss.kind());
            if lost.replacement.is_some() {
                self.planner.plan.tallies.replacements += 1;
            }
            let pod_name = names::worker(&name, lost.index);
            let pod = current.get(&lost.index);
            let node = pod.and_then(|p| pods::node(p)).map(String::from);
            let on = node
                .as_deref()
                .map(|n| format!(" on node {n}"))
                .unwrap_or_default();
            let then = match lost.replacement {
                Some(replacement) => match backed_off.retry_at {
                    Some(at) if backed_off.held.contains(&replacement) => format!(
                        "replaced by {} at {at}: the Workers keep failing on their own, and their replacements back off",
                        names::worker(&name, replacement)
                    ),
                    _ => format!("replaced by {}", names::worker(&name, replacement)),
                },
                None if suspending => {
                    "not replaced: the job is suspending, and the run that resumes creates its \
                     own workers"
                        .to_string()
                }
                None => format!("not replaced (worker restartPolicy {policy:?})"),
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
            // A loss to a node's warning says so: the worker may return (see crate::target_workers).
            let reason = pod
                .and_then(|p| pods::disruption_reason(p))
                .filter(|reason| *reason == node_warnings::NODE_WARNING)
                .unwrap_or(lost.loss.reason());
            blacklist::record(
                &mut self.planner.status.blacklist,
                BlacklistEntry {
                    pod: pod_name,
                    node,
                    reason: reason.to_string(),
                    exit_code: lost.loss.exit_code(),
                    time: Time(self.planner.now),
                },
            );
        }
        self.report_lost_groups(&decision, &current, &survivors_failed);
        for left in &decision.left_with_group {
            if left.replacement.is_some() {
                self.planner.plan.tallies.replacements += 1;
            }
            let then = match left.replacement {
                Some(replacement) => format!("replaced by {}", names::worker(&name, replacement)),
                None => "not replaced".to_string(),
            };
            self.planner.event(
                false,
                "WorkerLeftWithGroup",
                "Replace",
                format!(
                    "worker {} leaves with its group, whose worker {} was lost; it is {then}",
                    names::worker(&name, left.index),
                    names::worker(&name, left.lost),
                ),
            );
        }
        for (index, replacement) in &decision.renewed {
            let pod_name = names::worker(&name, *index);
            let by = names::worker(&name, *replacement);
            let Some(left_at) = silent.get(index) else {
                self.planner.event(
                    false,
                    template_change::TEMPLATE_CHANGED,
                    "Replace",
                    format!(
                        "worker {pod_name} waits on a pod template the job no longer has; it is replaced by {by}, of the new template"
                    ),
                );
                continue;
            };
            let node = current
                .get(index)
                .and_then(|p| pods::node(p))
                .map(String::from);
            self.planner.plan.tallies.lost.push(silent_workers::SILENT);
            self.planner.plan.tallies.replacements += 1;
            self.planner.event(
                true,
                WORKER_LOST,
                "Replace",
                format!(
                    "worker {pod_name} runs but its agent left the group at {left_at} and has not come back (no heartbeat: frozen, or cut off); it is deleted and replaced by {by}",
                ),
            );
            blacklist::record(
                &mut self.planner.status.blacklist,
                BlacklistEntry {
                    pod: pod_name,
                    node,
                    reason: silent_workers::SILENT.to_string(),
                    exit_code: None,
                    time: Time(self.planner.now),
                },
            );
        }
        for (index, gave_way) in &decision.returned {
            let pod_name = names::worker(&name, *index);
            self.planner
                .status
                .blacklist
                .retain(|entry| entry.pod != pod_name);
            let instead = gave_way
                .map(|other| format!(" in place of {}", names::worker(&name, other)))
                .unwrap_or_default();
            self.planner.event(
                false,
                "WorkerReturned",
                "Return",
                format!(
                    "worker {pod_name} returns to host discovery{instead}: the warning of its node was withdrawn"
                ),
            );
        }
        self.cool_down_failed_nodes(&decision, &survivors_failed, &silent, &current);

        if let Some((from, to)) = decision.resized {
            self.planner.event(
                false,
                "WorkersScaled",
                "Scale",
                format!("worker replicas changed from {from} to {to}"),
            );
        }
        let holds = self.remove_workers(&decision, &current);
        let to_create: Vec<u32> = decision
            .create
            .iter()
            .copied()
            .filter(|index| !backed_off.held.contains(index))
            .collect();
        let creates = !to_create.is_empty() && !holds;
        // New workers avoid the nodes in cooldown and those that announced they go.
        let mut avoided = self.planner.status.nodes_in_cooldown.clone();
        avoided.extend(node_warnings::avoided(&self.planner.warned));
        let digest = self.worker_template_digest();
        let mut new: BTreeMap<u32, Pod> = to_create
            .iter()
            .filter(|_| creates)
            .filter_map(|index| {
                let mut pod = self.job().worker_pod(*index, &avoided)?;
                template_change::stamp(&mut pod.metadata, digest.clone());
                Some((*index, pod))
            })
            .collect();
        // A replica group no worker holds takes its id: a waiting spare first, else a new
        // worker (see kind::pytorch_job::replica_groups).
        let pods_per_group = self.context.job_ref.pods_per_group().max(1);
        let held_groups = u32::try_from(decision.target.len())
            .unwrap_or(u32::MAX)
            .saturating_sub(spares)
            .div_ceil(pods_per_group);
        let promoted =
            self.context
                .job_ref
                .seat_workers(held_groups, &decision.target, &current, &mut new);
        self.promote_spares(&promoted, &current);
        if creates {
            let created: Vec<String> = to_create.iter().map(|i| names::worker(&name, *i)).collect();
            // A group that re-forms gathers its first workers itself; those joining it once
            // it formed start together, behind their gate (see crate::joining).
            let starts_at_once = self.context.job_ref.coordinator().group_reforms
                && !matches!(
                    self.state,
                    RunState::AtMinimum | RunState::BelowMinimum { .. }
                );
            for mut pod in new.into_values() {
                if starts_at_once {
                    pod.metadata
                        .annotations
                        .get_or_insert_default()
                        .insert(joining::START_ANNOTATION.into(), joining::GO.into());
                }
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
        self.planner.status.next_worker_index =
            Some(i32::try_from(next_unused).unwrap_or(i32::MAX));
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
            spares: (workers.spares > 0)
                .then(|| count(spares::kept(workers, holds_to, kept_when) as usize)),
        });
        self.planner.status.replica_statuses = replica_statuses(
            self.context.kind(),
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
                conditions::WORKERS_CREATED,
                true,
                &self.context.kind().reason("WorkerCreated"),
                &format!("{} workers created", decision.target.len()),
            );
        }
        ready
            .iter()
            .map(|index| Host {
                name: self.context.worker_host(*index),
                slots: spec.slots_per_worker,
            })
            .collect()
    }

    /// Shows every worker the `Checkpoint` notice of the workers draining out of a group that
    /// re-forms, and takes it down once none drains (see [`crate::reforming_group`]); a suspending
    /// job's `Suspend` notice stays. While a worker drains, the store's report is read again
    /// every [`reforming_group::POLL`].
    /// Shows each waiting spare of `promoted` (by index, among `current`) the labels of the
    /// place it takes, and says so once.
    fn promote_spares(
        &mut self,
        promoted: &BTreeMap<u32, BTreeMap<String, String>>,
        current: &BTreeMap<u32, &Pod>,
    ) {
        for (index, labels) in promoted {
            let Some(pod) = current.get(index) else {
                continue;
            };
            let desired = ObjectMeta {
                labels: Some(labels.clone()),
                ..ObjectMeta::default()
            };
            let Some(change) = PodMetadata::change(&desired, &pod.metadata, &[]) else {
                continue;
            };
            let place = labels
                .iter()
                .map(|(key, value)| format!("{key}={value}"))
                .collect::<Vec<_>>()
                .join(", ");
            self.planner.event(
                false,
                SPARE_TAKES_PLACE,
                "Promote",
                format!("spare worker {} takes the place {place}", change.name),
            );
            self.planner.plan.apply.push(Child::PodMetadata(change));
        }
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
