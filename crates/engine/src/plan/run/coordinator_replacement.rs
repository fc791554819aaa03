//! A coordinator lost while its groups train, where each group stands alone (a PyTorchJob's
//! TorchFT Lighthouse, see [`crate::job::Coordinator::groups_stand_alone`]): replaced under
//! the same address, the run goes on.
//!
//! Such a coordinator keeps no state the groups need back: each group's manager heartbeats it
//! and asks it for every step's quorum, and a new one forms the next quorum from the groups
//! that come to it. So, unlike a store the group re-forms at (whose loss ends the run, see
//! `launcher_loss.rs`), a coordinator that ended (a crash, out of memory, its pod evicted or
//! gone with its node) is replaced at once in the same run, under the same name and host
//! name, and no group is touched: the groups that outlive the gap train on. A group whose
//! request fails in the gap ends its training process; its container restarts in its pod (the
//! Workers' `OnFailure`) and heals from a group that went on. Nor does a warning of the
//! coordinator's node suspend the job: it stays until its pod goes, and its replacement avoids
//! the warned nodes.

use super::{Launcher, Run};
use crate::own_failure::OwnFailure;
use crate::{conditions, pods};

/// Reason of the Warning event when such a coordinator is lost: its role followed by `Lost`
/// (`LighthouseLost`).
pub fn coordinator_lost(role: &str) -> String {
    format!("{role}Lost")
}

impl Run<'_, '_> {
    /// Makes way for a new coordinator when the run's `launcher` ended or disappeared (see
    /// the module documentation): deletes an ended pod, so that its name is free, and says so.
    /// The new one is created with the launcher, in [`Run::discovery_and_launcher`]. Returns
    /// whether the coordinator is lost.
    pub(super) fn coordinator_replaced(&mut self, launcher: Option<&Launcher<'_>>) -> bool {
        let name = self.context.job_ref.launcher_name();
        let called = self.context.job_ref.launcher_called();
        let role = self.context.job_ref.coordinator().role;
        let why = match launcher {
            Some(launcher) => {
                let ended = launcher.disruption.as_ref().is_some_and(|d| d.ended)
                    || matches!(launcher.phase, "Succeeded" | "Failed");
                let Some(pod) = launcher
                    .pod
                    .filter(|pod| ended && !pods::is_terminating(pod))
                else {
                    return ended;
                };
                self.planner.delete_pod_with_grace(pod, 0);
                match &launcher.disruption {
                    Some(disruption) => format!("{name} {}", disruption.describe()),
                    None => {
                        // Its own failure: its replacement backs off (see
                        // restart_backoff.rs).
                        if let Some(failure) = OwnFailure::of(pod) {
                            let cause = format!("{called} {name}: {}", failure.describe());
                            let key = pod.metadata.uid.clone().unwrap_or_default();
                            self.count_failure(role, &key, cause);
                        }
                        format!("{name} ended ({})", launcher.phase)
                    }
                }
            }
            None if conditions::is_true(
                &self.planner.status.conditions,
                conditions::LAUNCHER_CREATED,
            ) && !self.pod_exists(&name) =>
            {
                format!("{name} disappeared (deleted, or gone with its node)")
            }
            None => return false,
        };
        self.planner.event(
            true,
            &coordinator_lost(role),
            "Replace",
            format!(
                "{} {}: its {called} {why}; a new {called} starts under the same address and the replica groups go on (no suspend, no failure counted)",
                self.context.kind().vocabulary().name,
                self.name()
            ),
        );
        true
    }
}
