//! Scenarios of a job's life, stepped through the in-memory world: the general ones here, the
//! others by subject in the modules below, and the property tests over random lives.

mod autoscaler;
mod backoff;
mod collateral;
mod gang;
mod goodput;
mod group_orders;
mod health_fixtures;
mod joining;
mod launcher_loss;
mod lost_group;
mod mpi;
mod node_warning;
mod properties;
mod pytorch;
mod reforming_group;
mod rejection;
mod rendezvous;
mod replica_groups;
mod scaling;
mod spares;
mod survivors;
mod suspension;
mod train_job;
mod warned_handover;

use eto_api::common::CleanPodPolicy;
use eto_api::common::ReplicaRestartPolicy;
use eto_api::job_status::JobPhase;
use eto_api::training_job::JobRestartPolicy;
use pretty_assertions::assert_eq;

use super::*;
use crate::conditions;
use crate::job::Kind;
use crate::testing::training_job;
use crate::testing::world::{World, deleted_pods, pod_names, reasons};

fn condition(world: &World, type_: &str) -> (bool, String) {
    let condition = conditions::find(&world.status().conditions, type_)
        .unwrap_or_else(|| panic!("no {type_} condition"));
    (
        condition.status == eto_api::common::ConditionStatus::True,
        condition.reason.clone().unwrap_or_default(),
    )
}

/// A world whose job (two workers, min 2) has been reconciled once.
fn started() -> World {
    let mut world = World::new(training_job());
    world.reconcile();
    world
}

/// A started world whose workers are ready and whose launcher runs.
fn running() -> World {
    let mut world = World::new(training_job());
    world.launch();
    world
}

#[test]
fn a_new_job_gets_its_supporting_objects_and_workers_but_no_launcher() {
    let mut world = World::new(training_job());
    let plan = world.reconcile();
    let kinds: Vec<&str> = plan.apply.iter().map(Child::kind).collect();
    assert_eq!(
        kinds,
        [
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "Service",
            "Pod",
            "Pod",
            "ConfigMap"
        ]
    );
    assert_eq!(pod_names(&plan), ["mnist-worker-0", "mnist-worker-1"]);
    assert!(plan.create_ssh_secret.is_some());
    assert_eq!(reasons(&plan), ["WorkersCreated"]);
    let status = world.status();
    assert_eq!(status.phase, Some(JobPhase::Created));
    assert_eq!(status.target_workers, ["mnist-worker-0", "mnist-worker-1"]);
    assert!(status.start_time.is_some());
    assert_eq!(
        status.selector.as_deref(),
        Some("training-job-name=mnist,training-job-role=worker")
    );
    assert_eq!(
        condition(&world, conditions::READY),
        (false, "WaitingForWorkers".into())
    );
    assert_eq!(
        condition(&world, conditions::WORKERS_READY),
        (false, "WaitingForWorkers".into())
    );
}

#[test]
fn a_reconcile_with_nothing_to_change_plans_nothing() {
    let mut world = started();
    let again = world.reconcile();
    assert!(again.is_empty(), "{again:#?}");
    let mut world = running();
    assert!(world.reconcile().is_empty());
    world.advance(3600);
    assert!(world.reconcile().is_empty(), "time alone changes nothing");
}

#[test]
fn the_launcher_waits_until_min_replicas_workers_are_ready() {
    let mut world = started();
    world.ready("mnist-worker-0");
    world.running_not_ready("mnist-worker-1");
    let plan = world.reconcile();
    assert!(
        pod_names(&plan).is_empty(),
        "one of two workers is not enough"
    );
    assert_eq!(
        world
            .status()
            .workers
            .as_ref()
            .map(|w| (w.ready, w.pending)),
        Some((1, 1))
    );

    world.ready("mnist-worker-1");
    let plan = world.reconcile();
    assert_eq!(pod_names(&plan), ["mnist-launcher"]);
    assert_eq!(reasons(&plan), ["LauncherCreated"]);
    assert_eq!(
        world.launcher_hostfile().as_deref(),
        Some("mnist-worker-0.mnist-workers:1\nmnist-worker-1.mnist-workers:1\n")
    );
    assert_eq!(
        condition(&world, conditions::READY),
        (false, "LauncherPending".into())
    );
    assert_eq!(world.status().phase, Some(JobPhase::Created));
}

#[test]
fn min_replicas_below_replicas_starts_the_launcher_early() {
    let mut job = training_job();
    job.spec.et_replica_specs.worker.replicas = Some(4);
    job.spec.et_replica_specs.worker.min_replicas = Some(1);
    let mut world = World::new(job);
    world.reconcile();
    world.ready("mnist-worker-2");
    let plan = world.reconcile();
    assert_eq!(pod_names(&plan), ["mnist-launcher"]);
    assert_eq!(
        world.launcher_hostfile().as_deref(),
        Some("mnist-worker-2.mnist-workers:1\n")
    );
}

