//! A job's HorizontalPodAutoscaler, for a kind whose jobs may have one (see
//! [`crate::job::Vocabulary::autoscaler`]): applied while the job's run goes on and its kind
//! builds one from its spec, deleted otherwise. A name held by an object the job does not control is left to it (the run
//! reports it, see `run.rs`).

use super::{Child, ChildKind, Deletion, Observed, Planner};
use crate::already_applied::autoscaler_is_applied;
use crate::effective_spec::EffectiveSpec;
use crate::job::JobContext;
use crate::names;

impl Planner {
    pub(super) fn autoscaler(&mut self, observed: &Observed<'_>, spec: &EffectiveSpec) {
        let job = JobContext {
            job_ref: observed.job,
            spec,
            run: self.status.current_run(),
            notice: None,
            gang: None,
        };
        let desired = observed
            .job
            .kind()
            .vocabulary()
            .autoscaler
            .and_then(|autoscaler| autoscaler(job))
            .filter(|_| self.going_on_with_launcher.is_some());
        match (desired, observed.autoscaler) {
            (Some(desired), existing) => {
                let taken =
                    observed.is_taken("HorizontalPodAutoscaler", &names::autoscaler(job.name()));
                if !taken && !existing.is_some_and(|e| autoscaler_is_applied(&desired, e)) {
                    self.plan.apply.push(Child::Autoscaler(Box::new(desired)));
                }
            }
            (None, Some(existing)) => self.plan.delete.push(Deletion {
                kind: ChildKind::Autoscaler,
                name: existing.metadata.name.clone().unwrap_or_default(),
                grace_seconds: None,
            }),
            (None, None) => {}
        }
    }
}
