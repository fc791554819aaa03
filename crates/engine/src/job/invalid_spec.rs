//! A job whose spec breaks rules: every rule broken, each naming its field.

use super::kind::Kind;
use crate::field_error::FieldError;

/// A job that breaks at least one rule; every broken rule is listed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid {}: {}", .kind.vocabulary().name, join(.errors))]
pub struct InvalidSpec {
    /// The kind of the job.
    pub kind: Kind,
    /// The violated rules, in the order of the fields in the spec.
    pub errors: Vec<FieldError>,
}

fn join(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
