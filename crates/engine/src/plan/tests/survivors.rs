//! Replica groups that did not survive another group's loss, and a run that lost every group
//! (see `plan/run/survivor_failure.rs`); and how often the Lighthouse's quorum is read.

use std::time::Duration;

use eto_api::PyTorchJob;
use eto_api::job_status::ReplicaGroupsStatus;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::group_report::GroupReport;
use crate::group_report::QuorumReport;
use crate::testing::pytorch_job;
use crate::testing::world::{World, reasons};

/// `ddp`: three replica groups of one pod between two and four, every pod ready, its
/// Lighthouse reporting a quorum of the three at step 40 (quorum id 3).
fn three_groups_at_step_40() -> World {
    let mut value = serde_json::to_value(pytorch_job()).unwrap();
    json_patch::merge(
        &mut value,
        &json!({"spec": {
            "elasticPolicy": {"minReplicas": 1, "maxReplicas": 4, "replicaGroups": {}},
            "pytorchReplicaSpecs": {"Master": null, "Worker": {"replicas": 3}}
        }}),
    );
    let job: PyTorchJob = serde_json::from_value(value).unwrap();
    let mut world = World::pytorch(job);
    world.reconcile();
    let names: Vec<String> = world.pods.keys().cloned().collect();
    for name in names {
        world.ready(&name);
    }
    report(&mut world, 3, 3, 40);
    world.reconcile();
    world
}

/// The Lighthouse reports quorum `id` of `participants` groups at `step`.
fn report(world: &mut World, id: i64, participants: i64, step: i64) {
    world.group_report = Some(GroupReport {
        quorum: Some(QuorumReport {
            quorum_id: id,
            participants,
            step,
            heartbeating: participants,
            heartbeats: Vec::new(),
            waiting_for_groups: false,
        }),
        ..GroupReport::default()
    });
}

fn replica_groups(world: &World) -> ReplicaGroupsStatus {
    let status = world.pytorch_job.as_ref().unwrap().status.as_ref().unwrap();
    status.replica_groups.clone().expect("the groups shown")
}

fn notes(plan: &crate::plan::Plan, reason: &str) -> Vec<String> {
    plan.events
        .iter()
        .filter(|event| event.reason == reason)
        .map(|event| event.note.clone())
        .collect()
}

#[test]
fn survivors_of_a_loss_are_replaced_at_once_and_a_run_left_with_no_group_says_its_state_is_lost() {
    let mut world = three_groups_at_step_40();
    // Group 1's pod is force-deleted; 3 s later the others' training fails (TorchFT's own
    // DistributedDataParallel asserting after a peer reset), one after the other.
    world.advance(5);
    world.pods.remove("ddp-worker-1");
    world.reconcile();
    assert!(world.pods.contains_key("ddp-worker-3"), "group 1 replaced");
    world.advance(3);
    world.exit("ddp-worker-0", 1);
    let plan = world.reconcile();
    assert!(
        world.pods.contains_key("ddp-worker-4"),
        "a survivor is replaced at once"
    );
    let said = notes(&plan, "SurvivorRestarted");
    assert_eq!(said.len(), 1, "{:?}", reasons(&plan));
    assert!(
        said[0].contains("worker ddp-worker-0") && said[0].contains("ddp-worker-1 was deleted"),
        "{}",
        said[0]
    );
    assert!(
        notes(&plan, "GroupStateLost").is_empty(),
        "group 2 still holds the state"
    );
    world.advance(1);
    world.exit("ddp-worker-2", 1);
    let plan = world.reconcile();
    assert!(
        world.pods.contains_key("ddp-worker-5"),
        "the second survivor is replaced at once too: no back-off"
    );
    let status = world.pytorch_job.as_ref().unwrap().status.clone().unwrap();
    assert!(
        status.eto.backoff.is_empty(),
        "nothing counted: {:?}",
        status.eto.backoff
    );
    assert!(
        status.eto.nodes_in_cooldown.is_empty(),
        "their nodes did nothing wrong"
    );
    let lost = notes(&plan, "GroupStateLost");
    assert_eq!(lost.len(), 1, "{:?}", reasons(&plan));
    assert!(lost[0].contains("state at step 40 is lost"), "{}", lost[0]);
    let groups = replica_groups(&world);
    assert_eq!(groups.survivor_restarts, 2);
    let state_lost = groups.state_lost.clone().expect("the loss shown");
    assert_eq!(
        (state_lost.step, state_lost.quorum_id, state_lost.resumed_at),
        (40, 3, None)
    );
    assert!(
        plan.requeue_after
            .is_some_and(|after| after <= Duration::from_secs(1)),
        "the Lighthouse is read every second until the groups resume: {:?}",
        plan.requeue_after
    );

    // The Lighthouse still shows the old quorum: no resumption yet.
    world.advance(1);
    let plan = world.reconcile();
    assert!(notes(&plan, "GroupsResumed").is_empty());
    // The new groups load the checkpoint of step 30 and form quorum 4.
    report(&mut world, 4, 3, 30);
    world.advance(1);
    let plan = world.reconcile();
    let resumed = notes(&plan, "GroupsResumed");
    assert_eq!(resumed.len(), 1, "{:?}", reasons(&plan));
    assert!(
        resumed[0].contains("at step 30") && resumed[0].contains("10 steps behind the step 40"),
        "{}",
        resumed[0]
    );
    let groups = replica_groups(&world);
    assert_eq!(groups.state_lost.unwrap().resumed_at, Some(30));
    assert_eq!(
        (groups.quorum_id, groups.step, groups.survivor_restarts),
        (4, 30, 2)
    );
    world.advance(1);
    let plan = world.reconcile();
    assert!(notes(&plan, "GroupsResumed").is_empty(), "said once");
}

