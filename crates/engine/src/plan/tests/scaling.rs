//! ScaleIn and ScaleOut requests carried out by a job's reconciles, stepped through the
//! in-memory world.

use eto_api::common::{ReplicaRestartPolicy, ScalerPhase};
use eto_api::job_status::JobPhase;
use eto_api::training_job::JobRestartPolicy;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::conditions;
use crate::plan::*;
use crate::scaling::ScalerKind::{ScaleIn, ScaleOut};
use crate::testing::training_job;
use crate::testing::world::{World, deleted_pods, pod_names, reasons};

/// A running job of `ready` ready workers (replicas), between `min` and `max`.
fn running(ready: u32, min: u32, max: Option<u32>) -> World {
    let mut job = training_job();
    let worker = &mut job.spec.et_replica_specs.worker;
    worker.replicas = Some(ready.try_into().unwrap());
    worker.min_replicas = Some(min.try_into().unwrap());
    worker.max_replicas = max.map(|m| m.try_into().unwrap());
    let mut world = World::new(job);
    world.reconcile();
    for index in 0..ready {
        world.ready(&format!("mnist-worker-{index}"));
    }
    world.reconcile();
    world.ready("mnist-launcher");
    world.reconcile();
    assert_eq!(world.status().phase, Some(JobPhase::Running));
    world
}

fn phase(world: &World, name: &str) -> Option<ScalerPhase> {
    world.scaler(name).state.phase
}

/// The reason and message of a request's condition of `type_`.
fn scaler_condition(world: &World, name: &str, type_: &str) -> (String, String) {
    let condition = conditions::find(&world.scaler(name).state.conditions, type_)
        .unwrap_or_else(|| panic!("{name} has no {type_} condition"));
    (
        condition.reason.clone().unwrap_or_default(),
        condition.message.clone().unwrap_or_default(),
    )
}

/// The workers a plan creates.
fn created_pods(plan: &Plan) -> Vec<String> {
    pod_names(plan)
        .into_iter()
        .filter(|name| name.contains("-worker-"))
        .collect()
}

fn desired(world: &World) -> i32 {
    world.status().workers.as_ref().unwrap().desired
}

fn hostfile_workers(world: &World) -> Vec<String> {
    world
        .launcher_hostfile()
        .unwrap()
        .lines()
        .map(|line| line.split('.').next().unwrap().to_string())
        .collect()
}

#[test]
fn a_scale_out_adds_workers_under_new_names_and_succeeds_once_they_are_ready() {
    let mut world = running(2, 1, None);
    world.request(ScaleOut, "out", json!({"toAdd": {"count": 2}}));
    let plan = world.reconcile();
    assert_eq!(created_pods(&plan), ["mnist-worker-2", "mnist-worker-3"]);
    assert_eq!(reasons(&plan), ["ScalingStarted", "WorkersCreated"]);
    let out = world.scaler("out");
    assert_eq!(out.state.phase, Some(ScalerPhase::Scaling));
    assert_eq!(out.state.pods, ["mnist-worker-2", "mnist-worker-3"]);
    assert_eq!(
        out.owners,
        ["6f1d7c1e-0000-4000-8000-000000000001"],
        "owned by the job"
    );
    assert_eq!(world.status().phase, Some(JobPhase::Scaling));
    assert_eq!(
        world.status().current_scaler.as_deref(),
        Some("ScaleOut:default/out")
    );
    assert_eq!(
        scaler_condition(&world, "out", conditions::SCALING).0,
        "ScalingStart"
    );
    assert_eq!(
        plan.requeue_after,
        Some(Duration::from_secs(60)),
        "looked at again at its timeout"
    );

    world.ready("mnist-worker-2");
    world.reconcile();
    assert_eq!(
        phase(&world, "out"),
        Some(ScalerPhase::Scaling),
        "one of two ready"
    );
    world.ready("mnist-worker-3");
    let plan = world.reconcile();
    assert_eq!(reasons(&plan), ["ScaleSucceeded"]);
    assert_eq!(plan.tallies.scaling, [("ScaleOut".to_string(), true)]);
    assert_eq!(phase(&world, "out"), Some(ScalerPhase::Succeeded));
    assert!(world.scaler("out").state.completion_time.is_some());
    assert_eq!(world.status().phase, Some(JobPhase::Running));
    assert_eq!(world.status().current_scaler, None);
    assert_eq!(desired(&world), 4, "the job holds to its new size");
    assert_eq!(
        hostfile_workers(&world),
        [
            "mnist-worker-0",
            "mnist-worker-1",
            "mnist-worker-2",
            "mnist-worker-3"
        ]
    );
    let scaling = conditions::find(&world.status().conditions, conditions::SCALING).unwrap();
    assert_eq!(scaling.reason.as_deref(), Some("ScaleSucceeded"));

    // Done for good: the next reconciles carry out nothing more.
    world.advance(3600);
    assert!(world.reconcile().is_empty());
}

