//! An elastic PyTorchJob whose rendezvous eto hosts re-forms its group once per change, after
//! a checkpoint (see crate::reforming_group): a worker leaving by a scale-in or a node's warning
//! drains while every worker is told to save, and goes when the training code says it saved
//! or the drain ends; the workers the job is short of start as it goes, or, for a worker the
//! platform takes, at once, behind their gate until the group saved.

use std::time::Duration;

use eto_api::PyTorchJob;
use eto_api::job_status::{JobPhase, Notice, NoticeKind};
use eto_api::kubeflow::EtoJobStatus;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::joining::{opened, start};
use super::rendezvous::{Round, store_report};
use crate::group_report::{GroupOrders, GroupReport, Member, SavedCheckpoint};
use crate::node_warnings::NODE_WARNING;
use crate::plan::Plan;
use crate::reforming_group::WORKERS_LEAVING;
use crate::testing::pytorch_job;
use crate::testing::world::{World, created_pods, deleted_pods};

/// `ddp`: three Workers between two and four, its rendezvous left to eto, 20 s to drain.
fn job() -> PyTorchJob {
    let mut value = serde_json::to_value(pytorch_job()).unwrap();
    json_patch::merge(
        &mut value,
        &json!({"spec": {
            "elasticPolicy": {"minReplicas": 2, "maxReplicas": 4, "drainSeconds": 20},
            "pytorchReplicaSpecs": {"Master": null, "Worker": {"replicas": 3}}
        }}),
    );
    serde_json::from_value(value).unwrap()
}

/// A world whose job runs: its store and three workers ready.
fn running() -> World {
    let mut world = World::pytorch(job());
    world.reconcile();
    for pod in ["ddp-rdzv", "ddp-worker-0", "ddp-worker-1", "ddp-worker-2"] {
        world.ready(pod);
    }
    world.reconcile();
    assert_eq!(phase(&world), Some(JobPhase::Running));
    world
}

fn phase(world: &World) -> Option<JobPhase> {
    world.pytorch_job.as_ref()?.status.as_ref()?.eto.phase
}

/// eto's part of the job's status.
fn eto_status(world: &World) -> EtoJobStatus {
    let job = world.pytorch_job.as_ref().expect("a PyTorchJob");
    job.status.clone().expect("a status").eto
}

fn job_notice(world: &World) -> Option<Notice> {
    eto_status(world).notice
}

fn notice_of(world: &World, name: &str) -> Option<Notice> {
    crate::notice::shown(&world.pods[name])
}

/// The training code says it saved for `notice`.
fn saved(world: &mut World, notice: &Notice) {
    world.group_report = Some(GroupReport {
        orders: None,
        quorum: None,
        progress: None,
        saved: vec![SavedCheckpoint {
            pod: "ddp-worker-0".into(),
            step: Some(12),
            since: serde_json::to_value(&notice.since)
                .unwrap()
                .as_str()
                .unwrap()
                .to_string(),
        }],
        group: None,
    });
}

