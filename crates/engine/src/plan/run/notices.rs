//! What the run shows its pods and the status on the way: the notices, the gates of joining
//! workers, and the training group its coordinator reports.

use eto_api::well_known::NOTICE_ANNOTATION;
use k8s_openapi::api::core::v1::Pod;

use crate::builders;
use crate::group_report::FormedRound;
use crate::joining;
use crate::status::GroupStatus;
use crate::{group_orders, names, node_warnings, notice, pods};

use super::Run;
use super::launcher::metadata_change;

impl Run<'_, '_> {
    /// Shows the rendezvous the run's store reports in the status (see
    /// [`crate::group_report`]), and reads it again soon while the group forms, or while a
    /// store that runs tells of no rendezvous; without a report, or once this reconcile
    /// started a new run, the status keeps what it showed.
    pub(super) fn show_group(&mut self) {
        // The report was read from the store of the run the reconcile began in.
        if self.number != self.planner.status_before.current_run() {
            return;
        }
        self.show_groups();
        let Some(state) = self
            .observed
            .group_report
            .and_then(|report| report.group.as_ref())
        else {
            // The store runs and tells of no rendezvous yet (its server starts, or no agent
            // wrote one): its first group gathers, and the orders that end the round's last
            // call wait for a report.
            let store_runs = self.context.job_ref.coordinator().group_reforms
                && self
                    .observed
                    .job
                    .report_source(&self.observed.pods)
                    .is_some();
            if store_runs {
                self.read_store_again_soon();
            }
            return;
        };
        let group = state.status();
        let formed = |group: Option<&GroupStatus>| {
            group
                .and_then(|g| g.last_reformation.as_ref())
                .map(|r| (r.round, r.formed.clone()))
        };
        let newly_formed = formed(Some(&group)).filter(|latest| {
            Some(latest) != formed(self.planner.status_before.group.as_ref()).as_ref()
        });
        if let Some(round) = newly_formed.and_then(|_| state.last_reformed_round()) {
            self.planner
                .event(false, GROUP_REFORMED, "Rendezvous", reformed_message(round));
        }
        self.planner.status.group = Some(group);
        if state.forming() {
            self.read_store_again_soon();
        }
    }

    /// Reads the store's report again within [`crate::group_report::FORMING_POLL`]: where
    /// its agents change what no pod shows.
    pub(super) fn read_store_again_soon(&mut self) {
        let again = crate::time::after(self.planner.now, crate::group_report::FORMING_POLL);
        self.planner.requeue_at(again);
    }

    /// Shows what the coordinator reports of a run whose groups stand alone (see
    /// [`crate::job::GroupedWorkers::show_groups`]), and reads it again when the kind says.
    fn show_groups(&mut self) {
        if !self.context.job_ref.coordinator().groups_stand_alone {
            return;
        }
        let pods_per_group = self.context.job_ref.pods_per_group().max(1) as usize;
        // Spare groups wait outside the group count.
        let spares = self
            .planner
            .status
            .workers
            .as_ref()
            .and_then(|workers| workers.spares)
            .map_or(0, |spares| usize::try_from(spares).unwrap_or(0));
        let groups = self
            .planner
            .status
            .target_workers
            .len()
            .saturating_sub(spares)
            / pods_per_group;
        let Some(shown) = self.context.job_ref.show_groups(
            self.observed.group_report,
            groups,
            &mut self.planner.status,
        ) else {
            return;
        };
        let again = crate::time::after(self.planner.now, shown.read_again);
        self.planner.requeue_at(again);
        self.planner.plan.events.extend(shown.events);
    }

    /// Changes the metadata of the workers of the run whose notice is not the one they should
    /// show (see [`crate::notice`]); the launcher's is kept current with its hostfile.
    pub(super) fn show_notices(&mut self) {
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
            let mut desired = builders::worker_metadata(self.job(), index);
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
        self.order_group(&opening);
    }

