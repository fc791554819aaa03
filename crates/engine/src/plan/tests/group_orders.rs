//! The orders eto gives the rendezvous store of an elastic PyTorchJob (see
//! `crate::group_orders`), and the re-formations the store reports, as a reconcile plans them.

use eto_api::PyTorchJob;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::group_report::GroupOrders;
use crate::group_report::GroupReport;
use crate::testing::pytorch_job;
use crate::testing::world::{World, reasons};

/// `ddp`, three Workers between two and three, no Master, its rendezvous left to eto; its
/// store and Workers run.
fn running() -> World {
    let mut value = serde_json::to_value(pytorch_job()).unwrap();
    json_patch::merge(
        &mut value,
        &json!({"spec": {
            "elasticPolicy": {"minReplicas": 2, "maxReplicas": 3},
            "pytorchReplicaSpecs": {"Master": null, "Worker": {"replicas": 3}}
        }}),
    );
    let job: PyTorchJob = serde_json::from_value(value).unwrap();
    let mut world = World::pytorch(job);
    world.reconcile();
    for pod in ["ddp-rdzv", "ddp-worker-0", "ddp-worker-1", "ddp-worker-2"] {
        world.ready(pod);
    }
    world.reconcile();
    world
}

/// The store's report: a round of `members`, `waiting` agents, the rounds that formed, and
/// the orders it holds.
fn report(
    members: &[&str],
    waiting: &[&str],
    formed: serde_json::Value,
    held: &GroupOrders,
) -> GroupReport {
    let member = |host: &&str| json!({"host": host, "heartbeat_age": 1.0});
    serde_json::from_value(json!({
        "saved": [],
        "rendezvous": {"round": 1, "complete": waiting.is_empty(), "closed": false,
                       "participants": members.len(), "waiting": waiting.len(),
                       "members": members.iter().map(member).collect::<Vec<_>>(),
                       "others": waiting.iter().map(member).collect::<Vec<_>>(),
                       "reformations": formed},
        "orders": held,
    }))
    .unwrap()
}

fn orders(departed: &[&str], expected: &[&str]) -> GroupOrders {
    GroupOrders {
        departed: departed.iter().map(|h| h.to_string()).collect(),
        expected: expected.iter().map(|h| h.to_string()).collect(),
        min_nodes: 2,
        max_nodes: 3,
        // torchrun's 5 s keep-alive, 3 attempts.
        dead_after: 15,
        join_wait: crate::group_orders::JOIN_WAIT.as_secs(),
    }
}

const ALL: [&str; 3] = ["ddp-worker-0", "ddp-worker-1", "ddp-worker-2"];

#[test]
fn a_lost_workers_agent_is_ordered_out_and_the_survivors_re_form_without_waiting() {
    let mut world = running();
    let mut forming = report(&["ddp-worker-0"], &[], json!([]), &GroupOrders::default());
    let state = forming.group.as_mut().unwrap();
    (state.round, state.complete) = (0, false);
    world.group_report = Some(forming);
    let plan = world.reconcile();
    assert_eq!(
        plan.group_orders,
        Some(orders(&[], &ALL)),
        "the run's first group waits for every running Worker"
    );

    // Worker 1 is deleted: its agent departs; its replacement, just created, is not waited
    // for.
    world.group_report = Some(report(&ALL, &[], json!([]), &orders(&[], &ALL)));
    world.pods.remove("ddp-worker-1");
    let plan = world.reconcile();
    assert!(world.pods.contains_key("ddp-worker-3"), "a replacement");
    let survivors = ["ddp-worker-0", "ddp-worker-2"];
    assert_eq!(
        plan.group_orders,
        Some(orders(&["ddp-worker-1"], &survivors))
    );

    // Nothing changed: no orders go.
    let held = orders(&["ddp-worker-1"], &survivors);
    world.group_report = Some(report(&ALL, &[], json!([]), &held));
    assert_eq!(world.reconcile().group_orders, None);

    // The replacement runs and its gate opens: its agent starts, and a round that forms
    // meanwhile waits for it (the store, at most JOIN_WAIT).
    world.ready("ddp-worker-3");
    world.group_report = Some(report(&survivors, &[], json!([]), &held));
    let plan = world.reconcile();
    let with_it = ["ddp-worker-0", "ddp-worker-2", "ddp-worker-3"];
    assert_eq!(
        plan.group_orders.map(|o| o.expected),
        Some(with_it.map(String::from).to_vec())
    );
    let held = orders(&[], &with_it);

    // Its agent waits at the rendezvous: the orders stand.
    world.group_report = Some(report(&survivors, &["ddp-worker-3"], json!([]), &held));
    assert_eq!(world.reconcile().group_orders, None);
}

