//! A ScaleIn or ScaleOut request as eto reads it: its kind, what it asks for, and its state
//! and status, read leniently so that a request that does not decode is still reported.

use std::time::Duration;

use eto_api::common::{JobCondition, ScalerPhase};
use eto_api::scale_in::{ScaleIn, ScaleInStatus};
use eto_api::scale_out::{ScaleOut, ScaleOutStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::field_error::FieldError;
use crate::parse::parse;

use super::DEFAULT_TIMEOUT;

/// The two kinds of request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScalerKind {
    /// Remove workers.
    ScaleIn,
    /// Add workers.
    ScaleOut,
}

impl ScalerKind {
    /// The kind's name, as in `apiVersion`/`kind` and `status.currentScaler`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ScaleIn => "ScaleIn",
            Self::ScaleOut => "ScaleOut",
        }
    }
}

/// What a request asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Remove workers.
    Remove(Removal),
    /// Add this many workers.
    Add(u32),
}

/// Which workers a ScaleIn removes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Removal {
    /// This many: those not ready first, then the newest.
    Count(u32),
    /// These pods.
    Pods(Vec<String>),
}

/// The status of a request, common to both kinds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScalerState {
    /// Where the request is.
    pub phase: Option<ScalerPhase>,
    /// Its conditions.
    pub conditions: Vec<JobCondition>,
    /// `status.toDeletePods` of a ScaleIn, `status.addPods` of a ScaleOut.
    pub pods: Vec<String>,
    /// When it was started.
    pub start_time: Option<Time>,
    /// When it finished.
    pub completion_time: Option<Time>,
}

/// A ScaleIn or ScaleOut, as the engine reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct Scaler {
    /// Its kind.
    pub kind: ScalerKind,
    /// Its name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Its `metadata.generation`.
    pub generation: Option<i64>,
    /// When it was created.
    pub created: Option<jiff::Timestamp>,
    /// The uids of its owners.
    pub owners: Vec<String>,
    /// `spec.selector.name`: the TrainingJob it is for; empty when unset.
    pub job: String,
    /// What it asks for, or why it cannot be understood.
    pub request: Result<Request, FieldError>,
    /// `spec.script`.
    pub script: Option<String>,
    /// `spec.timeout`, defaulted.
    pub timeout: Duration,
    /// Its status.
    pub state: ScalerState,
}

