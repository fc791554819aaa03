//! ScaleIn and ScaleOut requests, as `arena scalein etjob` and `arena scaleout etjob` create
//! them.
//!
//! # Life of a request
//! 1. **Queued** (phase `Created`). A job carries out one request at a time, the newest
//!    unfinished one first, and only while its launcher runs.
//! 2. **Checked** when its turn comes. It fails, changing nothing, when it sets `spec.script`
//!    (running a script on the launcher needs `pods/exec`, which eto never uses), names pods
//!    that are not workers of the job, would leave fewer than `worker.minReplicas` workers or
//!    make more than `worker.maxReplicas`, or does not decode.
//! 3. **Carried out** (phase `Scaling`; the job's phase is `Scaling` and its `currentScaler`
//!    names it). A ScaleOut adds workers under new indices (`status.addPods`); a ScaleIn takes
//!    its workers (`status.toDeletePods`: the named pods, or for a count those not ready first,
//!    then the newest) out of host discovery at once, and they drain before their pods go (see
//!    [`crate::drain`]).
//! 4. **Finished.** A ScaleOut succeeds once every worker it added is ready, and fails at
//!    `spec.timeout` (60 s by default), removing the workers it added. A ScaleIn succeeds once
//!    the pods of its workers are gone. When a request succeeds, the job holds to its new
//!    number of workers (`status.workers.desired`) until `worker.replicas` changes.
//!
//! A request is abandoned (`Failed`) when its job finishes or restarts; a ScaleOut also when
//! `worker.replicas` changes while it is carried out. The phase of a finished request is
//! final, so it is never carried out again, after an operator restart too. Deleting a request
//! never deletes workers: what it did belongs to the job.
//!
//! The module is in three parts: `request.rs` reads a request from the API (its kind, what it
//! asks, its state and status, leniently, so that one that does not decode is still
//! reported); `lifecycle.rs` carries its life ([`step`], [`abandon`]); `orphans.rs` fails a
//! request no job takes ([`orphan`]).

mod lifecycle;
mod orphans;
mod request;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use lifecycle::push;
pub use lifecycle::{abandon, step};
pub use orphans::{Orphaned, orphan};
pub use request::{Removal, Request, Scaler, ScalerKind, ScalerState, ScalerStatus, ScalerUpdate};

use crate::effective_spec::WorkerCounts;
use crate::names;

/// Default of a request's `spec.timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a request naming a TrainingJob that does not exist is given for the job to show
/// up (watch caches may show a request before the job created just before it).
pub const JOB_GRACE: Duration = Duration::from_secs(10);

/// Condition of a request: succeeded.
pub const SCALE_SUCCEEDED: &str = "ScaleSucceeded";
/// Condition of a request: failed.
pub const SCALE_FAILED: &str = "ScaleFailed";

/// How a request that finished in this reconcile ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finished {
    /// `Kind:namespace/name`.
    pub reference: String,
    /// Whether it succeeded.
    pub succeeded: bool,
    /// What happened.
    pub message: String,
}

/// An event about the job, from its requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalingEvent {
    /// Warning rather than Normal.
    pub warning: bool,
    /// CamelCase reason.
    pub reason: &'static str,
    /// What happened.
    pub note: String,
}

/// The job, as its requests need it.
#[derive(Clone, Copy, Debug)]
pub struct JobSide<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its uid.
    pub uid: &'a str,
    /// The indices of `status.targetWorkers` at the start of the reconcile.
    pub target: &'a [u32],
    /// The worker pods of the current run, by index.
    pub pods: &'a BTreeMap<u32, &'a Pod>,
    /// Indices of workers on the blacklist.
    pub blacklisted: &'a BTreeSet<u32>,
    /// The smallest index never used by the job.
    pub next_index: u32,
    /// Its minimum and maximum.
    pub counts: WorkerCounts,
    /// Whether its launcher runs (a request may start).
    pub running: bool,
    /// Whether `worker.replicas` changed since the last reconcile.
    pub resizing: bool,
    /// The time.
    pub now: jiff::Timestamp,
}

impl<'a> JobSide<'a> {
    /// A job whose requests wait: it has no workers to scale and does not run.
    pub fn idle(name: &'a str, uid: &'a str, now: jiff::Timestamp) -> Self {
        const NO_PODS: &BTreeMap<u32, &Pod> = &BTreeMap::new();
        const NO_INDICES: &BTreeSet<u32> = &BTreeSet::new();
        Self {
            name,
            uid,
            target: &[],
            pods: NO_PODS,
            blacklisted: NO_INDICES,
            next_index: 0,
            counts: WorkerCounts {
                desired: 0,
                min: 0,
                max: None,
                spares: 0,
            },
            running: false,
            resizing: false,
            now,
        }
    }
}

/// What the job's requests decided in this reconcile.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Step {
    /// Indices that belong to the target (the workers of a ScaleOut under way).
    pub add: Vec<u32>,
    /// Indices to take out of the target (the workers of a ScaleIn, or of a failed ScaleOut).
    pub remove: Vec<u32>,
    /// Writes to requests.
    pub updates: Vec<ScalerUpdate>,
    /// The request under way after this reconcile, as `Kind:namespace/name`, and what it does.
    pub under_way: Option<(String, String)>,
    /// The request that finished in this reconcile.
    pub finished: Option<Finished>,
    /// Events about the job.
    pub events: Vec<ScalingEvent>,
    /// When to look again (a ScaleOut's timeout).
    pub requeue_at: Option<jiff::Timestamp>,
}

impl Step {
    /// Records that worker `lost` of the ScaleOut under way was replaced by `replacement`:
    /// the replacement is what the request waits for now.
    pub fn replaced(&mut self, scalers: &[Scaler], job: &str, lost: u32, replacement: u32) {
        let Some((reference, _)) = &self.under_way else {
            return;
        };
        let Some(scaler) = scalers
            .iter()
            .find(|s| s.kind == ScalerKind::ScaleOut && s.reference() == *reference)
        else {
            return;
        };
        let written = self
            .updates
            .iter()
            .find(|u| u.kind == scaler.kind && u.name == scaler.name)
            .and_then(|u| match &u.status {
                Some(ScalerStatus::Out(status)) => Some(ScalerState::of_scale_out(status.clone())),
                _ => None,
            });
        let mut state = written.unwrap_or_else(|| scaler.state.clone());
        let (lost, replacement) = (names::worker(job, lost), names::worker(job, replacement));
        if !state.pods.contains(&lost) {
            return;
        }
        for pod in state.pods.iter_mut().filter(|pod| **pod == lost) {
            pod.clone_from(&replacement);
        }
        push(self, scaler.update(state));
    }
}

/// The `Scaling` condition of the job, when a request is under way or just finished.
pub fn job_condition(step: &Step) -> Option<(bool, &str, String)> {
    if let Some((reference, what)) = &step.under_way {
        return Some((true, "ScalingStart", format!("{reference}: {what}")));
    }
    step.finished.as_ref().map(|finished| {
        let reason = if finished.succeeded {
            SCALE_SUCCEEDED
        } else {
            SCALE_FAILED
        };
        (
            false,
            reason,
            format!("{}: {}", finished.reference, finished.message),
        )
    })
}

#[cfg(test)]
mod tests;
