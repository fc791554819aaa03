//! TorchFT replica groups (see `kind/pytorch_job/replica_groups.rs`), as a reconcile plans
//! them: a Lighthouse beside the groups, a lost group replaced alone under the id it had.

use eto_api::PyTorchJob;
use k8s_openapi::api::core::v1::Pod;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::kind::pytorch_job::replica_groups::group_of;
use crate::testing::pytorch_job;
use crate::testing::world::World;

/// `ddp`: `groups` replica groups of one pod between two and four, no Master; planned once.
fn job(groups: u32) -> World {
    job_of(groups, json!({}))
}

/// `ddp`: `groups` replica groups between two and four, no Master, whose
/// `elasticPolicy.replicaGroups` is `settings`; planned once.
fn job_of(groups: u32, settings: serde_json::Value) -> World {
    job_with_policy(groups, json!({"replicaGroups": settings}))
}

/// `ddp`: `groups` Workers between two and four, no Master, whose `elasticPolicy` also has
/// `policy`; planned once.
fn job_with_policy(groups: u32, policy: serde_json::Value) -> World {
    let mut value = serde_json::to_value(pytorch_job()).unwrap();
    json_patch::merge(
        &mut value,
        &json!({"spec": {
            "elasticPolicy": {"minReplicas": 2, "maxReplicas": 4},
            "pytorchReplicaSpecs": {"Master": null, "Worker": {"replicas": groups}}
        }}),
    );
    json_patch::merge(&mut value, &json!({"spec": {"elasticPolicy": policy}}));
    let job: PyTorchJob = serde_json::from_value(value).unwrap();
    let mut world = World::pytorch(job);
    world.reconcile();
    world
}

/// Each Worker pod's name and group id, by name.
pub(super) fn groups(world: &World) -> Vec<(String, Option<u32>)> {
    world
        .pods
        .iter()
        .filter(|(name, _)| name.starts_with("ddp-worker-"))
        .map(|(name, pod)| (name.clone(), group_of(pod)))
        .collect()
}

fn env(pod: &Pod, name: &str) -> Option<String> {
    pod.spec.as_ref()?.containers[0]
        .env
        .iter()
        .flatten()
        .find(|var| var.name == name)?
        .value
        .clone()
}

/// Gives pod `name` the lowest deletion cost of the job's pods.
fn cheapest(world: &mut World, name: &str) {
    world.pod(name).metadata.annotations = Some(
        [(
            eto_api::well_known::POD_DELETION_COST_ANNOTATION.to_string(),
            "-1".to_string(),
        )]
        .into(),
    );
}

/// The pods named `names`, as they are now.
fn snapshot(world: &World, names: &[&str]) -> Vec<Pod> {
    names.iter().map(|name| world.pods[*name].clone()).collect()
}

fn ready_all(world: &mut World) {
    let names: Vec<String> = world.pods.keys().cloned().collect();
    for name in names {
        world.ready(&name);
    }
    world.reconcile();
}

#[test]
fn groups_start_beside_a_lighthouse_each_with_its_own_id() {
    let world = job(3);
    assert_eq!(
        groups(&world),
        [
            ("ddp-worker-0".to_string(), Some(0)),
            ("ddp-worker-1".to_string(), Some(1)),
            ("ddp-worker-2".to_string(), Some(2)),
        ]
    );
    let lighthouse = &world.pods["ddp-lighthouse"];
    let command = lighthouse.spec.as_ref().unwrap().containers[0]
        .command
        .clone()
        .unwrap();
    assert_eq!(
        command[3..],
        [
            "torchft_lighthouse",
            "--min_replicas",
            "2",
            "--bind",
            "[::]:29510",
            "--heartbeat_timeout_ms",
            "1000"
        ]
    );
    let worker = &world.pods["ddp-worker-1"];
    assert_eq!(env(worker, "REPLICA_GROUP_ID").as_deref(), Some("1"));
    assert_eq!(env(worker, "NUM_REPLICA_GROUPS").as_deref(), Some("4"));
    assert_eq!(
        env(worker, "TORCHFT_LIGHTHOUSE").as_deref(),
        Some("http://ddp-lighthouse.ddp-workers:29510")
    );
    assert_eq!(env(worker, "PET_RDZV_ENDPOINT"), None);
    assert!(
        env(
            worker,
            crate::kind::pytorch_job::objects::SHUTDOWN_TIMEOUT_ENV
        )
        .is_some(),
        "torchrun gives the training time after a SIGTERM, to leave between two steps"
    );
    assert!(
        worker
            .spec
            .as_ref()
            .unwrap()
            .termination_grace_period_seconds
            .is_some()
    );
    let spec = worker.spec.as_ref().unwrap();
    assert_eq!(
        (spec.hostname.as_deref(), spec.subdomain.as_deref()),
        (Some("ddp-worker-1"), Some("ddp-workers"))
    );
    assert_eq!(
        spec.dns_config.as_ref().unwrap().searches,
        Some(vec!["ddp-workers.default.svc.cluster.local".to_string()])
    );
    assert!(world.pod_services.contains_key("ddp-workers"));
}

