//! A PyTorchJob's HorizontalPodAutoscaler, v1's from `elasticPolicy.metrics`: applied while
//! the run goes on, kept as the spec says, deleted while suspended, once finished, and when
//! the spec drops its metrics.

use eto_api::PyTorchJob;
use eto_api::job_status::JobPhase;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::plan::*;
use crate::testing::pytorch_job;
use crate::testing::world::{World, reasons};

const CPU: &str = r#"{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}"#;

/// `ddp` without a Master, two Workers between one and three, its rendezvous left to eto,
/// with `policy` merged into its `elasticPolicy`.
fn elastic(policy: serde_json::Value) -> PyTorchJob {
    let mut value = serde_json::to_value(pytorch_job()).unwrap();
    let cpu: serde_json::Value = serde_json::from_str(CPU).unwrap();
    json_patch::merge(
        &mut value,
        &json!({"spec": {
            "elasticPolicy": {"minReplicas": 1, "maxReplicas": 3, "metrics": [cpu]},
            "pytorchReplicaSpecs": {"Master": null}
        }}),
    );
    json_patch::merge(&mut value, &json!({"spec": {"elasticPolicy": policy}}));
    serde_json::from_value(value).unwrap()
}

fn applied(plan: &Plan) -> Option<&HorizontalPodAutoscaler> {
    plan.apply.iter().find_map(|child| match child {
        Child::Autoscaler(autoscaler) => Some(autoscaler.as_ref()),
        _ => None,
    })
}

fn deleted(plan: &Plan) -> bool {
    plan.delete
        .iter()
        .any(|d| d.kind == ChildKind::Autoscaler && d.name == "ddp")
}

fn job(world: &mut World) -> &mut PyTorchJob {
    world.pytorch_job.as_mut().expect("a PyTorchJob")
}

fn phase(world: &World) -> Option<JobPhase> {
    world.pytorch_job.as_ref()?.status.as_ref()?.eto.phase
}

#[test]
fn a_job_with_metrics_gets_its_autoscaler_once_and_again_only_when_the_spec_changes() {
    let mut world = World::pytorch(elastic(json!({})));
    let plan = world.reconcile();
    let hpa = applied(&plan).expect("the autoscaler is applied with the first pods");
    let spec = hpa.spec.as_ref().expect("spec");
    assert_eq!((spec.min_replicas, spec.max_replicas), (Some(1), 3));
    assert_eq!(
        applied(&world.reconcile()),
        None,
        "it says what eto would apply"
    );
    job(&mut world)
        .spec
        .elastic_policy
        .as_mut()
        .unwrap()
        .max_replicas = Some(5);
    let plan = world.reconcile();
    let spec = applied(&plan).and_then(|hpa| hpa.spec.as_ref());
    assert_eq!(spec.map(|s| s.max_replicas), Some(5));
}

#[test]
fn amounts_the_api_server_wrote_canonically_are_not_applied_again() {
    let pods = |amount: &str| json!({"metrics": [{"type": "Pods", "pods": {"metric": {"name": "rate"}, "target": {"type": "AverageValue", "averageValue": amount}}}]});
    let mut world = World::pytorch(elastic(pods("1500m")));
    world.reconcile();
    let target = &mut world
        .autoscaler
        .as_mut()
        .unwrap()
        .spec
        .as_mut()
        .unwrap()
        .metrics
        .as_mut()
        .unwrap()[0];
    target.pods.as_mut().unwrap().target.average_value = Some(
        k8s_openapi::apimachinery::pkg::api::resource::Quantity("1.5".into()),
    );
    assert_eq!(applied(&world.reconcile()), None);
}

#[test]
fn a_job_without_metrics_has_no_autoscaler_and_dropping_them_deletes_it() {
    let mut world = World::pytorch(elastic(json!({"metrics": null})));
    let plan = world.reconcile();
    assert_eq!(applied(&plan), None);
    assert!(!deleted(&plan));

    let mut world = World::pytorch(elastic(json!({})));
    world.reconcile();
    job(&mut world)
        .spec
        .elastic_policy
        .as_mut()
        .unwrap()
        .metrics = None;
    assert!(deleted(&world.reconcile()));
    assert_eq!(world.autoscaler, None);
}

#[test]
fn a_suspended_job_has_no_autoscaler_and_gets_it_back_when_it_resumes() {
    let mut world = World::pytorch(elastic(json!({})));
    world.reconcile();
    let suspend = |world: &mut World, suspend: bool| {
        job(world).spec.run_policy.get_or_insert_default().suspend = Some(suspend);
    };
    suspend(&mut world, true);
    let plan = world.reconcile();
    assert!(deleted(&plan), "{plan:#?}");
    assert_eq!(phase(&world), Some(JobPhase::Suspended));
    let plan = world.reconcile();
    assert_eq!(applied(&plan), None, "not created while suspended");
    suspend(&mut world, false);
    let plan = world.reconcile();
    assert!(applied(&plan).is_some(), "{plan:#?}");
}

#[test]
fn a_finished_job_has_no_autoscaler() {
    let mut world = World::pytorch(elastic(json!({})));
    world.reconcile();
    for pod in ["ddp-rdzv", "ddp-worker-0", "ddp-worker-1"] {
        world.ready(pod);
    }
    world.reconcile();
    world.exit("ddp-worker-0", 0);
    let plan = world.reconcile();
    assert_eq!(phase(&world), Some(JobPhase::Succeeded));
    assert!(deleted(&plan));
    assert_eq!(applied(&world.reconcile()), None);
}

#[test]
fn a_name_held_by_another_autoscaler_is_not_written_and_the_job_says_so() {
    let mut world = World::pytorch(elastic(json!({})));
    world.taken = vec![TakenName {
        kind: "HorizontalPodAutoscaler",
        name: "ddp".into(),
        holder: "nobody (no controller)".into(),
    }];
    let plan = world.reconcile();
    assert_eq!(applied(&plan), None);
    assert!(reasons(&plan).contains(&NAME_TAKEN.to_string()));
}

#[test]
fn a_metric_the_api_server_would_refuse_is_reported_and_nothing_is_created() {
    let bad = json!({"metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization"}}}]});
    let mut world = World::pytorch(elastic(bad));
    let plan = world.reconcile();
    assert!(plan.apply.is_empty(), "{:?}", plan.apply);
    let note = plan
        .events
        .iter()
        .find(|event| event.reason == "InvalidSpec")
        .map(|event| event.note.clone())
        .unwrap_or_default();
    assert!(
        note.contains("spec.elasticPolicy.metrics[0].resource.target.averageUtilization"),
        "{note}"
    );
}
