//! Warned replica groups that would leave too few train on until spares wait to take their
//! places (see [`crate::warned_handover`]), as reconciles plan it.

use eto_api::PyTorchJob;
use eto_api::job_status::NoticeKind;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::replica_groups::groups;
use crate::testing::pytorch_job;
use crate::testing::world::{World, created_pods, deleted_pods, pod_names, reasons};
use crate::warned_handover::HANDING_OVER;

/// `ddp`: three ready Workers needing two, whose `elasticPolicy` also has `policy`; the
/// Workers `ddp-worker-1` and `ddp-worker-2` run on node `spot-1`.
fn three_workers_two_on_one_node(policy: serde_json::Value) -> World {
    let mut value = serde_json::to_value(pytorch_job()).unwrap();
    json_patch::merge(
        &mut value,
        &json!({"spec": {
            "elasticPolicy": {"minReplicas": 2, "maxReplicas": 4},
            "pytorchReplicaSpecs": {"Master": null, "Worker": {"replicas": 3}}
        }}),
    );
    json_patch::merge(&mut value, &json!({"spec": {"elasticPolicy": policy}}));
    let job: PyTorchJob = serde_json::from_value(value).unwrap();
    let mut world = World::pytorch(job);
    world.reconcile();
    let names: Vec<String> = world.pods.keys().cloned().collect();
    for name in names {
        world.ready(&name);
    }
    world.reconcile();
    for name in ["ddp-worker-1", "ddp-worker-2"] {
        world.pod(name).spec.get_or_insert_default().node_name = Some("spot-1".into());
    }
    world
}

/// [`three_workers_two_on_one_node`] as replica groups of one pod, with `policy` too.
fn three_groups_two_on_one_node(mut policy: serde_json::Value) -> World {
    policy["replicaGroups"] = json!({});
    three_workers_two_on_one_node(policy)
}

fn notice_kind(world: &World, pod: &str) -> Option<NoticeKind> {
    crate::notice::shown(&world.pods[pod]).map(|notice| notice.kind)
}

fn spares_shown(world: &World) -> Option<i32> {
    world
        .mpi_status()
        .workers
        .and_then(|workers| workers.spares)
}

fn avoids_spot_1(world: &World, pod: &str) -> bool {
    let spec = world.pods[pod].spec.as_ref().unwrap();
    serde_json::to_string(&spec.affinity)
        .unwrap()
        .contains("spot-1")
}

#[test]
fn warned_groups_that_would_leave_too_few_train_on_until_spares_wait_then_hand_over() {
    let mut world = three_groups_two_on_one_node(json!({}));
    world.warn("spot-1", 120);
    let plan = world.reconcile();
    assert_eq!(notice_kind(&world, "ddp-worker-1"), None, "it trains on");
    assert_eq!(notice_kind(&world, "ddp-worker-2"), None, "it trains on");
    assert_eq!(world.mpi_status().notice, None, "no suspend");
    assert_eq!(
        groups(&world)[3..],
        [
            ("ddp-worker-3".to_string(), None),
            ("ddp-worker-4".to_string(), None)
        ],
        "a spare for each held group"
    );
    assert!(avoids_spot_1(&world, "ddp-worker-3") && avoids_spot_1(&world, "ddp-worker-4"));
    assert!(reasons(&plan).contains(&HANDING_OVER.to_string()));
    assert!(
        !reasons(&plan).contains(&"WorkersScaled".to_string()),
        "the job's size is the same"
    );
    assert_eq!(spares_shown(&world), Some(2));
    assert!(
        plan.requeue_after
            .is_some_and(|after| after <= std::time::Duration::from_secs(60)),
        "looked at again half-way through the warning at the latest"
    );

    let plan = world.reconcile();
    assert!(
        pod_names(&plan).is_empty() && !reasons(&plan).contains(&HANDING_OVER.to_string()),
        "a hold under way changes nothing: {:?}",
        reasons(&plan)
    );

    // One spare waits: with the group on node-ddp-worker-0 the job keeps its minimum, and the
    // warned groups leave, the spares taking their places.
    world.ready("ddp-worker-3");
    let plan = world.reconcile();
    assert_eq!(
        notice_kind(&world, "ddp-worker-1"),
        Some(NoticeKind::Reclaim)
    );
    assert_eq!(
        notice_kind(&world, "ddp-worker-2"),
        Some(NoticeKind::Reclaim)
    );
    assert_eq!(world.mpi_status().notice, None, "no suspend");
    assert!(
        reasons(&plan).contains(&crate::plan::SPARE_TAKES_PLACE.to_string()),
        "{:?}",
        reasons(&plan)
    );
    assert_eq!(groups(&world)[3], ("ddp-worker-3".to_string(), Some(1)));
    assert!(
        !world.pods.contains_key("ddp-worker-5"),
        "the spares are the replacements: no other worker starts"
    );
    assert!(deleted_pods(&plan).is_empty(), "{:?}", deleted_pods(&plan));
    assert!(!reasons(&plan).contains(&"WorkersScaled".to_string()));
    let target = world.mpi_status().target_workers;
    assert_eq!(target, ["ddp-worker-0", "ddp-worker-3", "ddp-worker-4"]);
    assert_eq!(spares_shown(&world), None);

    // The other spare takes the last place once it waits.
    world.ready("ddp-worker-4");
    world.reconcile();
    assert_eq!(groups(&world)[4], ("ddp-worker-4".to_string(), Some(2)));
    assert_eq!(world.mpi_status().notice, None);
}

