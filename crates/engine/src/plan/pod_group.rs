//! The job's PodGroup, when the operator uses a gang scheduler.

use crate::already_applied::is_applied;
pub use crate::child::{Child, ChildKind, Deletion};
use crate::effective_spec::EffectiveSpec;
use crate::gang;
use crate::job::JobContext;

use super::{Observed, Planner};

impl Planner {
    /// Keeps the job's PodGroup as its run needs it, when the operator uses a gang scheduler:
    /// applied (before the pods that belong to it) while the run goes on, deleted once it does
    /// not (a suspended or finished job reserves nothing).
    pub(super) fn pod_group(&mut self, observed: &Observed<'_>, spec: &EffectiveSpec) {
        let Some(scheduler) = observed.gang.ready() else {
            return;
        };
        let Some(launcher_exists) = self.going_on_with_launcher else {
            if let Some(existing) = observed.pod_group {
                self.plan.delete.push(Deletion {
                    kind: ChildKind::PodGroup,
                    name: existing.metadata.name.clone().unwrap_or_default(),
                    grace_seconds: None,
                });
            }
            return;
        };
        let job = JobContext {
            job_ref: observed.job,
            spec,
            run: self.status.current_run(),
            notice: None,
            gang: Some(scheduler),
        };
        let desired = gang::pod_group(job, scheduler, launcher_exists);
        let taken = observed.is_taken("PodGroup", gang::pod_group_name(observed.job));
        if taken
            || observed
                .pod_group
                .is_some_and(|existing| is_applied(&desired, existing))
        {
            return;
        }
        let first_member = self
            .plan
            .apply
            .iter()
            .position(|child| matches!(child, Child::Pod(_) | Child::LauncherJob(_)))
            .unwrap_or(self.plan.apply.len());
        self.plan
            .apply
            .insert(first_member, Child::PodGroup(Box::new(desired)));
    }
}