#[test]
fn a_lost_group_is_replaced_alone_under_its_id() {
    let mut world = job(3);
    ready_all(&mut world);
    let before = snapshot(&world, &["ddp-worker-0", "ddp-worker-2"]);
    world.evict("ddp-worker-1");
    world.reconcile();
    world.pods.remove("ddp-worker-1");
    world.reconcile();
    assert_eq!(
        groups(&world),
        [
            ("ddp-worker-0".to_string(), Some(0)),
            ("ddp-worker-2".to_string(), Some(2)),
            ("ddp-worker-3".to_string(), Some(1)),
        ],
        "the replacement takes the lost group's id"
    );
    let after = snapshot(&world, &["ddp-worker-0", "ddp-worker-2"]);
    assert_eq!(before, after, "the other groups are not touched");
    assert!(world.pods.contains_key("ddp-lighthouse"));
    let status = world.pytorch_job.as_ref().unwrap().status.as_ref().unwrap();
    assert!(
        status
            .eto
            .blacklist
            .iter()
            .any(|entry| entry.pod == "ddp-worker-1"),
        "{:?}",
        status.eto.blacklist
    );
}

/// `ddp`: `groups` replica groups of one pod between two and four and one spare group, every
/// pod ready.
fn with_a_spare(groups: u32) -> World {
    let mut world = job_with_policy(groups, json!({"spareReplicas": 1, "replicaGroups": {}}));
    ready_all(&mut world);
    world
}

#[test]
fn a_spare_group_waits_without_an_id_and_shows_its_id_in_a_file() {
    let world = with_a_spare(3);
    assert_eq!(
        groups(&world),
        [
            ("ddp-worker-0".to_string(), Some(0)),
            ("ddp-worker-1".to_string(), Some(1)),
            ("ddp-worker-2".to_string(), Some(2)),
            ("ddp-worker-3".to_string(), None),
        ],
        "three groups and a spare"
    );
    let spare = &world.pods["ddp-worker-3"];
    assert_eq!(
        env(spare, "REPLICA_GROUP_ID").as_deref(),
        Some("spare"),
        "not a number: code that does not wait for its id stops with an error"
    );
    assert_eq!(env(spare, "NUM_REPLICA_GROUPS").as_deref(), Some("4"));
    let files: Vec<(String, String)> = spare
        .spec
        .as_ref()
        .unwrap()
        .volumes
        .iter()
        .flatten()
        .filter_map(|volume| volume.downward_api.as_ref())
        .flat_map(|api| api.items.iter().flatten())
        .map(|item| {
            (
                item.path.clone(),
                item.field_ref.as_ref().unwrap().field_path.clone(),
            )
        })
        .collect();
    assert!(
        files.contains(&(
            "replica-group".to_string(),
            "metadata.labels['eto.dev/replica-group']".to_string()
        )),
        "{files:?}"
    );
    let status = world.pytorch_job.as_ref().unwrap().status.as_ref().unwrap();
    let workers = status.eto.workers.as_ref().unwrap();
    assert_eq!((workers.desired, workers.spares), (3, Some(1)));
}

