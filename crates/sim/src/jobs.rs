//! The part of the `batch/v1` Job controller that single-pod jobs need (eto's MPIJob launcher
//! is one).
//!
//! For each Job that has not finished, is not suspended and is not being deleted:
//! - `status.startTime` is set on first sight, and `active`, `ready` and `terminating` count
//!   its pods (those with a controller owner reference to the Job).
//! - A pod that ended is counted once in `succeeded` or `failed`, even after it is removed.
//! - The Job completes (`SuccessCriteriaMet` and `Complete` conditions, `completionTime`) when
//!   `completions` pods (default 1) succeeded; it fails (`FailureTarget` and `Failed` with
//!   reason `BackoffLimitExceeded`) when more than `backoffLimit` (default 6) pods failed, and
//!   its unfinished pods are deleted.
//! - A `podFailurePolicy` decides what a failed pod counts as, its rules tried in order, the
//!   first that matches winning: `Ignore` counts nothing (the pod is replaced), `FailJob`
//!   fails the Job at once (reason `PodFailurePolicy`), `Count` counts it as usual. A rule
//!   matches on a pod condition (`onPodConditions`: type and status) or on the exit codes of
//!   its containers that did not succeed (`onExitCodes`: `In` or `NotIn`, optionally for one
//!   container).
//! - Otherwise, when fewer than `parallelism` (default 1) pods are active, a pod is created
//!   from the template with `generateName: <job>-`, the labels the real controller adds
//!   (`batch.kubernetes.io/job-name`, `job-name`, `batch.kubernetes.io/controller-uid`,
//!   `controller-uid`) and a controller owner reference to the Job. With `podReplacementPolicy:
//!   Failed` a replacement waits until the pods being deleted are gone.
//!
//! Not simulated: indexed completion (so no `FailIndex`), success policies, backoff delays between
//! retries, `activeDeadlineSeconds`, suspension (a suspended Job is left alone), the
//! job-tracking finalizer (counting is kept in memory instead) and `ttlSecondsAfterFinished`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::nodes::conditions::set_condition;
use crate::options::{DeleteOptions, Subresource, WriteOptions, timestamp_now};
use crate::resources::ResourceId;
use crate::store::{ObjectKey, State};

const MANAGER: &str = "job-controller";

/// What the Job controller remembers between passes: the ended pods already counted, per Job
/// uid.
#[derive(Debug, Default)]
pub struct JobController {
    counted: HashMap<String, HashSet<String>>,
}

fn jobs() -> ResourceId {
    ResourceId::new("batch", "jobs")
}

fn pods() -> ResourceId {
    ResourceId::new("", "pods")
}

