//! The PodGroup a job gets when the operator uses a gang scheduler, and the schedulers eto
//! creates them for: the object itself, as [`crate::child::Child`] carries it. What goes in
//! it, and how pods join it, is [`crate::gang`]'s.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// The scheduler name Volcano's pods carry.
pub const VOLCANO_SCHEDULER: &str = "volcano";

/// The gang scheduler the operator creates PodGroups for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GangScheduler {
    /// Volcano: `scheduling.volcano.sh/v1beta1` PodGroups, scheduler `volcano`.
    Volcano,
    /// The scheduler-plugins coscheduling plugin: `scheduling.x-k8s.io/v1alpha1` PodGroups,
    /// served by the scheduler named here.
    Coscheduling {
        /// The `schedulerName` of the pods.
        scheduler_name: String,
    },
}

impl GangScheduler {
    /// The API group of its PodGroups.
    pub fn group(&self) -> &'static str {
        match self {
            Self::Volcano => "scheduling.volcano.sh",
            Self::Coscheduling { .. } => "scheduling.x-k8s.io",
        }
    }

    /// The API version of its PodGroups.
    pub fn version(&self) -> &'static str {
        match self {
            Self::Volcano => "v1beta1",
            Self::Coscheduling { .. } => "v1alpha1",
        }
    }

    /// The `schedulerName` its pods need.
    pub fn scheduler_name(&self) -> &str {
        match self {
            Self::Volcano => VOLCANO_SCHEDULER,
            Self::Coscheduling { scheduler_name } => scheduler_name,
        }
    }
}

impl GangScheduler {
    /// The scheduler as people name it.
    pub fn display_name(&self) -> &'static str {
        match self {
            Self::Volcano => "Volcano",
            Self::Coscheduling { .. } => "scheduler-plugins coscheduling",
        }
    }

    /// The name of its PodGroup CRD.
    pub fn crd_name(&self) -> String {
        format!("podgroups.{}", self.group())
    }
}

/// A PodGroup of either API (see [`GangScheduler`]), as eto applies it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodGroup {
    /// `scheduling.volcano.sh/v1beta1` or `scheduling.x-k8s.io/v1alpha1`.
    pub api_version: String,
    /// `PodGroup`.
    pub kind: String,
    /// Name (the job's), namespace, labels and the job's owner reference.
    pub metadata: ObjectMeta,
    /// The gang.
    pub spec: PodGroupSpec,
}

/// The spec fields of both PodGroup APIs that eto sets; each API gets only its own.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupSpec {
    /// Pods that must be placed together (both APIs).
    pub min_member: i32,
    /// Resources that must be free together (both APIs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_resources: Option<BTreeMap<String, Quantity>>,
    /// Volcano queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Volcano priority class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// Seconds the coscheduling plugin waits for the whole group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_timeout_seconds: Option<i32>,
}
