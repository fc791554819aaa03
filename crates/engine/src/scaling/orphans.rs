//! Requests no TrainingJob takes.

use super::lifecycle::Transition;
use super::*;
use crate::names;

/// A request failed because no TrainingJob takes it.
#[derive(Clone, Debug, PartialEq)]
pub struct Orphaned {
    /// The write that fails it.
    pub update: ScalerUpdate,
    /// Why it failed.
    pub message: String,
}

/// What becomes of a request that no existing TrainingJob takes: it fails when its
/// `spec.selector.name` names no TrainingJob of its namespace ([`JOB_GRACE`] after its
/// creation, in case the job is only about to show up), and is left alone otherwise (the
/// job's own reconcile carries it out). Returns the failure, if any, and when to look again.
pub fn orphan(
    scaler: &Scaler,
    job_exists: bool,
    now: jiff::Timestamp,
) -> (Option<Orphaned>, Option<jiff::Timestamp>) {
    if scaler.is_finished() {
        return (None, None);
    }
    let namespace = &scaler.namespace;
    if scaler.job.is_empty() || !names::is_dns1123_subdomain(&scaler.job) {
        let message = format!(
            "spec.selector.name: {:?} is not the name of a TrainingJob; a {} acts on a TrainingJob of its own namespace ({namespace}), named without a namespace",
            scaler.job,
            scaler.kind.as_str()
        );
        let update = Transition::of(scaler, now).finished(false, "InvalidSelector", &message);
        return (Some(Orphaned { update, message }), None);
    }
    if job_exists {
        return (None, None);
    }
    let grace_over = scaler
        .created
        .map_or(now, |created| crate::time::after(created, JOB_GRACE));
    if now < grace_over {
        return (None, Some(grace_over));
    }
    let message = format!(
        "spec.selector.name: TrainingJob {} does not exist in namespace {namespace}",
        scaler.job
    );
    let update = Transition::of(scaler, now).finished(false, "JobNotFound", &message);
    (Some(Orphaned { update, message }), None)
}
