//! One rule a job's spec breaks, naming the field: what parsing and validation report.

use std::fmt;

/// One violated rule, naming the field as a path into the object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// Path of the offending field, for example `spec.etReplicaSpecs.worker.minReplicas`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}