#[test]
fn a_running_launcher_makes_the_job_running_once() {
    let mut world = started();
    world.ready("mnist-worker-0");
    world.ready("mnist-worker-1");
    world.reconcile();
    world.ready("mnist-launcher");
    let plan = world.reconcile();
    assert_eq!(reasons(&plan), ["TrainingJobRunning"]);
    assert_eq!(world.status().phase, Some(JobPhase::Running));
    assert_eq!(
        condition(&world, conditions::READY),
        (true, "TrainingJobRunning".into())
    );
    assert_eq!(
        condition(&world, conditions::RUNNING),
        (true, "TrainingJobRunning".into())
    );
    assert_eq!(
        world.status().current_workers,
        ["mnist-worker-0", "mnist-worker-1"]
    );
    let launcher = &world.status().replica_statuses[&eto_api::common::ReplicaType::Launcher];
    assert_eq!(launcher.active, 1);
}

#[test]
fn a_failed_worker_leaves_discovery_at_once_and_is_replaced_under_a_new_name() {
    let mut world = World::launched_replacing_failed_workers();

    world.exit("mnist-worker-1", 1);
    let plan = world.reconcile();
    assert_eq!(
        pod_names(&plan),
        ["mnist-worker-2", "mnist-launcher"],
        "a replacement, and the launcher's new hostfile"
    );
    assert_eq!(
        world.launcher_hostfile().as_deref(),
        Some("mnist-worker-0.mnist-workers:1\n")
    );
    assert_eq!(reasons(&plan), ["WorkerLost", "WorkersCreated"]);
    assert!(
        plan.events[0]
            .note
            .contains("mnist-worker-1 failed (exit code 1, Error) on node node-mnist-worker-1"),
        "{}",
        plan.events[0].note
    );
    assert!(plan.events[0].note.contains("replaced by mnist-worker-2"));
    let status = world.status();
    assert_eq!(status.target_workers, ["mnist-worker-0", "mnist-worker-2"]);
    assert_eq!(status.blacklist.len(), 1);
    assert_eq!(
        (
            status.blacklist[0].pod.as_str(),
            status.blacklist[0].exit_code
        ),
        ("mnist-worker-1", Some(1))
    );
    assert!(
        deleted_pods(&plan).is_empty(),
        "failed pods stay for inspection"
    );

    world.ready("mnist-worker-2");
    world.reconcile();
    assert_eq!(
        world.launcher_hostfile().as_deref(),
        Some("mnist-worker-0.mnist-workers:1\nmnist-worker-2.mnist-workers:1\n")
    );
    assert!(
        world.reconcile().is_empty(),
        "a lost worker is reported once"
    );
}

#[test]
fn a_worker_seen_only_gone_is_replaced_when_the_state_it_went_in_shows_the_platform_took_it() {
    // The pod garbage collector marks the pod of a node that vanished and deletes it at once:
    // the reconcile may see it only gone, with the mark in the state the watch saw it go in.
    // (case, marked as it went, replaced, what the event says)
    let cases = [
        (
            "gone with its node",
            true,
            true,
            "is replaced by mnist-worker-2",
        ),
        (
            "deleted by someone",
            false,
            false,
            "was deleted on node node-mnist-worker-1; it left host discovery and is not",
        ),
    ];
    for (case, marked, replaced, said) in cases {
        let mut world = World::launched_replacing_failed_workers();
        if marked {
            world.lose_with_node("mnist-worker-1");
        }
        world.went("mnist-worker-1");
        let plan = world.reconcile();
        let lost = plan
            .events
            .iter()
            .find(|event| event.reason == "WorkerLost")
            .unwrap_or_else(|| panic!("{case}: a WorkerLost event"));
        assert!(lost.note.contains(said), "{case}: {}", lost.note);
        let entry = world
            .status()
            .blacklist
            .iter()
            .find(|e| e.pod == "mnist-worker-1");
        assert!(
            entry.is_some_and(|entry| entry.node.is_some()),
            "{case}: blacklisted with the node it ran on, {entry:?}"
        );
        let expected: &[&str] = if replaced {
            &["mnist-worker-0", "mnist-worker-2"]
        } else {
            &["mnist-worker-0"]
        };
        assert_eq!(world.status().target_workers, expected, "{case}");
    }
}

#[test]
fn a_failed_worker_under_never_is_not_replaced() {
    let mut world = running();
    world.exit("mnist-worker-0", 3);
    let plan = world.reconcile();
    assert_eq!(
        pod_names(&plan),
        ["mnist-launcher"],
        "only the launcher's hostfile changes"
    );
    assert!(
        plan.events[0]
            .note
            .contains("not replaced (worker restartPolicy Never)"),
        "{}",
        plan.events[0].note
    );
    assert_eq!(world.status().target_workers, ["mnist-worker-1"]);
}

