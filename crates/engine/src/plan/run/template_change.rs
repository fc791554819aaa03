//! A new pod template fixes pods at once: pods that wait for good on a template the job no
//! longer has (an image never pulled, a missing Secret, a container crash-looping in place;
//! see [`crate::own_failure`]) are replaced by pods of the new template, without waiting for
//! any back-off (a new template also ends the back-off, see [`crate::backoff`]).
//!
//! eto knows the template a pod was made from by the digest it stamps on the pods it creates
//! (annotation [`TEMPLATE_ANNOTATION`]). A Worker of an elastic run waiting on an old template
//! is replaced within the run, under a new name, whatever its restart policy. The pod that
//! coordinates the run, or a Worker of a run whose Workers are its ranks, takes the run with
//! it: a new run starts from the new template, and nothing is counted against
//! `backoffLimit`. Pods that run, or that eto did not stamp, are left as they are: a running
//! pod takes no new template.

use std::collections::{BTreeMap, BTreeSet};

use eto_api::well_known::{TEMPLATE_ANNOTATION, WORKER_ROLE};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{Restart, Run};
use crate::backoff;
use crate::job::WorkerNames;
use crate::own_failure::OwnFailure;
use crate::pods;

/// Reason of the event when Workers are replaced by Workers of a new template.
pub const TEMPLATE_CHANGED: &str = "TemplateChanged";

/// Stamps `metadata` with the digest of the template the pod is made from.
pub fn stamp(metadata: &mut ObjectMeta, digest: String) {
    metadata
        .annotations
        .get_or_insert_default()
        .insert(TEMPLATE_ANNOTATION.to_string(), digest);
}

/// Whether `pod` waits for good on a template other than the one of digest `digest`, and
/// why.
fn waits_on_another_template(pod: &Pod, digest: &str) -> Option<OwnFailure> {
    let stamped = pods::annotation(pod, TEMPLATE_ANNOTATION)?;
    if stamped == digest || pods::is_terminating(pod) {
        return None;
    }
    OwnFailure::of(pod).filter(|failure| failure.waits)
}

impl Run<'_, '_> {
    /// The digest of the Workers' template now.
    pub(super) fn worker_template_digest(&self) -> String {
        backoff::digest(self.context.job_ref.worker_template())
    }

    /// The digest of the template of the pod that coordinates the run now.
    pub(super) fn coordinator_template_digest(&self) -> String {
        backoff::digest(self.context.job_ref.coordinator_template())
    }

    /// The Workers of an elastic run, among `current`, to replace by Workers of the new
    /// template (see the module documentation).
    pub(super) fn workers_to_renew(&self, current: &BTreeMap<u32, &Pod>) -> BTreeSet<u32> {
        if self.context.job_ref.worker_names() == WorkerNames::PerRun {
            return BTreeSet::new();
        }
        let digest = self.worker_template_digest();
        current
            .iter()
            .filter(|(_, pod)| waits_on_another_template(pod, &digest).is_some())
            .map(|(index, _)| *index)
            .collect()
    }

    /// Starts a new run from the new template when the run's coordinator, or a Worker of a
    /// run whose Workers are its ranks, waits on an old one (see the module documentation).
    pub(super) fn restart_on_new_template(&mut self) {
        let role_label = self.context.kind().vocabulary().role_label;
        let per_run = self.context.job_ref.worker_names() == WorkerNames::PerRun;
        let worker_digest = self.worker_template_digest();
        let coordinator_digest = self.coordinator_template_digest();
        let stale = self
            .observed
            .pods
            .iter()
            .filter(|pod| !self.is_stale(pod))
            .find_map(|pod| {
                let worker = pods::label(pod, role_label) == Some(WORKER_ROLE);
                if worker && !per_run {
                    return None;
                }
                let digest = if worker {
                    &worker_digest
                } else {
                    &coordinator_digest
                };
                let failure = waits_on_another_template(pod, digest)?;
                Some(format!(
                    "pod {} {}, and the job's pod template changed since it was created",
                    pod.metadata.name.as_deref().unwrap_or_default(),
                    failure.describe()
                ))
            });
        if let Some(why) = stale {
            let message = format!("{why}: a new run starts from the new template");
            self.start_new_run(&message, Restart::Uncounted);
        }
    }
}
