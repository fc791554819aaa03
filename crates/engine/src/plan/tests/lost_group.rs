//! A torchrun group that cannot go on (see `plan/run/lost_group.rs`): a closed rendezvous, or
//! every started Worker failing, ends the run in the same reconcile; after the platform took a
//! Worker the next run resumes from the checkpoint with nothing counted, and a Suspend notice
//! waits only for Workers whose training still runs.

use crate::status::JobStatus;
use eto_api::PyTorchJob;
use eto_api::common::ConditionStatus;
use eto_api::job_status::{JobPhase, NoticeKind};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::pytorch::env;
use super::rendezvous::{Round, store_report};
use crate::group_report::{GroupReport, GroupState, Member};
use crate::testing::pytorch_job;
use crate::testing::world::{World, deleted_pods, pod_names};

const UID: &str = "6f1d7c1e-0000-4000-8000-000000000003";

/// `ddp`: three Workers between two and four, its rendezvous left to eto, 60 s to save on a
/// notice, `spec` merged into its spec.
fn job(spec: serde_json::Value) -> PyTorchJob {
    let mut value = serde_json::to_value(pytorch_job()).unwrap();
    json_patch::merge(
        &mut value,
        &json!({"spec": {
            "elasticPolicy": {"minReplicas": 2, "maxReplicas": 4, "checkpointGraceSeconds": 60},
            "pytorchReplicaSpecs": {"Master": null, "Worker": {"replicas": 3}}
        }}),
    );
    json_patch::merge(&mut value, &json!({ "spec": spec }));
    serde_json::from_value(value).unwrap()
}

/// A world whose job trains: its store runs and three Workers train.
fn training(job: PyTorchJob) -> World {
    let mut world = World::pytorch(job);
    world.reconcile();
    world.ready("ddp-rdzv");
    for worker in ["ddp-worker-0", "ddp-worker-1", "ddp-worker-2"] {
        world.training(worker);
    }
    world.reconcile();
    assert_eq!(status(&world).phase, Some(JobPhase::Running));
    world
}

/// The job's status, in the engine's shape.
fn status(world: &World) -> JobStatus {
    world.observed().job.status()
}

/// The store's report of a complete rendezvous in `round`, closed or not, whose three first
/// Workers' agents beat a second ago.
fn report(round: i64, closed: bool) -> GroupReport {
    store_report(
        round,
        if closed { Round::Closed } else { Round::Formed },
        &[
            ("ddp-worker-0", 1.0),
            ("ddp-worker-1", 1.0),
            ("ddp-worker-2", 1.0),
        ],
    )
}

/// The survivors' agents exited after the rendezvous closed: their heartbeats are old.
fn survivors_gone(round: i64) -> GroupReport {
    store_report(
        round,
        Round::Closed,
        &[("ddp-worker-0", 20.0), ("ddp-worker-2", 20.0)],
    )
}

/// The `Suspended` condition's reason, while it holds.
fn suspended_for(world: &World) -> Option<String> {
    status(world)
        .conditions
        .iter()
        .find(|c| c.type_ == "Suspended" && c.status == ConditionStatus::True)
        .and_then(|c| c.reason.clone())
}

/// Worker 1 is deleted (force-deleted, gone with its node): eto replaces it.
fn lose_worker_1(world: &mut World) {
    world.pods.remove("ddp-worker-1");
    world.advance(1);
    let plan = world.reconcile();
    assert_eq!(
        pod_names(&plan),
        ["ddp-worker-3"],
        "replaced under a new name"
    );
}

#[test]
fn a_rendezvous_closed_after_a_lost_worker_ends_the_run_at_once_and_the_next_resumes() {
    let mut world = training(job(json!({})));
    lose_worker_1(&mut world);
    // The survivors' agents close the rendezvous, and their containers fail.
    world.advance(3);
    world.group_report = Some(survivors_gone(1));
    world.crash_loop("ddp-worker-0", 1);
    world.crash_loop("ddp-worker-2", 1);
    let plan = world.reconcile();
    assert_eq!(
        suspended_for(&world).as_deref(),
        Some("GroupLost"),
        "{:?}",
        status(&world).conditions
    );
    let suspended = status(&world);
    let message = suspended
        .conditions
        .iter()
        .find(|c| c.type_ == "Suspended")
        .and_then(|c| c.message.clone())
        .unwrap();
    assert!(
        message.contains("rendezvous was closed in round 1")
            && message.contains("worker ddp-worker-1 was lost to the platform (deleted)"),
        "{message}"
    );
    assert!(
        deleted_pods(&plan).contains(&"ddp-worker-0".to_string()),
        "no grace period waits for Workers that run no training: {:?}",
        deleted_pods(&plan)
    );
    assert_eq!(suspended.run, Some(1), "a new run");
    assert_eq!(suspended.restart_count, 0, "nothing counted");
    assert_eq!(
        suspended.group, None,
        "the old run's rendezvous is not shown"
    );
    // The new run's Workers start at once, at a rendezvous of their own, told to resume.
    world.group_report = None;
    let plan = world.reconcile();
    let created = pod_names(&plan);
    let worker = created
        .iter()
        .find(|name| name.starts_with("ddp-worker-"))
        .unwrap_or_else(|| panic!("the new run's Workers: {created:?}"));
    assert_eq!(
        env(&world.pods[worker], "PET_RDZV_ID").as_deref(),
        Some(format!("{UID}-1").as_str())
    );
    assert_eq!(
        status(&world).notice.map(|n| n.kind),
        Some(NoticeKind::Resume)
    );
}

