//! One invalid field of a refused write, as kube-apiserver lists it in `details.causes`;
//! shared by the schema validation of custom objects and the errors of the API verbs.

/// One invalid field, as listed in `details.causes` of an `Invalid` status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueNotSupported`, ...
    pub reason: String,
    /// What is wrong.
    pub message: String,
    /// Path of the field, for example `spec.replicas`.
    pub field: String,
}

impl Cause {
    /// A `FieldValueRequired` cause: `field` is missing or empty.
    pub fn required(field: impl Into<String>) -> Self {
        Self {
            reason: "FieldValueRequired".into(),
            message: "Required value".into(),
            field: field.into(),
        }
    }

    /// A `FieldValueInvalid` cause.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            reason: "FieldValueInvalid".into(),
            message: message.into(),
            field: field.into(),
        }
    }
}
