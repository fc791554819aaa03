//! The labels Trainer's JobSet gives a TrainJob's pods, which tools select on: the `kubeflow`
//! SDK finds a job's steps by `jobset.sigs.k8s.io/jobset-name` and
//! `jobset.sigs.k8s.io/replicatedjob-name`, and numbers its nodes by
//! `batch.kubernetes.io/job-completion-index`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use eto_api::train_job::{ANCESTOR_LABEL, TRAINER_STEP};

/// The label holding the job's name (JobSet's name is the TrainJob's).
pub const JOBSET_NAME_LABEL: &str = "jobset.sigs.k8s.io/jobset-name";
/// The label holding the replicated job (the step) a pod belongs to.
pub const REPLICATED_JOB_LABEL: &str = "jobset.sigs.k8s.io/replicatedjob-name";
/// The label holding the index of the pod's Job within its replicated job: always 0.
pub const JOB_INDEX_LABEL: &str = "jobset.sigs.k8s.io/job-index";
/// The label, and annotation, holding a node's index: its rank among the nodes.
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// The label eto gives the pods of its TrainJobs, naming the kind.
pub const KIND_LABEL: &str = "eto.dev/kind";
/// The label holding a pod's role in its run (`master`: node 0 of a static job, `worker`,
/// `rendezvous-store`, `lighthouse`).
pub const ROLE_LABEL: &str = "eto.dev/role";
/// The label holding a pod's index within its role.
pub const INDEX_LABEL: &str = "eto.dev/index";

/// The replicated job of the training nodes.
pub const NODE_STEP: &str = "node";

/// The labels of every pod of step `step` of job `job`.
pub fn step_labels(job: &str, step: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([
        (JOBSET_NAME_LABEL.to_string(), job.to_string()),
        (REPLICATED_JOB_LABEL.to_string(), step.to_string()),
        (JOB_INDEX_LABEL.to_string(), "0".to_string()),
    ]);
    if step == NODE_STEP {
        labels.insert(ANCESTOR_LABEL.into(), TRAINER_STEP.into());
    }
    labels
}

/// Marks the pod of `metadata` as one of step `step` of job `job` (see [`step_labels`]), and
/// with `rank`, its completion index, as label and annotation, as a Job's indexed pod has it.
pub fn mark_step(metadata: &mut ObjectMeta, job: &str, step: &str, rank: Option<u32>) {
    let labels = metadata.labels.get_or_insert_default();
    labels.extend(step_labels(job, step));
    if let Some(rank) = rank {
        labels.insert(COMPLETION_INDEX.into(), rank.to_string());
        metadata
            .annotations
            .get_or_insert_default()
            .insert(COMPLETION_INDEX.into(), rank.to_string());
    }
}
