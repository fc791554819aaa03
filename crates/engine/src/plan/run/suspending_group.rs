//! The group of a run that suspends, where its launcher forms the group from host discovery
//! (Horovod's elastic driver, `horovodrun --host-discovery-script`):
//!
//! - **No one new joins it.** Host discovery lists only the workers it listed before the run
//!   began to suspend: a worker ready only now (a replacement asked for before the notice)
//!   would make the group re-form when it should save, and the re-formed group can miss the
//!   notice until the deadline.
//! - **Below its minimum it cannot save.** The driver needs `--min-np` slots (rendered from
//!   the job's minimum of workers, as `arena submit etjob` does) to form the group: with fewer
//!   members, it holds every survivor in its rendezvous until hosts come, where no training
//!   code runs to hear a notice. The members are the workers whose pods still run a process
//!   and that discovery listed at the last reconcile, or that were lost while their pods run
//!   on (being evicted, disrupted or warned, a worker still trains until the driver's next
//!   commit, and may save), and the launcher where it trains too. A worker that left
//!   discovery otherwise (not ready) left the group at that commit. Such a run is suspended
//!   at once rather than after the whole grace period.

use k8s_openapi::api::core::v1::Pod;

use super::{Run, RunState};

impl Run<'_, '_> {
    /// Whether host discovery lists the ready worker `worker` (a pod name): always, except
    /// while the run suspends, when only the workers it listed before are (see the module
    /// documentation).
    pub(super) fn stays_listed(&self, worker: &str) -> bool {
        !matches!(self.state, RunState::Suspending(_))
            || self
                .planner
                .status_before
                .current_workers
                .iter()
                .any(|listed| listed == worker)
    }

    /// Whether the run's group, formed by its launcher from host discovery, has fewer members
    /// than the job's minimum, so that nothing of it can save (see the module documentation).
    pub(super) fn group_below_its_minimum(&self) -> bool {
        let coordinator = self.context.job_ref.coordinator();
        if !coordinator.reads_host_discovery {
            return false;
        }
        let before = &self.planner.status_before;
        let member = |pod: &&&Pod| {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            (before.current_workers.iter().any(|worker| worker == name)
                || before.blacklist.iter().any(|lost| lost.pod == name))
                && self.may_run_its_training(pod)
        };
        let members = self.observed.pods.iter().filter(member).count();
        let launcher_trains = coordinator.trains
            && self
                .launcher()
                .is_some_and(|launcher| launcher.is_running());
        members + usize::from(launcher_trains) < self.context.spec.workers.min as usize
    }
}
