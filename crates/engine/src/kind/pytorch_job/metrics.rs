//! The rules kube-apiserver holds an autoscaling/v2 metric to, checked on
//! `elasticPolicy.metrics`: eto copies the metrics into the job's HorizontalPodAutoscaler (see
//! [`super::v1_autoscaler`]), and a metric the API server would refuse is reported on the job,
//! naming its field, before anything is created, rather than failing every reconcile.
//!
//! A metric has a `type` (`Object`, `Pods`, `Resource`, `ContainerResource` or `External`)
//! and the one source of that type; each source names its metric and sets a target of type
//! `Utilization`, `Value` or `AverageValue` with positive amounts: a utilization or an average
//! value for a resource, an average value for pods, a value or an average value for an object
//! or an external metric (not both, for an external metric or a resource).

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, MetricIdentifier, MetricSpec, MetricTarget,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::quantity;
use crate::validation::Errors;

/// The metric types kube-apiserver accepts, with the field each one's source is set in.
const SOURCES: [(&str, &str); 5] = [
    ("ContainerResource", "containerResource"),
    ("External", "external"),
    ("Object", "object"),
    ("Pods", "pods"),
    ("Resource", "resource"),
];

/// The target types kube-apiserver accepts.
const TARGET_TYPES: [&str; 3] = ["Utilization", "Value", "AverageValue"];

/// The resources a container metric may name besides huge pages (`hugepages-<size>`).
const CONTAINER_RESOURCES: [&str; 3] = ["cpu", "memory", "ephemeral-storage"];

/// Adds every rule of `metrics`, found at `field`, that kube-apiserver would refuse to
/// `errors`.
pub(crate) fn check(metrics: &[MetricSpec], field: &str, errors: &mut Errors) {
    for (index, metric) in metrics.iter().enumerate() {
        check_metric(metric, &format!("{field}[{index}]"), errors);
    }
}

fn check_metric(metric: &MetricSpec, field: &str, errors: &mut Errors) {
    let set: Vec<&str> = [
        metric.container_resource.is_some(),
        metric.external.is_some(),
        metric.object.is_some(),
        metric.pods.is_some(),
        metric.resource.is_some(),
    ]
    .into_iter()
    .zip(SOURCES)
    .filter_map(|(is_set, (_, source))| is_set.then_some(source))
    .collect();
    match SOURCES.iter().find(|(type_, _)| *type_ == metric.type_) {
        None => {
            let types: Vec<&str> = SOURCES.iter().map(|(type_, _)| *type_).collect();
            errors.push(
                format!("{field}.type"),
                format!(
                    "must be one of {}, not {:?}",
                    types.join(", "),
                    metric.type_
                ),
            );
        }
        Some((type_, source)) if !set.contains(source) => errors.push(
            format!("{field}.{source}"),
            format!("must be set for a metric of type {type_}"),
        ),
        Some(_) => {}
    }
    let expected = SOURCES
        .iter()
        .find(|(type_, _)| *type_ == metric.type_)
        .map(|(_, source)| *source);
    for source in &set {
        if set.len() > 1 && Some(*source) != expected {
            errors.push(
                format!("{field}.{source}"),
                "must not be set: a metric sets the source of its type only",
            );
        }
    }
    // The first source set is checked, as kube-apiserver checks it.
    let Some(first) = set.first() else {
        return;
    };
    let source_field = format!("{field}.{first}");
    let source = Source {
        field: &source_field,
        errors,
    };
    match *first {
        "containerResource" => {
            let Some(container) = &metric.container_resource else {
                return;
            };
            source.container_resource(&container.name, &container.container, &container.target);
        }
        "external" => {
            let Some(external) = &metric.external else {
                return;
            };
            source.external(&external.metric, &external.target);
        }
        "object" => {
            let Some(object) = &metric.object else {
                return;
            };
            source.object(&object.described_object, &object.metric, &object.target);
        }
        "pods" => {
            let Some(pods) = &metric.pods else { return };
            source.pods(&pods.metric, &pods.target);
        }
        _ => {
            let Some(resource) = &metric.resource else {
                return;
            };
            source.resource(&resource.name, &resource.target);
        }
    }
}

/// One metric source, at `field`.
struct Source<'a> {
    field: &'a str,
    errors: &'a mut Errors,
}