#[test]
fn groups_that_fail_on_their_own_are_no_survivors_but_their_state_is_lost_all_the_same() {
    let mut world = three_groups_at_step_40();
    world.advance(5);
    for name in ["ddp-worker-0", "ddp-worker-1", "ddp-worker-2"] {
        world.exit(name, 1);
    }
    let plan = world.reconcile();
    assert!(notes(&plan, "SurvivorRestarted").is_empty());
    let status = world.pytorch_job.as_ref().unwrap().status.clone().unwrap();
    assert_eq!(
        status.eto.backoff.first().map(|b| b.failures),
        Some(1),
        "failures of their own code, counted (together, once)"
    );
    assert_eq!(
        notes(&plan, "GroupStateLost").len(),
        1,
        "{:?}",
        reasons(&plan)
    );
    // Resumed from nothing: steps behind are a warning.
    report(&mut world, 4, 3, 0);
    world.advance(1);
    let plan = world.reconcile();
    let resumed: Vec<_> = plan
        .events
        .iter()
        .filter(|event| event.reason == "GroupsResumed")
        .collect();
    assert_eq!(resumed.len(), 1);
    assert!(resumed[0].warning);
    assert!(
        resumed[0].note.contains("at step 0") && resumed[0].note.contains("40 steps behind"),
        "{}",
        resumed[0].note
    );
}

#[test]
fn a_group_lost_while_others_live_loses_no_state() {
    let mut world = three_groups_at_step_40();
    world.advance(5);
    world.evict("ddp-worker-1");
    let plan = world.reconcile();
    assert!(notes(&plan, "GroupStateLost").is_empty());
    assert!(notes(&plan, "SurvivorRestarted").is_empty());
    assert_eq!(replica_groups(&world).state_lost, None);
}

#[test]
fn the_quorum_is_read_every_few_seconds_whether_or_not_the_lighthouse_answered() {
    let mut world = three_groups_at_step_40();
    for (case, answers) in [("steady", true), ("no answer", false)] {
        if !answers {
            world.group_report = None;
        }
        world.advance(1);
        let plan = world.reconcile();
        assert!(
            plan.requeue_after
                .is_some_and(|after| after <= crate::group_report::FORMING_POLL),
            "{case}: {:?}",
            plan.requeue_after
        );
    }
}