    /// The orders for the coordinator of a group that re-forms (see [`crate::group_orders`]),
    /// when they change; `opening` are the gates this plan opens.
    fn order_group(&mut self, opening: &[String]) {
        // The report was read from the coordinator of the run the reconcile began in.
        if self.number != self.planner.status_before.current_run() {
            return;
        }
        let Some(report) = self.observed.group_report else {
            return;
        };
        let expected = self
            .target_pods()
            .into_iter()
            .filter(|(worker, pod)| {
                pod.is_some_and(|pod| {
                    !self.is_stale(pod) && group_orders::is_expected(pod, opening.contains(worker))
                })
            })
            .map(|(worker, _)| worker)
            .collect();
        let deleting = self.pods_deleted_now();
        let saving: Vec<&str> = self.saving_workers.iter().map(String::as_str).collect();
        self.planner.plan.group_orders = group_orders::orders(
            report,
            &self.worker_pods(),
            group_orders::Leaving {
                deleting: &deleting,
                saving: &saving,
            },
            expected,
            self.context.spec.workers.min,
            self.context.spec.workers.max.unwrap_or(0),
            self.context.job_ref.heartbeat_timeout(),
        );
    }

    /// The workers of a group that re-forms whose gate opens now (see [`crate::joining`]);
    /// looks again when the next waiting worker's batch wait ends. None while warned Workers
    /// train on for the Workers started to take their places (see
    /// [`crate::warned_handover::hold_reforming`]), or while a Worker drains out of the group
    /// and its pod is not being deleted, or the group saves for a Worker the platform takes:
    /// one that joined then would make the group re-form with the leaving one, and again
    /// without it.
    pub(super) fn gates_to_open(&mut self) -> Vec<String> {
        if !self.context.job_ref.coordinator().group_reforms || self.leaving_first() {
            return Vec::new();
        }
        let waiting: Vec<&Pod> = self
            .worker_pods()
            .into_iter()
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

    /// The pods this plan deletes.
    fn pods_deleted_now(&self) -> Vec<&str> {
        self.planner
            .plan
            .delete
            .iter()
            .filter(|deletion| deletion.kind == crate::child::ChildKind::Pod)
            .map(|deletion| deletion.name.as_str())
            .collect()
    }

    /// Whether Workers are to leave the group before any joins it: warned ones held, one the
    /// platform takes whose save the group waits for (see [`crate::saving_on_termination`]),
    /// or one draining whose pod is neither being deleted nor deleted by this plan.
    fn leaving_first(&self) -> bool {
        if !self.planner.held_warned.workers.is_empty() || !self.saving_workers.is_empty() {
            return true;
        }
        let deleted_now = self.pods_deleted_now();
        let staying: Vec<&str> = self
            .worker_pods()
            .into_iter()
            .filter(|pod| !pods::is_terminating(pod))
            .filter_map(|pod| pod.metadata.name.as_deref())
            .filter(|name| !deleted_now.contains(name))
            .collect();
        self.planner
            .status
            .draining_workers
            .iter()
            .any(|draining| staying.contains(&draining.pod.as_str()))
    }
}

/// The reason of the Event that says the group re-formed.
pub const GROUP_REFORMED: &str = "GroupReformed";

/// What the Event says of the round `formed`: its members, why, and how long the run had no
/// group.
fn reformed_message(formed: &FormedRound) -> String {
    let mut why = Vec::new();
    if !formed.left.is_empty() {
        why.push(format!("{} left", formed.left.join(", ")));
    }
    if !formed.joined.is_empty() {
        why.push(format!("{} joined", formed.joined.join(", ")));
    }
    let why = if why.is_empty() {
        String::new()
    } else {
        format!(" ({})", why.join("; "))
    };
    let paused = formed
        .paused
        .map(|seconds| format!(", {seconds:.1}s after the group before it broke up"))
        .unwrap_or_default();
    format!(
        "the group re-formed{why}: round {} formed with {} agents ({}){paused}",
        formed.round,
        formed.members.len(),
        formed.members.join(", ")
    )
}
