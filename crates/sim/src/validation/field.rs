//! Field errors as kube-apiserver words them: a cause's reason (`FieldValueRequired`, ...) and
//! its message body (`Required value: ...`, `Invalid value: "x": ...`), which the API server
//! joins with the field path into the `Status` message.

use serde_json::Value;

use crate::errors::Cause;

/// How a rejected value reads in a message: strings quoted, numbers and booleans bare,
/// anything else as JSON.
fn shown(value: &Value) -> String {
    match value {
        Value::String(text) => format!("{text:?}"),
        other => other.to_string(),
    }
}

fn with_detail(body: String, detail: &str) -> String {
    if detail.is_empty() {
        body
    } else {
        format!("{body}: {detail}")
    }
}

fn cause(reason: &str, field: &str, message: String) -> Cause {
    Cause {
        reason: reason.into(),
        message,
        field: field.into(),
    }
}

/// The field must be given; `detail` may say when.
pub fn required(field: &str, detail: &str) -> Cause {
    cause(
        "FieldValueRequired",
        field,
        with_detail("Required value".into(), detail),
    )
}

/// The field's `value` breaks a rule `detail` states.
pub fn invalid(field: &str, value: &Value, detail: &str) -> Cause {
    cause(
        "FieldValueInvalid",
        field,
        with_detail(format!("Invalid value: {}", shown(value)), detail),
    )
}

/// The field's `value` is none of `supported`.
pub fn not_supported(field: &str, value: &Value, supported: &[&str]) -> Cause {
    let quoted: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    cause(
        "FieldValueNotSupported",
        field,
        format!(
            "Unsupported value: {}: supported values: {}",
            shown(value),
            quoted.join(", ")
        ),
    )
}

/// The field's `value` appears twice where it must be unique.
pub fn duplicate(field: &str, value: &Value) -> Cause {
    cause(
        "FieldValueDuplicate",
        field,
        format!("Duplicate value: {}", shown(value)),
    )
}

/// The field refers to `value`, which does not exist.
pub fn not_found(field: &str, value: &Value) -> Cause {
    cause(
        "FieldValueNotFound",
        field,
        format!("Not found: {}", shown(value)),
    )
}

/// The field may not be set, as `detail` says.
pub fn forbidden(field: &str, detail: &str) -> Cause {
    cause(
        "FieldValueForbidden",
        field,
        with_detail("Forbidden".into(), detail),
    )
}

/// The field's value is longer than `limit` bytes.
pub fn too_long(field: &str, limit: usize) -> Cause {
    cause(
        "FieldValueTooLong",
        field,
        format!("Too long: may not be more than {limit} bytes"),
    )
}

/// One [`invalid`] cause per message a syntax check returned for `value`.
pub fn each_invalid(field: &str, value: &str, messages: Vec<String>) -> Vec<Cause> {
    let value = Value::String(value.to_string());
    messages
        .into_iter()
        .map(|message| invalid(field, &value, &message))
        .collect()
}