#[test]
fn a_scale_out_that_times_out_removes_the_workers_it_added() {
    let mut world = running(2, 1, None);
    world.request(
        ScaleOut,
        "out",
        json!({"toAdd": {"count": 2}, "timeout": 30}),
    );
    world.reconcile();
    world.ready("mnist-worker-2");
    world.advance(29);
    world.reconcile();
    assert_eq!(phase(&world, "out"), Some(ScalerPhase::Scaling));
    world.advance(1);
    let plan = world.reconcile();
    assert_eq!(phase(&world, "out"), Some(ScalerPhase::Failed));
    let (reason, message) = scaler_condition(&world, "out", "ScaleFailed");
    assert_eq!(reason, "Timeout");
    assert!(
        message.contains("1 of 2 added workers were ready within spec.timeout (30s)"),
        "{message}"
    );
    assert_eq!(
        deleted_pods(&plan),
        ["mnist-worker-3"],
        "the one not ready goes at once"
    );
    assert_eq!(
        world.status().draining_workers[0].pod,
        "mnist-worker-2",
        "the ready one drains"
    );
    assert_eq!(
        world.status().target_workers,
        ["mnist-worker-0", "mnist-worker-1"]
    );
    assert_eq!(desired(&world), 2);
    assert!(reasons(&plan).contains(&"ScaleFailed".to_string()));
}

#[test]
fn a_scale_in_by_name_drains_exactly_those_workers_and_succeeds_when_they_are_gone() {
    let mut world = running(4, 1, None);
    world.request(
        ScaleIn,
        "in",
        json!({"toDelete": {"podNames": ["mnist-worker-3", "mnist-worker-1"]}}),
    );
    let plan = world.reconcile();
    assert!(deleted_pods(&plan).is_empty(), "they drain first");
    assert_eq!(
        hostfile_workers(&world),
        ["mnist-worker-0", "mnist-worker-2"]
    );
    assert_eq!(
        world.scaler("in").state.pods,
        ["mnist-worker-1", "mnist-worker-3"]
    );
    assert_eq!(world.status().phase, Some(JobPhase::Scaling));

    world.advance(30);
    let plan = world.reconcile();
    assert_eq!(deleted_pods(&plan), ["mnist-worker-1", "mnist-worker-3"]);
    assert_eq!(
        phase(&world, "in"),
        Some(ScalerPhase::Scaling),
        "until the pods are gone"
    );
    world.reconcile();
    assert_eq!(phase(&world, "in"), Some(ScalerPhase::Succeeded));
    assert_eq!(desired(&world), 2);
    assert_eq!(world.status().phase, Some(JobPhase::Running));
}

#[test]
fn a_scale_in_by_count_removes_workers_that_are_not_ready_first_then_the_newest() {
    let mut world = running(4, 1, None);
    world.running_not_ready("mnist-worker-1");
    world.reconcile();
    world.request(ScaleIn, "in", json!({"toDelete": {"count": 2}}));
    world.reconcile();
    assert_eq!(
        world.scaler("in").state.pods,
        ["mnist-worker-1", "mnist-worker-3"]
    );
}

#[test]
fn requests_beyond_the_limits_fail_naming_them_and_change_nothing() {
    let mut world = running(3, 2, Some(4));
    world.request(ScaleIn, "too-few", json!({"toDelete": {"count": 2}}));
    let plan = world.reconcile();
    let (reason, message) = scaler_condition(&world, "too-few", "ScaleFailed");
    assert_eq!(reason, "BelowMinReplicas");
    assert_eq!(
        message,
        "spec.toDelete.count: removing 2 of 3 workers would leave 1, fewer than worker.minReplicas (2)"
    );
    assert!(deleted_pods(&plan).is_empty() && created_pods(&plan).is_empty());

    world.request(ScaleOut, "too-many", json!({"toAdd": {"count": 2}}));
    let plan = world.reconcile();
    let (reason, message) = scaler_condition(&world, "too-many", "ScaleFailed");
    assert_eq!(reason, "AboveMaxReplicas");
    assert_eq!(
        message,
        "spec.toAdd.count: adding 2 to 3 workers would make 5, more than worker.maxReplicas (4)"
    );
    assert!(created_pods(&plan).is_empty());
    assert_eq!(world.status().target_workers.len(), 3);
    assert_eq!(world.status().phase, Some(JobPhase::Running));
    assert!(reasons(&plan).contains(&"ScaleFailed".to_string()));
}

