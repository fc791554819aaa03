//! A PyTorchJob's HorizontalPodAutoscaler (see [`crate::kind::pytorch_job::autoscaler`]):
//! applied while the job's run goes on and its spec sets `elasticPolicy.metrics`, deleted
//! otherwise. A name held by an object the job does not control is left to it (the run
//! reports it, see `run.rs`).

use super::{Child, ChildKind, Deletion, Observed, Planner, current_run};
use crate::build::Job;
use crate::effective_spec::EffectiveSpec;
use crate::kind::pytorch_job::autoscaler;

impl Planner {
    pub(super) fn autoscaler(&mut self, observed: &Observed<'_>, spec: &EffectiveSpec) {
        let job = Job {
            job: observed.job,
            spec,
            run: current_run(&self.status),
            notice: None,
            gang: None,
        };
        let desired = autoscaler::autoscaler(job).filter(|_| self.going_on_with_launcher.is_some());
        match (desired, observed.autoscaler) {
            (Some(desired), existing) => {
                let taken =
                    observed.is_taken("HorizontalPodAutoscaler", &autoscaler::name(job.name()));
                if !taken && !existing.is_some_and(|e| autoscaler::is_current(&desired, e)) {
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