#[test]
fn a_scale_in_asks_every_worker_to_save_and_the_worker_goes_once_they_say_they_did() {
    let mut world = running();
    world.advance(1);
    world.set_worker_replicas(2);
    let plan = world.reconcile();
    assert!(deleted_pods(&plan).is_empty(), "the group saves first");
    let notice = job_notice(&world).expect("the job's notice");
    assert_eq!(
        (notice.kind, notice.reason.as_str()),
        (NoticeKind::Checkpoint, WORKERS_LEAVING)
    );
    assert!(
        notice.message.starts_with("ddp-worker-2 leaves"),
        "{}",
        notice.message
    );
    assert_eq!(
        notice.deadline.as_ref().map(|d| d.0),
        Some(world.now + jiff::SignedDuration::from_secs(20)),
        "drainSeconds"
    );
    for worker in ["ddp-worker-0", "ddp-worker-1", "ddp-worker-2"] {
        assert_eq!(notice_of(&world, worker), Some(notice.clone()), "{worker}");
    }
    assert!(
        plan.requeue_after
            .is_some_and(|after| after <= Duration::from_secs(1)),
        "the store's report is read again soon: {:?}",
        plan.requeue_after
    );
    assert!(plan.stops.is_empty(), "no kubeai stop: training goes on");

    // Nothing yet: the word may come any moment.
    world.advance(3);
    let plan = world.reconcile();
    assert!(deleted_pods(&plan).is_empty());

    saved(&mut world, &notice);
    let plan = world.reconcile();
    assert_eq!(deleted_pods(&plan), ["ddp-worker-2"]);
    assert_eq!(
        job_notice(&world),
        Some(notice),
        "up until the worker is gone"
    );
    // (The world's pods go as soon as they are deleted.)
    world.reconcile();
    assert_eq!(job_notice(&world), None, "the notice is taken down");
    for worker in ["ddp-worker-0", "ddp-worker-1"] {
        assert_eq!(notice_of(&world, worker), None, "{worker}");
    }
    assert_eq!(phase(&world), Some(JobPhase::Running));
}

#[test]
fn without_the_trainings_word_the_worker_goes_when_the_drain_ends() {
    let mut world = running();
    world.set_worker_replicas(2);
    world.reconcile();
    let notice = job_notice(&world).expect("the job's notice");
    // The word for an earlier notice answers nothing.
    let mut earlier = notice.clone();
    earlier.since.0 -= jiff::SignedDuration::from_secs(60);
    saved(&mut world, &earlier);
    world.advance(19);
    assert!(deleted_pods(&world.reconcile()).is_empty());
    world.advance(1);
    assert_eq!(deleted_pods(&world.reconcile()), ["ddp-worker-2"]);
    world.reconcile();
    assert_eq!(job_notice(&world), None);
}

#[test]
fn a_worker_on_a_warned_node_trains_on_until_its_replacement_waits_then_saves_and_leaves() {
    let mut world = running();
    world.advance(1);
    world.warn("node-ddp-worker-1", 120);
    let plan = world.reconcile();
    assert!(deleted_pods(&plan).is_empty());
    assert_eq!(
        created_pods(&plan),
        ["ddp-worker-3"],
        "its replacement starts at once, behind its gate"
    );
    assert!(!world.gate_open("ddp-worker-3"));
    assert_eq!(notice_of(&world, "ddp-worker-1"), None, "it trains on");
    assert_eq!(job_notice(&world), None, "nobody saves yet");
    assert!(
        plan.events
            .iter()
            .any(|e| e.reason == crate::warned_handover::HANDING_OVER),
        "{:?}",
        plan.events
    );
    assert!(
        !plan.events.iter().any(|e| e.reason == "WorkersScaled"),
        "the job's size is the same"
    );
    let plan = world.reconcile();
    assert!(created_pods(&plan).is_empty() && deleted_pods(&plan).is_empty());

    // The replacement runs at its gate: the warned Worker leaves as without the hold, the
    // group saving first, and the replacement takes its place in the target.
    world.ready("ddp-worker-3");
    world.advance(2);
    let plan = world.reconcile();
    assert!(deleted_pods(&plan).is_empty(), "the group saves first");
    assert!(created_pods(&plan).is_empty(), "nobody else starts");
    let leaving = notice_of(&world, "ddp-worker-1").expect("its own notice");
    assert_eq!(
        (leaving.kind, leaving.reason.as_str()),
        (NoticeKind::Reclaim, NODE_WARNING)
    );
    let notice = job_notice(&world).expect("the job's notice");
    assert_eq!(notice.kind, NoticeKind::Checkpoint);
    assert_eq!(notice.since, leaving.since, "one word answers both");
    for worker in ["ddp-worker-0", "ddp-worker-2"] {
        assert_eq!(notice_of(&world, worker), Some(notice.clone()), "{worker}");
    }
    let status = eto_status(&world);
    assert_eq!(
        status.target_workers,
        ["ddp-worker-0", "ddp-worker-2", "ddp-worker-3"],
        "the replacement stands in"
    );
    assert_eq!(
        status.blacklist.last().map(|b| b.reason.as_str()),
        Some(NODE_WARNING)
    );
    assert!(
        !world.gate_open("ddp-worker-3"),
        "it joins once the warned Worker leaves, not while the group saves"
    );

    world.advance(2);
    saved(&mut world, &leaving);
    let plan = world.reconcile();
    assert_eq!(deleted_pods(&plan), ["ddp-worker-1"]);
    assert!(
        world.gate_open("ddp-worker-3"),
        "its training starts as the warned Worker goes: the group re-forms once, with it"
    );
    // (The world's pods go as soon as they are deleted.)
    let plan = world.reconcile();
    assert!(created_pods(&plan).is_empty());
    assert_eq!(job_notice(&world), None);
    assert_eq!(phase(&world), Some(JobPhase::Running));
}

