//! Workers out of their group: a Worker that freezes without closing its connections (its
//! node cut off, a kernel hang, a process stopped) stops heartbeating, and the group's
//! rendezvous drops its agent after torchrun's expiry; but its pod stays `Running`, outside
//! the group, and no rule of the platform ends it. The job would train one Worker short until
//! a person noticed.
//!
//! A Worker of the run's target whose pod runs (not being deleted, its containers running)
//! and whose agent left a round that formed at least [`SILENT_GRACE`] ago without coming back
//! (neither a member nor waiting: an agent restarted in its pod joins again within seconds)
//! is taken as lost: its pod is deleted, it is replaced under a new name, it goes on the
//! blacklist with reason [`SILENT`] and its node cools down, as after a failure.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::Run;
use crate::pods;

/// How long a Worker whose agent left the group may stay out of it, running, before it is
/// replaced: beyond what an agent restarted in its pod takes to join again.
pub const SILENT_GRACE: Duration = Duration::from_secs(60);

/// The blacklist's reason, and the event's, for a Worker replaced as silent.
pub const SILENT: &str = "Silent";

impl Run<'_, '_> {
    /// The Workers of the target among `current` (by index) to replace as silent (see the
    /// module documentation), each with when its agent left the group; the plan looks again
    /// when a Worker out of the group will be due.
    pub(super) fn silent_workers(
        &mut self,
        current: &BTreeMap<u32, &Pod>,
    ) -> BTreeMap<u32, jiff::Timestamp> {
        let Some(rendezvous) = self
            .observed
            .group_report
            .and_then(|report| report.rendezvous.as_ref())
            .filter(|rendezvous| !rendezvous.closed)
        else {
            return BTreeMap::new();
        };
        let in_group: BTreeSet<&str> = rendezvous.hosts().collect();
        let target = self.planner.old.target_workers.clone();
        let now = self.planner.now;
        let mut silent = BTreeMap::new();
        let mut next: Option<jiff::Timestamp> = None;
        for (index, pod) in current {
            let Some(name) = pod.metadata.name.as_deref() else {
                continue;
            };
            let runs = pods::phase(pod) == "Running"
                && !pods::is_terminating(pod)
                && !pods::is_disrupted(pod)
                && self.context.kind().training_activity(pod).may_run();
            if !runs || in_group.contains(name) || !target.iter().any(|w| w == name) {
                continue;
            }
            let Some(left_at) = rendezvous
                .reformations
                .iter()
                .rev()
                .find(|round| round.left.iter().any(|host| host == name))
                .and_then(|round| round.formed.parse::<jiff::Timestamp>().ok())
            else {
                continue;
            };
            let due = crate::time::after(left_at, SILENT_GRACE);
            if now >= due {
                silent.insert(*index, left_at);
            } else {
                next = Some(next.map_or(due, |at| at.min(due)));
            }
        }
        if let Some(due) = next {
            self.planner.requeue_at(due);
        }
        silent
    }
}