#[test]
fn spares_that_do_not_wait_in_time_end_the_hold_and_the_job_suspends_with_time_to_save() {
    let mut world = three_groups_two_on_one_node(json!({}));
    world.warn("spot-1", 120);
    world.reconcile();
    world.advance(60);
    world.reconcile();
    let notice = world.mpi_status().notice.expect("a suspend");
    assert_eq!(notice.kind, NoticeKind::Suspend);
    assert_eq!(
        notice.deadline.map(|deadline| deadline.0),
        Some(world.now + jiff::SignedDuration::from_secs(60)),
        "the other half of the warning is left to save the checkpoint"
    );
    assert!(
        !world.pods.contains_key("ddp-worker-5"),
        "no worker starts beyond the spares: the job suspends"
    );
}

#[test]
fn a_short_checkpoint_grace_holds_the_groups_longer() {
    let mut world = three_groups_two_on_one_node(json!({"checkpointGraceSeconds": 20}));
    world.warn("spot-1", 120);
    world.reconcile();
    world.advance(99);
    world.reconcile();
    assert_eq!(world.mpi_status().notice, None, "still held");
    world.advance(1);
    world.reconcile();
    assert_eq!(
        world.mpi_status().notice.map(|notice| notice.kind),
        Some(NoticeKind::Suspend)
    );
}

#[test]
fn a_warning_withdrawn_during_the_hold_costs_nothing() {
    let mut world = three_groups_two_on_one_node(json!({}));
    world.warn("spot-1", 120);
    world.reconcile();
    world.node_warnings.clear();
    let plan = world.reconcile();
    assert_eq!(
        deleted_pods(&plan),
        ["ddp-worker-3", "ddp-worker-4"],
        "the spares started for the hold go"
    );
    assert_eq!(
        world.mpi_status().target_workers,
        ["ddp-worker-0", "ddp-worker-1", "ddp-worker-2"]
    );
    assert_eq!(notice_kind(&world, "ddp-worker-1"), None);
    assert_eq!(world.mpi_status().blacklist, []);
}

#[test]
fn a_job_with_a_spare_of_its_own_keeps_it_after_the_handover() {
    let mut world = three_groups_two_on_one_node(json!({"spareReplicas": 1}));
    // Its own spare, ddp-worker-3, is on the warned node too: it is no use there.
    world
        .pods
        .get_mut("ddp-worker-3")
        .unwrap()
        .spec
        .get_or_insert_default()
        .node_name = Some("spot-1".into());
    world.warn("spot-1", 120);
    world.reconcile();
    assert_eq!(notice_kind(&world, "ddp-worker-1"), None, "held");
    let started: Vec<String> = groups(&world)
        .into_iter()
        .filter(|(name, id)| id.is_none() && name != "ddp-worker-3")
        .map(|(name, _)| name)
        .collect();
    assert_eq!(
        started,
        ["ddp-worker-4", "ddp-worker-5", "ddp-worker-6"],
        "two spares for the held groups and one for the warned spare"
    );
    for name in &started {
        world.ready(name);
    }
    world.reconcile();
    let status = world.mpi_status();
    assert_eq!(status.notice, None);
    assert_eq!(
        status.target_workers,
        [
            "ddp-worker-0",
            "ddp-worker-4",
            "ddp-worker-5",
            "ddp-worker-6"
        ],
        "three groups and one spare"
    );
    assert_eq!(spares_shown(&world), Some(1));
}

#[test]
fn warned_members_of_a_group_that_re_forms_train_on_until_their_replacements_wait_then_leave() {
    // The store eto hosts: the group re-forms once the warned Workers left.
    let mut world = three_workers_two_on_one_node(json!({}));
    world.warn("spot-1", 120);
    let plan = world.reconcile();
    assert_eq!(world.mpi_status().notice, None, "no suspend");
    assert_eq!(notice_kind(&world, "ddp-worker-1"), None, "it trains on");
    assert_eq!(notice_kind(&world, "ddp-worker-2"), None, "it trains on");
    for new in ["ddp-worker-3", "ddp-worker-4"] {
        assert!(avoids_spot_1(&world, new), "{new}");
        assert!(!world.gate_open(new), "{new} waits at its gate");
    }
    assert!(reasons(&plan).contains(&HANDING_OVER.to_string()));
    assert!(!reasons(&plan).contains(&"WorkersScaled".to_string()));
    assert_eq!(spares_shown(&world), Some(2));

    // One runs at its gate: not enough for both warned Workers.
    world.ready("ddp-worker-3");
    world.reconcile();
    assert_eq!(notice_kind(&world, "ddp-worker-1"), None);
    assert_eq!(world.mpi_status().notice, None);

    // Both: the warned Workers save and leave, the new ones standing in for them, and no
    // suspend, though two of three Workers leave a job that needs two.
    world.ready("ddp-worker-4");
    let created = created_pods(&world.reconcile());
    assert!(created.is_empty(), "{created:?}");
    assert_eq!(
        notice_kind(&world, "ddp-worker-1"),
        Some(NoticeKind::Reclaim)
    );
    assert_eq!(
        world.mpi_status().notice.map(|notice| notice.kind),
        Some(NoticeKind::Checkpoint),
        "the group saves, the job does not suspend"
    );
    assert_eq!(
        world.mpi_status().target_workers,
        ["ddp-worker-0", "ddp-worker-3", "ddp-worker-4"]
    );
    assert_eq!(spares_shown(&world), None, "the hold is over");
    assert!(
        !world.gate_open("ddp-worker-3"),
        "not while the group saves"
    );
}
