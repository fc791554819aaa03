//! What keeps a run from going on, reported as such: names held by other objects, a gang
//! scheduler missing, a pod the API server refused, a wait for workers past its limit.

use crate::conditions;
use crate::gang::{GANG_SCHEDULER_MISSING, GANG_SCHEDULER_RECHECK};
use crate::plan::{
    Child, NAME_TAKEN, NAME_TAKEN_RECHECK, POD_REJECTED, POD_REJECTED_RECHECK, RejectedPod,
    SameStall, WAITING_RESOURCE_TIMEOUT,
};
use crate::pod_group::GangScheduler;

use super::{Counts, Run};

impl Run<'_, '_> {
    /// Applies `elasticPolicy.maxWaitSeconds`: a run whose launcher has not been created may
    /// wait that long, from the start of the job or of the run, for `minReplicas` ready
    /// workers; then the job fails and its pods are deleted. Returns whether the job goes on.
    pub(super) fn still_worth_waiting(&mut self) -> bool {
        let Some(max_wait) = self.context.spec.elastic.max_wait else {
            return true;
        };
        let conditions = &self.planner.status.conditions;
        if self.launcher().is_some()
            || conditions::is_true(conditions, conditions::LAUNCHER_CREATED)
        {
            return true;
        }
        // The run began waiting when its launcher was last found missing or removed by a
        // restart, or else when the job started.
        let since = conditions::find(conditions, conditions::LAUNCHER_CREATED)
            .and_then(|launcher| launcher.last_transition_time.as_ref())
            .or(self.planner.status.start_time.as_ref())
            .map_or(self.planner.now, |time| time.0);
        let due = crate::time::after(since, max_wait);
        let Counts { ready, pending } = self.counts();
        let min = self.context.spec.workers.min;
        if ready >= min || self.planner.now < due {
            self.planner.requeue_at(due);
            return true;
        }
        let message = format!(
            "waited {}s (elasticPolicy.maxWaitSeconds) for {min} ready workers ({}) before starting launcher {}: {ready} ready, {pending} pending",
            max_wait.as_secs(),
            self.context.job_ref.min_field(),
            self.context.job_ref.launcher_name(),
        );
        self.planner.fail(
            self.observed,
            self.context,
            WAITING_RESOURCE_TIMEOUT,
            &message,
            true,
        );
        false
    }

    /// The API server refused to create a pod of the job (see [`RejectedPod`]). Like a
    /// failed write, the refusal leaves the job as it was, so that the next reconcile decides
    /// again from the same state: this plan creates no pod and no launcher Job, deletes
    /// nothing, leaves the ScaleIn and ScaleOut requests alone and keeps the job's status but
    /// for its conditions (`Ready=False`, `Stalled=True`, reason `PodRejected`) and one
    /// Warning event per message. It still writes host discovery and notices for the pods
    /// that exist, so that a lost worker leaves the hostfile at once. The job tries again
    /// every [`POD_REJECTED_RECHECK`].
    pub(super) fn pod_rejected(self, rejected: &RejectedPod) {
        let message = format!(
            "the API server rejected pod {}: {}; no pod of {} {} is created until it accepts them",
            rejected.name,
            rejected.message,
            self.context.kind().vocabulary().name,
            self.context.name(),
        );
        let planner = self.planner;
        let plan = &mut planner.plan;
        plan.apply
            .retain(|child| !matches!(child, Child::Pod(_) | Child::LauncherJob(_)));
        plan.delete.clear();
        plan.scalers.clear();
        plan.events.clear();
        planner.status = planner.status_before.clone();
        let note = message.clone();
        planner.stall(POD_REJECTED, &message, SameStall::Message, "Create", note);
        let recheck = crate::time::after(planner.now, POD_REJECTED_RECHECK);
        planner.requeue_at(recheck);
    }

    /// The operator is set to use a gang scheduler whose PodGroup API the cluster does not
    /// serve: no pod is created, since none would be scheduled; the job says so
    /// (`Ready=False`, `Stalled=True`, reason [`GANG_SCHEDULER_MISSING`], one Warning event)
    /// and looks again every [`GANG_SCHEDULER_RECHECK`].
    pub(super) fn gang_scheduler_missing(self, scheduler: &GangScheduler) {
        let message = format!(
            "eto is set to gang-schedule with {}, but the cluster does not serve its PodGroup API ({}/{}, CustomResourceDefinition {}); no pod is created until it does (install the scheduler, or run eto without a gang scheduler)",
            scheduler.display_name(),
            scheduler.group(),
            scheduler.version(),
            scheduler.crd_name(),
        );
        let planner = self.planner;
        let note = message.clone();
        planner.stall(
            GANG_SCHEDULER_MISSING,
            &message,
            SameStall::Reason,
            "Schedule",
            note,
        );
        let recheck = crate::time::after(planner.now, GANG_SCHEDULER_RECHECK);
        planner.requeue_at(recheck);
    }

    /// Some of the job's children's names are held by objects it does not control: those
    /// objects are not written, no pod is created, and the job says which names are taken
    /// (`Ready=False`, `Stalled=True`, reason `NameTaken`, one Warning event) until they are
    /// free; it looks again every [`NAME_TAKEN_RECHECK`].
    pub(super) fn names_taken(self) {
        let observed = self.observed;
        let taken = observed.taken;
        let plan = &mut self.planner.plan;
        plan.apply
            .retain(|child| !observed.is_taken(child.kind(), child.name()));
        if plan.create_ssh_secret.as_ref().is_some_and(|secret| {
            observed.is_taken(
                "Secret",
                secret.metadata.name.as_deref().unwrap_or_default(),
            )
        }) {
            plan.create_ssh_secret = None;
        }
        let held: Vec<String> = taken
            .iter()
            .map(|held| {
                format!(
                    "{} {} (controlled by {})",
                    held.kind, held.name, held.holder
                )
            })
            .collect();
        let message = format!(
            "{} {} needs the name of {}, which eto did not create; eto neither adopts nor overwrites it, and creates no pod until the name is free: delete or rename that object",
            self.context.kind().vocabulary().name,
            self.context.name(),
            held.join(", "),
        );
        let planner = self.planner;
        let note = message.clone();
        planner.stall(NAME_TAKEN, &message, SameStall::Message, "Create", note);
        let recheck = crate::time::after(planner.now, NAME_TAKEN_RECHECK);
        planner.requeue_at(recheck);
    }
}