#[test]
fn a_warning_withdrawn_while_the_replacement_starts_keeps_the_worker() {
    let mut world = running();
    world.warn("node-ddp-worker-1", 120);
    world.reconcile();
    assert!(world.pods.contains_key("ddp-worker-3"));
    world.node_warnings.clear();
    world.advance(2);
    let plan = world.reconcile();
    trains_on_without(&mut world, &plan, "ddp-worker-3");
}

/// Asserts that `plan` deleted the Worker `started` for a warning that was withdrawn, and
/// nothing else, and that the group trains on as before the warning.
fn trains_on_without(world: &mut World, plan: &Plan, started: &str) {
    assert_eq!(
        deleted_pods(plan),
        [started],
        "the Worker started for the warning goes"
    );
    assert_eq!(job_notice(world), None, "training goes on");
    for worker in ["ddp-worker-0", "ddp-worker-1"] {
        assert_eq!(notice_of(world, worker), None, "{worker}");
    }
    let status = eto_status(world);
    assert!(status.draining_workers.is_empty());
    assert_eq!(
        status.target_workers,
        ["ddp-worker-0", "ddp-worker-1", "ddp-worker-2"]
    );
    world.advance(30);
    let plan = world.reconcile();
    assert!(deleted_pods(&plan).is_empty() && created_pods(&plan).is_empty());
}

#[test]
fn a_warning_withdrawn_while_the_group_saves_keeps_the_worker() {
    let mut world = running();
    // A group beside which nobody can start: the warned Worker leaves at the hold's end.
    world.warn("node-ddp-worker-1", 120);
    world.reconcile();
    world.advance(61);
    world.reconcile();
    assert!(job_notice(&world).is_some());
    world.node_warnings.clear();
    world.advance(2);
    let plan = world.reconcile();
    assert!(
        !deleted_pods(&plan).contains(&"ddp-worker-1".to_string()),
        "{plan:#?}"
    );
    assert_eq!(job_notice(&world), None, "training goes on");
    assert_eq!(notice_of(&world, "ddp-worker-0"), None);
    let status = eto_status(&world);
    assert!(status.draining_workers.is_empty());
    assert!(
        status.target_workers.contains(&"ddp-worker-1".to_string()),
        "{:?}",
        status.target_workers
    );
}

/// A running world whose node under worker 1 was warned, and whose Worker started for it,
/// worker 3, waits at its gate: the hold is over, and the group saves for the handover.
fn saving_for_the_handover() -> World {
    let mut world = running();
    world.warn("node-ddp-worker-1", 120);
    world.reconcile();
    world.ready("ddp-worker-3");
    world.advance(2);
    world.reconcile();
    world
}

#[test]
fn a_warning_withdrawn_while_the_group_saves_for_a_waiting_replacement_keeps_the_worker() {
    let mut world = saving_for_the_handover();
    assert!(job_notice(&world).is_some());
    assert!(!world.gate_open("ddp-worker-3"));

    // The warning is withdrawn before the warned Worker left: it is still a member of the
    // round, the replacement never joined. The replacement goes, not the member, and the
    // group trains on without re-forming.
    world.node_warnings.clear();
    world.advance(2);
    let plan = world.reconcile();
    trains_on_without(&mut world, &plan, "ddp-worker-3");
}

