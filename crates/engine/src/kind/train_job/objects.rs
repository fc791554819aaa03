//! A TrainJob's pods and Services: those of the PyTorchJob shape it resolves to (see
//! [`super::resolve`]), shown as Trainer's JobSet shows its own: the JobSet labels the SDK
//! and other tools select on, the node's completion index, and the TrainJob as their owner.

use std::collections::BTreeMap;

use eto_api::job_status::NodeCooldown;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::labels::{self, INDEX_LABEL, NODE_STEP, ROLE_LABEL};
use crate::child::Child;
use crate::job::launcher::{LauncherInputs, LauncherObjects};
use crate::job::{JobContext, Role};
use crate::kind::pytorch_job;

/// The prefix of training-operator v1's labels, which a TrainJob's objects do not carry.
const V1_LABELS: &str = "training.kubeflow.org/";

/// Node `index` of `job` (see [`pytorch_job::objects::worker_pod`]).
pub fn worker_pod(job: JobContext<'_>, index: u32, in_cooldown: &[NodeCooldown]) -> Option<Pod> {
    pytorch_job::objects::worker_pod(job, index, in_cooldown).map(|pod| shown_pod(job, pod))
}

/// The coordinator of `job`'s run: node 0 of a static job, the rendezvous store or the
/// Lighthouse of an elastic one (see [`pytorch_job::objects::launcher_objects`]).
pub fn launcher_objects(job: JobContext<'_>, inputs: LauncherInputs<'_>) -> LauncherObjects {
    let mut objects = pytorch_job::objects::launcher_objects(job, inputs);
    objects.launcher = objects.launcher.map(|child| shown(job, child));
    objects
}

/// The Services that name `job`'s pods (see [`pytorch_job::objects::supporting_objects`]).
pub fn supporting_objects(job: JobContext<'_>) -> Vec<Child> {
    pytorch_job::objects::supporting_objects(job)
        .into_iter()
        .map(|child| shown(job, child))
        .collect()
}

fn shown(job: JobContext<'_>, child: Child) -> Child {
    match child {
        Child::Pod(pod) => Child::Pod(Box::new(shown_pod(job, *pod))),
        Child::Service(service) => Child::Service(Box::new(shown_service(job, *service))),
        other => other,
    }
}

/// `pod` with JobSet's labels: the step it belongs to (the nodes' `node`, or the
/// coordinator's role for a pod that only serves them) and a node's completion index (its
/// rank: a static job's Workers come after node 0), as label and annotation.
fn shown_pod(job: JobContext<'_>, mut pod: Pod) -> Pod {
    let metadata = &mut pod.metadata;
    own(job, metadata);
    let labels = metadata.labels.get_or_insert_default();
    labels.retain(|key, _| !key.starts_with(V1_LABELS));
    let role = labels.get(ROLE_LABEL).cloned().unwrap_or_default();
    let index: Option<u32> = labels.get(INDEX_LABEL).and_then(|i| i.parse().ok());
    let node_zero_trains = job.job_ref.coordinator().trains;
    let (step, rank) = match role.as_str() {
        role if role == job.kind().vocabulary().launcher_role && node_zero_trains => {
            (NODE_STEP, Some(0))
        }
        role if role == Role::Worker.label_value(job.kind()) => (
            NODE_STEP,
            index.map(|index| if node_zero_trains { index + 1 } else { index }),
        ),
        other => (other, None),
    };
    labels::mark_step(metadata, job.name(), step, rank);
    pod
}

/// `service` selecting its pod by the TrainJob's labels rather than v1's.
fn shown_service(job: JobContext<'_>, mut service: Service) -> Service {
    own(job, &mut service.metadata);
    let labels = service.metadata.labels.get_or_insert_default();
    labels.retain(|key, _| !key.starts_with(V1_LABELS));
    labels.extend(job.labels());
    if let Some(selector) = service
        .spec
        .as_mut()
        .and_then(|spec| spec.selector.as_mut())
    {
        *selector = selector
            .iter()
            .map(|(key, value)| translated(job, key, value))
            .collect::<BTreeMap<_, _>>();
    }
    service
}

/// A label v1's shape selects on, as the TrainJob's pods carry it.
fn translated(job: JobContext<'_>, key: &str, value: &str) -> (String, String) {
    let vocabulary = job.kind().vocabulary();
    let key = key.to_string();
    match key.as_str() {
        pytorch_job::OPERATOR_NAME_LABEL => (
            vocabulary.operator_label.0.into(),
            vocabulary.operator_label.1.into(),
        ),
        pytorch_job::JOB_NAME_LABEL => (vocabulary.job_name_label.into(), value.into()),
        pytorch_job::REPLICA_TYPE_LABEL => (vocabulary.role_label.into(), value.into()),
        pytorch_job::REPLICA_INDEX_LABEL => (vocabulary.index_label.into(), value.into()),
        _ => (key, value.into()),
    }
}

/// The TrainJob as the controller owner of `metadata`'s object, where its shape named the
/// job it resolves to.
fn own(job: JobContext<'_>, metadata: &mut ObjectMeta) {
    let owner = job.owner();
    for reference in metadata.owner_references.iter_mut().flatten() {
        if reference.uid == owner.uid {
            *reference = owner.clone();
        }
    }
}
