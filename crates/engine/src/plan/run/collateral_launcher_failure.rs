//! A launcher that fails soon after the platform took a worker: collateral damage of that
//! loss, not the training code's failure.
//!
//! Real elastic Horovod does not always survive a lost worker: when a worker pod goes
//! abruptly, the surviving ranks' background loop can abort inside Gloo (a broken connection,
//! a 30 s receive timeout), and `horovodrun` gives up after three failures, its launcher
//! exiting non-zero while enough workers are still ready. The job's fate must not depend on
//! it. A launcher that fails (a non-zero exit, without the platform's mark on itself) within
//! [`COLLATERAL_WINDOW`] of a worker of the run being lost to the platform (its pod disrupted,
//! evicted, deleted, gone with its node, or on a node that announced it goes: the blacklist's
//! `Disrupted`, `Evicted`, `Deleted` and `NodeWarning`) ends the run, not the job: the job is
//! suspended with reason [`WORKER_DISRUPTED`] and resumes from its checkpoint in a new run,
//! exactly as after a suspend below the minimum, whatever the count of ready workers and
//! whatever `suspendBelowMinWorkers` says. No `Failed`, no restart counted, no `backoffLimit`.
//! A launcher failure with no such loss before it is the training code's, as always.

use std::time::Duration;

use eto_api::job_status::BlacklistEntry;

use super::{Launcher, Run};
use crate::loss::Loss;
use crate::node_warnings::NODE_WARNING;

/// Reason of the `Suspended` condition and of the resume notice when a launcher failed as
/// collateral damage of a worker's loss to the platform.
pub const WORKER_DISRUPTED: &str = "WorkerDisrupted";

/// How long after a worker's loss to the platform a launcher's failure is taken for its
/// consequence: Horovod gives up after three failed resets, each bounded by Gloo's 30 s
/// timeouts.
pub const COLLATERAL_WINDOW: Duration = Duration::from_secs(180);

/// The blacklist's reasons of the losses the platform causes.
const PLATFORM_REASONS: [&str; 4] = ["Disrupted", "Evicted", "Deleted", NODE_WARNING];

impl Run<'_, '_> {
    /// What the failure of `launcher` is the collateral damage of, if it is (see the module
    /// documentation): the cause, for the suspend's condition and event.
    pub(super) fn collateral_of(&self, launcher: &Launcher<'_>) -> Option<String> {
        let (loss, what) = self.recent_platform_loss(COLLATERAL_WINDOW)?;
        let how = match launcher.pod.and_then(|pod| Loss::of(Some(pod))) {
            Some(loss) => loss.describe(),
            None => match launcher.job_failure {
                Some(why) => format!("failed ({why})"),
                None => "failed".to_string(),
            },
        };
        let after = self.planner.now.duration_since(loss.time.0).as_secs();
        let on = loss
            .node
            .as_deref()
            .map(|node| format!(" on node {node}"))
            .unwrap_or_default();
        Some(format!(
            "the launcher {how} {after}s after worker {} was lost to the platform ({what}{on}): the training did not survive that loss",
            loss.pod,
        ))
    }

    /// The latest loss of a worker to the platform the blacklist recorded within `window`,
    /// and how it was lost ("evicted").
    pub(super) fn recent_platform_loss(
        &self,
        window: Duration,
    ) -> Option<(&BlacklistEntry, &'static str)> {
        let now = self.planner.now;
        let since = now - jiff::SignedDuration::try_from(window).ok()?;
        let loss = self
            .planner
            .status
            .blacklist
            .iter()
            .filter(|entry| PLATFORM_REASONS.contains(&entry.reason.as_str()))
            .filter(|entry| entry.time.0 >= since && entry.time.0 <= now)
            .max_by_key(|entry| entry.time.0)?;
        let what = match loss.reason.as_str() {
            "Disrupted" => "disrupted",
            "Evicted" => "evicted",
            "Deleted" => "deleted",
            _ => "its node announced it goes",
        };
        Some((loss, what))
    }
}