#[test]
fn a_rendezvous_torch_1_closes_five_minutes_after_the_loss_is_still_the_losss_doing() {
    let mut world = training(job(json!({})));
    lose_worker_1(&mut world);
    world.ready("ddp-worker-3");
    world.reconcile();
    // The survivors' agents waited at their exit barrier for the lost one, then closed it.
    world.advance(305);
    world.group_report = Some(survivors_gone(0));
    world.crash_loop("ddp-worker-0", 1);
    world.crash_loop("ddp-worker-2", 1);
    world.reconcile();
    let message = status(&world)
        .conditions
        .iter()
        .find(|c| c.type_ == "Suspended" && c.status == ConditionStatus::True)
        .and_then(|c| c.message.clone())
        .expect("suspended at once: the replacement waits to join, it trains nothing");
    assert!(
        message.contains("305s after worker ddp-worker-1 was lost to the platform (deleted)"),
        "{message}"
    );
    assert_eq!(status(&world).restart_count, 0, "nothing counted");
    // Long after any loss, the same closure is the training's own failure.
    let mut world = training(job(json!({})));
    world.advance(400);
    world.group_report = Some(report(0, true));
    world.crash_loop("ddp-worker-0", 1);
    world.reconcile();
    assert_eq!(status(&world).restart_count, 1, "counted");
    assert_eq!(
        status(&world).group,
        None,
        "the new run does not show the rendezvous of the one that ended"
    );
}

#[test]
fn workers_still_training_in_a_closed_rendezvous_are_told_to_save_and_only_they_are_waited_for() {
    let mut world = training(job(json!({})));
    lose_worker_1(&mut world);
    world.advance(3);
    // Worker 0's agent still beats, in the group of the round that formed.
    world.group_report = Some(store_report(
        1,
        Round::Closed,
        &[("ddp-worker-0", 1.0), ("ddp-worker-2", 20.0)],
    ));
    world.crash_loop("ddp-worker-2", 1);
    world.reconcile();
    let notice = status(&world).notice.expect("a notice");
    assert_eq!(
        (notice.kind, notice.reason.as_str()),
        (NoticeKind::Suspend, "GroupLost")
    );
    assert_eq!(
        notice.deadline.map(|d| d.0),
        Some(world.now + jiff::SignedDuration::from_secs(60)),
        "the Worker that trains gets checkpointGraceSeconds"
    );
    assert_eq!(suspended_for(&world), None, "still suspending");
    // Worker 0 saved and exited; worker 2 crash-loops: nothing is left to wait for.
    world.advance(5);
    world.crash_loop("ddp-worker-0", 1);
    world.reconcile();
    assert_eq!(suspended_for(&world).as_deref(), Some("GroupLost"));
    assert_eq!(status(&world).run, Some(1));
}

#[test]
fn a_rendezvous_closed_by_a_finished_group_is_its_success_not_a_loss() {
    let mut world = training(job(json!({})));
    world.group_report = Some(report(0, true));
    // The report says closed before the kubelets report the exits.
    let plan = world.reconcile();
    assert!(deleted_pods(&plan).is_empty(), "{:?}", deleted_pods(&plan));
    assert_eq!(status(&world).phase, Some(JobPhase::Running));
    world.exit("ddp-worker-0", 0);
    world.crash_loop("ddp-worker-1", 1);
    world.reconcile();
    assert_eq!(status(&world).phase, Some(JobPhase::Succeeded));
}

