//! Backing off what replaces a run, or the pod that coordinates it, after their own failure
//! (see [`crate::backoff`]).
//!
//! - **A counted restart** (a launcher or Master whose training failed, a torchrun group that
//!   failed on its own, a rank whose training failed) starts the next run at once after a
//!   first failure in a row, and after the role's back-off after the next ones. Until then the
//!   failed run's pods stay as they are, the job says when it restarts (`PodsFailing`,
//!   `Stalled`), and `backoffLimit` bounds the restarts as before.
//! - **A Lighthouse that failed on its own** is replaced within the run, after the same
//!   back-off; one the platform took is replaced at once.
//!
//! The count of a coordinator's role ends as a Worker's does: a pod of the role created after
//! the latest failure runs for 10 minutes, or its template changes.

use eto_api::well_known::WORKER_ROLE;
use k8s_openapi::api::core::v1::Pod;

use super::Run;
use super::worker_backoff::{BACKOFF_ENDED, WORKER};
use crate::backoff::{self, Failure};
use crate::conditions;
use crate::pods;

impl Run<'_, '_> {
    /// The digest of `role`'s template now.
    fn template_of(&self, role: &str) -> String {
        if role == WORKER {
            self.worker_template_digest()
        } else {
            self.coordinator_template_digest()
        }
    }

    /// The run's pods of `role`.
    fn pods_of(&self, role: &str) -> Vec<&Pod> {
        let role_label = self.context.kind().vocabulary().role_label;
        self.observed
            .pods
            .iter()
            .copied()
            .filter(|pod| !self.is_stale(pod))
            .filter(|pod| (pods::label(pod, role_label) == Some(WORKER_ROLE)) == (role == WORKER))
            .collect()
    }

    /// Ends the back-off of the pod that coordinates the run once it is over (see the module
    /// documentation); the Workers' ends in `worker_backoff.rs`.
    pub(super) fn end_coordinator_backoff(&mut self) {
        let role = self.context.job_ref.coordinator().role;
        let Some(record) = self.planner.status.backoff.iter().find(|r| r.role == role) else {
            return;
        };
        let template = self.template_of(role);
        let pods = self.pods_of(role);
        if let Some(why) = backoff::ended(record, &template, &pods, self.planner.now) {
            self.planner.event(
                false,
                BACKOFF_ENDED,
                "Create",
                format!("the {role} backs off no more: {why}"),
            );
            self.planner.status.backoff.retain(|r| r.role != role);
            return;
        }
        if let Some(well) = pods
            .iter()
            .filter_map(|pod| backoff::ran_well_since(pod, record.since.0))
            .min()
        {
            self.planner.requeue_at(well);
        }
    }

    /// Counts the failure of `role` that ends the run (`cause` in words) and says whether the
    /// counted restart may start now (see the module documentation). While it may not, the
    /// job says why and when it restarts, and the plan looks again then.
    pub(super) fn restart_due(&mut self, role: &'static str, cause: String) -> bool {
        let key = format!("run {}", self.number);
        if !self.count_failure(role, &key, cause) {
            return true;
        }
        if let Some((reason, message)) = self.report_failing_pods() {
            self.planner
                .condition(conditions::STALLED, true, &reason, &message);
            self.planner
                .condition(conditions::READY, false, &reason, &message);
        }
        false
    }

    /// Counts a failure of `role` (the failed pod or run `key`, `cause` in words) in its
    /// back-off; returns whether the role waits now, and if so makes the plan look again when
    /// it waits no more.
    pub(super) fn count_failure(&mut self, role: &'static str, key: &str, cause: String) -> bool {
        let now = self.planner.now;
        let template = self.template_of(role);
        let record = backoff::count(
            self.planner.status.backoff.iter().find(|r| r.role == role),
            &Failure {
                role,
                pod_uid: key,
                cause,
                fresh: true,
                template: &template,
            },
            now,
        );
        let waits = backoff::waits(&record, now);
        if waits {
            self.planner.requeue_at(record.retry_at.0);
        }
        self.planner.status.backoff.retain(|r| r.role != role);
        self.planner.status.backoff.push(record);
        waits
    }

    /// Whether the pod that coordinates the run waits for its back-off before it is created
    /// again; the plan looks again when it waits no more.
    pub(super) fn coordinator_waits(&mut self) -> bool {
        let role = self.context.job_ref.coordinator().role;
        let now = self.planner.now;
        let Some(retry_at) = self
            .planner
            .status
            .backoff
            .iter()
            .find(|r| r.role == role && backoff::waits(r, now))
            .map(|r| r.retry_at.0)
        else {
            return false;
        };
        self.planner.requeue_at(retry_at);
        true
    }
}