impl Source<'_> {
    fn push(&mut self, at: &str, message: impl Into<String>) {
        self.errors.push(format!("{}.{at}", self.field), message);
    }

    fn resource(mut self, name: &str, target: &MetricTarget) {
        if name.is_empty() {
            self.push("name", "must name a resource, for example cpu");
        }
        self.utilization_or_average(target);
    }

    fn container_resource(mut self, name: &str, container: &str, target: &MetricTarget) {
        if name.is_empty() {
            self.push("name", "must name a resource, for example cpu");
        } else if !CONTAINER_RESOURCES.contains(&name) && !name.starts_with("hugepages-") {
            self.push(
                "name",
                format!(
                    "must be a container resource ({}, or hugepages-<size>), not {name:?}",
                    CONTAINER_RESOURCES.join(", ")
                ),
            );
        }
        if container.is_empty() {
            self.push("container", "must name a container");
        } else if !crate::names::is_dns1123_label(container) {
            self.push(
                "container",
                format!("must be a container's name (a DNS-1123 label), not {container:?}"),
            );
        }
        self.utilization_or_average(target);
    }

    fn pods(mut self, metric: &MetricIdentifier, target: &MetricTarget) {
        self.metric(metric);
        self.target(target);
        if target.average_value.is_none() {
            self.push(
                "target.averageValue",
                "must be set: a pods metric is averaged over the pods",
            );
        }
    }

    fn object(
        mut self,
        described: &CrossVersionObjectReference,
        metric: &MetricIdentifier,
        target: &MetricTarget,
    ) {
        for (at, value) in [
            ("describedObject.kind", &described.kind),
            ("describedObject.name", &described.name),
        ] {
            self.path_segment(at, value);
        }
        self.metric(metric);
        self.target(target);
        if target.value.is_none() && target.average_value.is_none() {
            self.push(
                "target.averageValue",
                "either value or averageValue must be set",
            );
        }
    }

    fn external(mut self, metric: &MetricIdentifier, target: &MetricTarget) {
        self.metric(metric);
        self.target(target);
        match (&target.value, &target.average_value) {
            (None, None) => {
                self.push(
                    "target.averageValue",
                    "either value or averageValue must be set",
                );
            }
            (Some(_), Some(_)) => {
                self.push(
                    "target.value",
                    "cannot be set with averageValue: set one of them",
                );
            }
            _ => {}
        }
    }

    /// A resource's target: a utilization or an average value, not both.
    fn utilization_or_average(&mut self, target: &MetricTarget) {
        self.target(target);
        match (target.average_utilization, &target.average_value) {
            (None, None) => self.push(
                "target.averageUtilization",
                "either averageUtilization or averageValue must be set",
            ),
            (Some(_), Some(_)) => self.push(
                "target.averageValue",
                "cannot be set with averageUtilization: set one of them",
            ),
            _ => {}
        }
    }

    fn metric(&mut self, metric: &MetricIdentifier) {
        self.path_segment("metric.name", &metric.name);
    }

    /// A name kube-apiserver puts into a URL path: set, not `.` or `..`, without `/` or `%`.
    fn path_segment(&mut self, at: &str, value: &str) {
        if value.is_empty() {
            self.push(at, "must be set");
        } else if value == "." || value == ".." || value.contains(['/', '%']) {
            self.push(
                at,
                format!("must not be . or .., nor contain / or %, not {value:?}"),
            );
        }
    }

    fn target(&mut self, target: &MetricTarget) {
        if !TARGET_TYPES.contains(&target.type_.as_str()) {
            self.push(
                "target.type",
                format!(
                    "must be one of {}, not {:?}",
                    TARGET_TYPES.join(", "),
                    target.type_
                ),
            );
        }
        for (at, value) in [
            ("target.value", &target.value),
            ("target.averageValue", &target.average_value),
        ] {
            if let Some(Quantity(text)) = value
                && quantity::parse(text).is_none_or(|amount| amount <= 0)
            {
                self.push(at, format!("must be a positive quantity, not {text:?}"));
            }
        }
        if let Some(utilization) = target.average_utilization.filter(|u| *u < 1) {
            self.push(
                "target.averageUtilization",
                format!("must be at least 1 (percent), not {utilization}"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn errors_of(metric: serde_json::Value) -> Vec<String> {
        let metric: MetricSpec = serde_json::from_value(metric).expect("a MetricSpec");
        let mut errors = Errors::default();
        check(&[metric], "spec.elasticPolicy.metrics", &mut errors);
        errors
            .0
            .iter()
            .map(|error| format!("{}: {}", error.field, error.message))
            .collect()
    }

    #[test]
    fn metrics_the_api_server_accepts_pass() {
        let accepted = [
            json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}),
            json!({"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "2Gi"}}}),
            json!({"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "pytorch", "target": {"type": "Utilization", "averageUtilization": 60}}}),
            json!({"type": "Pods", "pods": {"metric": {"name": "samples_per_second"}, "target": {"type": "AverageValue", "averageValue": 100}}}),
            json!({"type": "Object", "object": {"describedObject": {"kind": "Service", "name": "queue"}, "metric": {"name": "depth"}, "target": {"type": "Value", "value": "30"}}}),
            json!({"type": "External", "external": {"metric": {"name": "queue_messages"}, "target": {"type": "AverageValue", "averageValue": "500m"}}}),
        ];
        for metric in accepted {
            assert_eq!(errors_of(metric.clone()), Vec::<String>::new(), "{metric}");
        }
    }

    #[test]
    fn each_rule_names_its_field() {
        let m = "spec.elasticPolicy.metrics[0]";
        let cases = [
            (
                json!({"type": "Cpu"}),
                format!(
                    "{m}.type: must be one of ContainerResource, External, Object, Pods, Resource, not \"Cpu\""
                ),
            ),
            (
                json!({"type": "Pods"}),
                format!("{m}.pods: must be set for a metric of type Pods"),
            ),
            (
                json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
                       "pods": {"metric": {"name": "x"}, "target": {"type": "AverageValue", "averageValue": "1"}}}),
                format!("{m}.pods: must not be set: a metric sets the source of its type only"),
            ),
            (
                json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization"}}}),
                format!(
                    "{m}.resource.target.averageUtilization: either averageUtilization or averageValue must be set"
                ),
            ),
            (
                json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80, "averageValue": "1"}}}),
                format!(
                    "{m}.resource.target.averageValue: cannot be set with averageUtilization: set one of them"
                ),
            ),
            (
                json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Percent", "averageUtilization": 80}}}),
                format!(
                    "{m}.resource.target.type: must be one of Utilization, Value, AverageValue, not \"Percent\""
                ),
            ),
            (
                json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 0}}}),
                format!(
                    "{m}.resource.target.averageUtilization: must be at least 1 (percent), not 0"
                ),
            ),
            (
                json!({"type": "Pods", "pods": {"metric": {"name": "rate"}, "target": {"type": "AverageValue", "averageValue": "-1"}}}),
                format!("{m}.pods.target.averageValue: must be a positive quantity, not \"-1\""),
            ),
            (
                json!({"type": "Pods", "pods": {"metric": {"name": "rate"}, "target": {"type": "Value", "value": "3"}}}),
                format!(
                    "{m}.pods.target.averageValue: must be set: a pods metric is averaged over the pods"
                ),
            ),
            (
                json!({"type": "Pods", "pods": {"metric": {"name": "a/b"}, "target": {"type": "AverageValue", "averageValue": "3"}}}),
                format!(
                    "{m}.pods.metric.name: must not be . or .., nor contain / or %, not \"a/b\""
                ),
            ),
            (
                json!({"type": "ContainerResource", "containerResource": {"name": "gpu", "container": "Py_Torch", "target": {"type": "Utilization", "averageUtilization": 50}}}),
                format!(
                    "{m}.containerResource.name: must be a container resource (cpu, memory, ephemeral-storage, or hugepages-<size>), not \"gpu\""
                ),
            ),
            (
                json!({"type": "Object", "object": {"describedObject": {"kind": "Service", "name": ""}, "metric": {"name": "depth"}, "target": {"type": "Value"}}}),
                format!("{m}.object.describedObject.name: must be set"),
            ),
            (
                json!({"type": "External", "external": {"metric": {"name": "q"}, "target": {"type": "Value", "value": "1", "averageValue": "1"}}}),
                format!(
                    "{m}.external.target.value: cannot be set with averageValue: set one of them"
                ),
            ),
        ];
        for (metric, expected) in cases {
            let errors = errors_of(metric.clone());
            assert!(errors.contains(&expected), "{metric}: {errors:?}");
        }
    }

    #[test]
    fn every_metric_is_checked_under_its_index() {
        let metrics: Vec<MetricSpec> = serde_json::from_value(json!([
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}},
            {"type": "External"},
        ]))
        .expect("metrics");
        let mut errors = Errors::default();
        check(&metrics, "spec.elasticPolicy.metrics", &mut errors);
        let fields: Vec<&str> = errors.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["spec.elasticPolicy.metrics[1].external"]);
    }
}