#[test]
fn workers_leave_discovery_when_disrupted_terminating_or_not_ready() {
    let mut job = training_job();
    job.spec.et_replica_specs.worker.replicas = Some(4);
    job.spec.et_replica_specs.worker.min_replicas = Some(1);
    job.spec.et_replica_specs.worker.restart_policy = Some(ReplicaRestartPolicy::Always);
    let mut world = World::new(job);
    world.reconcile();
    for i in 0..4 {
        world.ready(&format!("mnist-worker-{i}"));
    }
    world.reconcile();
    world.ready("mnist-launcher");
    world.reconcile();

    world.disrupt("mnist-worker-1");
    world.pod("mnist-worker-2").metadata.deletion_timestamp = Some(Time(world.now));
    world.running_not_ready("mnist-worker-3");
    world.reconcile();
    assert_eq!(
        world.launcher_hostfile().as_deref(),
        Some("mnist-worker-0.mnist-workers:1\n")
    );
    let reasons: Vec<&str> = world
        .status()
        .blacklist
        .iter()
        .map(|e| e.reason.as_str())
        .collect();
    assert_eq!(reasons, ["Disrupted", "Deleted"]);
    assert_eq!(
        world.status().target_workers,
        [
            "mnist-worker-0",
            "mnist-worker-3",
            "mnist-worker-4",
            "mnist-worker-5"
        ]
    );
}

#[test]
fn launcher_success_applies_the_clean_pod_policy() {
    for (policy, workers_deleted) in [
        (None, true),
        (Some(CleanPodPolicy::Running), true),
        (Some(CleanPodPolicy::All), true),
        (Some(CleanPodPolicy::None), false),
    ] {
        let mut world = running();
        world.job.spec.clean_pod_policy = policy;
        world.exit("mnist-launcher", 0);
        let plan = world.reconcile();
        assert_eq!(
            world.status().phase,
            Some(JobPhase::Succeeded),
            "{policy:?}"
        );
        assert!(world.status().completion_time.is_some());
        assert_eq!(reasons(&plan), ["TrainingJobSucceeded"]);
        assert_eq!(
            condition(&world, conditions::READY),
            (true, "TrainingJobSucceeded".into())
        );
        let expected: Vec<String> = if workers_deleted {
            vec!["mnist-worker-0".into(), "mnist-worker-1".into()]
        } else {
            vec![]
        };
        assert_eq!(deleted_pods(&plan), expected, "{policy:?}");
        assert_eq!(
            plan.delete.iter().any(|d| d.kind == ChildKind::Service),
            workers_deleted
        );
        assert!(
            world.pods.contains_key("mnist-launcher"),
            "the launcher is kept"
        );
        let refresh = world.reconcile();
        assert!(
            refresh.apply.is_empty() && refresh.delete.is_empty() && refresh.events.is_empty(),
            "{policy:?}: {refresh:?}"
        );
        assert!(
            world.reconcile().is_empty(),
            "{policy:?}: a finished job settles"
        );
    }
}

#[test]
fn launcher_failure_fails_the_job_under_never() {
    let mut world = running();
    world.exit("mnist-launcher", 2);
    let plan = world.reconcile();
    assert_eq!(world.status().phase, Some(JobPhase::Failed));
    assert_eq!(reasons(&plan), ["TrainingJobFailed"]);
    assert_eq!(
        condition(&world, conditions::STALLED),
        (true, "TrainingJobFailed".into())
    );
    assert_eq!(
        condition(&world, conditions::READY),
        (false, "TrainingJobFailed".into())
    );
}

#[test]
fn launcher_failure_restarts_the_job_until_the_backoff_limit() {
    let mut job = training_job();
    job.spec.restart_policy = Some(JobRestartPolicy::OnFailure);
    job.spec.backoff_limit = Some(1);
    let mut world = World::new(job);
    world.reconcile();
    world.ready("mnist-worker-0");
    world.ready("mnist-worker-1");
    world.reconcile();
    world.ready("mnist-launcher");
    world.reconcile();

    world.exit("mnist-launcher", 1);
    // The old pods are deleted, but a pod being deleted is still there for a while.
    let plan = plan(&world.observed(), world.now);
    assert_eq!(
        deleted_pods(&plan),
        ["mnist-launcher", "mnist-worker-0", "mnist-worker-1"]
    );
    assert_eq!(
        pod_names(&plan),
        ["mnist-worker-2", "mnist-worker-3"],
        "the new run gets new workers, but no launcher yet"
    );
    assert_eq!(reasons(&plan), ["TrainingJobRestarting", "WorkersCreated"]);
    assert!(
        plan.events[0].note.contains("restart 1 of 1"),
        "{}",
        plan.events[0].note
    );
    let status = plan.status.clone().unwrap();
    assert_eq!(
        (status.restart_count, status.phase),
        (1, Some(JobPhase::Restarting))
    );
    world.apply(&plan);

    world.ready("mnist-worker-2");
    world.ready("mnist-worker-3");
    let plan = world.reconcile();
    assert_eq!(
        pod_names(&plan),
        ["mnist-launcher"],
        "the old launcher is gone: a new one starts"
    );
    assert_eq!(
        world.pods["mnist-launcher"]
            .metadata
            .labels
            .as_ref()
            .unwrap()["eto.dev/run"],
        "1"
    );
    world.ready("mnist-launcher");
    world.reconcile();
    assert_eq!(world.status().phase, Some(JobPhase::Running));
    assert_eq!(
        condition(&world, conditions::RESTARTING),
        (false, "RestartDone".into())
    );

    world.exit("mnist-launcher", 1);
    let plan = world.reconcile();
    assert_eq!(world.status().phase, Some(JobPhase::Failed));
    assert!(
        plan.events[0]
            .note
            .contains("the backoff limit of 1 restarts is reached"),
        "{}",
        plan.events[0].note
    );
}

