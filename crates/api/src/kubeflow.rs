//! Types shared by the Kubeflow kinds eto serves, `MPIJob` and `PyTorchJob`: the scheduling
//! policy and replica counts their APIs share, and eto's additions to their status.
//
// Doc comments on items in this module become CRD descriptions and so `kubectl explain`
// text: they are written for users. Developer notes belong in `//` comments.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::job_status::{
    BLACKLIST_LIMIT, BlacklistEntry, COOLDOWN_LIMIT, DrainingWorker, Goodput, JobPhase,
    NODE_WARNINGS_LIMIT, NodeCooldown, Notice, RoleBackoff, WarnedNode, WorkerSummary,
};

/// Gang-scheduling settings of a Kubeflow job.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingPolicy {
    /// Pods that must be placed together (the PodGroup's minMember). Defaults to the minimum
    /// of workers plus the launcher or master; a launcher created only when the workers are
    /// ready joins the count once it exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<i32>,
    /// Volcano queue (else the job's annotation `scheduling.volcano.sh/queue-name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Resources that must be free together. Defaults to what the launcher or master and the
    /// minimum of workers request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_resources: Option<BTreeMap<String, Quantity>>,
    /// Priority class of the pod group, for Volcano (else the launcher's or master's template's,
    /// else the workers').
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class: Option<String>,
    /// Seconds the scheduler-plugins coscheduling plugin waits for the group to form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_timeout_seconds: Option<i32>,
}

/// Pod counts of one replica type of a Kubeflow job.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct KubeflowReplicaStatus {
    /// Pods that are running.
    #[serde(default)]
    pub active: i32,
    /// Pods that finished successfully.
    #[serde(default)]
    pub succeeded: i32,
    /// Pods whose training failed.
    #[serde(default)]
    pub failed: i32,
    /// eto: pods the platform took (evicted, preempted, reclaimed with their node, taken by a
    /// disruption), counted apart from `failed`: their training did not fail.
    #[serde(default, skip_serializing_if = "crate::common::is_zero")]
    pub preempted: i32,
    /// Deprecated: the selector of the replicas' pods as a structure; see `selector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Label selector of the replicas' pods, as the scale subresource reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
}

/// eto's fields in the status of a Kubeflow job, after the original operator's.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EtoJobStatus {
    /// eto: the `metadata.generation` of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// eto: where the job is in its life: `Created`, `Running`, `Restarting`, `Suspended`,
    /// `Succeeded` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<JobPhase>,

    /// eto: how many times the whole job has been restarted after its launcher or master
    /// failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_count: Option<i32>,

    /// eto: the current run: 0 at first, one more after each restart and each resume. The
    /// job's pods carry it in the label `eto.dev/run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<i32>,

    /// eto: worker counts at a glance, as `kubectl get` shows them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<WorkerSummary>,

    /// eto: names of the worker pods the job should have now.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub target_workers: Vec<String>,

    /// eto: names of the worker pods that are running and ready (for an MPIJob: listed by
    /// host discovery).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub current_workers: Vec<String>,

    /// eto: the index the job's next new worker gets; indices are never used twice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_worker_index: Option<i32>,

    /// eto: what the job's pods show their training processes in `/etc/edl/notice`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<Notice>,

    /// eto: workers lost so far, newest last, at most 64.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = BLACKLIST_LIMIT))]
    pub blacklist: Vec<BlacklistEntry>,

    /// eto: workers removed from the job whose pods are deleted once their drain ends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub draining_workers: Vec<DrainingWorker>,

    /// eto: nodes the job's new workers avoid because a worker failed there recently.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = COOLDOWN_LIMIT))]
    pub nodes_in_cooldown: Vec<NodeCooldown>,

    /// eto: nodes running the job's workers that announced they go away.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = NODE_WARNINGS_LIMIT))]
    pub node_warnings: Vec<WarnedNode>,

    /// eto: roles whose pods keep failing on their own, and when eto creates their next
    /// pods; absent while none does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backoff: Vec<RoleBackoff>,

    /// eto: how much of the job's time trained, and where the rest went (its goodput
    /// ledger).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput: Option<Goodput>,
}
