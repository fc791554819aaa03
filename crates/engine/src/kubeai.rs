//! The stop signal of Alibaba's `kubeai` SDK, sent with eto's notices.
//!
//! Training code written for ACK's elastic training calls `kubeai.init()`, which serves HTTP
//! on port 9009 inside the training process, and `kubeai.check_alive()` before each batch: a
//! `GET /stop` makes it return false from then on, and the script saves a checkpoint and exits.
//! eto sends that request to a pod when it posts the pod a `Suspend` or `Reclaim` notice (see
//! [`crate::notice`]), so that such a script checkpoints under eto as it did under Alibaba's job
//! supervisor.
//!
//! # Who gets it
//! A running pod (one being deleted too, until its grace period ends: eto's PID 1 keeps its
//! training running, see [`crate::builders::termination`]) that this plan newly shows a
//! `Suspend` or `Reclaim` notice, and that opted in: with the annotation [`KUBEAI_MANAGED_ANNOTATION`]`: "true"` (from
//! its template), or through the job's `elasticPolicy.kubeaiStop`. Once per pod and notice: a
//! pod that shows that notice already is not sent it again. The notice file is written either
//! way; the stop is a courtesy on top of it, and nothing waits for its answer.

use eto_api::job_status::{Notice, NoticeKind};
use eto_api::well_known::{KUBEAI_MANAGED_ANNOTATION, NOTICE_ANNOTATION};
use k8s_openapi::api::core::v1::Pod;

use crate::effective_spec::KubeaiStop;
use crate::notice;
use crate::pod_metadata::PodMetadata;
use crate::pods;

/// A stop signal to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stop {
    /// The pod, in the job's namespace.
    pub pod: String,
    /// The port the SDK listens on.
    pub port: u16,
    /// The notice it comes with: `Suspend` or `Reclaim`.
    pub notice: NoticeKind,
}

/// Whether `pod` asked for the stop signal by its annotation.
fn opted_in(pod: &Pod) -> bool {
    pods::annotation(pod, KUBEAI_MANAGED_ANNOTATION) == Some("true")
}

/// The stop signals that go with the notices that `changes` (a plan's changes of pod
/// metadata) newly show the `pods` of the job (see the module documentation).
pub fn stops<'c>(
    changes: impl IntoIterator<Item = &'c PodMetadata>,
    pods: &[&Pod],
    settings: KubeaiStop,
    now: jiff::Timestamp,
) -> Vec<Stop> {
    changes
        .into_iter()
        .filter_map(|change| {
            let notice: Notice =
                serde_json::from_str(change.annotation(NOTICE_ANNOTATION)?).ok()?;
            if !matches!(notice.kind, NoticeKind::Suspend | NoticeKind::Reclaim) {
                return None;
            }
            let pod = pods
                .iter()
                .find(|pod| pod.metadata.name.as_deref() == Some(change.name.as_str()))?;
            let running = pods::runs_at(pod, now);
            let before = notice::shown(pod);
            let new = before.is_none_or(|before| {
                (before.kind, before.since) != (notice.kind, notice.since.clone())
            });
            (running && new && (settings.every_pod || opted_in(pod))).then(|| Stop {
                pod: change.name.clone(),
                port: settings.port,
                notice: notice.kind,
            })
        })
        .collect()
}