#[test]
fn a_restarted_job_is_restarting_until_the_earlier_runs_pods_are_gone() {
    let mut job = training_job();
    job.spec.restart_policy = Some(JobRestartPolicy::OnFailure);
    let mut world = World::new(job);
    world.launch();
    world.exit("mnist-launcher", 1);
    // The old launcher takes its termination grace period to go.
    let mut going = world.pods["mnist-launcher"].clone();
    going.metadata.deletion_timestamp = Some(Time(world.now));
    world.reconcile();
    world.pods.insert("mnist-launcher".into(), going);
    assert_eq!(world.status().phase, Some(JobPhase::Restarting));

    // The new run reaches its minimum meanwhile: still restarting, no launcher yet.
    world.ready("mnist-worker-2");
    world.ready("mnist-worker-3");
    let plan = world.reconcile();
    assert_eq!(world.status().phase, Some(JobPhase::Restarting));
    assert!(pod_names(&plan).is_empty(), "{:?}", pod_names(&plan));
    assert_eq!(
        condition(&world, conditions::READY),
        (false, "TrainingJobRestarting".into())
    );

    // The old launcher is gone: the new one starts and the restart is done.
    world.pods.remove("mnist-launcher");
    let plan = world.reconcile();
    assert_eq!(pod_names(&plan), ["mnist-launcher"]);
    assert_eq!(world.status().phase, Some(JobPhase::Created));
    assert_eq!(
        condition(&world, conditions::RESTARTING),
        (false, "RestartDone".into())
    );
}

#[test]
fn the_active_deadline_fails_the_job_and_stops_its_pods() {
    let mut world = started();
    world.job.spec.active_deadline_seconds = Some(600);
    world.ready("mnist-worker-0");
    world.ready("mnist-worker-1");
    let plan = world.reconcile();
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(600)));
    world.ready("mnist-launcher");
    world.reconcile();
    world.advance(600);
    let plan = world.reconcile();
    assert_eq!(world.status().phase, Some(JobPhase::Failed));
    assert_eq!(
        condition(&world, conditions::FAILED),
        (true, "DeadlineExceeded".into())
    );
    assert_eq!(
        deleted_pods(&plan),
        ["mnist-launcher", "mnist-worker-0", "mnist-worker-1"]
    );
}

#[test]
fn a_finished_job_is_deleted_after_its_time_to_live() {
    let mut world = running();
    world.job.spec.ttl_seconds_after_finished = Some(60);
    world.exit("mnist-launcher", 0);
    let plan = world.reconcile();
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(60)));
    assert!(!plan.delete_job);
    world.advance(59);
    assert!(!world.reconcile().delete_job);
    world.advance(1);
    assert!(world.reconcile().delete_job);
}

#[test]
fn an_invalid_spec_creates_nothing_reports_once_and_recovers_when_fixed() {
    let mut job = training_job();
    job.spec.et_replica_specs.worker.min_replicas = Some(5);
    let mut world = World::new(job);
    let plan = world.reconcile();
    assert!(plan.apply.is_empty() && plan.create_ssh_secret.is_none());
    assert_eq!(reasons(&plan), ["InvalidSpec"]);
    assert!(
        plan.events[0]
            .note
            .contains("spec.etReplicaSpecs.worker.minReplicas"),
        "{}",
        plan.events[0].note
    );
    assert_eq!(
        condition(&world, conditions::READY),
        (false, "InvalidSpec".into())
    );
    assert_eq!(
        condition(&world, conditions::STALLED),
        (true, "InvalidSpec".into())
    );
    assert!(world.reconcile().is_empty(), "reported once");

    world.job.spec.et_replica_specs.worker.min_replicas = Some(1);
    let plan = world.reconcile();
    assert_eq!(pod_names(&plan), ["mnist-worker-0", "mnist-worker-1"]);
    assert_eq!(
        condition(&world, conditions::STALLED),
        (false, "Progressing".into())
    );
}

