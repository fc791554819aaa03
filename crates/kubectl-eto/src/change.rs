//! `kubectl eto scale`, `suspend` and `resume`: the writes a person makes to a job.

use kube::Client;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::error::{Error, Request};
use crate::jobs::{self, Job, qualified_name};

/// The field manager of the plugin's writes.
const MANAGER: &str = "kubectl-eto";

/// Sets the desired workers of `job` to `workers` through the scale subresource, after
/// checking them against the job's bounds (the engine's reading of its spec). Returns the
/// message to print.
pub async fn scale(client: &Client, job: &Job, workers: u32) -> Result<String, Error> {
    let job_ref = job.as_ref();
    let kind = job_ref.kind();
    let spec = job_ref.validate().map_err(|invalid| {
        Error::Refused(format!(
            "cannot scale {}: its spec is invalid ({invalid}); fix it first",
            qualified_name(job_ref)
        ))
    })?;
    let bounds = spec.workers;
    let max = bounds.max.map_or("unbounded".into(), |max| max.to_string());
    let fields = kind.vocabulary().bound_paths;
    if workers < bounds.min {
        return Err(Error::Refused(format!(
            "cannot scale {} to {workers} workers: its minimum ({}) is {}; it accepts {}..{max}. Lower the minimum first to run with fewer workers",
            qualified_name(job_ref),
            fields.0,
            bounds.min,
            bounds.min
        )));
    }
    if let Some(limit) = bounds.max.filter(|max| workers > *max) {
        return Err(Error::Refused(format!(
            "cannot scale {} to {workers} workers: its maximum ({}) is {limit}; it accepts {}..{limit}. Raise the maximum first",
            qualified_name(job_ref),
            fields.1,
            bounds.min
        )));
    }
    let patch = Patch::Merge(json!({"spec": {"replicas": workers}}));
    let params = PatchParams {
        field_manager: Some(MANAGER.into()),
        ..PatchParams::default()
    };
    let namespace = job_ref.namespace();
    jobs::api_of(client, kind, namespace)
        .patch_scale(job_ref.name(), &params, &patch)
        .await
        .map_err(|error| {
            Request {
                verb: "patch",
                resource: &format!("{}/scale", kind.vocabulary().resource),
                namespace: Some(namespace),
            }
            .failed(error)
        })?;
    Ok(format!(
        "{} scaled to {workers} workers (min {}, max {max})\n",
        qualified_name(job_ref),
        bounds.min
    ))
}

/// Suspends (`true`) or resumes `job`. Returns the message to print.
pub async fn set_suspended(client: &Client, job: &Job, suspend: bool) -> Result<String, Error> {
    let job_ref = job.as_ref();
    let kind = job_ref.kind();
    let namespace = job_ref.namespace();
    let patch = Patch::Merge(kind.suspend_patch(suspend));
    let params = PatchParams {
        field_manager: Some(MANAGER.into()),
        ..PatchParams::default()
    };
    jobs::api_of(client, kind, namespace)
        .patch(job_ref.name(), &params, &patch)
        .await
        .map_err(|error| {
            Request {
                verb: "patch",
                resource: kind.vocabulary().resource,
                namespace: Some(namespace),
            }
            .failed(error)
        })?;
    Ok(if suspend {
        format!(
            "{} suspending: its training gets a checkpoint notice, then its pods are deleted (after checkpointGraceSeconds at most)\n",
            qualified_name(job_ref)
        )
    } else {
        format!(
            "{} resuming: new workers are created, and the launcher starts from the checkpoint once the minimum is ready\n",
            qualified_name(job_ref)
        )
    })
}