#[test]
fn a_lost_group_is_taken_over_by_the_waiting_spare_and_a_new_spare_starts() {
    use crate::testing::world::reasons;
    let mut world = with_a_spare(3);
    let spare_before = world.pods["ddp-worker-3"].spec.clone();
    world.evict("ddp-worker-1");
    let plan = world.reconcile();
    assert!(
        reasons(&plan).contains(&crate::plan::SPARE_TAKES_PLACE.to_string()),
        "{:?}",
        reasons(&plan)
    );
    assert_eq!(
        groups(&world),
        [
            ("ddp-worker-0".to_string(), Some(0)),
            ("ddp-worker-1".to_string(), Some(1)),
            ("ddp-worker-2".to_string(), Some(2)),
            ("ddp-worker-3".to_string(), Some(1)),
            ("ddp-worker-4".to_string(), None),
        ],
        "the spare takes group 1 in the reconcile that sees the loss; its replacement waits"
    );
    assert_eq!(
        world.pods["ddp-worker-3"].spec, spare_before,
        "the spare's pod is the same: only its label changed"
    );
    world.pods.remove("ddp-worker-1");
    world.ready("ddp-worker-4");
    let plan = world.reconcile();
    assert!(
        !reasons(&plan).contains(&crate::plan::SPARE_TAKES_PLACE.to_string()),
        "no group is missing: the new spare waits"
    );
    assert_eq!(groups(&world).last().unwrap().1, None);
}

#[test]
fn a_group_added_is_taken_by_the_spare_and_a_scale_in_keeps_it() {
    let mut world = with_a_spare(3);
    world.set_worker_replicas(4);
    world.reconcile();
    assert_eq!(
        groups(&world)[3..],
        [
            ("ddp-worker-3".to_string(), Some(3)),
            ("ddp-worker-4".to_string(), None),
        ],
        "the spare trains as group 3; a new spare starts"
    );
    world.ready("ddp-worker-4");
    world.reconcile();
    world.set_worker_replicas(3);
    let plan = world.reconcile();
    let deleted = crate::testing::world::deleted_pods(&plan);
    assert_eq!(deleted.len(), 1, "{deleted:?}");
    assert_ne!(
        deleted[0], "ddp-worker-4",
        "a training group leaves, not the spare"
    );
}

#[test]
fn a_spare_that_is_not_ready_leaves_the_lost_group_to_a_new_pod() {
    let mut world = with_a_spare(3);
    world.pods.get_mut("ddp-worker-3").unwrap().status =
        Some(serde_json::from_value(json!({"phase": "Pending"})).unwrap());
    world.evict("ddp-worker-1");
    world.reconcile();
    assert_eq!(
        groups(&world)[3..],
        [
            ("ddp-worker-3".to_string(), None),
            ("ddp-worker-4".to_string(), Some(1)),
        ]
    );
    assert_eq!(
        env(&world.pods["ddp-worker-4"], "REPLICA_GROUP_ID").as_deref(),
        Some("1")
    );
}

#[test]
fn a_new_group_takes_the_lowest_free_id() {
    let mut world = job(2);
    ready_all(&mut world);
    world.set_worker_replicas(3);
    world.reconcile();
    assert_eq!(
        groups(&world).last().cloned(),
        Some(("ddp-worker-2".to_string(), Some(2)))
    );
}

#[test]
fn below_the_minimum_of_groups_the_job_suspends() {
    let mut world = job(2);
    ready_all(&mut world);
    world.lose_with_node("ddp-worker-0");
    world.reconcile();
    world.advance(3600);
    world.reconcile();
    world.reconcile();
    let status = world.pytorch_job.as_ref().unwrap().status.as_ref().unwrap();
    let running = status.conditions.iter().find(|c| c.type_ == "Running");
    assert_eq!(
        running.and_then(|c| c.reason.as_deref()),
        Some("BelowMinWorkers"),
        "{:?}",
        status.conditions
    );
    assert_eq!(status.eto.run, Some(1), "it resumes in a new run");
}

