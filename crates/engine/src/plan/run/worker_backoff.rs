//! The Workers' back-off within a run (see [`crate::backoff`]): the failures of its Workers'
//! own code counted, the replacements of those Workers held back until the delay ends, and
//! the back-off ended by a fixed template or a Worker that runs well.
//!
//! Only the replacements of Workers that failed on their own wait: a Worker the platform took
//! is replaced at once, during a back-off too. A run that starts while Workers wait (a resume
//! after a suspend, a restart) holds back as many of its new Workers as were waiting, so that
//! a suspend below the minimum does not bring back at once what the back-off held.

use std::collections::{BTreeMap, BTreeSet};

use eto_api::job_status::{BACKOFF_WAITING_LIMIT, RoleBackoff};
use k8s_openapi::api::core::v1::Pod;

use super::Run;
use crate::backoff::{self, Failure};
use crate::job::WorkerNames;
use crate::loss::Loss;
use crate::names;
use crate::own_failure::OwnFailure;
use crate::pods;
use crate::target_workers::WorkerDecision;

/// The role of the Workers in `status.backoff`.
pub const WORKER: &str = "Worker";

/// Reason of the Normal event when a back-off ends.
pub const BACKOFF_ENDED: &str = "BackoffEnded";

impl Run<'_, '_> {
    /// The Workers' back-off as the last reconcile left it.
    pub(super) fn worker_backoff(&self) -> Option<&RoleBackoff> {
        self.planner
            .status_before
            .backoff
            .iter()
            .find(|record| record.role == WORKER)
    }

    /// Fails the job once a role's pods failed on their own more than `backoffLimit` times in
    /// a row, as a Job fails past its limit. Returns whether the job goes on.
    pub(super) fn within_backoff_limit(&mut self) -> bool {
        let limit = self.context.spec.backoff_limit;
        let Some(record) = self
            .planner
            .status_before
            .backoff
            .iter()
            .find(|record| u32::try_from(record.failures).is_ok_and(|n| n > limit))
        else {
            return true;
        };
        let message = format!(
            "its {} pods failed {} times in a row, more than its backoffLimit ({limit}); the latest: {}",
            record.role, record.failures, record.cause
        );
        let reason = self.context.kind().reason("Failed");
        self.planner
            .fail(self.observed, self.context, &reason, &message, true);
        false
    }

    /// The indices of the Workers the last reconcile held back (see the module
    /// documentation): without a pod, they are not lost but still to create.
    pub(super) fn workers_held_back(&self) -> BTreeSet<u32> {
        let name = self.name();
        self.worker_backoff()
            .into_iter()
            .flat_map(|record| &record.waiting)
            .filter_map(|worker| names::worker_index(name, worker))
            .collect()
    }