fn has_condition(job: &Value, type_: &str) -> bool {
    job["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == type_ && c["status"] == "True")
}

fn owned_by(pod: &Value, uid: &str) -> bool {
    pod["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|owner| owner["uid"] == uid && owner["controller"] == true)
}

fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

impl JobController {
    /// One pass over every Job. Returns whether it wrote anything.
    pub fn sync(&mut self, state: &mut State) -> bool {
        let Ok(resource) = state.resource(&jobs()) else {
            return false;
        };
        let all: Vec<(ObjectKey, Arc<Value>)> = state
            .list(&jobs(), None)
            .map(|(key, job)| (key.clone(), Arc::clone(job)))
            .collect();
        let live: HashSet<&str> = all
            .iter()
            .filter_map(|(_, job)| job["metadata"]["uid"].as_str())
            .collect();
        self.counted.retain(|uid, _| live.contains(uid.as_str()));
        let mut wrote = false;
        for (key, job) in &all {
            let finished = has_condition(job, "Complete") || has_condition(job, "Failed");
            if finished
                || job["metadata"].get("deletionTimestamp").is_some()
                || job["spec"]["suspend"] == true
            {
                continue;
            }
            let uid = job["metadata"]["uid"].as_str().unwrap_or_default();
            let owned: Vec<(ObjectKey, Arc<Value>)> = state
                .list(&pods(), Some(&key.namespace))
                .filter(|(_, pod)| owned_by(pod, uid))
                .map(|(key, pod)| (key.clone(), Arc::clone(pod)))
                .collect();
            let mut status = job["status"].as_object().cloned().unwrap_or_default();
            let counted = self.counted.entry(uid.to_string()).or_default();
            let mut failed_by_policy = None;
            let mut active = 0;
            let mut ready = 0;
            let mut terminating = 0;
            for (_, pod) in &owned {
                let pod_uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
                let field = match pod["status"]["phase"].as_str() {
                    Some("Succeeded") => "succeeded",
                    Some("Failed") => "failed",
                    _ if pod["metadata"].get("deletionTimestamp").is_some() => {
                        terminating += 1;
                        continue;
                    }
                    _ => {
                        active += 1;
                        ready += i64::from(is_ready(pod));
                        continue;
                    }
                };
                if counted.insert(pod_uid.to_string()) {
                    let action = if field == "failed" {
                        failure_action(&job["spec"]["podFailurePolicy"], pod)
                    } else {
                        ("Count", None)
                    };
                    match action {
                        ("Ignore", _) => continue,
                        ("FailJob", index) => {
                            let name = pod["metadata"]["name"].as_str().unwrap_or_default();
                            failed_by_policy = Some(format!(
                                "Pod {}/{name} failed, matching FailJob rule at index {}",
                                key.namespace,
                                index.unwrap_or_default()
                            ));
                        }
                        _ => {}
                    }
                    let count = status.get(field).and_then(Value::as_i64).unwrap_or(0);
                    status.insert(field.into(), json!(count + 1));
                }
            }
            let now = timestamp_now();
            status.entry("startTime").or_insert_with(|| json!(now));
            let succeeded = status.get("succeeded").and_then(Value::as_i64).unwrap_or(0);
            let failed = status.get("failed").and_then(Value::as_i64).unwrap_or(0);
            let completions = job["spec"]["completions"].as_i64().unwrap_or(1);
            let backoff_limit = job["spec"]["backoffLimit"].as_i64().unwrap_or(6);
            let mut updated = (**job).clone();
            let mut create = false;
            if succeeded >= completions {
                active = 0;
                status.insert("completionTime".into(), json!(now));
                for type_ in ["SuccessCriteriaMet", "Complete"] {
                    set_condition(
                        &mut updated,
                        json!({"type": type_, "status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods", "lastProbeTime": now, "lastTransitionTime": now}),
                    );
                }
            } else if failed_by_policy.is_some() || failed > backoff_limit {
                if let Ok(pod_type) = state.resource(&pods()) {
                    let unfinished = owned.iter().filter(|(_, pod)| {
                        !matches!(
                            pod["status"]["phase"].as_str(),
                            Some("Succeeded" | "Failed")
                        ) && pod["metadata"].get("deletionTimestamp").is_none()
                    });
                    for (pod_key, _) in unfinished {
                        let _ = state.delete(
                            &pod_type,
                            &pod_key.namespace,
                            &pod_key.name,
                            &DeleteOptions::default(),
                        );
                    }
                }
                active = 0;
                let (reason, message) = match &failed_by_policy {
                    Some(message) => ("PodFailurePolicy", message.as_str()),
                    None => (
                        "BackoffLimitExceeded",
                        "Job has reached the specified backoff limit",
                    ),
                };
                for type_ in ["FailureTarget", "Failed"] {
                    set_condition(
                        &mut updated,
                        json!({"type": type_, "status": "True", "reason": reason, "message": message, "lastProbeTime": now, "lastTransitionTime": now}),
                    );
                }
            } else {
                let parallelism = job["spec"]["parallelism"].as_i64().unwrap_or(1);
                let waits_for_termination =
                    job["spec"]["podReplacementPolicy"].as_str() == Some("Failed");
                create = active < parallelism && !(waits_for_termination && terminating > 0);
            }
            if create {
                wrote |= create_pod(state, key, job);
                active += 1;
            }
            status.insert("active".into(), json!(active));
            status.insert("ready".into(), json!(ready));
            status.insert("terminating".into(), json!(terminating));
            let conditions = updated["status"]["conditions"].clone();
            if !conditions.is_null() {
                status.insert("conditions".into(), conditions);
            }
            let status = Value::Object(status);
            if status != job["status"] {
                updated["status"] = status;
                wrote |= state
                    .replace(
                        &resource,
                        &key.namespace,
                        &key.name,
                        updated,
                        Some(Subresource::Status),
                        &WriteOptions::internal(MANAGER),
                    )
                    .is_ok();
            }
        }
        wrote
    }
}

/// What `policy` (a Job's `podFailurePolicy`) does with the failed `pod`: the action of the
/// first rule that matches, with its index, or `Count` when none does.
fn failure_action<'a>(policy: &'a Value, pod: &Value) -> (&'a str, Option<usize>) {
    let rules = policy["rules"].as_array().into_iter().flatten();
    for (index, rule) in rules.enumerate() {
        let on_condition = rule["onPodConditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|pattern| {
                pod["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|condition| {
                        condition["type"] == pattern["type"]
                            && condition["status"] == pattern["status"].as_str().unwrap_or("True")
                    })
            });
        let exit_codes = &rule["onExitCodes"];
        let on_exit_code = exit_codes.is_object() && {
            let values: Vec<i64> = exit_codes["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_i64)
                .collect();
            let within = exit_codes["operator"] == "In";
            pod["status"]["containerStatuses"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|status| {
                    exit_codes["containerName"]
                        .as_str()
                        .is_none_or(|name| status["name"] == name)
                })
                .filter_map(|status| status["state"]["terminated"]["exitCode"].as_i64())
                .filter(|code| *code != 0)
                .any(|code| values.contains(&code) == within)
        };
        if on_condition || on_exit_code {
            return (rule["action"].as_str().unwrap_or("Count"), Some(index));
        }
    }
    ("Count", None)
}

/// Creates one pod of `job` from its template.
fn create_pod(state: &mut State, key: &ObjectKey, job: &Value) -> bool {
    let Ok(resource) = state.resource(&pods()) else {
        return false;
    };
    let uid = job["metadata"]["uid"].as_str().unwrap_or_default();
    let template = &job["spec"]["template"];
    let mut metadata = template["metadata"].clone();
    if !metadata.is_object() {
        metadata = json!({});
    }
    for (label, value) in [
        ("batch.kubernetes.io/job-name", key.name.as_str()),
        ("job-name", key.name.as_str()),
        ("batch.kubernetes.io/controller-uid", uid),
        ("controller-uid", uid),
    ] {
        metadata["labels"][label] = json!(value);
    }
    metadata["generateName"] = json!(format!("{}-", key.name));
    metadata["ownerReferences"] = json!([{
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": key.name,
        "uid": uid,
        "controller": true,
        "blockOwnerDeletion": true,
    }]);
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": template["spec"],
    });
    state
        .create(
            &resource,
            &key.namespace,
            pod,
            &WriteOptions::internal(MANAGER),
        )
        .is_ok()
}