#[test]
fn a_worker_that_exits_while_the_group_saves_did_what_it_was_asked_not_the_jobs_end() {
    let mut world = running();
    world.set_worker_replicas(2);
    world.reconcile();
    world.exit("ddp-worker-0", 0);
    world.reconcile();
    assert_eq!(phase(&world), Some(JobPhase::Running), "not Succeeded");
}

#[test]
fn a_worker_lost_without_warning_is_replaced_at_once_as_before() {
    let mut world = running();
    world.lose_with_node("ddp-worker-1");
    let plan = world.reconcile();
    assert_eq!(created_pods(&plan), ["ddp-worker-3"]);
    assert_eq!(job_notice(&world), None, "nothing to save for: it is gone");
}

#[test]
fn a_hold_waits_for_every_worker_that_starts_to_join_so_the_group_re_forms_once() {
    let mut world = running();
    world.lose_with_node("ddp-worker-2");
    assert_eq!(created_pods(&world.reconcile()), ["ddp-worker-3"]);
    world.warn("node-ddp-worker-1", 120);
    assert_eq!(created_pods(&world.reconcile()), ["ddp-worker-4"]);

    // The replacement of the lost Worker waits at its gate, the one started for the warned
    // Worker is scheduled and still starts: the warned Worker trains on.
    world.ready("ddp-worker-3");
    world.pod("ddp-worker-4").spec.as_mut().unwrap().node_name = Some("node-4".into());
    world.advance(2);
    world.reconcile();
    assert_eq!(notice_of(&world, "ddp-worker-1"), None, "it trains on");
    assert_eq!(job_notice(&world), None);
    assert!(!world.gate_open("ddp-worker-3"), "it joins with the other");

    // Both wait: the group saves, and re-forms once, with both.
    world.ready("ddp-worker-4");
    world.advance(2);
    world.reconcile();
    assert_eq!(
        notice_of(&world, "ddp-worker-1").map(|notice| notice.kind),
        Some(NoticeKind::Reclaim)
    );
    assert_eq!(
        job_notice(&world).map(|notice| notice.kind),
        Some(NoticeKind::Checkpoint)
    );
    let leaving = notice_of(&world, "ddp-worker-1").unwrap();
    saved(&mut world, &leaving);
    let plan = world.reconcile();
    assert_eq!(deleted_pods(&plan), ["ddp-worker-1"]);
    for worker in ["ddp-worker-3", "ddp-worker-4"] {
        assert!(world.gate_open(worker), "{worker}");
    }
}

#[test]
fn a_hold_does_not_wait_for_a_worker_that_waits_for_capacity() {
    let mut world = running();
    world.lose_with_node("ddp-worker-2");
    world.reconcile();
    world.warn("node-ddp-worker-1", 120);
    world.reconcile();
    // The Worker started for the warned one waits at its gate; the lost Worker's replacement
    // finds no node.
    world.ready("ddp-worker-4");
    world.advance(2);
    world.reconcile();
    assert_eq!(
        notice_of(&world, "ddp-worker-1").map(|notice| notice.kind),
        Some(NoticeKind::Reclaim),
        "the handover goes on"
    );
}

