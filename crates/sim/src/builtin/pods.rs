//! kube-apiserver's pod defaults and the immutability of a pod's spec.

use serde_json::{Value, json};

use super::invalid;
use crate::errors::{ApiError, Cause};
use crate::resources::ResourceType;
use crate::validation::pod as pod_rules;

pub(super) fn admit_pod(
    resource: &ResourceType,
    old: Option<&Value>,
    pod: &mut Value,
) -> Result<(), ApiError> {
    let Some(old) = old else {
        let spec = &mut pod["spec"];
        for (field, default) in [
            ("restartPolicy", json!("Always")),
            ("schedulerName", json!("default-scheduler")),
            ("dnsPolicy", json!("ClusterFirst")),
            ("terminationGracePeriodSeconds", json!(30)),
            ("enableServiceLinks", json!(true)),
        ] {
            if spec.get(field).is_none_or(Value::is_null) {
                spec[field] = default;
            }
        }
        for container in spec["containers"].as_array_mut().into_iter().flatten() {
            if container.get("imagePullPolicy").is_none() {
                let latest = container["image"]
                    .as_str()
                    .is_some_and(|image| !image.contains(':') || image.ends_with(":latest"));
                container["imagePullPolicy"] =
                    json!(if latest { "Always" } else { "IfNotPresent" });
            }
        }
        pod_rules::default(pod);
        let causes = pod_rules::validate(pod);
        if !causes.is_empty() {
            return Err(invalid(resource, pod, causes));
        }
        pod["status"] = json!({"phase": "Pending"});
        return Ok(());
    };
    // Only images, activeDeadlineSeconds and added tolerations may change in a pod's spec,
    // and `nodeName` once (kube-apiserver takes it through the `binding` subresource only).
    let binding = old["spec"]["nodeName"]
        .as_str()
        .unwrap_or_default()
        .is_empty();
    let masked = |spec: &Value| {
        let mut spec = spec.clone();
        for list in ["containers", "initContainers"] {
            for container in spec[list].as_array_mut().into_iter().flatten() {
                if let Some(container) = container.as_object_mut() {
                    container.remove("image");
                }
            }
        }
        if let Some(spec) = spec.as_object_mut() {
            spec.remove("activeDeadlineSeconds");
            spec.remove("tolerations");
            if binding {
                spec.remove("nodeName");
            }
        }
        spec
    };
    if masked(&pod["spec"]) != masked(&old["spec"]) {
        return Err(invalid(resource, pod, vec![Cause {
            reason: "FieldValueForbidden".into(),
            message: "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, \
                      `spec.initContainers[*].image`, `spec.activeDeadlineSeconds` or `spec.tolerations` \
                      (only additions to existing tolerations)"
                .into(),
            field: "spec".into(),
        }]));
    }
    Ok(())
}