#[test]
fn an_undecodable_job_gets_a_condition_naming_the_field() {
    let error = FieldError {
        field: "spec.restartPolicy".into(),
        message: "unknown variant `Sometimes`".into(),
    };
    let now = jiff::Timestamp::from_second(1_800_000_000).unwrap();
    let plan = plan_undecodable(
        Kind::TRAINING_JOB,
        &ObjectMeta::default(),
        None,
        &error,
        now,
    );
    let status = plan.status.unwrap();
    let ready = conditions::find(&status.conditions, conditions::READY).unwrap();
    assert_eq!(ready.reason.as_deref(), Some("InvalidSpec"));
    assert!(
        ready
            .message
            .as_deref()
            .unwrap()
            .contains("spec.restartPolicy: unknown variant")
    );
    assert_eq!(plan.events.len(), 1);
}

#[test]
fn a_missing_provided_ssh_secret_holds_the_pods_back() {
    let mut job = training_job();
    job.metadata.annotations = Some(
        [(
            "arena.kubeflow.org/ssh-secret".to_string(),
            "team-keys".to_string(),
        )]
        .into(),
    );
    let mut world = World::new(job);
    let plan = world.reconcile();
    assert!(pod_names(&plan).is_empty());
    assert!(
        plan.create_ssh_secret.is_none(),
        "a provided Secret is never created"
    );
    assert_eq!(reasons(&plan), ["SSHSecretNotFound"]);
    assert_eq!(
        condition(&world, conditions::READY),
        (false, "SSHSecretNotFound".into())
    );
    assert!(world.reconcile().is_empty());
    world.secret = SecretPresence::Present;
    assert_eq!(
        pod_names(&world.reconcile()),
        ["mnist-worker-0", "mnist-worker-1"]
    );
}

fn taken(kind: &'static str, name: &str) -> TakenName {
    TakenName {
        kind,
        name: name.into(),
        holder: "nobody".into(),
    }
}

#[test]
fn a_taken_name_is_neither_written_nor_built_on_and_the_job_says_so_once() {
    for held in [
        taken("ConfigMap", "mnist-config"),
        taken("Service", "mnist-workers"),
        taken("Secret", "mnist-ssh"),
        taken("Role", "mnist-launcher"),
        taken("Pod", "mnist-worker-1"),
    ] {
        let mut world = World::new(training_job());
        world.taken = vec![held.clone()];
        let plan = world.reconcile();
        let what = format!("{} {}", held.kind, held.name);
        assert!(
            !plan
                .apply
                .iter()
                .any(|child| child.kind() == held.kind && child.name() == held.name),
            "{what} is not written"
        );
        let secret = plan.create_ssh_secret.as_ref();
        assert_eq!(secret.is_none(), held.kind == "Secret", "{what}");
        assert!(pod_names(&plan).is_empty(), "no pod while {what} is taken");
        assert_eq!(reasons(&plan), ["NameTaken"], "{what}");
        assert_eq!(
            condition(&world, conditions::STALLED),
            (true, "NameTaken".into())
        );
        assert_eq!(
            condition(&world, conditions::READY),
            (false, "NameTaken".into())
        );
        let message = conditions::find(&world.status().conditions, conditions::STALLED)
            .and_then(|s| s.message.clone())
            .unwrap_or_default();
        assert!(
            message.contains(&format!("{what} (controlled by nobody)")),
            "{message}"
        );
        assert_eq!(plan.requeue_after, Some(NAME_TAKEN_RECHECK), "{what}");
        let again = world.reconcile();
        assert!(again.events.is_empty(), "reported once: {what}");
        assert!(again.status.is_none(), "{what}");

        world.taken.clear();
        let freed = world.reconcile();
        assert_eq!(
            pod_names(&freed),
            ["mnist-worker-0", "mnist-worker-1"],
            "{what}"
        );
        assert_eq!(
            condition(&world, conditions::STALLED),
            (false, "Progressing".into())
        );
    }
}

#[test]
fn a_running_job_that_finds_a_name_taken_keeps_its_pods_and_creates_none() {
    let mut world = running();
    world.exit("mnist-worker-1", 1);
    world.taken = vec![taken("Pod", "mnist-worker-2")];
    let plan = world.reconcile();
    assert!(pod_names(&plan).is_empty(), "{:?}", pod_names(&plan));
    assert!(deleted_pods(&plan).is_empty());
    assert!(world.pods.contains_key("mnist-launcher"));
    assert_eq!(
        condition(&world, conditions::STALLED),
        (true, "NameTaken".into())
    );
}

#[test]
fn a_restarted_operator_adopts_what_exists() {
    let mut world = running();
    let before: Vec<String> = world.pods.keys().cloned().collect();
    // The status was lost (or never written): the pods are adopted, nothing is created twice.
    world.job.status = None;
    let plan = world.reconcile();
    assert!(
        pod_names(&plan).iter().all(|name| name == "mnist-launcher"),
        "{:?}",
        pod_names(&plan)
    );
    assert!(deleted_pods(&plan).is_empty());
    assert_eq!(world.pods.keys().cloned().collect::<Vec<_>>(), before);
    assert_eq!(
        world.status().target_workers,
        ["mnist-worker-0", "mnist-worker-1"]
    );
    assert!(world.reconcile().is_empty(), "and converges");
}