#[test]
fn a_scale_in_naming_pods_that_are_not_workers_fails_naming_them() {
    let mut world = running(3, 1, None);
    world.request(
        ScaleIn,
        "in",
        json!({"toDelete": {"podNames": ["mnist-worker-1", "mnist-worker-9", "other-worker-0"]}}),
    );
    let plan = world.reconcile();
    let (reason, message) = scaler_condition(&world, "in", "ScaleFailed");
    assert_eq!(reason, "UnknownPods");
    assert!(
        message.contains("mnist-worker-9, other-worker-0 are not a worker of TrainingJob mnist"),
        "{message}"
    );
    assert!(deleted_pods(&plan).is_empty());
    assert_eq!(hostfile_workers(&world).len(), 3, "nothing was removed");
}

#[test]
fn a_request_with_a_script_is_refused_and_says_why() {
    let mut world = running(2, 1, None);
    world.request(
        ScaleOut,
        "scripted",
        json!({"toAdd": {"count": 1}, "script": "/scaler.sh"}),
    );
    let plan = world.reconcile();
    assert_eq!(phase(&world, "scripted"), Some(ScalerPhase::Failed));
    let (reason, message) = scaler_condition(&world, "scripted", "ScaleFailed");
    assert_eq!(reason, "ScriptNotSupported");
    assert!(
        message.starts_with("spec.script: eto does not run scripts on the launcher"),
        "{message}"
    );
    assert!(message.contains("pods/exec"));
    assert!(created_pods(&plan).is_empty());
}

#[test]
fn requests_run_one_at_a_time_newest_first() {
    let mut world = running(2, 1, None);
    world.request(ScaleOut, "older", json!({"toAdd": {"count": 1}}));
    world.advance(1);
    world.request(ScaleOut, "newer", json!({"toAdd": {"count": 1}}));
    world.reconcile();
    assert_eq!(phase(&world, "newer"), Some(ScalerPhase::Scaling));
    assert_eq!(phase(&world, "older"), Some(ScalerPhase::Created));
    assert_eq!(
        scaler_condition(&world, "older", conditions::CREATED).1,
        "waiting for ScaleOut:default/newer to finish"
    );
    world.ready("mnist-worker-2");
    world.reconcile();
    assert_eq!(phase(&world, "newer"), Some(ScalerPhase::Succeeded));
    world.reconcile();
    assert_eq!(phase(&world, "older"), Some(ScalerPhase::Scaling));
    assert_eq!(world.scaler("older").state.pods, ["mnist-worker-3"]);
}

#[test]
fn a_request_waits_until_its_job_runs() {
    let mut world = World::new(training_job());
    world.reconcile();
    world.request(ScaleOut, "early", json!({"toAdd": {"count": 1}}));
    world.reconcile();
    assert_eq!(phase(&world, "early"), Some(ScalerPhase::Created));
    assert_eq!(
        scaler_condition(&world, "early", conditions::CREATED).1,
        "waiting for TrainingJob mnist to run"
    );
    world.ready("mnist-worker-0");
    world.ready("mnist-worker-1");
    world.reconcile();
    world.ready("mnist-launcher");
    world.reconcile();
    assert_eq!(phase(&world, "early"), Some(ScalerPhase::Scaling));
}

#[test]
fn a_job_that_finishes_or_restarts_abandons_its_requests() {
    let mut world = running(2, 1, None);
    world.request(ScaleOut, "out", json!({"toAdd": {"count": 1}}));
    world.reconcile();
    world.exit("mnist-launcher", 0);
    world.reconcile();
    assert_eq!(world.status().phase, Some(JobPhase::Succeeded));
    assert_eq!(phase(&world, "out"), Some(ScalerPhase::Failed));
    assert_eq!(
        scaler_condition(&world, "out", "ScaleFailed").1,
        "abandoned: TrainingJob mnist succeeded"
    );
    assert_eq!(world.status().current_scaler, None);

    let mut world = running(2, 1, None);
    world.job.spec.restart_policy = Some(JobRestartPolicy::OnFailure);
    world.request(ScaleIn, "in", json!({"toDelete": {"count": 1}}));
    world.reconcile();
    world.exit("mnist-launcher", 1);
    world.reconcile();
    assert_eq!(world.status().restart_count, 1);
    assert_eq!(phase(&world, "in"), Some(ScalerPhase::Failed));
}

