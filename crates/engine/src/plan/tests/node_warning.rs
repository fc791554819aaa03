//! Advance warnings of node losses (see [`crate::node_warnings`]): the workers on a warned node
//! are told at once, leave discovery and are replaced off that node; a job left below its
//! minimum posts its `Suspend` notice at once, ending no later than the node goes.

use eto_api::common::ReplicaRestartPolicy;
use eto_api::elastic::ElasticPolicy;
use eto_api::job_status::{JobPhase, Notice, NoticeKind};
use pretty_assertions::assert_eq;

use crate::node_warnings::{NODE_WARNING, NodeWarning};
use crate::testing::training_job;
use crate::testing::world::{World, deleted_pods, pod_names};

/// A running job of 4 workers needing `min`, with `policy`; its lost workers are replaced
/// (`restartPolicy: OnFailure`: a disruption is replaced, an exit 0 is not).
fn four_needing(min: i32, policy: ElasticPolicy) -> World {
    let mut job = training_job();
    job.spec.et_replica_specs.worker.restart_policy = Some(ReplicaRestartPolicy::OnFailure);
    job.spec.et_replica_specs.worker.replicas = Some(4);
    job.spec.et_replica_specs.worker.min_replicas = Some(min);
    job.spec.elastic_policy = Some(policy);
    let mut world = World::new(job);
    world.launch_with(4);
    assert_eq!(world.status().phase, Some(JobPhase::Running));
    world
}

/// A running job of 4 workers needing 3, with `grace` seconds to checkpoint.
fn four_needing_three(grace: i32) -> World {
    four_needing(
        3,
        ElasticPolicy {
            checkpoint_grace_seconds: Some(grace),
            ..ElasticPolicy::default()
        },
    )
}

/// A warning that the node of `worker` goes in `seconds`.
fn warn(world: &mut World, worker: &str, seconds: i64) {
    world.warn(&format!("node-{worker}"), seconds);
}

fn shown(world: &World, pod: &str) -> Option<Notice> {
    crate::notice::shown(&world.pods[pod])
}

#[test]
fn a_worker_on_a_warned_node_is_told_at_once_leaves_discovery_and_is_replaced_elsewhere() {
    let mut world = four_needing(2, ElasticPolicy::default());
    warn(&mut world, "mnist-worker-3", 120);
    let plan = world.reconcile();

    let notice = shown(&world, "mnist-worker-3").expect("its own notice");
    assert_eq!(
        (notice.kind, notice.reason.as_str()),
        (NoticeKind::Reclaim, NODE_WARNING)
    );
    assert_eq!(
        notice.deadline.map(|d| d.0),
        Some(world.now + jiff::SignedDuration::from_secs(120))
    );
    assert!(
        notice
            .message
            .contains("node node-mnist-worker-3 goes away"),
        "{}",
        notice.message
    );
    assert_eq!(shown(&world, "mnist-worker-0"), None, "the others train on");
    assert_eq!(
        world.status().notice,
        None,
        "the job stays above its minimum"
    );
    assert!(
        !world
            .status()
            .current_workers
            .contains(&"mnist-worker-3".to_string()),
        "out of discovery"
    );
    assert!(
        deleted_pods(&plan).is_empty(),
        "it runs on until its node goes"
    );
    assert!(
        pod_names(&plan).contains(&"mnist-worker-4".to_string()),
        "replaced"
    );
    let replacement = world.pods["mnist-worker-4"].spec.clone().unwrap();
    let avoided = serde_json::to_string(&replacement.affinity).unwrap();
    assert!(avoided.contains("node-mnist-worker-3"), "{avoided}");
    assert_eq!(
        world.status().blacklist.last().map(|b| b.reason.as_str()),
        Some(NODE_WARNING),
        "the blacklist says why, so that the worker may return"
    );
    let listed = &world.status().node_warnings;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        (listed[0].node.as_str(), listed[0].workers.clone()),
        ("node-mnist-worker-3", vec!["mnist-worker-3".to_string()])
    );
    let warned: Vec<&str> = plan
        .events
        .iter()
        .filter(|e| e.reason == NODE_WARNING)
        .map(|e| e.note.as_str())
        .collect();
    assert_eq!(warned.len(), 1, "one event names the node and the warning");
    assert!(
        warned[0].contains("taint karpenter.sh/disrupted"),
        "{warned:?}"
    );
    assert_eq!(plan.tallies.warned, 1);

    // Once per warning: nothing changes while it stands.
    world.advance(5);
    assert!(world.reconcile().is_empty());
}