#[test]
fn scaling_replicas_adds_or_removes_workers() {
    let mut world = running();
    world.job.spec.et_replica_specs.worker.replicas = Some(3);
    world.job.spec.et_replica_specs.worker.min_replicas = Some(2);
    let plan = world.reconcile();
    assert_eq!(pod_names(&plan), ["mnist-worker-2"]);
    assert_eq!(reasons(&plan), ["WorkersScaled", "WorkersCreated"]);
    world.ready("mnist-worker-2");
    world.reconcile();
    assert_eq!(world.status().current_workers.len(), 3);

    world.job.spec.et_replica_specs.worker.replicas = Some(2);
    let plan = world.reconcile();
    assert_eq!(
        world.status().target_workers,
        ["mnist-worker-0", "mnist-worker-1"]
    );
    assert_eq!(
        world.launcher_hostfile().unwrap(),
        "mnist-worker-0.mnist-workers:1\nmnist-worker-1.mnist-workers:1\n",
        "the removed worker leaves host discovery at once"
    );
    assert!(
        deleted_pods(&plan).is_empty(),
        "and drains before its pod goes"
    );
    assert_eq!(reasons(&plan), ["WorkersScaled", "WorkersDraining"]);
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(30)));
    let draining: Vec<&str> = world
        .status()
        .draining_workers
        .iter()
        .map(|d| d.pod.as_str())
        .collect();
    assert_eq!(draining, ["mnist-worker-2"]);

    world.advance(29);
    assert!(deleted_pods(&world.reconcile()).is_empty());
    world.advance(1);
    assert_eq!(deleted_pods(&world.reconcile()), ["mnist-worker-2"]);
    assert!(
        world.status().draining_workers.is_empty(),
        "its drain is over"
    );
    world.reconcile();
    assert!(world.reconcile().is_empty(), "settled");
}

/// A running job of four ready workers, at least two.
fn running_four() -> World {
    let mut job = training_job();
    job.spec.et_replica_specs.worker.replicas = Some(4);
    job.spec.et_replica_specs.worker.min_replicas = Some(2);
    let mut world = World::new(job);
    world.reconcile();
    for worker in 0..4 {
        world.ready(&format!("mnist-worker-{worker}"));
    }
    world.reconcile();
    world.ready("mnist-launcher");
    world.reconcile();
    world
}

#[test]
fn a_scale_in_removes_workers_not_in_discovery_at_once_and_drains_the_others() {
    let mut world = running_four();
    world.running_not_ready("mnist-worker-1");
    world.reconcile();
    world.job.spec.et_replica_specs.worker.replicas = Some(2);
    let plan = world.reconcile();
    assert_eq!(
        deleted_pods(&plan),
        ["mnist-worker-1"],
        "not ready: never listed, nothing to drain"
    );
    let draining: Vec<&str> = world
        .status()
        .draining_workers
        .iter()
        .map(|d| d.pod.as_str())
        .collect();
    assert_eq!(draining, ["mnist-worker-3"]);
}

#[test]
fn a_drain_ends_early_when_the_worker_stops_or_the_launcher_finishes() {
    let mut world = running_four();
    world.job.spec.et_replica_specs.worker.replicas = Some(2);
    world.reconcile();
    assert_eq!(world.status().draining_workers.len(), 2);
    // Horovod stopped the processes of worker 3: its pod completes.
    world.exit("mnist-worker-3", 0);
    assert_eq!(deleted_pods(&world.reconcile()), ["mnist-worker-3"]);
    // The launcher finishes: nothing trains with worker 2 any more.
    world.exit("mnist-launcher", 0);
    let plan = world.reconcile();
    assert!(deleted_pods(&plan).contains(&"mnist-worker-2".to_string()));
    assert_eq!(world.status().phase, Some(JobPhase::Succeeded));
    assert!(world.status().draining_workers.is_empty());
}

#[test]
fn a_zero_drain_deletes_removed_workers_at_once() {
    let mut world = running_four();
    world.job.spec.elastic_policy = Some(eto_api::elastic::ElasticPolicy {
        drain_seconds: Some(0),
        ..Default::default()
    });
    world.job.spec.et_replica_specs.worker.replicas = Some(3);
    let plan = world.reconcile();
    assert_eq!(deleted_pods(&plan), ["mnist-worker-3"]);
    assert!(
        !world
            .launcher_hostfile()
            .unwrap()
            .contains("mnist-worker-3"),
        "out of discovery in the same reconcile"
    );
}

