//! training-operator v1's HorizontalPodAutoscaler: a PyTorchJob whose `elasticPolicy` sets
//! `metrics` gets an autoscaling/v2 HPA named like the job and controlled by it, whose
//! metrics are the job's, and which scales the job's Workers between `minReplicas` and
//! `maxReplicas` through the job's scale subresource (`Worker.replicas`; the selector of
//! `status.replicaStatuses.Worker` finds the pods it measures). eto then holds the Workers at
//! that count as it holds any other: replacements, pending pods kept for the autoscaler,
//! notices before a scale-in.
//!
//! The HPA exists while the job's run goes on: it is not created, and is deleted, while the
//! job is suspended (as v1 does) and once it finished (there is nothing left to scale), and
//! it is deleted when the spec no longer sets `metrics` (where v1 left it).

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec,
};

use crate::job::JobContext;
use crate::kind::pytorch_job::Defaulted;
use crate::names;
use eto_api::PyTorchJob;

/// The HPA of `job`, if it is a PyTorchJob whose `elasticPolicy` sets `metrics` (an empty
/// list included, as v1 reads it: kube-apiserver then gives the HPA its default, 80% CPU).
pub fn autoscaler(job: JobContext<'_>) -> Option<HorizontalPodAutoscaler> {
    let pytorch = job.job_ref.downcast::<PyTorchJob>()?;
    let bounds = Defaulted::of(pytorch).elastic?;
    let metrics = bounds.policy.metrics.clone()?;
    let count = |count: u32| i32::try_from(count).unwrap_or(i32::MAX);
    let resource = job.kind().api_resource();
    Some(HorizontalPodAutoscaler {
        metadata: job.metadata(names::autoscaler(job.name())),
        spec: Some(HorizontalPodAutoscalerSpec {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some(resource.api_version),
                kind: resource.kind,
                name: job.name().into(),
            },
            min_replicas: Some(count(bounds.min)),
            max_replicas: count(bounds.max.max(bounds.min)),
            metrics: Some(metrics),
            behavior: None,
        }),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use crate::job::JobRef;
    use serde_json::json;

    use eto_api::PyTorchJob;
    use serde_json::Value;

    use super::*;

    /// The autoscaler of the test PyTorchJob (a Master, 2 Workers) with `spec` merged in.
    fn hpa_of(spec: Value) -> Option<HorizontalPodAutoscaler> {
        let mut value = serde_json::to_value(crate::testing::pytorch_job()).expect("json");
        json_patch::merge(&mut value, &json!({"spec": spec}));
        let job: PyTorchJob = serde_json::from_value(value).expect("a PyTorchJob");
        let effective = JobRef::new(&job).validate().expect("a valid job");
        autoscaler(JobContext {
            job_ref: JobRef::new(&job),
            spec: &effective,
            run: 0,
            notice: None,
            gang: None,
        })
    }

    const CPU: &str = r#"[{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]"#;

    #[test]
    fn a_job_with_metrics_gets_v1s_hpa_scaling_it_between_its_bounds() {
        let metrics: Value = serde_json::from_str(CPU).expect("json");
        let hpa = hpa_of(
            json!({"elasticPolicy": {"minReplicas": 2, "maxReplicas": 4, "metrics": metrics}}),
        )
        .expect("an HPA");
        assert_eq!(hpa.metadata.name.as_deref(), Some("ddp"));
        let owner = &hpa.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("PyTorchJob", Some(true))
        );
        let spec = hpa.spec.expect("spec");
        assert_eq!(
            spec.scale_target_ref,
            CrossVersionObjectReference {
                api_version: Some("kubeflow.org/v1".into()),
                kind: "PyTorchJob".into(),
                name: "ddp".into(),
            }
        );
        assert_eq!((spec.min_replicas, spec.max_replicas), (Some(2), 4));
        assert_eq!(serde_json::to_value(spec.metrics).expect("json"), metrics);
    }

    #[test]
    fn bounds_are_v1s_defaults_when_one_or_none_is_set() {
        let metrics: Value = serde_json::from_str(CPU).expect("json");
        for (policy, bounds) in [
            (json!({"maxReplicas": 5, "metrics": metrics}), (Some(5), 5)),
            (json!({"minReplicas": 2, "metrics": metrics}), (Some(2), 2)),
            (json!({"metrics": metrics}), (Some(2), 2)),
        ] {
            let spec = hpa_of(json!({"elasticPolicy": policy}))
                .and_then(|hpa| hpa.spec)
                .expect("an HPA");
            assert_eq!((spec.min_replicas, spec.max_replicas), bounds, "{policy}");
        }
    }

    #[test]
    fn no_metrics_no_hpa() {
        assert_eq!(
            hpa_of(json!({"elasticPolicy": {"minReplicas": 2, "maxReplicas": 4}})),
            None
        );
        assert_eq!(hpa_of(json!({})), None);
        let empty = hpa_of(json!({"elasticPolicy": {"metrics": []}})).expect("an HPA");
        assert_eq!(empty.spec.and_then(|s| s.metrics), Some(Vec::new()));
    }

    #[test]
    fn amounts_written_canonically_by_the_api_server_are_current() {
        let metric = |amount: Value| json!({"elasticPolicy": {"maxReplicas": 4, "metrics": [{"type": "Pods", "pods": {"metric": {"name": "rate"}, "target": {"type": "AverageValue", "averageValue": amount}}}]}});
        let desired = hpa_of(metric(json!("1000m"))).expect("an HPA");
        let canonical = hpa_of(metric(json!("1"))).expect("an HPA");
        assert!(crate::already_applied::autoscaler_is_applied(
            &desired, &canonical
        ));
        let integer = hpa_of(metric(json!(1))).expect("an HPA");
        assert!(crate::already_applied::autoscaler_is_applied(
            &integer, &canonical
        ));
        let changed = hpa_of(metric(json!("2"))).expect("an HPA");
        assert!(!crate::already_applied::autoscaler_is_applied(
            &changed, &canonical
        ));
    }
}
