//! Decoding of custom objects with errors that name the offending field.
//!
//! A watch delivers objects as JSON. When one does not fit eto's types (a value outside an
//! enum, a string where a number belongs: possible when the CRD was installed without
//! validation or by an older eto), serde's own error names neither the object nor the field.
//! [`parse`] reports the path, so the error can be shown on the object itself.

use serde::de::DeserializeOwned;

use crate::field_error::FieldError;

/// Decodes `value` into `K`, naming the first field that does not fit.
///
/// # Errors
/// A [`FieldError`] whose `field` is the path of the value that failed to decode, for example
/// `spec.etReplicaSpecs.worker.restartPolicy`, or `.` when the object as a whole is unusable.
pub fn parse<K: DeserializeOwned>(value: serde_json::Value) -> Result<K, FieldError> {
    serde_path_to_error::deserialize(value).map_err(|error| {
        let field = error.path().to_string();
        FieldError {
            field,
            message: error.into_inner().to_string(),
        }
    })
}

#[cfg(test)]
mod tests {
    use eto_api::TrainingJob;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn minimal_job() -> serde_json::Value {
        json!({
            "apiVersion": "kai.alibabacloud.com/v1alpha1",
            "kind": "TrainingJob",
            "metadata": {"name": "mnist"},
            "spec": {"etReplicaSpecs": {
                "launcher": {"template": {"spec": {"containers": [{"name": "l", "image": "i"}]}}},
                "worker": {"template": {"spec": {"containers": [{"name": "w", "image": "i"}]}}}
            }}
        })
    }

    #[test]
    fn a_well_formed_job_parses() {
        let job: TrainingJob = parse(minimal_job()).unwrap();
        assert_eq!(job.metadata.name.as_deref(), Some("mnist"));
    }

    #[test]
    fn decoding_errors_name_the_field() {
        let cases = [
            (
                "/spec/restartPolicy",
                json!("Sometimes"),
                "spec.restartPolicy",
            ),
            (
                "/spec/etReplicaSpecs/worker/replicas",
                json!("three"),
                "spec.etReplicaSpecs.worker.replicas",
            ),
            (
                "/spec/etReplicaSpecs/worker/template/spec/containers/0/ports",
                json!({"containerPort": 22}),
                "spec.etReplicaSpecs.worker.template.spec.containers[0].ports",
            ),
        ];
        for (pointer, bad_value, field) in cases {
            let mut value = minimal_job();
            let (parent, key) = pointer.rsplit_once('/').unwrap();
            value.pointer_mut(parent).unwrap()[key] = bad_value;
            let error = parse::<TrainingJob>(value).unwrap_err();
            assert_eq!(error.field, field, "{error}");
        }
    }
}
