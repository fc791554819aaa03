//! `ScaleOut` (`kai.alibabacloud.com/v1alpha1`): a request to add workers to a running
//! TrainingJob, as `arena scaleout etjob` renders it.
//
// Doc comments on items in this module become CRD descriptions and so `kubectl explain`
// text: they are written for users.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{JobCondition, ScaleTarget, ScalerPhase, ScriptEnvVar, conditions_schema};

/// Desired outcome of a ScaleOut.
// The printer columns repeat keys such as `type_`, which clippy mistakes for duplicated
// attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "kai.alibabacloud.com",
    version = "v1alpha1",
    kind = "ScaleOut",
    plural = "scaleouts",
    singular = "scaleout",
    namespaced,
    status = "ScaleOutStatus",
    derive = "PartialEq",
    printcolumn(name = "Job", type_ = "string", json_path = ".spec.selector.name"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    doc = "A request to add workers to a running TrainingJob. A job carries out one request at a time, the newest first. The new workers get new indices and join host discovery as each becomes ready; the request succeeds once all are ready, and the job then holds to its larger size until worker.replicas changes. When they are not all ready within spec.timeout the request fails and the workers it added are removed. A request that would make more than worker.maxReplicas workers or sets spec.script fails and adds nothing."
)]
#[serde(rename_all = "camelCase")]
pub struct ScaleOutSpec {
    /// The TrainingJob to grow.
    pub selector: ScaleTarget,

    /// How many workers to add.
    pub to_add: ToAdd,

    /// Path of a script on the launcher that et-operator runs with the new host list. eto
    /// does not run scripts (it would need `pods/exec`): a request that sets one fails and
    /// says so. Without it the hosts join `/etc/edl/hostfile` and the output of the discovery
    /// script as they become ready, which is what Horovod reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,

    /// Seconds the new workers get to become ready; when they are not ready by then the
    /// request fails and they are removed. Defaults to 60.
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

/// How many workers a ScaleOut adds.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct ToAdd {
    /// Number of workers to add.
    #[schemars(range(min = 1))]
    pub count: i32,
}

/// Observed state of a ScaleOut, written by eto only.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScaleOutStatus {
    /// Where the request is in its life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ScalerPhase>,

    /// Observations about the request, one per type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<JobCondition>,

    /// The worker pods created for this request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add_pods: Vec<String>,

    /// When eto started carrying out the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,

    /// When the request succeeded or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
}
