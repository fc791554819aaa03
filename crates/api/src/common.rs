//! Types shared by the resources eto serves.
//
// Doc comments on items in this module become CRD descriptions and so `kubectl explain`
// text: they are written for users. Developer notes belong in `//` comments.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// When the pods of a replica type are replaced after they stop.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq, Hash)]
#[schemars(transform = without_description)]
pub enum ReplicaRestartPolicy {
    /// Replace the pod whenever it stops or disappears, whatever the reason.
    Always,
    /// Replace the pod when it fails (exits non-zero or is evicted).
    OnFailure,
    /// Never replace the pod.
    Never,
    /// Replace the pod when its main container exited with a code from 129 to 254 (killed by
    /// a signal, for example by a preemption or the out-of-memory killer), or when it was
    /// evicted or its node is going away; other failures are permanent.
    ExitCode,
}

/// Status of a condition: `True`, `False` or `Unknown`.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq, Hash)]
#[schemars(transform = without_description)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// eto cannot tell whether the condition holds.
    Unknown,
}

/// One observation about the state of a job or a scaling request.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct JobCondition {
    /// Kind of the condition, for example `Running`, `Ready`, `WorkersReady` or `Failed`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Whether the condition holds.
    pub status: ConditionStatus,
    /// Machine-readable, CamelCase reason for the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable explanation of the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the reason or message of this condition last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// When `status` last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// The `metadata.generation` of the object that this condition describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Pod counts of one replica type.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaStatus {
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
    #[serde(default, skip_serializing_if = "is_zero")]
    pub preempted: i32,
}

/// Whether a count is zero, for counts written only when not.
#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
pub(crate) fn is_zero(count: &i32) -> bool {
    *count == 0
}

/// Name and value of an environment variable passed to a scaling script.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct ScriptEnvVar {
    /// Variable name.
    pub name: String,
    /// Variable value; empty when omitted.
    #[serde(default)]
    pub value: String,
}

// kube-core's schema rewriter hoists the schema of an `Option<Enum>` over the field, so a
// description on the enum type would replace the field's own description. Enum types used as
// fields therefore drop theirs from the schema (rustdoc keeps it).
pub(crate) fn without_description(schema: &mut schemars::Schema) {
    schema.remove("description");
}

// A string schema without an enum, for the fields the original operators' CRDs leave open;
// the field's description lists the values eto accepts.
pub(crate) fn open_string(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string"})
}

// Conditions are a list keyed by `type`, so server-side apply merges them per type and a
// duplicate type is rejected by the API server.
pub(crate) fn conditions_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = generator.subschema_for::<Vec<JobCondition>>();
    schema.insert("x-kubernetes-list-type".into(), "map".into());
    schema.insert(
        "x-kubernetes-list-map-keys".into(),
        serde_json::json!(["type"]),
    );
    schema
}

/// The TrainingJob a ScaleIn or ScaleOut applies to.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct ScaleTarget {
    /// Name of the TrainingJob, in the same namespace.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// Where a ScaleIn or ScaleOut request is in its life.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq, Hash)]
#[schemars(transform = without_description)]
pub enum ScalerPhase {
    /// Accepted; waiting for the job to be running and for earlier requests to finish.
    Created,
    /// Being carried out.
    Scaling,
    /// Done: the workers were added or removed.
    Succeeded,
    /// Given up; the message of the `Failed` condition says why.
    Failed,
}

/// Which pods are deleted when a job finishes.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[schemars(transform = without_description)]
pub enum CleanPodPolicy {
    /// Delete every worker.
    All,
    /// Delete the workers that are still running (in practice: every worker).
    Running,
    /// Keep every pod.
    None,
}

/// A replica type of a job that has a launcher: the launcher or the workers.
#[derive(
    Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq, PartialOrd, Ord,
)]
pub enum ReplicaType {
    /// The launcher pod.
    Launcher,
    /// The worker pods.
    Worker,
}