#[test]
fn the_group_waits_until_the_leaving_worker_is_gone_before_it_trains_on_or_grows() {
    let mut world = saving_for_the_handover();
    let notice = job_notice(&world).expect("the job's notice");
    saved(&mut world, &notice);
    let leaving = world.pods["ddp-worker-1"].clone();
    let plan = world.reconcile();
    let deletion = plan
        .delete
        .iter()
        .find(|d| d.name == "ddp-worker-1")
        .expect("deleted");
    assert_eq!(
        deletion.grace_seconds,
        Some(crate::reforming_group::LEAVING_GRACE_SECONDS),
        "it goes at once"
    );
    assert_eq!(created_pods(&plan), Vec::<String>::new());

    // Its pod is still being deleted: the notice stays, nobody new comes.
    let mut deleting = leaving;
    deleting.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(world.now),
    );
    world.pods.insert("ddp-worker-1".into(), deleting);
    world.advance(2);
    let plan = world.reconcile();
    assert_eq!(created_pods(&plan), Vec::<String>::new());
    assert_eq!(
        job_notice(&world),
        Some(notice.clone()),
        "the group stays paused"
    );
    assert_eq!(notice_of(&world, "ddp-worker-0"), Some(notice));

    // Gone: the notice goes.
    world.pods.remove("ddp-worker-1");
    let plan = world.reconcile();
    assert_eq!(created_pods(&plan), Vec::<String>::new());
    assert_eq!(job_notice(&world), None);
    assert_eq!(notice_of(&world, "ddp-worker-0"), None);
}

#[test]
fn a_warned_worker_beside_the_round_goes_at_once_and_the_member_warned_with_it_trains_on() {
    let mut world = running();
    world.set_worker_replicas(4);
    world.reconcile();
    world.ready("ddp-worker-3");
    world.reconcile();
    // Workers 0 to 2 train; worker 3 waits beside their round as its spare.
    let mut report = store_report(
        3,
        Round::Formed,
        &[
            ("ddp-worker-0", 1.0),
            ("ddp-worker-1", 1.0),
            ("ddp-worker-2", 1.0),
        ],
    );
    let group = report.group.as_mut().expect("a group");
    group.others.push(Member {
        host: "ddp-worker-3".into(),
        heartbeat_age: Some(1.0),
    });
    group.spares = 1;
    report.orders = Some(GroupOrders::default());
    world.group_report = Some(report);
    world.warn("node-ddp-worker-1", 120);
    world.warn("node-ddp-worker-3", 120);
    let plan = world.reconcile();
    assert_eq!(
        deleted_pods(&plan),
        ["ddp-worker-3"],
        "it trains nothing: it goes before the member leaves, so that it cannot take its place"
    );
    assert_eq!(
        plan.delete[0].grace_seconds,
        Some(crate::reforming_group::BESIDE_GROUP_GRACE_SECONDS),
        "its agent is not kept to come back to the rendezvous"
    );
    assert_eq!(
        plan.group_orders
            .as_ref()
            .map(|orders| orders.departed.clone()),
        Some(vec!["ddp-worker-3".to_string()]),
        "the store takes its agent out now"
    );
    assert_eq!(job_notice(&world), None, "the member trains on");
    assert!(eto_status(&world).draining_workers.is_empty());
    assert_eq!(
        created_pods(&plan),
        ["ddp-worker-4", "ddp-worker-5"],
        "worker 3's replacement, and one started for the member"
    );

    // Both run at their gates: the member leaves, worker 5 standing in for it, and both
    // join once it is out.
    world.ready("ddp-worker-4");
    world.ready("ddp-worker-5");
    let plan = world.reconcile();
    assert!(created_pods(&plan).is_empty());
    let notice = job_notice(&world).expect("the job's notice");
    assert!(
        notice.message.starts_with("ddp-worker-1 leaves"),
        "only the member drains: {}",
        notice.message
    );
    assert_eq!(
        eto_status(&world).target_workers,
        [
            "ddp-worker-0",
            "ddp-worker-2",
            "ddp-worker-4",
            "ddp-worker-5"
        ]
    );
    assert!(!world.gate_open("ddp-worker-4") && !world.gate_open("ddp-worker-5"));
    saved(&mut world, &notice);
    let plan = world.reconcile();
    assert_eq!(deleted_pods(&plan), ["ddp-worker-1"]);
    assert!(world.gate_open("ddp-worker-4") && world.gate_open("ddp-worker-5"));
}

