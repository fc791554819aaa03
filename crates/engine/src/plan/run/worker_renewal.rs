//! Workers replaced while they run: one waiting on a pod template the job no longer has (see
//! `template_change.rs`) is replaced quietly; one out of its group (see `silent_workers.rs`)
//! is said in a Warning event and goes on the blacklist as [`silent_workers::SILENT`].

use std::collections::BTreeMap;

use eto_api::job_status::BlacklistEntry;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::super::WORKER_LOST;
use super::{Run, silent_workers, template_change};
use crate::target_workers::WorkerDecision;
use crate::{blacklist, names, pods};

impl Run<'_, '_> {
    /// Says and records each worker `decision` renewed among `current`: `silent` ones with
    /// when their agent left the group, the others for their template.
    pub(super) fn record_renewed_workers(
        &mut self,
        decision: &WorkerDecision,
        current: &BTreeMap<u32, &Pod>,
        silent: &BTreeMap<u32, jiff::Timestamp>,
    ) {
        let name = self.name().to_string();
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
    }
}
