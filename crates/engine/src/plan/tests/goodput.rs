//! The goodput ledger as the plan keeps it in the job's status: from pod states alone, from
//! the steps the rendezvous store reports, and from the Lighthouse's quorum step.

use eto_api::job_status::{Goodput, GoodputBucket, ProgressSource};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::rendezvous::{Round, store_report};
use crate::goodput::ReportedProgress;
use crate::group_report::GroupReport;
use crate::testing::world::World;
use crate::testing::{pytorch_job, training_job};

fn ledger(world: &World) -> Goodput {
    world.observed().job.status().goodput.expect("a ledger")
}

fn seconds_ago(world: &World, seconds: i64) -> jiff::Timestamp {
    world.now - jiff::SignedDuration::from_secs(seconds)
}

#[test]
fn a_training_job_without_reports_is_productive_while_its_run_goes_on() {
    let mut world = World::new(training_job());
    world.reconcile();
    assert_eq!(ledger(&world).current, Some(GoodputBucket::Waiting));
    world.advance(20);
    world.launch();
    let running = ledger(&world);
    assert_eq!(running.source, ProgressSource::PodStates);
    assert_eq!(running.current, Some(GoodputBucket::Productive));
    assert_eq!(
        running.seconds.waiting, 20.0,
        "no worker had a node until then"
    );
    world.advance(600);
    assert!(
        world.reconcile().status.is_none(),
        "a job that trains writes nothing"
    );
    world.evict("mnist-worker-1");
    world.reconcile();
    world.advance(30);
    world.exit("mnist-launcher", 0);
    world.reconcile();
    let finished = ledger(&world);
    assert_eq!(finished.current, None);
    assert_eq!(
        finished.seconds.total(),
        650.0,
        "every second of its life, once"
    );
}

/// `mnist`, whose Workers' containers declare the port eto's helper serves their steps on.
fn serving_progress() -> World {
    let mut job = training_job();
    let worker = &mut job.spec.et_replica_specs.worker.template;
    let container = &mut worker.spec.as_mut().expect("a pod spec").containers[0];
    container.ports = Some(vec![
        serde_json::from_value(json!({
            "name": crate::group_report::PROGRESS_PORT_NAME,
            "containerPort": 29411
        }))
        .unwrap(),
    ]);
    World::new(job)
}

/// The progress a training pod serves: `step`, reached `ago` seconds ago, in a stretch that
/// began at `first_step`, `first_ago` seconds ago.
fn served(world: &World, step: i64, ago: i64, first_step: i64, first_ago: i64) -> ReportedProgress {
    ReportedProgress {
        step,
        at: Some(seconds_ago(world, ago)),
        first_step: Some(first_step),
        first_at: Some(seconds_ago(world, first_ago)),
        total: None,
        restored: None,
        ended: None,
        source: ProgressSource::TrainingReports,
    }
}

/// The report a training pod's helper serves, as eto reads it.
fn served_report(progress: ReportedProgress) -> GroupReport {
    GroupReport {
        progress: Some(progress),
        ..GroupReport::default()
    }
}

#[test]
fn a_pod_that_declares_its_progress_port_is_read_again_before_it_answers() {
    let mut world = serving_progress();
    world.reconcile();
    world.launch();
    // The training still imports: its helper does not answer yet.
    let plan = world.reconcile();
    assert_eq!(ledger(&world).source, ProgressSource::PodStates);
    assert_eq!(
        plan.requeue_after,
        Some(crate::goodput::RECORD_EVERY),
        "its port is read again"
    );
    let mut silent = World::new(training_job());
    silent.reconcile();
    silent.launch();
    assert_eq!(
        silent.reconcile().requeue_after,
        None,
        "nothing to read: no reason to come back"
    );
}

#[test]
fn steps_a_pod_served_count_once_every_pod_that_served_them_is_gone() {
    let mut world = serving_progress();
    world.reconcile();
    world.launch();
    world.group_report = Some(served_report(served(&world, 1, 0, 1, 0)));
    assert_eq!(
        world.reconcile().requeue_after,
        Some(crate::goodput::READ_EVERY),
        "its pods may all go at once: read more often than recorded"
    );
    world.advance(15);
    let read = served(&world, 31, 0, 1, 15);
    world.group_report = Some(served_report(read.clone()));
    assert!(
        world.reconcile().status.is_none(),
        "read, and kept in the controller's memory, not written"
    );
    world.advance(2);
    // Both Workers go with their node, and their helpers with them: nothing answers.
    world.group_report = None;
    world.went("mnist-worker-0");
    world.went("mnist-worker-1");
    world.earlier_progress = Some(read);
    world.reconcile();
    let ledger = ledger(&world);
    assert_eq!(ledger.latest.map(|latest| latest.step), Some(31));
    assert_eq!(ledger.highest_step, Some(31));
    assert_eq!(
        ledger.seconds.productive, 15.0,
        "trained up to the last read, not only to the last record"
    );
}

/// `ddp`, two Workers between one and three, its rendezvous hosted by eto.
fn elastic() -> World {
    let mut world = World::pytorch(super::rendezvous::elastic(json!({})));
    world.reconcile();
    for pod in ["ddp-rdzv", "ddp-worker-0", "ddp-worker-1"] {
        world.ready(pod);
    }
    world
}