#[test]
fn a_lost_lighthouse_is_replaced_in_the_same_run_and_the_groups_are_kept() {
    let mut world = job(3);
    ready_all(&mut world);
    let groups_before = groups(&world);
    world.exit("ddp-lighthouse", 137);
    let plan = world.reconcile();
    assert!(
        crate::testing::world::deleted_pods(&plan).contains(&"ddp-lighthouse".to_string()),
        "the ended Lighthouse makes way"
    );
    assert!(
        crate::testing::world::reasons(&plan).contains(&"LighthouseLost".to_string()),
        "{:?}",
        crate::testing::world::reasons(&plan)
    );
    world.reconcile();
    assert!(
        world.pods.contains_key("ddp-lighthouse"),
        "a new Lighthouse"
    );
    assert_eq!(groups(&world), groups_before, "no group is touched");
    let status = world.pytorch_job.as_ref().unwrap().status.as_ref().unwrap();
    assert_eq!(status.eto.run.unwrap_or(0), 0, "the run goes on");
    assert!(
        !status
            .conditions
            .iter()
            .any(|c| c.type_ == "Suspended" && c.status == eto_api::common::ConditionStatus::True)
    );

    world.pods.remove("ddp-lighthouse");
    world.reconcile();
    assert!(
        world.pods.contains_key("ddp-lighthouse"),
        "one that disappears is replaced too"
    );
}

#[test]
fn the_status_shows_the_quorum_the_lighthouse_reports() {
    use crate::group_report::GroupReport;
    use crate::group_report::QuorumReport;

    let mut world = job(3);
    ready_all(&mut world);
    world.group_report = Some(GroupReport {
        quorum: Some(QuorumReport {
            quorum_id: 5,
            participants: 2,
            step: 140,
            heartbeating: 2,
            heartbeats: Vec::new(),
            waiting_for_groups: false,
        }),
        ..GroupReport::default()
    });
    world.reconcile();
    let status = world.pytorch_job.as_ref().unwrap().status.as_ref().unwrap();
    let groups = status.replica_groups.clone().expect("the quorum shown");
    assert_eq!((groups.quorum_id, groups.quorum, groups.step), (5, 2, 140));
    assert_eq!(
        (groups.heartbeating, groups.healing, groups.missing),
        (2, 0, 1),
        "one of three groups does not heartbeat"
    );
}

#[test]
fn a_scale_in_deletes_the_leaving_groups_pod_at_once_the_cheapest_first() {
    use crate::testing::world::deleted_pods;
    let mut world = job(3);
    ready_all(&mut world);
    let staying = snapshot(&world, &["ddp-worker-1", "ddp-worker-2"]);
    cheapest(&mut world, "ddp-worker-0");
    world.set_worker_replicas(2);
    let plan = world.reconcile();
    assert_eq!(
        deleted_pods(&plan),
        ["ddp-worker-0"],
        "no drain: the group leaves the quorum when its training stops"
    );
    let status = world.pytorch_job.as_ref().unwrap().status.as_ref().unwrap();
    assert!(status.eto.draining_workers.is_empty());
    assert_eq!(
        status.eto.notice, None,
        "the others are not asked to checkpoint"
    );
    let after = snapshot(&world, &["ddp-worker-1", "ddp-worker-2"]);
    assert_eq!(staying, after, "the staying groups are not touched");
    assert!(world.pods.contains_key("ddp-lighthouse"));
}

#[test]
fn a_warned_group_is_told_and_replaced_the_others_untouched() {
    use eto_api::job_status::NoticeKind;
    let mut world = job(3);
    ready_all(&mut world);
    world
        .pod("ddp-worker-1")
        .spec
        .get_or_insert_default()
        .node_name = Some("spot-1".into());
    let staying = snapshot(&world, &["ddp-worker-0", "ddp-worker-2"]);
    world.warn("spot-1", 120);
    world.reconcile();
    let notice = crate::notice::shown(&world.pods["ddp-worker-1"]).expect("a notice");
    assert_eq!(notice.kind, NoticeKind::Reclaim, "the warned group is told");
    assert_eq!(
        groups(&world).last().cloned(),
        Some(("ddp-worker-3".to_string(), Some(1))),
        "its replacement starts at once, elsewhere, under its id"
    );
    let after = snapshot(&world, &["ddp-worker-0", "ddp-worker-2"]);
    assert_eq!(staying, after, "the other groups are not touched");
    let status = world.pytorch_job.as_ref().unwrap().status.as_ref().unwrap();
    assert_eq!(status.eto.notice, None, "no notice for the job");
}

/// A Worker pod's name, its group id, its rank and where its group forms.
type Place = (String, Option<u32>, Option<String>, Option<String>);

