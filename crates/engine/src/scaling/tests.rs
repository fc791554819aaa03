//! Requests read, carried out and finished, with time passed in.

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::conditions;
use eto_api::common::ScalerPhase;

fn at(seconds: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_800_000_000 + seconds).unwrap()
}

fn object(kind: ScalerKind, spec: serde_json::Value) -> serde_json::Value {
    json!({
        "apiVersion": "kai.alibabacloud.com/v1alpha1", "kind": kind.as_str(),
        "metadata": {"name": "req", "namespace": "team", "generation": 1,
            "creationTimestamp": at(0).to_string()},
        "spec": spec,
    })
}

#[test]
fn requests_are_read_with_their_defaults() {
    let scale_in = Scaler::read(
        ScalerKind::ScaleIn,
        &object(
            ScalerKind::ScaleIn,
            json!({"selector": {"name": "mnist"}, "toDelete": {"podNames": ["b", "a", "b"]}}),
        ),
    );
    assert_eq!(scale_in.job, "mnist");
    assert_eq!(scale_in.reference(), "ScaleIn:team/req");
    assert_eq!(
        scale_in.request,
        Ok(Request::Remove(Removal::Pods(vec!["a".into(), "b".into()])))
    );
    assert_eq!(scale_in.timeout, DEFAULT_TIMEOUT);
    assert_eq!(scale_in.created, Some(at(0)));

    let scale_out = Scaler::read(
        ScalerKind::ScaleOut,
        &object(
            ScalerKind::ScaleOut,
            json!({"selector": {"name": "mnist"}, "toAdd": {"count": 3}, "timeout": 600, "script": ""}),
        ),
    );
    assert_eq!(scale_out.request, Ok(Request::Add(3)));
    assert_eq!(scale_out.timeout, Duration::from_secs(600));
    assert_eq!(scale_out.script, None, "an empty script is no script");
}

#[test]
fn a_request_that_does_not_decode_is_read_with_the_field_that_does_not() {
    let cases = [
        (
            ScalerKind::ScaleIn,
            json!({"selector": {"name": "mnist"}, "toDelete": {"count": "two"}}),
            "spec.toDelete.count",
        ),
        (
            ScalerKind::ScaleIn,
            json!({"selector": {"name": "mnist"}, "toDelete": {"count": 1, "podNames": ["a"]}}),
            "spec.toDelete",
        ),
        (
            ScalerKind::ScaleIn,
            json!({"selector": {"name": "mnist"}, "toDelete": {"podNames": []}}),
            "spec.toDelete",
        ),
        (
            ScalerKind::ScaleOut,
            json!({"selector": {"name": "mnist"}, "toAdd": {"count": 0}}),
            "spec.toAdd.count",
        ),
        (
            ScalerKind::ScaleOut,
            json!({"selector": {"name": "mnist"}}),
            "spec",
        ),
    ];
    for (kind, spec, field) in cases {
        let scaler = Scaler::read(kind, &object(kind, spec.clone()));
        assert_eq!(scaler.job, "mnist");
        assert_eq!(
            scaler.request.as_ref().map_err(|e| e.field.as_str()),
            Err(field),
            "{spec}"
        );
    }
    let missing = Scaler::read(
        ScalerKind::ScaleOut,
        &object(ScalerKind::ScaleOut, json!({"selector": {"name": "mnist"}})),
    );
    assert!(missing.request.unwrap_err().message.contains("toAdd"));
}

fn orphan_at(
    spec: serde_json::Value,
    job_exists: bool,
    now: i64,
) -> (Option<String>, Option<jiff::Timestamp>) {
    let scaler = Scaler::read(ScalerKind::ScaleOut, &object(ScalerKind::ScaleOut, spec));
    let (orphaned, requeue) = orphan(&scaler, job_exists, at(now));
    let message = orphaned.map(|orphaned| {
        let state = orphaned.update.status.expect("a status").state();
        assert_eq!(state.phase, Some(ScalerPhase::Failed));
        let condition =
            conditions::find(&state.conditions, SCALE_FAILED).and_then(|c| c.message.clone());
        assert_eq!(condition.as_ref(), Some(&orphaned.message));
        orphaned.message
    });
    (message, requeue)
}

#[test]
fn a_request_for_a_job_that_does_not_exist_fails_after_a_grace_period() {
    let spec = json!({"selector": {"name": "gone"}, "toAdd": {"count": 1}});
    assert_eq!(orphan_at(spec.clone(), false, 5), (None, Some(at(10))));
    assert_eq!(
        orphan_at(spec.clone(), false, 10),
        (
            Some("spec.selector.name: TrainingJob gone does not exist in namespace team".into()),
            None
        )
    );
    assert_eq!(
        orphan_at(spec, true, 10),
        (None, None),
        "the job's reconcile takes it"
    );
}

#[test]
fn a_request_naming_a_job_of_another_namespace_fails_at_once() {
    let spec = json!({"selector": {"name": "other/mnist"}, "toAdd": {"count": 1}});
    let (message, requeue) = orphan_at(spec, false, 0);
    assert!(
        message
            .unwrap()
            .contains("a ScaleOut acts on a TrainingJob of its own namespace (team)")
    );
    assert_eq!(requeue, None);
}

#[test]
fn a_finished_request_is_left_alone() {
    let mut value = object(
        ScalerKind::ScaleOut,
        json!({"selector": {"name": "gone"}, "toAdd": {"count": 1}}),
    );
    value["status"] = json!({"phase": "Succeeded"});
    let scaler = Scaler::read(ScalerKind::ScaleOut, &value);
    assert_eq!(orphan(&scaler, false, at(3600)), (None, None));
}