/// The store's report of the first group of [`elastic`], formed.
fn formed_group() -> GroupReport {
    let members = [("ddp-worker-0", 1.0), ("ddp-worker-1", 1.0)];
    store_report(0, Round::Formed, &members)
}

fn progress(world: &mut World, step: i64, ago: i64, first_step: i64, first_ago: i64) {
    let report = ReportedProgress {
        total: Some(1000),
        ..served(world, step, ago, first_step, first_ago)
    };
    world.group_report = Some(GroupReport {
        progress: Some(report),
        ..formed_group()
    });
}

#[test]
fn reported_steps_end_the_start_up_and_a_steady_run_is_written_every_so_often() {
    let mut world = elastic();
    world.advance(3);
    // The store answers, its group formed; the training reports no step yet.
    world.group_report = Some(formed_group());
    let plan = world.reconcile();
    assert_eq!(
        ledger(&world).current,
        Some(GoodputBucket::Productive),
        "before any report, the states tell"
    );
    world.advance(12);
    progress(&mut world, 3, 1, 1, 4);
    let plan_with_steps = world.reconcile();
    let trained = ledger(&world);
    assert_eq!(trained.source, ProgressSource::TrainingReports);
    assert_eq!(trained.current, Some(GoodputBucket::Productive));
    assert_eq!(trained.seconds.waiting, 3.0);
    assert_eq!(
        trained.seconds.start_up, 8.0,
        "from the pods' start up to the first step, 4 s ago"
    );
    assert_eq!(trained.seconds.productive, 3.0);
    assert_eq!(
        plan.requeue_after,
        Some(crate::goodput::RECORD_EVERY),
        "the store is read again for a first step"
    );
    assert_eq!(
        plan_with_steps.requeue_after,
        Some(crate::goodput::RECORD_EVERY)
    );
    world.advance(10);
    progress(&mut world, 13, 0, 1, 14);
    assert!(
        world.reconcile().status.is_none(),
        "10 s on: nothing written"
    );
    world.advance(25);
    progress(&mut world, 38, 0, 1, 39);
    world.reconcile();
    let recorded = ledger(&world);
    assert_eq!(recorded.highest_step, Some(38));
    assert_eq!(
        recorded.seconds.productive, 39.0,
        "from the first step, 39 s ago"
    );
    assert_eq!(recorded.latest.as_ref().unwrap().total, Some(1000));
}

#[test]
fn a_lost_worker_turns_the_time_after_the_last_step_into_re_formation() {
    let mut world = elastic();
    world.reconcile();
    progress(&mut world, 50, 1, 1, 50);
    world.reconcile();
    world.advance(5);
    world.lose_with_node("ddp-worker-1");
    progress(&mut world, 54, 2, 1, 55);
    world.reconcile();
    let lost = ledger(&world);
    assert_eq!(lost.highest_step, Some(54), "the report read at the loss");
    assert_ne!(lost.current, Some(GoodputBucket::Productive));
    world.advance(20);
    progress(&mut world, 41, 0, 41, 0);
    world.reconcile();
    let again = ledger(&world);
    assert_eq!(again.current, Some(GoodputBucket::Retrained));
    assert_eq!(again.retrained_steps, 1);
    assert_eq!(
        again.seconds.total(),
        again.seconds.productive + 22.0,
        "from the step 2 s before the loss to the first step after it, 22 s not trained"
    );
}

#[test]
fn replica_groups_are_productive_while_their_quorum_steps_on() {
    let mut value = serde_json::to_value(pytorch_job()).unwrap();
    json_patch::merge(
        &mut value,
        &json!({"spec": {
            "elasticPolicy": {"minReplicas": 1, "maxReplicas": 2, "replicaGroups": {}},
            "pytorchReplicaSpecs": {"Master": null, "Worker": {"replicas": 2}}
        }}),
    );
    let mut world = World::pytorch(serde_json::from_value(value).unwrap());
    world.reconcile();
    let pods: Vec<String> = world.pods.keys().cloned().collect();
    for pod in &pods {
        world.ready(pod);
    }
    // The Lighthouse's page, read by the kind's reader as the operator reads it.
    let quorum = |step: i64| {
        crate::kind::pytorch_job::lighthouse_page::read(&format!(
            "Current quorum_id: 1 <br>\nNext quorum status: [2 heartbeating]\n<h3>Previous Quorum</h3>\nPrevious quorum id: 1 <br>\nNum participants: 2 <br>\n<div class=\"member\"><b>ft_0:a</b> <br/>\nStep: {step} <br/></div>\n<div class=\"member\"><b>ft_1:b</b> <br/>\nStep: {step} <br/></div>"
        ))
        .expect("a page")
    };
    world.group_report = Some(quorum(1));
    world.reconcile();
    assert_eq!(ledger(&world).source, ProgressSource::Lighthouse);
    assert_eq!(ledger(&world).current, Some(GoodputBucket::Productive));
    world.advance(40);
    world.group_report = Some(quorum(80));
    world.reconcile();
    assert_eq!(ledger(&world).seconds.productive, 40.0);
    assert_eq!(ledger(&world).highest_step, Some(80));
}