/// Each Worker pod's [`Place`].
fn places(world: &World) -> Vec<Place> {
    world
        .pods
        .iter()
        .filter(|(name, _)| name.starts_with("ddp-worker-"))
        .map(|(name, pod)| {
            (
                name.clone(),
                group_of(pod),
                env(pod, "PET_NODE_RANK"),
                env(pod, "PET_MASTER_ADDR"),
            )
        })
        .collect()
}

fn place(name: &str, id: u32, rank: u32, first: &str) -> Place {
    (
        name.to_string(),
        Some(id),
        Some(rank.to_string()),
        Some(format!("{first}.ddp-workers")),
    )
}

/// The places of the pair that replaces group 1 of three groups of two pods: the next two
/// indices, group 1, formed at the first.
fn group_one_renewed() -> [Place; 2] {
    [
        place("ddp-worker-6", 1, 0, "ddp-worker-6"),
        place("ddp-worker-7", 1, 1, "ddp-worker-6"),
    ]
}

#[test]
fn groups_of_two_pods_form_each_at_its_first_pod() {
    let world = job_of(3, json!({"podsPerGroup": 2}));
    assert_eq!(
        places(&world),
        [
            place("ddp-worker-0", 0, 0, "ddp-worker-0"),
            place("ddp-worker-1", 0, 1, "ddp-worker-0"),
            place("ddp-worker-2", 1, 0, "ddp-worker-2"),
            place("ddp-worker-3", 1, 1, "ddp-worker-2"),
            place("ddp-worker-4", 2, 0, "ddp-worker-4"),
            place("ddp-worker-5", 2, 1, "ddp-worker-4"),
        ]
    );
    let worker = &world.pods["ddp-worker-3"];
    assert_eq!(env(worker, "PET_NNODES").as_deref(), Some("2"));
    assert_eq!(env(worker, "PET_MASTER_PORT").as_deref(), Some("23456"));
    assert_eq!(env(worker, "PET_STANDALONE"), None);
    assert_eq!(env(worker, "NUM_REPLICA_GROUPS").as_deref(), Some("4"));
    let first = world.pods["ddp-worker-2"].spec.as_ref().unwrap();
    assert_eq!(
        (first.hostname.as_deref(), first.subdomain.as_deref()),
        (Some("ddp-worker-2"), Some("ddp-workers")),
        "the Workers' Service names a group's first pod"
    );
    let command = world.pods["ddp-lighthouse"]
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
        .command
        .clone()
        .unwrap();
    assert_eq!(command[4..6], ["--min_replicas", "2"], "groups, not pods");
}

#[test]
fn a_lost_pod_takes_its_group_and_both_are_replaced_under_its_id() {
    use crate::testing::world::{deleted_pods, reasons};
    let mut world = job_of(3, json!({"podsPerGroup": 2}));
    ready_all(&mut world);
    let untouched = [
        "ddp-worker-0",
        "ddp-worker-1",
        "ddp-worker-4",
        "ddp-worker-5",
    ];
    let others = snapshot(&world, &untouched);
    world.evict("ddp-worker-3");
    let plan = world.reconcile();
    assert_eq!(
        deleted_pods(&plan),
        ["ddp-worker-2"],
        "its partner goes at once, without a drain"
    );
    assert_eq!(
        plan.delete[0].grace_seconds,
        Some(crate::target_workers::LEFT_WITH_GROUP_GRACE_SECONDS),
        "within seconds: while it lives it may hold up the other groups"
    );
    assert!(reasons(&plan).contains(&"WorkerLeftWithGroup".to_string()));
    world.pods.remove("ddp-worker-2");
    world.pods.remove("ddp-worker-3");
    world.reconcile();
    let new: Vec<_> = places(&world)
        .into_iter()
        .filter(|(name, ..)| ["ddp-worker-6", "ddp-worker-7"].contains(&name.as_str()))
        .collect();
    assert_eq!(
        new,
        group_one_renewed(),
        "a new group of two takes the lost group's id"
    );
    let after = snapshot(&world, &untouched);
    assert_eq!(others, after, "the other groups are not touched");
    let status = world.pytorch_job.as_ref().unwrap().status.as_ref().unwrap();
    let blacklisted: Vec<&str> = status
        .eto
        .blacklist
        .iter()
        .map(|e| e.pod.as_str())
        .collect();
    assert_eq!(
        blacklisted,
        ["ddp-worker-3"],
        "only the lost pod is blacklisted"
    );
}