#[test]
fn warnings_that_leave_too_few_workers_post_the_suspend_notice_at_once_capped_by_the_warning() {
    let mut world = four_needing_three(300);
    warn(&mut world, "mnist-worker-2", 90);
    warn(&mut world, "mnist-worker-3", 120);
    world.reconcile();
    let notice = world
        .status()
        .notice
        .clone()
        .expect("no belowMinSeconds wait");
    assert_eq!(notice.kind, NoticeKind::Suspend);
    assert_eq!(
        notice.deadline.map(|d| d.0),
        Some(world.now + jiff::SignedDuration::from_secs(90)),
        "the first node to go ends the grace period"
    );
    assert!(
        notice.message.contains("when a node of the job goes"),
        "{}",
        notice.message
    );
    assert_eq!(
        shown(&world, "mnist-worker-0").map(|n| n.kind),
        Some(NoticeKind::Suspend)
    );

    // With a grace period shorter than the warning, the grace period stands.
    let mut world = four_needing_three(30);
    warn(&mut world, "mnist-worker-2", 120);
    warn(&mut world, "mnist-worker-3", 120);
    world.reconcile();
    let notice = world.status().notice.clone().expect("suspending");
    assert_eq!(
        notice.deadline.map(|d| d.0),
        Some(world.now + jiff::SignedDuration::from_secs(30))
    );
}

#[test]
fn a_withdrawn_warning_takes_its_notice_with_it() {
    let mut world = four_needing(2, ElasticPolicy::default());
    warn(&mut world, "mnist-worker-3", 120);
    world.reconcile();
    assert!(shown(&world, "mnist-worker-3").is_some());
    world.node_warnings.clear();
    world.reconcile();
    assert_eq!(shown(&world, "mnist-worker-3"), None);
    assert_eq!(world.status().notice, None);
}

#[test]
fn a_reclaimed_worker_that_opted_in_gets_the_kubeai_stop_with_its_warning() {
    let mut world = four_needing(
        2,
        ElasticPolicy {
            kubeai_stop: Some(true),
            ..ElasticPolicy::default()
        },
    );
    warn(&mut world, "mnist-worker-1", 120);
    let plan = world.reconcile();
    let stops: Vec<(&str, NoticeKind)> = plan
        .stops
        .iter()
        .map(|stop| (stop.pod.as_str(), stop.notice))
        .collect();
    assert_eq!(stops, [("mnist-worker-1", NoticeKind::Reclaim)]);
}

/// A warning as most taints give it: no time of its own.
fn warn_without_time(world: &mut World, worker: &str) {
    world.node_warnings.push(NodeWarning {
        node: format!("node-{worker}"),
        signal: "taint karpenter.sh/disrupted".into(),
        since: None,
        deadline: None,
        lead: std::time::Duration::from_secs(120),
    });
}

#[test]
fn a_warning_without_a_time_keeps_the_deadline_it_was_first_seen_with() {
    let mut world = four_needing_three(300);
    let first_seen = world.now;
    let goes = first_seen + jiff::SignedDuration::from_secs(120);
    warn_without_time(&mut world, "mnist-worker-3");
    world.reconcile();
    let listed = world.status().node_warnings.clone();
    assert_eq!(
        listed
            .iter()
            .map(|w| (w.since.0, w.deadline.0))
            .collect::<Vec<_>>(),
        [(first_seen, goes)]
    );
    world.advance(40);
    assert!(world.reconcile().status.is_none(), "nothing moves");
    // A second node, later: the job falls below its minimum; its grace period ends when the
    // first node goes, as first seen.
    warn_without_time(&mut world, "mnist-worker-2");
    world.reconcile();
    let notice = world.status().notice.clone().expect("suspending");
    assert_eq!(notice.deadline.map(|d| d.0), Some(goes));
    assert_eq!(
        shown(&world, "mnist-worker-3")
            .and_then(|n| n.deadline)
            .map(|d| d.0),
        Some(goes)
    );
}

