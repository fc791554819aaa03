//! `ScaleIn` (`kai.alibabacloud.com/v1alpha1`): a request to remove workers from a running
//! TrainingJob, as `arena scalein etjob` renders it.
//
// Doc comments on items in this module become CRD descriptions and so `kubectl explain`
// text: they are written for users.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{JobCondition, ScaleTarget, ScalerPhase, ScriptEnvVar, conditions_schema};

/// Desired outcome of a ScaleIn.
// The printer columns repeat keys such as `type_`, which clippy mistakes for duplicated
// attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "kai.alibabacloud.com",
    version = "v1alpha1",
    kind = "ScaleIn",
    plural = "scaleins",
    singular = "scalein",
    namespaced,
    status = "ScaleInStatus",
    derive = "PartialEq",
    printcolumn(name = "Job", type_ = "string", json_path = ".spec.selector.name"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    doc = "A request to remove workers from a running TrainingJob: a number of them (those not ready first, then the newest) or named pods (for example those on a node about to be reclaimed). A job carries out one request at a time, the newest first. The workers leave host discovery at once and their pods are deleted after the job's elasticPolicy.drainSeconds; the request succeeds once they are gone, and the job then holds to its smaller size until worker.replicas changes. A request that would leave fewer than worker.minReplicas workers, names pods that are not workers of the job, or sets spec.script fails and removes nothing."
)]
#[serde(rename_all = "camelCase")]
pub struct ScaleInSpec {
    /// The TrainingJob to shrink.
    pub selector: ScaleTarget,

    /// Which workers to remove.
    pub to_delete: ToDelete,

    /// Path of a script on the launcher that et-operator runs with the removed hosts. eto
    /// does not run scripts (it would need `pods/exec`): a request that sets one fails and
    /// says so. Without it the hosts leave `/etc/edl/hostfile` and the output of the discovery
    /// script, which is what Horovod reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,

    /// Seconds et-operator gives the script. Accepted for compatibility: eto runs no script,
    /// and a ScaleIn ends when the removed workers' pods are gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub timeout: Option<i32>,

    /// Environment variables for the script. Accepted for compatibility: eto runs no script.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<ScriptEnvVar>,

    /// Retries of a failed request. Accepted for compatibility (et-operator does not read it
    /// either): a failed request is not retried; create a new one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub backoff_limit: Option<i32>,
}

/// Which workers a ScaleIn removes: exactly one of `count` and `podNames`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.count) != has(self.podNames)",
    "message": "set exactly one of spec.toDelete.count and spec.toDelete.podNames"
}]))]
pub struct ToDelete {
    /// Number of workers to remove: those that are not ready first, then the newest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub count: Option<i32>,

    /// Names of the worker pods to remove; every one must be a current worker of the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub pod_names: Option<Vec<String>>,
}

/// Observed state of a ScaleIn, written by eto only.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScaleInStatus {
    /// Where the request is in its life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ScalerPhase>,

    /// Observations about the request, one per type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<JobCondition>,

    /// The worker pods chosen for removal.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to_delete_pods: Vec<String>,

    /// When eto started carrying out the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,

    /// When the request succeeded or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
}
