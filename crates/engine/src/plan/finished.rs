//! A finished job: its health conditions, `cleanPodPolicy` and time to live.

use eto_api::common::CleanPodPolicy;
use eto_api::job_status::JobPhase;
use eto_api::well_known::WORKER_ROLE;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

pub use crate::child::{ChildKind, Deletion};
use crate::conditions;
use crate::job::JobContext;
use crate::pods;
use crate::scaling;

use super::{Observed, Planner, duration_until, replica_statuses, run};

impl Planner {
    /// A finished job: health conditions, `cleanPodPolicy`, time to live.
    pub(super) fn finished(&mut self, observed: &Observed<'_>, job: JobContext<'_>) {
        let succeeded = self.status.phase == Some(JobPhase::Succeeded);
        let (reason, message) = conditions::find(
            &self.status.conditions,
            if succeeded {
                conditions::SUCCEEDED
            } else {
                conditions::FAILED
            },
        )
        .map(|cond| {
            (
                cond.reason.clone().unwrap_or_default(),
                cond.message.clone().unwrap_or_default(),
            )
        })
        .unwrap_or_default();
        self.condition(conditions::READY, succeeded, &reason, &message);
        self.condition(conditions::STALLED, !succeeded, &reason, &message);
        if conditions::find(&self.status.conditions, run::PODS_FAILING).is_some() {
            self.condition(run::PODS_FAILING, false, &reason, "the job has finished");
        }
        let ended = format!(
            "{} {} {}",
            self.kind.vocabulary().name,
            job.name(),
            if succeeded { "succeeded" } else { "failed" }
        );
        self.scaling(scaling::abandon(
            job.name(),
            job.job_ref.uid(),
            observed.scalers,
            &ended,
            self.now,
        ));
        if self.foreign {
            // The pods are another operator's, which eto does not see: its counts stand.
            self.apply_ttl(job);
            return;
        }
        self.status.replica_statuses = replica_statuses(self.kind, &observed.pods);
        if let Some(workers) = self.status.workers.as_mut() {
            workers.ready = 0;
            workers.pending = 0;
        }
        self.status.current_workers.clear();
        // Nothing trains any more: no drain is worth waiting for (cleanPodPolicy decides), and
        // no notice is worth showing.
        self.status.forget_the_runs_group();
        self.status.notice = None;
        if job.job_ref.coordinator().only_serves {
            // The store or Lighthouse serves no one once the job ended, whatever
            // cleanPodPolicy keeps.
            let store = job.job_ref.launcher_name();
            let running = observed.pods.iter().filter(|p| {
                p.metadata.name.as_deref() == Some(store.as_str()) && !pods::is_terminating(p)
            });
            for pod in running {
                self.delete_pod(pod);
            }
        }
        if job.spec.clean_pod_policy != CleanPodPolicy::None
            && self.kind.vocabulary().coordinator.trains
        {
            self.clean_as_v1(observed, job.spec.clean_pod_policy);
        } else if job.spec.clean_pod_policy != CleanPodPolicy::None {
            let role_label = self.kind.vocabulary().role_label;
            let workers = observed
                .pods
                .iter()
                .filter(|p| pods::label(p, role_label) == Some(WORKER_ROLE));
            for pod in workers.filter(|p| !pods::is_terminating(p)) {
                self.delete_pod(pod);
            }
            if observed.worker_service.is_some() {
                self.plan.delete.push(Deletion {
                    kind: ChildKind::Service,
                    name: self.kind.service_name(job.name()),
                    grace_seconds: None,
                });
            }
        }
        self.apply_ttl(job);
    }

    /// `cleanPodPolicy` of a finished PyTorchJob, as training-operator v1 applies it:
    /// `Running` deletes the pods still running or pending, `All` every pod, the Master
    /// included; each goes with its Service.
    pub(super) fn clean_as_v1(&mut self, observed: &Observed<'_>, policy: CleanPodPolicy) {
        let goes = |pod: &Pod| policy == CleanPodPolicy::All || !pods::is_finished(pod);
        for pod in observed
            .pods
            .iter()
            .filter(|p| !pods::is_terminating(p) && goes(p))
        {
            self.delete_pod(pod);
        }
        for service in &observed.pod_services {
            let name = service.metadata.name.clone().unwrap_or_default();
            let pod = observed
                .pods
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(name.as_str()));
            if pod.is_none_or(|pod| pods::is_terminating(pod) || goes(pod)) {
                self.plan.delete.push(Deletion {
                    kind: ChildKind::Service,
                    name,
                    grace_seconds: None,
                });
            }
        }
    }

    /// Deletes a finished job whose time to live ran out, or looks again when it will have.
    pub(super) fn apply_ttl(&mut self, job: JobContext<'_>) {
        if let (Some(ttl), Some(Time(completion))) = (
            job.spec.ttl_after_finished,
            self.status.completion_time.as_ref(),
        ) {
            let due = crate::time::after(*completion, ttl);
            if self.now >= due {
                self.plan.delete_job = true;
            } else {
                self.plan.requeue_after = Some(duration_until(self.now, due));
            }
        }
    }
}
