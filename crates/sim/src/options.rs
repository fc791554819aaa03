//! What a request asks of a write or a delete, apart from the object: who writes, dry runs,
//! field validation, the subresource, deletion propagation and preconditions; and the time
//! format Kubernetes writes. Shared by the API verbs ([`crate::operations`]) and the
//! components that write directly (the built-in controllers, scheduler and kubelets).

use std::sync::Arc;

use serde_json::Value;

/// How unknown fields in a written custom object are treated (`fieldValidation`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// Dropped silently.
    Ignore,
    /// Dropped, with a warning (kube-apiserver's default).
    #[default]
    Warn,
    /// Rejected.
    Strict,
}

/// Who writes, and how.
#[derive(Clone, Debug)]
pub struct WriteOptions {
    /// Field manager recorded in `managedFields`.
    pub manager: String,
    /// Validate and compute, but store nothing (`dryRun=All`).
    pub dry_run: bool,
    /// Unknown-field handling.
    pub field_validation: FieldValidation,
}

impl WriteOptions {
    /// Options of an internal component (scheduler, kubelet, controllers) writing as `manager`.
    pub fn internal(manager: &str) -> Self {
        Self {
            manager: manager.to_string(),
            dry_run: false,
            field_validation: FieldValidation::Ignore,
        }
    }
}

/// The subresource a write goes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subresource {
    /// `/status`.
    Status,
    /// `/scale`.
    Scale,
}

impl Subresource {
    /// Its name in a request path, and in `managedFields`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Status => "status",
            Self::Scale => "scale",
        }
    }
}

/// The result of a write.
#[derive(Clone, Debug)]
pub struct Written {
    /// The object as stored (or as it would be, for a dry run). When the write removed it
    /// (its last finalizer went), its final state.
    pub object: Arc<Value>,
    /// Whether the write removed the object.
    pub removed: bool,
    /// Warnings for the `Warning` header.
    pub warnings: Vec<String>,
    /// Whether a new object was created.
    pub created: bool,
}

/// `propagationPolicy` of a delete.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Propagation {
    /// Dependents are deleted by the garbage collector after the owner.
    #[default]
    Background,
    /// Dependents are deleted first; the owner waits with a `foregroundDeletion` finalizer.
    Foreground,
    /// Dependents lose their owner reference and stay.
    Orphan,
}

/// Options of a delete.
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    /// Dependent handling.
    pub propagation: Propagation,
    /// Grace period for pods; `None` uses the pod's `terminationGracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// Precondition on the object's uid.
    pub uid: Option<String>,
    /// Precondition on the object's resourceVersion.
    pub resource_version: Option<String>,
    /// Validate, but delete nothing.
    pub dry_run: bool,
}

/// Now, as the second-precision RFC 3339 timestamps Kubernetes writes.
pub fn timestamp_now() -> String {
    format_timestamp(jiff::Timestamp::now())
}

/// A timestamp in the second-precision RFC 3339 form Kubernetes writes.
pub fn format_timestamp(time: jiff::Timestamp) -> String {
    time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}