#[test]
fn every_started_worker_failing_on_its_own_restarts_the_job_until_the_backoff_limit() {
    let mut world = training(job(json!({"runPolicy": {"backoffLimit": 1}})));
    for worker in ["ddp-worker-0", "ddp-worker-1", "ddp-worker-2"] {
        world.crash_loop(worker, 1);
    }
    world.advance(200);
    world.reconcile();
    let restarted = status(&world);
    assert_eq!(restarted.run, Some(1), "a new run");
    assert_eq!(restarted.restart_count, 1, "counted: the training failed");
    assert_eq!(suspended_for(&world), None);
    let restarting = restarted
        .conditions
        .iter()
        .find(|c| c.type_ == "Restarting")
        .and_then(|c| c.message.clone())
        .unwrap();
    assert!(
        restarting.contains("every started worker failed"),
        "{restarting}"
    );
    // The new run fails the same way: the limit is reached.
    world.reconcile();
    let workers: Vec<String> = world
        .pods
        .keys()
        .filter(|name| name.starts_with("ddp-worker-"))
        .cloned()
        .collect();
    for worker in &workers {
        world.crash_loop(worker, 1);
    }
    world.reconcile();
    assert_eq!(status(&world).phase, Some(JobPhase::Failed));
}

#[test]
fn a_closed_rendezvous_with_no_failed_worker_yet_and_a_lone_failure_wait() {
    // (report, Workers that crash-loop, the run goes on)
    let cases: [(Option<GroupReport>, &[&str]); 3] = [
        (Some(report(0, true)), &[]),
        (None, &["ddp-worker-2"]),
        (Some(report(0, false)), &["ddp-worker-2"]),
    ];
    for (index, (report, failing)) in cases.into_iter().enumerate() {
        let mut world = training(job(json!({})));
        world.group_report = report;
        for worker in failing {
            world.crash_loop(worker, 1);
        }
        let plan = world.reconcile();
        assert!(deleted_pods(&plan).is_empty(), "case {index}");
        assert_eq!(status(&world).run.unwrap_or(0), 0, "case {index}");
        assert_eq!(status(&world).notice, None, "case {index}");
    }
}

#[test]
fn under_never_a_lost_group_of_the_trainings_own_fails_the_job() {
    let mut world = training(job(
        json!({"pytorchReplicaSpecs": {"Worker": {"restartPolicy": "Never"}}}),
    ));
    world.group_report = Some(report(0, true));
    world.exit("ddp-worker-0", 1);
    world.reconcile();
    let failed = status(&world);
    assert_eq!(failed.phase, Some(JobPhase::Failed));
    let message = failed
        .conditions
        .iter()
        .find(|c| c.type_ == "Failed")
        .and_then(|c| c.message.clone())
        .unwrap();
    assert!(message.contains("worker restartPolicy Never"), "{message}");
}

#[test]
fn the_status_shows_a_closed_rendezvous() {
    let mut world = training(job(json!({})));
    world.group_report = Some(report(0, true));
    world.reconcile();
    assert_eq!(status(&world).group.map(|r| r.closed), Some(true));
}

#[test]
fn a_closure_no_failed_worker_confirms_is_a_loss_once_it_lasted_without_a_worker_exiting() {
    let closed_for = |seconds: f64| GroupReport {
        orders: None,
        quorum: None,
        progress: None,
        saved: Vec::new(),
        group: Some(GroupState {
            round: 1,
            complete: true,
            closed: true,
            closed_for: Some(seconds),
            others: Vec::new(),
            reformations: Vec::new(),
            participants: 2,
            waiting: 0,
            spares: 0,
            members: vec![
                Member {
                    host: "ddp-worker-0".into(),
                    heartbeat_age: Some(seconds),
                },
                Member {
                    host: "ddp-worker-2".into(),
                    heartbeat_age: Some(seconds),
                },
            ],
        }),
    };
    let mut world = training(job(json!({})));
    lose_worker_1(&mut world);
    world.training("ddp-worker-0");
    world.training("ddp-worker-2");
    world.group_report = Some(closed_for(4.0));
    let plan = world.reconcile();
    assert_eq!(
        status(&world).run.unwrap_or(0),
        0,
        "it may be a finished group"
    );
    assert_eq!(
        plan.requeue_after,
        Some(std::time::Duration::from_secs(6)),
        "looked at again when it would have lasted 10 s"
    );
    // Restarted agents that will fail once they meet it again run meanwhile.
    world.advance(6);
    world.group_report = Some(closed_for(20.0));
    world.reconcile();
    assert_eq!(
        suspended_for(&world).as_deref(),
        Some("GroupLost"),
        "nothing waits for agents that met the closed rendezvous"
    );
}
