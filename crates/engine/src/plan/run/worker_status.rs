//! What the status shows of a run's workers: the target, the next index, the workers ready,
//! the counts at a glance, the replica statuses and `WorkersCreated`; and the hosts of host
//! discovery, the ready workers of the target.

use std::collections::BTreeMap;

use eto_api::job_status::WorkerSummary;
use k8s_openapi::api::core::v1::Pod;

use super::super::replica_statuses;
use super::Run;
use crate::discovery::Host;
use crate::target_workers::WorkerDecision;
use crate::{conditions, names, pods, spares};

impl Run<'_, '_> {
    /// Shows `decision`'s target among `current` in the status, with `next_unused` the next
    /// index, `holds_to` the workers the job holds to and `surge` the spares started for held
    /// warned groups (see [`crate::warned_handover`]); returns the hosts of host discovery.
    pub(super) fn show_workers(
        &mut self,
        decision: &WorkerDecision,
        current: &BTreeMap<u32, &Pod>,
        next_unused: u32,
        holds_to: u32,
        surge: u32,
    ) -> Vec<Host> {
        let name = self.name().to_string();
        let spec = self.context.spec;
        let kept_when = self.context.job_ref.spares_kept();
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
                    && self.stays_listed(&names::worker(&name, *i))
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
            spares: (workers.spares > 0 || surge > 0)
                .then(|| count((spares::kept(workers, holds_to, kept_when) + surge) as usize)),
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
}
