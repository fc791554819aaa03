//! kube-apiserver's defaults and bounds of a HorizontalPodAutoscaler.

use serde_json::{Value, json};

use super::invalid;
use crate::errors::{ApiError, Cause};
use crate::resources::ResourceType;

/// kube-apiserver's defaults and checks of an autoscaling/v2 HorizontalPodAutoscaler: at
/// least one replica (1 by default), no more than `maxReplicas`, a target with a kind and a
/// name, and 80% CPU when no metric is given. Its metrics are stored as written (the API
/// server's metric rules are not checked here).
pub(super) fn admit_autoscaler(resource: &ResourceType, hpa: &mut Value) -> Result<(), ApiError> {
    let spec = &mut hpa["spec"];
    if spec["minReplicas"].is_null() {
        spec["minReplicas"] = json!(1);
    }
    if spec["metrics"].as_array().is_none_or(Vec::is_empty) {
        spec["metrics"] = json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]);
    }
    let min = spec["minReplicas"].as_i64().unwrap_or_default();
    let max = spec["maxReplicas"].as_i64().unwrap_or_default();
    let mut causes = Vec::new();
    if min < 1 {
        causes.push(Cause::invalid(
            "spec.minReplicas",
            format!("Invalid value: {min}: must be greater than or equal to 1"),
        ));
    }
    if max < min {
        causes.push(Cause::invalid(
            "spec.maxReplicas",
            format!("Invalid value: {max}: must be greater than or equal to `minReplicas`"),
        ));
    }
    for field in ["kind", "name"] {
        if spec["scaleTargetRef"][field]
            .as_str()
            .is_none_or(str::is_empty)
        {
            causes.push(Cause::required(format!("spec.scaleTargetRef.{field}")));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(invalid(resource, hpa, causes))
    }
}
