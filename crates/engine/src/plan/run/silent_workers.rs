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
//!
//! Replica groups have no rendezvous: there the Lighthouse's status page tells, listing each
//! Manager's latest heartbeat. A group whose pods run but whose Manager has not heartbeated
//! for [`SILENT_GRACE`] (the Lighthouse left it out of every quorum since) is replaced the
//! same way, whole, under its id. eto knows a Manager's group by the number its replica id
//! ends with, as its helper and examples name it (`replica_id=f"train_{group}"`).

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
        let now = self.planner.now;
        if self.context.job_ref.coordinator().groups_stand_alone {
            return self.silent_groups(current);
        }
        let Some(group) = self
            .observed
            .group_report
            .and_then(|report| report.group.as_ref())
            .filter(|group| !group.closed)
        else {
            return BTreeMap::new();
        };
        let in_group: BTreeSet<&str> = group.hosts().collect();
        let target = self.planner.status_before.target_workers.clone();
        let mut silent = BTreeMap::new();
        let mut next: Option<jiff::Timestamp> = None;
        for (index, pod) in current {
            let Some(name) = pod.metadata.name.as_deref() else {
                continue;
            };
            if !self.runs_in_target(pod, &target) || in_group.contains(name) {
                continue;
            }
            let Some(left_at) = group
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

    /// Whether `pod` is a Worker of the target `target` that runs: not being deleted or
    /// taken, its training container running.
    fn runs_in_target(&self, pod: &Pod, target: &[String]) -> bool {
        pods::phase(pod) == "Running"
            && !pods::is_terminating(pod)
            && !pods::is_disrupted(pod)
            && self.context.kind().training_activity(pod).may_run()
            && target
                .iter()
                .any(|w| Some(w.as_str()) == pod.metadata.name.as_deref())
    }

    /// The Workers of the target among `current` whose group the coordinator has not
    /// heard from for more than [`SILENT_GRACE`] while they run (see
    /// [`crate::job::GroupedWorkers::silent_group_workers`]), each with when it was last heard.
    fn silent_groups(&mut self, current: &BTreeMap<u32, &Pod>) -> BTreeMap<u32, jiff::Timestamp> {
        let Some(report) = self.observed.group_report else {
            return BTreeMap::new();
        };
        let target = self.planner.status_before.target_workers.clone();
        let now = self.planner.now;
        let running: BTreeMap<u32, &Pod> = current
            .iter()
            .filter(|(_, pod)| self.runs_in_target(pod, &target))
            .map(|(index, pod)| (*index, *pod))
            .collect();
        let Some(silent) =
            self.context
                .job_ref
                .silent_group_workers(&running, report, SILENT_GRACE)
        else {
            return BTreeMap::new();
        };
        self.planner
            .requeue_at(crate::time::after(now, silent.read_again));
        // A Manager's silence is its pod's only if the pod ran before it last heartbeated: the
        // pod that replaces a group trains under the same id, and its own Manager has not
        // started yet.
        silent
            .workers
            .into_iter()
            .filter_map(|(index, age)| {
                let since = now - jiff::SignedDuration::from_secs_f64(age.min(1e9));
                let started = current
                    .get(&index)
                    .and_then(|pod| pods::running_since(pod))?;
                (started < since).then_some((index, since))
            })
            .collect()
    }
}
