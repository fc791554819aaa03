//! Hot spares of an elastic PyTorchJob (see `crate::spares`), as a reconcile plans them.

use eto_api::PyTorchJob;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::group_report::GroupOrders;
use crate::group_report::GroupReport;
use crate::testing::pytorch_job;
use crate::testing::world::World;

/// `ddp`: `replicas` Workers between two and three, `spares` spares, no Master, its
/// rendezvous left to eto; planned once.
fn job(replicas: u32, spares: u32) -> World {
    let mut value = serde_json::to_value(pytorch_job()).unwrap();
    json_patch::merge(
        &mut value,
        &json!({"spec": {
            "elasticPolicy": {"minReplicas": 2, "maxReplicas": 3, "spareReplicas": spares},
            "pytorchReplicaSpecs": {"Master": null, "Worker": {"replicas": replicas}}
        }}),
    );
    let job: PyTorchJob = serde_json::from_value(value).unwrap();
    let mut world = World::pytorch(job);
    world.reconcile();
    world
}

fn workers(world: &World) -> Vec<String> {
    world
        .pods
        .keys()
        .filter(|name| name.starts_with("ddp-worker-"))
        .cloned()
        .collect()
}

/// `(desired, spares)` of the job's worker summary.
fn summary(world: &World) -> (i32, Option<i32>) {
    let status = world.pytorch_job.as_ref().unwrap().status.as_ref().unwrap();
    let workers = status.eto.workers.as_ref().unwrap();
    (workers.desired, workers.spares)
}

#[test]
fn a_full_group_gets_its_spares_and_a_smaller_one_none() {
    let full = job(3, 1);
    assert_eq!(
        workers(&full),
        [
            "ddp-worker-0",
            "ddp-worker-1",
            "ddp-worker-2",
            "ddp-worker-3"
        ]
    );
    assert_eq!(summary(&full), (3, Some(1)));

    let smaller = job(2, 1);
    assert_eq!(workers(&smaller), ["ddp-worker-0", "ddp-worker-1"]);
    assert_eq!(summary(&smaller), (2, Some(0)));

    let without = job(3, 0);
    assert_eq!(workers(&without).len(), 3);
    assert_eq!(summary(&without), (3, None));
}

#[test]
fn workers_of_a_job_with_spares_prefer_a_node_of_their_own() {
    let anti_affinity = |world: &World| {
        let pod = &world.pods["ddp-worker-0"];
        let affinity = pod.spec.as_ref().unwrap().affinity.clone();
        affinity.and_then(|a| a.pod_anti_affinity)
    };
    let spread = anti_affinity(&job(3, 1)).expect("a preference");
    let terms = spread
        .preferred_during_scheduling_ignored_during_execution
        .unwrap();
    let selector = terms[0].pod_affinity_term.label_selector.clone().unwrap();
    assert_eq!(
        selector
            .match_labels
            .unwrap()
            .get("training.kubeflow.org/job-name")
            .map(String::as_str),
        Some("ddp")
    );
    assert_eq!(anti_affinity(&job(3, 0)), None);
}

#[test]
fn a_lost_member_is_replaced_and_the_spare_is_expected_in_the_next_round() {
    let mut world = job(3, 1);
    for pod in [
        "ddp-rdzv",
        "ddp-worker-0",
        "ddp-worker-1",
        "ddp-worker-2",
        "ddp-worker-3",
    ] {
        world.ready(pod);
    }
    world.reconcile();
    let member = |host: &&str| json!({"host": host, "heartbeat_age": 1.0});
    let members = ["ddp-worker-0", "ddp-worker-1", "ddp-worker-2"];
    let report: GroupReport = serde_json::from_value(json!({
        "saved": [],
        "rendezvous": {"round": 1, "complete": true, "closed": false,
                       "participants": 3, "waiting": 0, "spares": 1,
                       "members": members.iter().map(member).collect::<Vec<_>>(),
                       "others": [member(&"ddp-worker-3")]},
        "orders": GroupOrders::default(),
    }))
    .unwrap();
    world.group_report = Some(report);
    world.reconcile();
    let rendezvous = world
        .pytorch_job
        .as_ref()
        .and_then(|job| job.status.as_ref())
        .and_then(|status| status.rendezvous.clone())
        .unwrap();
    assert_eq!((rendezvous.agents, rendezvous.spares), (3, Some(1)));

    world.pods.remove("ddp-worker-1");
    let plan = world.reconcile();
    assert!(
        world.pods.contains_key("ddp-worker-4"),
        "the lost member is replaced: the replacement is the next spare"
    );
    let orders = plan.group_orders.expect("orders");
    assert_eq!(orders.departed, ["ddp-worker-1"]);
    assert_eq!(
        orders.expected,
        ["ddp-worker-0", "ddp-worker-2", "ddp-worker-3"],
        "the spare's agent, at the rendezvous, is waited for; the replacement is not"
    );
    assert_eq!(summary(&world), (3, Some(1)));
}

#[test]
fn scaled_below_the_maximum_the_spare_goes() {
    let mut world = job(3, 1);
    for pod in ["ddp-rdzv", "ddp-worker-0", "ddp-worker-1", "ddp-worker-2"] {
        world.ready(pod);
    }
    world.reconcile();
    let job = world.pytorch_job.as_mut().unwrap();
    job.spec
        .pytorch_replica_specs
        .get_mut("Worker")
        .unwrap()
        .replicas = Some(2);
    world.reconcile();
    world.reconcile();
    let status = world.pytorch_job.as_ref().unwrap().status.as_ref().unwrap();
    assert_eq!(
        status.eto.target_workers.len(),
        2,
        "{:?}",
        status.eto.target_workers
    );
    assert_eq!(summary(&world), (2, Some(0)));
}