    /// Counts the Workers that `decision` found failed on their own, holds back their
    /// replacements while the Workers back off, and ends the back-off when it is over (see
    /// the module documentation). `current` are the run's Worker pods by index and `next` the
    /// first index `decision` could give a new Worker: Workers from it on are created now or
    /// later; `survivors` failed after another group's loss (see `survivor_failure.rs`) and
    /// count nothing. Returns the Workers of `decision.create` not to create now,
    /// and for each held replacement, when it will be created.
    pub(super) fn back_off_workers(
        &mut self,
        decision: &WorkerDecision,
        current: &BTreeMap<u32, &Pod>,
        next: u32,
        survivors: &BTreeSet<u32>,
    ) -> BackedOff {
        let name = self.name().to_string();
        let now = self.planner.now;
        let template = backoff::digest(self.context.job_ref.worker_template());
        let pods: Vec<&Pod> = current.values().copied().collect();
        let mut record = self.worker_backoff().cloned();
        if let Some(why) = record
            .as_ref()
            .and_then(|record| backoff::ended(record, &template, &pods, now))
        {
            self.planner.event(
                false,
                BACKOFF_ENDED,
                "Create",
                format!("the Workers back off no more: {why}"),
            );
            record = None;
        }
        let per_run = self.context.job_ref.worker_names() == WorkerNames::PerRun;
        // Only failures eto retries count: a Worker its restart policy leaves down is no
        // retry, and its loss event says why.
        let lost_on_their_own: Vec<u32> = decision
            .lost
            .iter()
            .filter(|lost| matches!(lost.loss, Loss::Failed { .. }) && lost.replacement.is_some())
            .filter(|lost| !survivors.contains(&lost.index))
            .map(|lost| lost.index)
            .collect();
        for lost in decision
            .lost
            .iter()
            .filter(|lost| lost_on_their_own.contains(&lost.index))
        {
            let Some(pod) = current.get(&lost.index).filter(|p| !pods::is_disrupted(p)) else {
                continue;
            };
            let failure = OwnFailure::of(pod);
            let cause = format!(
                "Worker {}: {}",
                names::worker(&name, lost.index),
                failure
                    .as_ref()
                    .map_or_else(|| lost.loss.describe(), OwnFailure::describe)
            );
            self.planner.plan.tallies.pod_failures.push((
                WORKER,
                failure.map_or_else(|| lost.loss.reason().to_string(), |f| f.reason),
            ));
            let fresh = per_run
                || record.as_ref().is_none_or(|record| {
                    i64::from(lost.index) >= i64::from(record.next_index.unwrap_or(0))
                });
            let next_record = backoff::count(
                record.as_ref(),
                &Failure {
                    role: WORKER,
                    pod_uid: pod.metadata.uid.as_deref().unwrap_or_default(),
                    cause,
                    fresh,
                    template: &template,
                },
                now,
            );
            // A counted failure: the Workers that exist now fail with it, if they fail.
            let next_index = if fresh {
                Some(i32::try_from(next).unwrap_or(i32::MAX))
            } else {
                next_record.next_index
            };
            record = Some(RoleBackoff {
                next_index,
                ..next_record
            });
        }
        let Some(mut record) = record else {
            self.planner.status.backoff.retain(|r| r.role != WORKER);
            return BackedOff::default();
        };
        // The replacements of the Workers that failed on their own, and of those that left
        // with them.
        let replacing: BTreeSet<u32> = decision
            .lost
            .iter()
            .filter(|lost| lost_on_their_own.contains(&lost.index))
            .filter_map(|lost| lost.replacement)
            .chain(
                decision
                    .left_with_group
                    .iter()
                    .filter(|left| lost_on_their_own.contains(&left.lost))
                    .filter_map(|left| left.replacement),
            )
            .collect();
        let mut waiting: BTreeSet<u32> = record
            .waiting
            .iter()
            .filter_map(|worker| names::worker_index(&name, worker))
            .filter(|index| decision.create.contains(index))
            .collect();
        // Workers the last reconcile held that this run no longer has (a new run, a resume):
        // as many of its new Workers wait in their place.
        let vanished = record.waiting.len().saturating_sub(
            record
                .waiting
                .iter()
                .filter_map(|worker| names::worker_index(&name, worker))
                .filter(|index| decision.target.contains(index))
                .count(),
        );
        let waits = backoff::waits(&record, now);
        if waits {
            waiting.extend(replacing.iter().filter(|i| decision.create.contains(i)));
            let stand_ins: Vec<u32> = decision
                .create
                .iter()
                .rev()
                .copied()
                .filter(|index| !waiting.contains(index))
                .take(vanished)
                .collect();
            waiting.extend(stand_ins);
            self.planner.requeue_at(record.retry_at.0);
        } else {
            waiting.clear();
        }
        record.waiting = waiting
            .iter()
            .take(BACKOFF_WAITING_LIMIT)
            .map(|index| names::worker(&name, *index))
            .collect();
        // A Worker created since the latest failure that runs long enough ends the back-off.
        if let Some(well) = pods
            .iter()
            .filter_map(|pod| backoff::ran_well_since(pod, record.since.0))
            .min()
        {
            self.planner.requeue_at(well);
        }
        let retry_at = record.retry_at.0;
        self.planner.status.backoff.retain(|r| r.role != WORKER);
        self.planner.status.backoff.push(record);
        BackedOff {
            held: waiting,
            retry_at: waits.then_some(retry_at),
        }
    }
}

/// What the Workers' back-off holds back.
#[derive(Clone, Debug, Default)]
pub(super) struct BackedOff {
    /// Workers of the target not to create now.
    pub(super) held: BTreeSet<u32>,
    /// When they are created, while they wait.
    pub(super) retry_at: Option<jiff::Timestamp>,
}
