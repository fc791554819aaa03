//! A launcher the platform takes: a disruption of the run, never a failure of the job.
//!
//! The launcher is the one pod a run cannot lose: `horovodrun` or `mpirun` drives the training
//! from it. It asks for no GPU, so it may well run on a spot node, and a spot reclaim, a
//! preemption, an eviction or a drain can take it as easily as a worker. What the training
//! code did not end is not its failure (see [`crate::disruption`]), so:
//!
//! - **Announced**: the launcher still runs, but its node announced it goes away (Karpenter,
//!   NTH, GKE, ACK; see [`crate::node_warnings`]), or its pod is disrupted or being deleted (an
//!   eviction through the API sends SIGTERM and gives it its termination grace period). The
//!   job starts suspending at once: the `Suspend` notice (reason [`LAUNCHER_DISRUPTED`]) goes
//!   to the launcher and every worker (Horovod's rank 0 runs on a worker, and it is the one
//!   that must save the checkpoint), the grace period ending no later than the node goes or
//!   the launcher's pod is killed. When the launcher exits, or the grace period ends, the job
//!   is suspended and resumes as below.
//! - **Unannounced**: the launcher ended (any exit code, even 0) with the platform's mark on it,
//!   or disappeared after it was created. The run ends at once: every pod that still runs is
//!   shown the `Suspend` notice and deleted (the kubelet gives each its termination grace
//!   period to save a checkpoint), and the job is suspended.
//!
//! Either way the job is `Suspended` with reason [`LAUNCHER_DISRUPTED`] and resumes by itself,
//! exactly as a job suspended below its minimum does: a new run with new workers (the old
//! run's workers may still hold training processes of the lost launcher's, so none is kept),
//! whose launcher starts once `minReplicas` of them are ready, with the `Resume` notice and
//! `ETO_RESUME=true`, preferring nodes that did not announce they go and that are not spot
//! capacity ([`crate::spot_capacity`]). No `Failed`, no restart counted, no `backoffLimit`
//! used, no `cleanPodPolicy`; a `LauncherDisrupted` Warning event and the `Suspended`
//! condition say what the platform did, and on which node.
//!
//! This holds for every kind and restart policy, and whatever `suspendBelowMinWorkers` says:
//! a run cannot go on without its launcher. The one exception is a Lighthouse of replica
//! groups, which is replaced within the run (see `coordinator_replacement.rs`).

use super::{Launcher, Run};
use crate::conditions;
use crate::{node_warnings, pods};

/// Reason of the `Suspended` condition, the notices and the Warning event when the platform
/// took (or is taking) the launcher.
pub const LAUNCHER_DISRUPTED: &str = "LauncherDisrupted";

impl Run<'_, '_> {
    /// Why the run's launcher, which still runs, is about to be taken, if it is: its node
    /// announced it goes away, or its pod is disrupted or being deleted. Reports it with a
    /// `LauncherDisrupted` Warning event.
    pub(super) fn launcher_threatened(&mut self) -> Option<String> {
        if self.context.job_ref.coordinator().groups_stand_alone {
            // Replaced once it goes, in the same run (see coordinator_replacement.rs).
            return None;
        }
        let launcher = self.launcher().filter(Launcher::is_running)?;
        let pod = launcher.pod?;
        let name = pod.metadata.name.clone().unwrap_or_default();
        let on = pods::node(pod)
            .map(|node| format!(" on node {node}"))
            .unwrap_or_default();
        let why = match &launcher.disruption {
            // A pod of the launcher Job that ended is a loss, not a threat (see below).
            Some(disruption) if !disruption.ended => {
                format!("its launcher {name} {}{on}", disruption.describe())
            }
            Some(_) => return None,
            None => {
                let node = pods::node(pod)?;
                let warning = self.planner.warned.iter().find(|w| w.node == node)?;
                format!(
                    "its launcher {name} runs on a node that announced it goes away: {}",
                    node_warnings::describe(warning)
                )
            }
        };
        self.planner.event(
            true,
            LAUNCHER_DISRUPTED,
            "Suspend",
            format!(
                "{} {}: {why}; the job suspends, every pod is told to checkpoint, and a new run resumes from the checkpoint (no failure counted)",
                self.context.kind().vocabulary().name,
                self.name()
            ),
        );
        Some(why)
    }

    /// Ends the run if the platform took its launcher (see the module documentation): shows
    /// every running pod the `Suspend` notice, deletes them, and suspends the job to resume in
    /// a new run. Returns whether it did.
    pub(super) fn launcher_lost(&mut self, launcher: Option<&Launcher<'_>>) -> bool {
        let name = self.context.job_ref.launcher_name();
        let cause = match launcher {
            Some(launcher) => match &launcher.disruption {
                Some(disruption) if disruption.ended => {
                    let pod = launcher
                        .pod
                        .and_then(|pod| pod.metadata.name.clone())
                        .unwrap_or(name);
                    let on = disruption
                        .node
                        .as_deref()
                        .map(|node| format!(" on node {node}"))
                        .unwrap_or_default();
                    format!("its launcher {pod} {}{on}", disruption.describe())
                }
                // A rendezvous store or a Lighthouse never ends by itself; if it does (out of
                // memory, a crash), what it served is gone as surely as if the platform took it.
                _ if self.context.job_ref.coordinator().only_serves
                    && matches!(launcher.phase, "Succeeded" | "Failed") =>
                {
                    let pod = launcher
                        .pod
                        .and_then(|pod| pod.metadata.name.clone())
                        .unwrap_or(name);
                    format!(
                        "its {} {pod} ended ({})",
                        self.context.job_ref.launcher_called(),
                        launcher.phase
                    )
                }
                _ => return false,
            },
            None if conditions::is_true(
                &self.planner.status.conditions,
                conditions::LAUNCHER_CREATED,
            ) =>
            {
                format!("its launcher {name} disappeared (deleted, or gone with its node)")
            }
            None => return false,
        };
        self.planner.event(
            true,
            LAUNCHER_DISRUPTED,
            "Suspend",
            format!(
                "{} {}: {cause}; a new run resumes from the checkpoint with a new launcher (no failure counted)",
                self.context.kind().vocabulary().name,
                self.name()
            ),
        );
        self.show_before_deleting(LAUNCHER_DISRUPTED, &cause);
        self.suspend(LAUNCHER_DISRUPTED, Some(&cause));
        true
    }
}
