//! Workers a run lost, said and recorded: each in a Warning event that says how and what
//! replaces it, and in the blacklist (a loss to a node's warning under its own reason, so
//! that the worker may return, see [`crate::target_workers`]); a worker that leaves with its
//! group, whose other worker was lost, in an event of its own; and the workers lost with a
//! run that a suspend ends at once, likewise.

use std::collections::BTreeMap;

use eto_api::common::ReplicaRestartPolicy;
use eto_api::job_status::BlacklistEntry;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::super::WORKER_LOST;
use super::Run;
use super::worker_backoff::BackedOff;
use crate::loss::Loss;
use crate::target_workers::WorkerDecision;
use crate::{blacklist, names, node_warnings, pods};

impl<'o> Run<'_, 'o> {
    /// Says and records each worker `decision` found lost among `current` (or `departed`, as
    /// their pods were seen going): replaced, backed off (`backed_off`), or not replaced
    /// because the job is `suspending` or its workers' restart `policy` says so.
    pub(super) fn record_lost_workers(
        &mut self,
        decision: &WorkerDecision,
        current: &BTreeMap<u32, &Pod>,
        departed: &BTreeMap<u32, &Pod>,
        backed_off: &BackedOff,
        suspending: bool,
        policy: ReplicaRestartPolicy,
    ) {
        let name = self.name().to_string();
        for lost in &decision.lost {
            if lost.replacement.is_some() {
                self.planner.plan.tallies.replacements += 1;
            }
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
            let pod_name = names::worker(&name, lost.index);
            let pod = current
                .get(&lost.index)
                .or_else(|| departed.get(&lost.index));
            self.record_loss(pod_name, &lost.loss, pod.copied(), &then);
        }
    }

    /// Says and records the workers of the run's target that a suspend after their loss
    /// ends with the run: the pods disrupted, evicted, failed, deleted or gone (a worker
    /// whose training completed is no loss) that took the job below its minimum, or whose
    /// launcher did not survive them. The run that resumes the job creates its own workers,
    /// so no loss is replaced; without this, the suspend at once (nothing trains, or nothing
    /// can save) would leave the workers that caused it unnamed.
    pub(super) fn record_workers_lost_with_the_run(&mut self) {
        let name = self.name().to_string();
        let held = self.held_back();
        let departed = self.departed_workers();
        let lost: Vec<(String, Loss, Option<&Pod>)> = self
            .target_pods()
            .into_iter()
            .filter(|(worker, pod)| pod.is_some() || !held.contains(&worker))
            .filter_map(|(worker, pod)| {
                if pod.is_some_and(|pod| self.is_stale(pod)) {
                    return None;
                }
                let gone = names::worker_index(&name, &worker)
                    .and_then(|index| departed.get(&index))
                    .copied();
                let loss = Loss::of_worker(pod, gone)?;
                (loss != Loss::Completed).then_some((worker, loss, pod.or(gone)))
            })
            .collect();
        for (worker, loss, pod) in lost {
            self.record_loss(
                worker,
                &loss,
                pod,
                "not replaced: the job is suspended, and the run that resumes creates its own \
                 workers",
            );
        }
    }

    /// Says the loss of worker `pod_name` in a Warning event that ends with `then`, what
    /// becomes of it, and puts it on the blacklist with the node it ran on: that of `pod`, the
    /// worker's pod, or the pod as its watch saw it going when it is gone.
    fn record_loss(&mut self, pod_name: String, loss: &Loss, pod: Option<&Pod>, then: &str) {
        self.planner.plan.tallies.lost.push(loss.kind());
        let node = pod.and_then(|p| pods::node(p)).map(String::from);
        let on = node
            .as_deref()
            .map(|n| format!(" on node {n}"))
            .unwrap_or_default();
        self.planner.event(
            true,
            WORKER_LOST,
            "Replace",
            format!(
                "worker {pod_name} {}{on}; it left host discovery and is {then}",
                loss.describe()
            ),
        );
        // A loss to a node's warning says so: the worker may return (see crate::target_workers).
        let reason = pod
            .and_then(|p| pods::disruption_reason(p))
            .filter(|reason| *reason == node_warnings::NODE_WARNING)
            .unwrap_or(loss.reason());
        blacklist::record(
            &mut self.planner.status.blacklist,
            BlacklistEntry {
                pod: pod_name,
                node,
                reason: reason.to_string(),
                exit_code: loss.exit_code(),
                time: Time(self.planner.now),
            },
        );
    }

    /// Says each worker that leaves with its group, whose other worker `decision` found lost.
    pub(super) fn record_workers_left_with_group(&mut self, decision: &WorkerDecision) {
        let name = self.name().to_string();
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
    }
}