#[test]
fn groups_of_two_scale_in_whole_and_count_as_groups() {
    use crate::group_report::GroupReport;
    use crate::group_report::QuorumReport;
    use crate::testing::world::deleted_pods;
    let mut world = job_of(3, json!({"podsPerGroup": 2}));
    ready_all(&mut world);
    cheapest(&mut world, "ddp-worker-2");
    world.set_worker_replicas(2);
    let plan = world.reconcile();
    assert_eq!(
        deleted_pods(&plan),
        ["ddp-worker-2", "ddp-worker-3"],
        "the group of the cheapest pod leaves whole"
    );
    world.group_report = Some(GroupReport {
        quorum: Some(QuorumReport {
            quorum_id: 3,
            participants: 1,
            step: 20,
            heartbeating: 1,
            heartbeats: Vec::new(),
            waiting_for_groups: false,
        }),
        ..GroupReport::default()
    });
    world.reconcile();
    let status = world.pytorch_job.as_ref().unwrap().status.as_ref().unwrap();
    let groups = status.replica_groups.clone().expect("the quorum shown");
    assert_eq!(
        (groups.quorum, groups.missing),
        (1, 1),
        "two groups of four pods, one in the quorum"
    );
    assert_eq!(status.eto.workers.as_ref().unwrap().desired, 4, "in pods");
}

#[test]
fn a_force_deleted_pod_takes_its_group_too() {
    use crate::testing::world::deleted_pods;
    let mut world = job_of(3, json!({"podsPerGroup": 2}));
    ready_all(&mut world);
    world.pods.remove("ddp-worker-3");
    let plan = world.reconcile();
    assert_eq!(
        deleted_pods(&plan),
        ["ddp-worker-2"],
        "the gone pod's labels are gone with it: its group is the one short of a pod"
    );
    world.pods.remove("ddp-worker-2");
    world.reconcile();
    assert_eq!(places(&world)[4..], group_one_renewed());
}

#[test]
fn a_pod_whose_training_fails_ends_and_its_group_is_replaced_whole() {
    use crate::testing::world::deleted_pods;
    let mut world = job_of(3, json!({"podsPerGroup": 2}));
    let restart_policies: Vec<Option<String>> = world
        .pods
        .values()
        .filter(|pod| group_of(pod).is_some())
        .map(|pod| pod.spec.as_ref().unwrap().restart_policy.clone())
        .collect();
    assert_eq!(
        restart_policies,
        vec![Some("Never".to_string()); 6],
        "under v1's OnFailure too, no Worker restarts in place"
    );
    ready_all(&mut world);
    world.exit("ddp-worker-3", 1);
    let plan = world.reconcile();
    assert_eq!(
        deleted_pods(&plan),
        ["ddp-worker-2"],
        "its partner goes too"
    );
    world.pods.remove("ddp-worker-2");
    world.pods.remove("ddp-worker-3");
    world.reconcile();
    assert_eq!(
        places(&world)[4..],
        group_one_renewed(),
        "OnFailure replaces the group under its id"
    );
    let status = world.pytorch_job.as_ref().unwrap().status.as_ref().unwrap();
    assert!(
        status.eto.blacklist.iter().any(|e| e.pod == "ddp-worker-3"),
        "the pod that failed is blacklisted"
    );
    assert_eq!(
        status
            .eto
            .nodes_in_cooldown
            .iter()
            .map(|n| n.node.as_str())
            .collect::<Vec<_>>(),
        ["node-ddp-worker-3"],
        "its node cools down"
    );
}