#[test]
fn a_scaled_in_worker_beside_the_round_goes_without_asking_the_group_to_save() {
    let mut world = running();
    let mut report = store_report(
        3,
        Round::Formed,
        &[("ddp-worker-0", 1.0), ("ddp-worker-1", 1.0)],
    );
    report.group.as_mut().expect("a group").others.push(Member {
        host: "ddp-worker-2".into(),
        heartbeat_age: Some(1.0),
    });
    world.group_report = Some(report);
    world.set_worker_replicas(2);
    let plan = world.reconcile();
    assert_eq!(deleted_pods(&plan), ["ddp-worker-2"]);
    assert_eq!(job_notice(&world), None, "nobody saves for it");
    assert!(eto_status(&world).draining_workers.is_empty());
}

/// The store's report of a formed round of workers 0 to 2, holding orders that differ from
/// any eto gives, so that each plan shows its own.
fn formed() -> GroupReport {
    let mut report = store_report(
        1,
        Round::Formed,
        &[
            ("ddp-worker-0", 1.0),
            ("ddp-worker-1", 1.0),
            ("ddp-worker-2", 1.0),
        ],
    );
    report.orders = Some(GroupOrders {
        min_nodes: 99,
        ..GroupOrders::default()
    });
    report
}

/// The platform deletes worker `name`, which the world marked `DisruptionTarget`, with a
/// grace period of 30 s from `began`.
fn deleted_by_the_platform(world: &mut World, name: &str, began: jiff::Timestamp) {
    let pod = world.pod(name);
    pod.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        began + jiff::SignedDuration::from_secs(30),
    ));
    pod.metadata.deletion_grace_period_seconds = Some(30);
}

/// The note of the Event that says why the group waits for a draining worker.
fn draining_note(plan: &Plan) -> String {
    plan.events
        .iter()
        .find(|event| event.reason == "WorkersDraining")
        .expect("an event says why the group waits")
        .note
        .clone()
}

#[test]
fn a_worker_the_platform_evicts_stays_in_the_group_until_it_saved() {
    let mut world = running();
    world.group_report = Some(formed());
    world.advance(5);
    // Evicted a moment ago with a grace period of 30 s: marked, being deleted, still running.
    let evicted_at = world.now - jiff::SignedDuration::from_millis(600);
    world.disrupt("ddp-worker-1");
    deleted_by_the_platform(&mut world, "ddp-worker-1", evicted_at);
    let plan = world.reconcile();
    assert!(deleted_pods(&plan).is_empty(), "the platform deletes it");
    assert_eq!(
        created_pods(&plan),
        ["ddp-worker-3"],
        "its replacement starts while the group saves"
    );
    assert_eq!(start(&world, "ddp-worker-3"), None, "behind its shut gate");
    let held = world
        .pytorch_job
        .as_ref()
        .and_then(|job| job.status.clone());
    assert_eq!(held.map(|status| status.held_workers), Some(vec![]));
    let notice = job_notice(&world).expect("the job's notice");
    assert_eq!(
        (notice.kind, notice.reason.as_str()),
        (NoticeKind::Checkpoint, WORKERS_LEAVING)
    );
    assert_eq!(
        notice.since.0.as_second(),
        evicted_at.as_second(),
        "from when its deletion began, as its SIGTERM came"
    );
    for worker in ["ddp-worker-0", "ddp-worker-2"] {
        assert_eq!(notice_of(&world, worker), Some(notice.clone()), "{worker}");
    }
    assert_eq!(
        plan.group_orders.as_ref().map(|o| o.departed.clone()),
        Some(vec![]),
        "a member while the group saves: the others are not told to re-form"
    );
    assert_eq!(
        eto_status(&world).target_workers,
        ["ddp-worker-0", "ddp-worker-2", "ddp-worker-3"]
    );
    assert!(draining_note(&plan).contains("ddp-worker-1"));

    // The replacement waits at its gate: joining now would re-form the group while it saves.
    world.advance(1);
    world.ready("ddp-worker-3");
    let plan = world.reconcile();
    assert_eq!(opened(&plan), Vec::<String>::new());
    assert_eq!(
        plan.group_orders.as_ref().map(|o| o.departed.clone()),
        Some(vec![])
    );

    // The training code said it saved: the store lets it go, the others re-form, and the
    // replacement joins them as they do, expected by the store.
    world.advance(1);
    let mut report = formed();
    report.saved = vec![SavedCheckpoint {
        pod: "ddp-worker-1".into(),
        step: Some(40),
        since: notice.since.0.to_string(),
    }];
    world.group_report = Some(report);
    let plan = world.reconcile();
    let orders = plan.group_orders.clone().expect("orders");
    assert_eq!(orders.departed, ["ddp-worker-1"]);
    assert!(
        orders.expected.contains(&"ddp-worker-3".to_string()),
        "{:?}",
        orders.expected
    );
    assert_eq!(opened(&plan), ["ddp-worker-3"]);
    assert_eq!(created_pods(&plan), Vec::<String>::new());

    // Gone: the notice goes.
    world.went("ddp-worker-1");
    let plan = world.reconcile();
    assert_eq!(created_pods(&plan), Vec::<String>::new());
    assert_eq!(job_notice(&world), None);
}