impl Scaler {
    /// Reads a request of `kind` from its JSON form. A request that does not decode is still
    /// read (name, job, status), with the field that does not decode as its request.
    pub fn read(kind: ScalerKind, value: &serde_json::Value) -> Self {
        let metadata: ObjectMeta =
            serde_json::from_value(value["metadata"].clone()).unwrap_or_default();
        let job = value["spec"]["selector"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let (request, script, timeout, state) = match kind {
            ScalerKind::ScaleIn => match parse::<ScaleIn>(value.clone()) {
                Ok(scaler) => (
                    removal(&scaler.spec.to_delete),
                    scaler.spec.script,
                    scaler.spec.timeout,
                    scaler.status.map(ScalerState::of_scale_in),
                ),
                Err(error) => (Err(error), None, None, None),
            },
            ScalerKind::ScaleOut => match parse::<ScaleOut>(value.clone()) {
                Ok(scaler) => (
                    addition(scaler.spec.to_add.count),
                    scaler.spec.script,
                    scaler.spec.timeout,
                    scaler.status.map(ScalerState::of_scale_out),
                ),
                Err(error) => (Err(error), None, None, None),
            },
        };
        // An undecodable request keeps the status it shows, as far as that decodes.
        let state = state.unwrap_or_else(|| lenient_state(kind, &value["status"]));
        Self {
            kind,
            name: metadata.name.unwrap_or_default(),
            namespace: metadata.namespace.unwrap_or_default(),
            generation: metadata.generation,
            created: metadata.creation_timestamp.map(|time| time.0),
            owners: metadata
                .owner_references
                .unwrap_or_default()
                .into_iter()
                .map(|owner| owner.uid)
                .collect(),
            job,
            request,
            script: script.filter(|s| !s.is_empty()),
            timeout: timeout
                .and_then(|seconds| u64::try_from(seconds).ok())
                .filter(|seconds| *seconds > 0)
                .map_or(DEFAULT_TIMEOUT, Duration::from_secs),
            state,
        }
    }

    /// `Kind:namespace/name`, as `status.currentScaler` names it.
    pub fn reference(&self) -> String {
        format!("{}:{}/{}", self.kind.as_str(), self.namespace, self.name)
    }

    /// Whether it succeeded or failed.
    pub fn is_finished(&self) -> bool {
        matches!(
            self.state.phase,
            Some(ScalerPhase::Succeeded | ScalerPhase::Failed)
        )
    }

    pub(super) fn update(&self, state: ScalerState) -> ScalerUpdate {
        ScalerUpdate {
            kind: self.kind,
            name: self.name.clone(),
            status: (state != self.state).then(|| ScalerStatus::of(self.kind, state)),
            adopt: false,
        }
    }
}

pub(super) fn removal(to_delete: &eto_api::scale_in::ToDelete) -> Result<Request, FieldError> {
    let invalid = |field: &str, message: &str| {
        Err(FieldError {
            field: field.into(),
            message: message.into(),
        })
    };
    match (to_delete.count, &to_delete.pod_names) {
        (Some(count), None) => match u32::try_from(count) {
            Ok(count) if count > 0 => Ok(Request::Remove(Removal::Count(count))),
            _ => invalid("spec.toDelete.count", "must be at least 1"),
        },
        (None, Some(names)) if !names.is_empty() => {
            let mut names = names.clone();
            names.sort();
            names.dedup();
            Ok(Request::Remove(Removal::Pods(names)))
        }
        _ => invalid(
            "spec.toDelete",
            "set exactly one of count and podNames (with at least one name)",
        ),
    }
}

pub(super) fn addition(count: i32) -> Result<Request, FieldError> {
    match u32::try_from(count) {
        Ok(count) if count > 0 => Ok(Request::Add(count)),
        _ => Err(FieldError {
            field: "spec.toAdd.count".into(),
            message: "must be at least 1".into(),
        }),
    }
}

pub(super) fn lenient_state(kind: ScalerKind, status: &serde_json::Value) -> ScalerState {
    match kind {
        ScalerKind::ScaleIn => serde_json::from_value::<ScaleInStatus>(status.clone())
            .map(ScalerState::of_scale_in)
            .unwrap_or_default(),
        ScalerKind::ScaleOut => serde_json::from_value::<ScaleOutStatus>(status.clone())
            .map(ScalerState::of_scale_out)
            .unwrap_or_default(),
    }
}

impl ScalerState {
    fn of_scale_in(status: ScaleInStatus) -> Self {
        Self {
            phase: status.phase,
            conditions: status.conditions,
            pods: status.to_delete_pods,
            start_time: status.start_time,
            completion_time: status.completion_time,
        }
    }

    pub(super) fn of_scale_out(status: ScaleOutStatus) -> Self {
        Self {
            phase: status.phase,
            conditions: status.conditions,
            pods: status.add_pods,
            start_time: status.start_time,
            completion_time: status.completion_time,
        }
    }
}

/// The new status of a request, of its kind.
#[derive(Clone, Debug, PartialEq)]
pub enum ScalerStatus {
    /// Of a ScaleIn.
    In(ScaleInStatus),
    /// Of a ScaleOut.
    Out(ScaleOutStatus),
}

impl ScalerStatus {
    /// The status, common to both kinds.
    pub fn state(&self) -> ScalerState {
        match self.clone() {
            Self::In(status) => ScalerState::of_scale_in(status),
            Self::Out(status) => ScalerState::of_scale_out(status),
        }
    }

    fn of(kind: ScalerKind, state: ScalerState) -> Self {
        match kind {
            ScalerKind::ScaleIn => Self::In(ScaleInStatus {
                phase: state.phase,
                conditions: state.conditions,
                to_delete_pods: state.pods,
                start_time: state.start_time,
                completion_time: state.completion_time,
            }),
            ScalerKind::ScaleOut => Self::Out(ScaleOutStatus {
                phase: state.phase,
                conditions: state.conditions,
                add_pods: state.pods,
                start_time: state.start_time,
                completion_time: state.completion_time,
            }),
        }
    }
}

/// A write to a request.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalerUpdate {
    /// Its kind.
    pub kind: ScalerKind,
    /// Its name, in the job's namespace.
    pub name: String,
    /// Its new status, when it changed.
    pub status: Option<ScalerStatus>,
    /// Whether to add the job to its owners, so that it goes with the job.
    pub adopt: bool,
}