#[test]
fn a_lighthouse_that_keeps_failing_on_its_own_is_replaced_later_and_later() {
    let mut world = job(3);
    ready_all(&mut world);
    let groups_before = groups(&world);
    // (its wait before the next one)
    for wait in [0, 10, 20] {
        world.exit("ddp-lighthouse", 1);
        world.reconcile();
        world.reconcile();
        if wait > 0 {
            assert!(!world.pods.contains_key("ddp-lighthouse"), "waits {wait}s");
            let status = world.pytorch_job.as_ref().unwrap().status.as_ref().unwrap();
            let failing = status
                .conditions
                .iter()
                .find(|c| c.type_ == "PodsFailing")
                .expect("PodsFailing");
            assert_eq!(failing.reason.as_deref(), Some("CrashLoopBackOff"));
            assert!(
                failing
                    .message
                    .as_deref()
                    .is_some_and(|m| m.starts_with("Lighthouse ddp-lighthouse: container")),
                "{failing:?}"
            );
            world.advance(wait);
            world.reconcile();
        }
        assert!(world.pods.contains_key("ddp-lighthouse"), "after {wait}s");
        world.ready("ddp-lighthouse");
        world.reconcile();
    }
    assert_eq!(groups(&world), groups_before, "no group is touched");
    // One the platform takes is replaced at once, whatever backs off.
    world.lose_with_node("ddp-lighthouse");
    world.reconcile();
    world.reconcile();
    assert!(world.pods.contains_key("ddp-lighthouse"));
}

const THREE: [&str; 3] = ["ddp-worker-0", "ddp-worker-1", "ddp-worker-2"];

#[test]
fn a_group_whose_manager_stopped_heartbeating_is_replaced_under_its_id() {
    use crate::group_report::GroupReport;
    use crate::group_report::QuorumReport;
    let mut world = job(3);
    ready_all(&mut world);
    for pod in THREE {
        world.runs(pod);
    }
    world.advance(100);
    let before = groups(&world);
    let stopped_for = |age: f64| GroupReport {
        quorum: Some(QuorumReport {
            quorum_id: 5,
            participants: 2,
            step: 40,
            heartbeating: 2,
            heartbeats: vec![
                ("train_0:aa".into(), 0.1),
                ("train_1:bb".into(), age),
                ("train_2:cc".into(), 0.1),
            ],
            waiting_for_groups: false,
        }),
        ..GroupReport::default()
    };
    world.group_report = Some(stopped_for(20.0));
    let plan = world.reconcile();
    assert!(
        crate::testing::world::deleted_pods(&plan).is_empty(),
        "not yet"
    );
    assert!(
        plan.requeue_after <= Some(std::time::Duration::from_secs(41)),
        "looked at again by the time it is due: {:?}",
        plan.requeue_after
    );
    world.group_report = Some(stopped_for(61.0));
    let plan = world.reconcile();
    assert_eq!(crate::testing::world::deleted_pods(&plan), ["ddp-worker-1"]);
    world.reconcile();
    let after = groups(&world);
    assert_eq!(after.len(), before.len());
    assert!(
        after.contains(&("ddp-worker-3".to_string(), Some(1))),
        "a new pod under group 1: {after:?}"
    );
    // Its replacement runs under the same id before its own Manager heartbeats: the old
    // Manager's silence is not its own.
    world.runs("ddp-worker-3");
    world.advance(10);
    world.group_report = Some(stopped_for(71.0));
    assert!(crate::testing::world::deleted_pods(&world.reconcile()).is_empty());
    let status = world.pytorch_job.as_ref().unwrap().status.as_ref().unwrap();
    let entry = status.eto.blacklist.last().unwrap();
    assert_eq!(
        (entry.pod.as_str(), entry.reason.as_str()),
        ("ddp-worker-1", "Silent")
    );
}

#[test]
fn a_group_whose_training_keeps_failing_is_replaced_later_and_later() {
    let mut world = job(3);
    ready_all(&mut world);
    // Group 1's training fails; its replacement (the pod of group 1 again) fails too.
    world.exit("ddp-worker-1", 1);
    world.reconcile();
    assert!(
        world.pods.contains_key("ddp-worker-3"),
        "a first failure: at once"
    );
    world.ready("ddp-worker-3");
    world.reconcile();
    world.exit("ddp-worker-3", 1);
    world.reconcile();
    assert!(!world.pods.contains_key("ddp-worker-4"), "the second waits");
    let status = world.pytorch_job.as_ref().unwrap().status.as_ref().unwrap();
    let backoff = status.eto.backoff.first().expect("a back-off");
    assert_eq!(
        (backoff.failures, backoff.waiting.clone()),
        (2, vec!["ddp-worker-4".to_string()])
    );
    world.advance(10);
    world.reconcile();
    assert_eq!(
        groups(&world).last(),
        Some(&("ddp-worker-4".to_string(), Some(1))),
        "then under its id"
    );
}