#[test]
fn a_scale_out_while_workers_drain_takes_new_indices() {
    let mut world = running_four();
    world.job.spec.et_replica_specs.worker.replicas = Some(3);
    world.reconcile();
    world.job.spec.et_replica_specs.worker.replicas = Some(4);
    let plan = world.reconcile();
    assert_eq!(
        pod_names(&plan),
        ["mnist-worker-4"],
        "the draining worker is not taken back"
    );
    assert_eq!(world.status().draining_workers.len(), 1);
}

/// A job (two workers, both needed) that may wait `seconds` for them.
fn waiting_at_most(seconds: i32) -> World {
    let mut job = training_job();
    job.spec.elastic_policy = Some(eto_api::elastic::ElasticPolicy {
        max_wait_seconds: Some(seconds),
        ..Default::default()
    });
    let mut world = World::new(job);
    world.reconcile();
    world
}

#[test]
fn a_job_short_of_min_workers_fails_when_max_wait_runs_out() {
    let mut world = waiting_at_most(60);
    world.ready("mnist-worker-0");
    world.advance(59);
    let plan = world.reconcile();
    assert_eq!(world.status().phase, Some(JobPhase::Created));
    assert_eq!(
        plan.requeue_after,
        Some(Duration::from_secs(1)),
        "looked at again when the wait runs out"
    );

    world.advance(1);
    let plan = world.reconcile();
    assert_eq!(world.status().phase, Some(JobPhase::Failed));
    assert_eq!(
        condition(&world, conditions::FAILED),
        (true, WAITING_RESOURCE_TIMEOUT.into())
    );
    let message = conditions::find(&world.status().conditions, conditions::FAILED)
        .and_then(|f| f.message.clone())
        .unwrap();
    assert!(
        message.contains("waited 60s") && message.contains("for 2 ready workers"),
        "{message}"
    );
    assert!(message.contains("1 ready, 1 pending"), "{message}");
    assert_eq!(
        deleted_pods(&plan),
        ["mnist-worker-0", "mnist-worker-1"],
        "the pending demand is withdrawn"
    );
    assert!(pod_names(&plan).is_empty(), "no launcher");
}

#[test]
fn workers_ready_in_time_start_the_launcher_and_the_wait_ends() {
    let mut world = waiting_at_most(60);
    world.advance(30);
    world.ready("mnist-worker-0");
    world.ready("mnist-worker-1");
    world.reconcile();
    assert!(world.pods.contains_key("mnist-launcher"));
    // Workers lost later, however long, no longer count against the wait.
    world.exit("mnist-worker-1", 1);
    world.advance(3600);
    world.reconcile();
    assert_ne!(world.status().phase, Some(JobPhase::Failed));
}

#[test]
fn without_a_limit_a_job_waits_as_long_as_it_takes() {
    let mut world = started();
    world.ready("mnist-worker-0");
    for _ in 0..10 {
        world.advance(86_400);
        let plan = world.reconcile();
        assert_eq!(plan.requeue_after, None);
    }
    assert_eq!(world.status().phase, Some(JobPhase::Created));
}

#[test]
fn the_wait_starts_again_with_each_run() {
    let mut world = waiting_at_most(60);
    world.job.spec.restart_policy = Some(JobRestartPolicy::OnFailure);
    world.ready("mnist-worker-0");
    world.ready("mnist-worker-1");
    world.reconcile();
    world.ready("mnist-launcher");
    world.reconcile();
    world.advance(600);
    world.exit("mnist-launcher", 1);
    world.reconcile();
    world.reconcile();
    assert_eq!(world.status().restart_count, 1);
    world.advance(59);
    world.reconcile();
    assert_ne!(
        world.status().phase,
        Some(JobPhase::Failed),
        "59 s into the new run"
    );
    world.advance(1);
    world.reconcile();
    assert_eq!(
        condition(&world, conditions::FAILED),
        (true, WAITING_RESOURCE_TIMEOUT.into())
    );
}

