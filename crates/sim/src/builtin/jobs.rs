//! kube-apiserver's batch Job defaults and selectors.

use serde_json::{Value, json};

use super::invalid;
use crate::errors::{ApiError, Cause};
use crate::resources::ResourceType;

/// A new Job gets kube-apiserver's defaults: a selector on its own uid (unless
/// `manualSelector`), the labels that selector and `kubectl logs job/<name>` rely on in its
/// template, and the defaults of its counts and policies. Its pods must not restart in place,
/// and its pod template cannot change afterwards.
pub(super) fn admit_job(
    resource: &ResourceType,
    old: Option<&Value>,
    job: &mut Value,
) -> Result<(), ApiError> {
    if let Some(old) = old {
        if old["spec"]["template"] != job["spec"]["template"] && old["spec"]["suspend"] != true {
            return Err(invalid(
                resource,
                job,
                vec![Cause::invalid(
                    "spec.template",
                    "Invalid value: field is immutable",
                )],
            ));
        }
        return Ok(());
    }
    let restart_policy = job["spec"]["template"]["spec"]["restartPolicy"].as_str();
    if !matches!(restart_policy, Some("Never" | "OnFailure")) {
        return Err(invalid(
            resource,
            job,
            vec![Cause {
                reason: "FieldValueNotSupported".into(),
                message: format!(
                    "Unsupported value: {:?}: supported values: \"OnFailure\", \"Never\"",
                    restart_policy.unwrap_or_default()
                ),
                field: "spec.template.spec.restartPolicy".into(),
            }],
        ));
    }
    let uid = job["metadata"]["uid"].clone();
    let name = job["metadata"]["name"].clone();
    if job["spec"]["manualSelector"] != true {
        job["spec"]["selector"] =
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
        let labels = &mut job["spec"]["template"]["metadata"]["labels"];
        for (key, value) in [
            ("batch.kubernetes.io/controller-uid", &uid),
            ("batch.kubernetes.io/job-name", &name),
            ("controller-uid", &uid),
            ("job-name", &name),
        ] {
            labels[key] = value.clone();
        }
    }
    let spec = &mut job["spec"];
    for (field, default) in [
        ("parallelism", json!(1)),
        ("completions", json!(1)),
        ("backoffLimit", json!(6)),
        ("completionMode", json!("NonIndexed")),
        ("suspend", json!(false)),
        ("podReplacementPolicy", json!("TerminatingOrFailed")),
    ] {
        if spec.get(field).is_none_or(Value::is_null) {
            spec[field] = default;
        }
    }
    Ok(())
}