fn returned_events(plan: &crate::plan::Plan) -> Vec<&str> {
    plan.events
        .iter()
        .filter(|e| e.reason == "WorkerReturned")
        .map(|e| e.note.as_str())
        .collect()
}

#[test]
fn a_withdrawn_warning_brings_its_running_worker_back_in_place_of_its_pending_replacement() {
    let mut world = four_needing(2, ElasticPolicy::default());
    warn(&mut world, "mnist-worker-3", 120);
    world.reconcile();
    assert!(world.pods.contains_key("mnist-worker-4"), "replaced");
    world.advance(10);
    world.node_warnings.clear();
    let plan = world.reconcile();

    assert_eq!(
        returned_events(&plan),
        [
            "worker mnist-worker-3 returns to host discovery in place of mnist-worker-4: the warning of its node was withdrawn"
        ]
    );
    assert_eq!(
        deleted_pods(&plan),
        ["mnist-worker-4"],
        "the replacement gives way"
    );
    let status = world.status();
    assert_eq!(
        status.current_workers,
        [
            "mnist-worker-0",
            "mnist-worker-1",
            "mnist-worker-2",
            "mnist-worker-3"
        ]
    );
    assert!(status.blacklist.iter().all(|b| b.pod != "mnist-worker-3"));
    assert_eq!(status.node_warnings, []);
    assert_eq!(shown(&world, "mnist-worker-3"), None);
    assert_eq!(status.workers.as_ref().map(|w| w.ready), Some(4));
    world.advance(5);
    assert!(world.reconcile().is_empty(), "settled");
}

#[test]
fn a_withdrawn_warning_after_the_replacement_joined_deletes_the_warned_worker() {
    let mut world = four_needing(2, ElasticPolicy::default());
    warn(&mut world, "mnist-worker-3", 120);
    world.reconcile();
    world.ready("mnist-worker-4");
    world.reconcile();
    world.node_warnings.clear();
    let plan = world.reconcile();

    assert_eq!(returned_events(&plan), [] as [&str; 0]);
    assert_eq!(deleted_pods(&plan), ["mnist-worker-3"], "its GPU is freed");
    let status = world.status();
    assert_eq!(
        status.current_workers,
        [
            "mnist-worker-0",
            "mnist-worker-1",
            "mnist-worker-2",
            "mnist-worker-4"
        ]
    );
    assert!(status.blacklist.iter().any(|b| b.pod == "mnist-worker-3"));
}

#[test]
fn a_finished_job_lists_no_warned_nodes() {
    let mut world = four_needing(2, ElasticPolicy::default());
    warn(&mut world, "mnist-worker-3", 120);
    world.reconcile();
    assert_eq!(world.status().node_warnings.len(), 1);
    world.job.spec.clean_pod_policy = Some(eto_api::common::CleanPodPolicy::None);
    world.exit("mnist-launcher", 0);
    world.reconcile();
    assert!(world.pods.contains_key("mnist-worker-3"), "pods are kept");
    assert_eq!(world.status().phase, Some(JobPhase::Succeeded));
    assert_eq!(world.status().node_warnings, []);
}

#[test]
fn a_suspend_notice_posted_for_a_warning_stands_when_the_warning_is_withdrawn() {
    // The training code may be saving its checkpoint and exiting already: a posted notice is
    // a promise (see plan::run::suspension).
    let mut world = four_needing_three(300);
    warn(&mut world, "mnist-worker-2", 120);
    warn(&mut world, "mnist-worker-3", 120);
    world.reconcile();
    let posted = world.status().notice.clone().expect("suspending");
    world.advance(10);
    world.node_warnings.clear();
    world.reconcile();
    assert_eq!(world.status().notice.as_ref(), Some(&posted));
    assert_eq!(
        shown(&world, "mnist-worker-0").map(|n| n.kind),
        Some(NoticeKind::Suspend)
    );
    world.exit("mnist-launcher", 0);
    world.reconcile();
    assert_eq!(world.status().phase, Some(JobPhase::Suspended));
}
