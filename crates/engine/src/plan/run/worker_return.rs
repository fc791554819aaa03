//! Workers that return: a worker lost to its node's warning that still runs when the warning
//! is withdrawn leaves the blacklist and returns to host discovery (see
//! [`crate::target_workers`]), said in an event.

use super::Run;
use crate::names;
use crate::target_workers::WorkerDecision;

impl Run<'_, '_> {
    /// Takes each worker `decision` found returning off the blacklist, and says so.
    pub(super) fn record_returned_workers(&mut self, decision: &WorkerDecision) {
        let name = self.name().to_string();
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
    }
}
