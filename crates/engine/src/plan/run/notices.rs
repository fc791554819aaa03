//! What the run shows its pods and the status on the way: the notices, the gates of joining
//! workers, and the training group its coordinator reports.

use eto_api::well_known::NOTICE_ANNOTATION;
use k8s_openapi::api::core::v1::Pod;

use crate::builders;
use crate::joining;
use crate::{names, node_warnings, notice, pods};

use super::Run;
use super::launcher::metadata_change;

impl Run<'_, '_> {
    /// Shows the rendezvous the run's store reports in the status (see
    /// [`crate::group_report`]), and reads it again soon while the group
    /// forms; without a report, or once this reconcile started a new run, the status keeps
    /// what it showed.
    pub(super) fn show_rendezvous(&mut self) {
        // The report was read from the store of the run the reconcile began in.
        if self.run != self.planner.old.current_run() {
            return;
        }
        let Some(state) = self
            .observed
            .group_report
            .and_then(|report| report.rendezvous.as_ref())
        else {
            return;
        };
        self.planner.status.group = Some(state.status());
        if state.forming() {
            let again = crate::time::after(self.planner.now, crate::group_report::FORMING_POLL);
            self.planner.requeue_at(again);
        }
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
    }

    /// The workers of a group that re-forms whose gate opens now (see [`crate::joining`]);
    /// looks again when the next waiting worker's batch wait ends.
    pub(super) fn gates_to_open(&mut self) -> Vec<String> {
        if !self.context.job_ref.coordinator().group_reforms() {
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
}