#[test]
fn a_worker_being_deleted_departs_at_once_and_a_store_without_orders_gets_none() {
    let mut world = running();
    world.group_report = Some(report(&ALL, &[], json!([]), &orders(&[], &ALL)));
    world.evict("ddp-worker-2");
    let plan = world.reconcile();
    assert_eq!(
        plan.group_orders.map(|o| o.departed),
        Some(vec!["ddp-worker-2".to_string()])
    );
    let mut world = running();
    let mut old_store = report(&ALL, &[], json!([]), &GroupOrders::default());
    old_store.orders = None;
    world.group_report = Some(old_store);
    world.pods.remove("ddp-worker-1");
    assert_eq!(world.reconcile().group_orders, None, "an older store");
}

#[test]
fn a_pod_being_deleted_stays_departed_after_the_store_took_its_agent_out() {
    let mut world = running();
    world.group_report = Some(report(&ALL, &[], json!([]), &orders(&[], &ALL)));
    let since = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(world.now);
    world.pod("ddp-worker-2").metadata.deletion_timestamp = Some(since);
    let plan = world.reconcile();
    let survivors = ["ddp-worker-0", "ddp-worker-1"];
    let held = orders(&["ddp-worker-2"], &survivors);
    assert_eq!(plan.group_orders, Some(held.clone()));

    // The store took its agent out; the agent lives until its pod stops, and would come back
    // to the rendezvous if the orders let it go.
    world.group_report = Some(report(&survivors, &[], json!([]), &held));
    assert_eq!(world.reconcile().group_orders, None, "still departed");

    // Its pod is gone, and its agent with it: nothing to keep out any more.
    world.pods.remove("ddp-worker-2");
    let plan = world.reconcile();
    assert_eq!(plan.group_orders.map(|o| o.departed), Some(vec![]));
}

#[test]
fn each_reformation_shows_in_the_status_and_one_event() {
    let mut world = running();
    let first = json!({"round": 0, "since": null, "formed": "2027-01-15T08:00:10.00Z",
                       "paused": null, "members": ALL, "left": [], "joined": ALL});
    let again = json!({"round": 1, "since": "2027-01-15T08:01:00.00Z",
                       "formed": "2027-01-15T08:01:02.30Z", "paused": 2.3,
                       "members": ["ddp-worker-0", "ddp-worker-2"], "left": ["ddp-worker-1"],
                       "joined": []});
    let held = orders(&[], &ALL);
    let last = |world: &World| {
        let status = world.pytorch_job.as_ref()?.status.as_ref()?;
        status.rendezvous.clone()?.last_reformation
    };

    world.group_report = Some(report(&ALL, &[], json!([first]), &held));
    let plan = world.reconcile();
    assert_eq!(last(&world), None, "the first group re-formed nothing");
    assert!(!reasons(&plan).contains(&"GroupReformed".to_string()));

    let survivors = ["ddp-worker-0", "ddp-worker-2"];
    world.group_report = Some(report(&survivors, &[], json!([first, again]), &held));
    let plan = world.reconcile();
    let shown = last(&world).expect("shown");
    assert_eq!(
        (shown.round, shown.paused.as_deref(), shown.left.clone()),
        (1, Some("2.3s"), vec!["ddp-worker-1".to_string()])
    );
    assert_eq!(
        shown.since.map(|t| t.0.to_string()).as_deref(),
        Some("2027-01-15T08:01:00Z")
    );
    let event = plan
        .events
        .iter()
        .find(|e| e.reason == "GroupReformed")
        .expect("an event");
    assert_eq!(
        event.note,
        "the group re-formed (ddp-worker-1 left): round 1 formed with 2 agents (ddp-worker-0, ddp-worker-2), 2.3s after the group before it broke up"
    );
    let plan = world.reconcile();
    assert!(
        !reasons(&plan).contains(&"GroupReformed".to_string()),
        "one event per re-formation"
    );
}