/// `with_a_spare(3)`, every pod training, then group 0 lost (the spare takes its place, a new
/// spare, `ddp-worker-4`, is created), then groups 1 and 0 lost at once: one group is left of
/// the two the job needs, and the job is suspending; the new spare's pod has started.
fn suspending_with_one_group_and_a_new_spare() -> World {
    let mut world = with_a_spare(3);
    for name in [
        "ddp-worker-0",
        "ddp-worker-1",
        "ddp-worker-2",
        "ddp-worker-3",
    ] {
        world.training(name);
    }
    world.pods.remove("ddp-worker-0");
    world.reconcile();
    assert_eq!(
        groups(&world),
        [
            ("ddp-worker-1".to_string(), Some(1)),
            ("ddp-worker-2".to_string(), Some(2)),
            ("ddp-worker-3".to_string(), Some(0)),
            ("ddp-worker-4".to_string(), None),
        ]
    );
    world.pods.remove("ddp-worker-1");
    world.pods.remove("ddp-worker-3");
    world.advance(1);
    world.reconcile();
    let notice = world
        .pytorch_job
        .as_ref()
        .unwrap()
        .status
        .as_ref()
        .unwrap()
        .eto
        .notice
        .clone();
    assert_eq!(
        notice.map(|n| n.kind),
        Some(eto_api::job_status::NoticeKind::Suspend),
        "one group of the two the job needs trains: the job suspends"
    );
    world.training("ddp-worker-4");
    world
}

/// The job's `Suspended` condition: its status and reason.
fn suspended(world: &World) -> Option<(eto_api::common::ConditionStatus, Option<String>)> {
    let status = world.pytorch_job.as_ref().unwrap().status.as_ref().unwrap();
    let condition = status.conditions.iter().find(|c| c.type_ == "Suspended");
    condition.map(|c| (c.status, c.reason.clone()))
}

#[test]
fn a_spare_waiting_for_a_place_does_not_hold_up_a_suspend() {
    let mut world = suspending_with_one_group_and_a_new_spare();
    world.advance(1);
    world.reconcile();
    assert_eq!(suspended(&world), None, "group 2 still trains: it may save");
    // The group that trained saves its checkpoint and exits; the spare never trained.
    world.exit("ddp-worker-2", 0);
    world.advance(1);
    world.reconcile();
    assert_eq!(
        suspended(&world),
        Some((
            eto_api::common::ConditionStatus::True,
            Some("BelowMinWorkers".to_string())
        )),
        "every group that trained has exited: the suspend is done, not held for the grace \
         period by a spare that waits for an id"
    );
}

#[test]
fn groups_stuck_waiting_for_a_quorum_too_small_to_form_end_the_suspend() {
    use crate::group_report::{GroupReport, QuorumReport};
    let mut world = suspending_with_one_group_and_a_new_spare();
    let lighthouse = |waiting_for_groups| GroupReport {
        quorum: Some(QuorumReport {
            quorum_id: 4,
            participants: 3,
            step: 80,
            heartbeating: 1,
            heartbeats: Vec::new(),
            waiting_for_groups,
        }),
        ..GroupReport::default()
    };
    world.group_report = Some(lighthouse(false));
    world.advance(1);
    world.reconcile();
    assert_eq!(
        suspended(&world),
        None,
        "group 2 has not asked for a quorum yet"
    );
    world.group_report = Some(lighthouse(true));
    world.advance(1);
    let plan = world.reconcile();
    assert_eq!(
        suspended(&world).map(|(status, _)| status),
        Some(eto_api::common::ConditionStatus::True),
        "group 2 waits in a quorum that needs two groups: it cannot save, nor hear the notice"
    );
    let deletion = plan
        .delete
        .iter()
        .find(|deletion| deletion.name == "ddp-worker-2")
        .expect("the stuck group's pod is deleted");
    assert_eq!(
        deletion.grace_seconds,
        Some(5),
        "it cannot save: five seconds, no grace period for eto's PID 1 to wait out (the new run waits for \
         the old one's pods to go)"
    );
}