#[test]
fn an_evicted_worker_whose_training_died_with_the_signal_leaves_once_its_containers_stop() {
    let mut world = running();
    world.group_report = Some(formed());
    world.disrupt("ddp-worker-1");
    let now = world.now;
    deleted_by_the_platform(&mut world, "ddp-worker-1", now);
    let plan = world.reconcile();
    assert_eq!(
        plan.group_orders.as_ref().map(|o| o.departed.clone()),
        Some(vec![])
    );
    world.advance(1);
    world.lose_with_node("ddp-worker-1");
    let plan = world.reconcile();
    assert_eq!(
        plan.group_orders.as_ref().map(|o| o.departed.clone()),
        Some(vec!["ddp-worker-1".to_string()]),
        "nothing to wait for"
    );
}

#[test]
fn an_eviction_seen_before_its_deletion_drains_all_the_same() {
    // The Eviction API marks the pod DisruptionTarget, then deletes it: two writes.
    let mut world = running();
    world.group_report = Some(formed());
    world.disrupt("ddp-worker-1");
    let plan = world.reconcile();
    assert!(deleted_pods(&plan).is_empty(), "the platform deletes it");
    assert_eq!(
        created_pods(&plan),
        ["ddp-worker-3"],
        "its replacement starts, behind its gate"
    );
    assert_eq!(start(&world, "ddp-worker-3"), None);
    let notice = job_notice(&world).expect("the job's notice");
    assert_eq!(notice.kind, NoticeKind::Checkpoint);
    let note = draining_note(&plan);
    assert!(note.contains("terminated by the platform"), "{note}");

    // Its deletion comes: it stays a member until the group saved.
    world.advance(1);
    let now = world.now;
    deleted_by_the_platform(&mut world, "ddp-worker-1", now);
    let plan = world.reconcile();
    assert_eq!(
        plan.group_orders.as_ref().map(|o| o.departed.clone()),
        Some(vec![])
    );
    assert_eq!(job_notice(&world), Some(notice));
}

#[test]
fn a_worker_taken_after_its_agent_left_the_round_holds_nothing() {
    // Its node went dark: its agent left the round, and the taint manager evicts it later.
    let mut world = running();
    let mut report = formed();
    report
        .group
        .as_mut()
        .expect("a group")
        .members
        .retain(|member| member.host != "ddp-worker-1");
    world.group_report = Some(report);
    world.disrupt("ddp-worker-1");
    let now = world.now;
    deleted_by_the_platform(&mut world, "ddp-worker-1", now);
    let plan = world.reconcile();
    assert_eq!(created_pods(&plan), ["ddp-worker-3"], "replaced at once");
    assert_eq!(job_notice(&world), None, "nobody saves for it");
    assert!(eto_status(&world).draining_workers.is_empty());
}