#[test]
fn changing_replicas_during_a_scale_out_fails_it_and_the_job_follows_replicas() {
    let mut world = running(2, 1, None);
    world.request(ScaleOut, "out", json!({"toAdd": {"count": 2}}));
    world.reconcile();
    world.job.spec.et_replica_specs.worker.replicas = Some(3);
    world.reconcile();
    assert_eq!(phase(&world, "out"), Some(ScalerPhase::Failed));
    assert_eq!(
        scaler_condition(&world, "out", "ScaleFailed").0,
        "ReplicasChanged"
    );
    assert_eq!(world.status().target_workers.len(), 3);
    assert_eq!(desired(&world), 3);
}

#[test]
fn after_a_request_a_change_of_replicas_resizes_the_job_to_it() {
    let mut world = running(2, 1, None);
    world.request(ScaleOut, "out", json!({"toAdd": {"count": 2}}));
    world.reconcile();
    world.ready("mnist-worker-2");
    world.ready("mnist-worker-3");
    world.reconcile();
    assert_eq!(desired(&world), 4);
    // worker.replicas is still 2 and unchanged: the job keeps 4.
    world.reconcile();
    assert_eq!(world.status().target_workers.len(), 4);
    world.job.spec.et_replica_specs.worker.replicas = Some(3);
    world.reconcile();
    assert_eq!(world.status().target_workers.len(), 3);
    assert_eq!(desired(&world), 3);
}

#[test]
fn a_scale_out_waits_for_the_replacement_of_an_added_worker_that_failed() {
    let mut world = running(2, 1, None);
    world.job.spec.et_replica_specs.worker.restart_policy = Some(ReplicaRestartPolicy::OnFailure);
    world.request(ScaleOut, "out", json!({"toAdd": {"count": 1}}));
    world.reconcile();
    world.ready("mnist-worker-2");
    world.exit("mnist-worker-2", 1);
    world.reconcile();
    assert_eq!(world.scaler("out").state.pods, ["mnist-worker-3"]);
    assert_eq!(phase(&world, "out"), Some(ScalerPhase::Scaling));
    world.ready("mnist-worker-3");
    world.reconcile();
    assert_eq!(phase(&world, "out"), Some(ScalerPhase::Succeeded));
    assert_eq!(desired(&world), 3);
}

#[test]
fn deleting_a_request_under_way_deletes_no_worker() {
    let mut world = running(2, 1, None);
    world.request(ScaleOut, "out", json!({"toAdd": {"count": 1}}));
    world.reconcile();
    world.scalers.clear();
    let plan = world.reconcile();
    assert!(deleted_pods(&plan).is_empty());
    assert_eq!(
        world.status().target_workers.len(),
        3,
        "the added worker stays"
    );
    assert_eq!(world.status().current_scaler, None);
}

#[test]
fn a_scale_out_whose_job_status_was_not_written_is_carried_on_without_duplicates() {
    let mut world = running(2, 1, None);
    let before = world.job.status.clone();
    world.request(ScaleOut, "out", json!({"toAdd": {"count": 1}}));
    world.reconcile();
    // The operator stopped after creating the pod and writing the request's status, before
    // the job's status.
    world.job.status = before;
    let plan = world.reconcile();
    assert!(
        created_pods(&plan).is_empty(),
        "no second pod for the same request"
    );
    assert_eq!(
        world.status().target_workers,
        ["mnist-worker-0", "mnist-worker-1", "mnist-worker-2"]
    );
    assert_eq!(world.status().phase, Some(JobPhase::Scaling));
}

#[test]
fn a_request_for_an_invalid_job_waits() {
    let mut world = running(2, 1, None);
    world.job.spec.launcher_attach_mode = Some(eto_api::training_job::LauncherAttachMode::Kubexec);
    world.request(ScaleOut, "out", json!({"toAdd": {"count": 1}}));
    world.reconcile();
    assert_eq!(phase(&world, "out"), Some(ScalerPhase::Created));
}