/// The nodes a pod's preferred affinity steers it away from.
fn avoided_nodes(pod: &Pod) -> Vec<String> {
    let affinity = serde_json::to_value(&pod.spec.as_ref().unwrap().affinity).unwrap();
    affinity["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|term| {
            term["preference"]["matchFields"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .flat_map(|requirement| {
            requirement["values"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|node| node.as_str().map(String::from))
        .collect()
}

#[test]
fn a_worker_failing_on_a_node_cools_it_and_its_replacement_prefers_other_nodes() {
    let mut job = training_job();
    job.spec.et_replica_specs.worker.restart_policy = Some(ReplicaRestartPolicy::OnFailure);
    let mut world = World::new(job);
    world.reconcile();
    world.ready("mnist-worker-0");
    world.ready("mnist-worker-1");
    world.reconcile();
    world.exit("mnist-worker-1", 1);
    let plan = world.reconcile();
    let cooling: Vec<(String, String)> = world
        .status()
        .nodes_in_cooldown
        .iter()
        .map(|n| (n.node.clone(), n.pod.clone()))
        .collect();
    assert_eq!(
        cooling,
        [(
            "node-mnist-worker-1".to_string(),
            "mnist-worker-1".to_string()
        )]
    );
    assert_eq!(
        world.status().nodes_in_cooldown[0].until.0,
        world.now + jiff::SignedDuration::from_secs(600)
    );
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(600)));
    assert_eq!(
        avoided_nodes(&world.pods["mnist-worker-2"]),
        ["node-mnist-worker-1"]
    );

    // Once the cooldown ends the node is forgotten, and later workers go anywhere.
    world.advance(600);
    world.reconcile();
    assert!(world.status().nodes_in_cooldown.is_empty());
    world.ready("mnist-worker-2");
    world.exit("mnist-worker-2", 137);
    world.reconcile();
    // The replacement failed too, a second failure in a row: its own replacement backs off.
    assert!(!world.pods.contains_key("mnist-worker-3"));
    world.advance(10);
    world.reconcile();
    assert_eq!(
        avoided_nodes(&world.pods["mnist-worker-3"]),
        ["node-mnist-worker-2"],
        "only the node of the new failure"
    );
}

#[test]
fn evictions_disruptions_and_deletions_do_not_cool_a_node() {
    let mut job = training_job();
    job.spec.et_replica_specs.worker.replicas = Some(4);
    job.spec.et_replica_specs.worker.restart_policy = Some(ReplicaRestartPolicy::Always);
    let mut world = World::new(job);
    world.reconcile();
    for worker in 0..4 {
        world.ready(&format!("mnist-worker-{worker}"));
    }
    world.reconcile();
    world.evict("mnist-worker-0");
    world.disrupt("mnist-worker-1");
    world.pods.remove("mnist-worker-2");
    // Killed by its node's loss: an error exit, but no sign of the node's health.
    world.lose_with_node("mnist-worker-3");
    world.reconcile();
    assert_eq!(world.status().blacklist.len(), 4);
    assert!(world.status().nodes_in_cooldown.is_empty());
    assert!(avoided_nodes(&world.pods["mnist-worker-4"]).is_empty());
}

#[test]
fn replacements_after_failures_on_three_nodes_avoid_all_three() {
    let mut job = training_job();
    job.spec.et_replica_specs.worker.restart_policy = Some(ReplicaRestartPolicy::OnFailure);
    let mut world = World::new(job);
    world.reconcile();
    world.ready("mnist-worker-0");
    world.ready("mnist-worker-1");
    world.reconcile();
    let mut failed_on = Vec::new();
    for (failing, replacement) in [(0, 2), (1, 3), (2, 4)] {
        let failing = format!("mnist-worker-{failing}");
        failed_on.push(format!("node-{failing}"));
        world.exit(&failing, 1);
        world.reconcile();
        // A replacement that fails in turn is replaced after a back-off.
        world.advance(10);
        world.reconcile();
        let replacement = format!("mnist-worker-{replacement}");
        assert_eq!(avoided_nodes(&world.pods[&replacement]), failed_on);
        world.ready(&replacement);
        world.reconcile();
    }
}

#[test]
fn a_zero_cooldown_turns_node_avoidance_off() {
    let mut job = training_job();
    job.spec.et_replica_specs.worker.restart_policy = Some(ReplicaRestartPolicy::OnFailure);
    job.spec.elastic_policy = Some(eto_api::elastic::ElasticPolicy {
        blacklist_cooldown_seconds: Some(0),
        ..Default::default()
    });
    let mut world = World::new(job);
    world.reconcile();
    world.ready("mnist-worker-0");
    world.reconcile();
    world.exit("mnist-worker-0", 1);
    world.reconcile();
    assert!(world.status().nodes_in_cooldown.is_empty());
    assert!(avoided_nodes(&world.pods["mnist-worker-2"]).is_empty());
}

#[test]
fn a_status_from_before_spec_replicas_was_recorded_causes_no_resize() {
    let mut world = running_four();
    world
        .job
        .status
        .as_mut()
        .unwrap()
        .workers
        .as_mut()
        .unwrap()
        .spec_replicas = None;
    let plan = world.reconcile();
    assert!(pod_names(&plan).is_empty() && deleted_pods(&plan).is_empty());
    assert!(!reasons(&plan).contains(&"WorkersScaled".to_string()));
    assert_eq!(
        world.status().workers.as_ref().unwrap().spec_replicas,
        Some(4),
        "recorded from now on"
    );
}

#[test]
fn the_count_a_job_holds_to_stays_within_a_changed_maximum() {
    let mut world = running_four();
    world
        .job
        .status
        .as_mut()
        .unwrap()
        .workers
        .as_mut()
        .unwrap()
        .desired = 5;
    world.job.spec.et_replica_specs.worker.max_replicas = Some(4);
    world.reconcile();
    assert_eq!(world.status().workers.as_ref().unwrap().desired, 4);
    assert_eq!(world.status().target_workers.len(), 4);
}
