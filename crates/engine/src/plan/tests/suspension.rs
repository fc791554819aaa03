//! Suspending a job and resuming it, stepped through the in-memory world with time passed in.

use eto_api::common::{ConditionStatus, ReplicaRestartPolicy};
use eto_api::elastic::ElasticPolicy;
use eto_api::job_status::{JobPhase, Notice, NoticeKind};
use eto_api::training_job::JobRestartPolicy;
use eto_api::well_known::{JOB_SUSPENDED_ANNOTATION, NOTICE_ANNOTATION, RUN_LABEL};
use pretty_assertions::assert_eq;

use crate::conditions;
use crate::plan::*;
use crate::testing::training_job;
use crate::testing::world::{World, deleted_pods, pod_names, reasons};

/// A running job of two workers, both needed, with `policy` settings.
fn running(policy: ElasticPolicy) -> World {
    let mut job = training_job();
    job.spec.elastic_policy = Some(policy);
    let mut world = World::new(job);
    world.launch();
    assert_eq!(world.status().phase, Some(JobPhase::Running));
    world
}

fn default_running() -> World {
    running(ElasticPolicy::default())
}

/// The notice pod `name` shows, if any.
fn shown(world: &World, name: &str) -> Option<Notice> {
    let pod = world
        .pods
        .get(name)
        .unwrap_or_else(|| panic!("no pod {name}"));
    let json = pod.metadata.annotations.as_ref()?.get(NOTICE_ANNOTATION)?;
    Some(serde_json::from_str(json).expect("a notice is JSON"))
}

fn suspended(world: &World) -> Option<(bool, String)> {
    conditions::find(&world.status().conditions, conditions::SUSPENDED).map(|condition| {
        (
            condition.status == ConditionStatus::True,
            condition.reason.clone().unwrap_or_default(),
        )
    })
}

fn run_of(world: &World, pod: &str) -> String {
    world.pods[pod].metadata.labels.as_ref().unwrap()[RUN_LABEL].clone()
}

fn env_of(world: &World, pod: &str, name: &str) -> Option<String> {
    world.pods[pod].spec.as_ref().unwrap().containers[0]
        .env
        .iter()
        .flatten()
        .find(|var| var.name == name)
        .and_then(|var| var.value.clone())
}

/// Takes the job below its minimum while its training can still save: one of its two
/// workers is being reclaimed (`DisruptionTarget`), its pod still running, so that its group
/// holds together until Horovod's next commit, and the next reconcile posts the notice.
fn below_its_minimum(world: &mut World) {
    world.disrupt("mnist-worker-1");
}

#[test]
fn a_job_below_its_minimum_posts_a_checkpoint_notice_to_every_pod() {
    let mut world = default_running();
    below_its_minimum(&mut world);
    let plan = world.reconcile();
    let notice = world.status().notice.clone().expect("a notice");
    assert_eq!(
        (notice.kind, notice.reason.as_str()),
        (NoticeKind::Suspend, "BelowMinWorkers")
    );
    assert_eq!(notice.since.0, world.now);
    assert_eq!(
        notice.deadline.as_ref().unwrap().0,
        world.now + jiff::SignedDuration::from_secs(300)
    );
    assert!(
        notice.message.contains("only 1 of the 2 workers it needs"),
        "{}",
        notice.message
    );
    assert_eq!(shown(&world, "mnist-launcher").as_ref(), Some(&notice));
    assert_eq!(shown(&world, "mnist-worker-0").as_ref(), Some(&notice));
    assert_eq!(reasons(&plan), ["CheckpointNotice", "WorkerLost"]);
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(300)));
    assert_eq!(
        world.status().phase,
        Some(JobPhase::Running),
        "still training, checkpointing"
    );
    let ready = conditions::find(&world.status().conditions, conditions::READY).unwrap();
    assert_eq!(ready.reason.as_deref(), Some("Suspending"));
    assert!(deleted_pods(&plan).is_empty());
}

#[test]
fn after_the_grace_period_the_pods_go_and_new_workers_are_asked_for() {
    let mut world = default_running();
    below_its_minimum(&mut world);
    world.reconcile();
    world.advance(299);
    assert!(
        deleted_pods(&world.reconcile()).is_empty(),
        "within the grace period"
    );
    world.advance(1);
    let plan = world.reconcile();
    assert_eq!(
        deleted_pods(&plan),
        ["mnist-launcher", "mnist-worker-0", "mnist-worker-1"]
    );
    assert_eq!(world.status().phase, Some(JobPhase::Suspended));
    assert_eq!(suspended(&world), Some((true, "BelowMinWorkers".into())));
    let event = plan
        .events
        .iter()
        .find(|e| e.reason == "TrainingJobSuspended")
        .unwrap();
    assert!(event.warning);
    assert!(
        event
            .note
            .contains("with 1 of the 2 workers it needs ready (0 pending)"),
        "{}",
        event.note
    );
    assert_eq!(world.status().run, Some(1));
    assert_eq!(world.status().restart_count, 0, "a suspend is no restart");
    assert_eq!(
        world.status().notice.as_ref().map(|n| n.kind),
        Some(NoticeKind::Resume)
    );

    // The new run asks for its workers: pending pods are what an autoscaler adds nodes for.
    let plan = world.reconcile();
    assert_eq!(pod_names(&plan), ["mnist-worker-2", "mnist-worker-3"]);
    assert_eq!(run_of(&world, "mnist-worker-2"), "1");
    assert_eq!(
        shown(&world, "mnist-worker-2").map(|n| n.kind),
        Some(NoticeKind::Resume)
    );
    assert_eq!(world.status().phase, Some(JobPhase::Suspended));
    assert_eq!(
        world
            .status()
            .workers
            .as_ref()
            .map(|w| (w.ready, w.pending)),
        Some((0, 2))
    );
}

#[test]
fn once_enough_new_workers_are_ready_a_resume_launcher_starts_the_new_run() {
    let mut world = default_running();
    below_its_minimum(&mut world);
    world.reconcile();
    world.advance(300);
    world.reconcile();
    world.reconcile();
    world.advance(120);
    world.ready("mnist-worker-2");
    world.reconcile();
    assert!(
        !world.pods.contains_key("mnist-launcher"),
        "one of two is not enough"
    );
    world.ready("mnist-worker-3");
    let plan = world.reconcile();
    assert_eq!(pod_names(&plan), ["mnist-launcher"]);
    assert_eq!(
        env_of(&world, "mnist-launcher", "ETO_RESUME").as_deref(),
        Some("true")
    );
    assert_eq!(
        shown(&world, "mnist-launcher").map(|n| n.kind),
        Some(NoticeKind::Resume)
    );
    assert_eq!(run_of(&world, "mnist-launcher"), "1");
    assert_eq!(suspended(&world), Some((false, "Resumed".into())));
    assert_eq!(
        plan.events
            .iter()
            .find(|e| e.reason == "TrainingJobResumed")
            .map(|e| e.note.as_str()),
        Some(
            "TrainingJob mnist resumed: 2 workers are ready; launcher mnist-launcher starts with the resume notice"
        )
    );
    assert_eq!(plan.tallies.resumes, ["BelowMinWorkers"]);
    assert_eq!(
        world.status().start_time.as_ref().unwrap().0,
        world.now,
        "started again"
    );
    world.ready("mnist-launcher");
    world.reconcile();
    assert_eq!(world.status().phase, Some(JobPhase::Running));
    assert_eq!(world.status().restart_count, 0);
    assert_eq!(
        world.launcher_hostfile().unwrap(),
        "mnist-worker-2.mnist-workers:1\nmnist-worker-3.mnist-workers:1\n",
        "only the workers of the new run"
    );
}

#[test]
fn a_worker_lost_while_the_job_suspends_is_not_replaced() {
    let mut job = training_job();
    job.spec.et_replica_specs.worker.restart_policy = Some(ReplicaRestartPolicy::Always);
    job.spec.elastic_policy = Some(ElasticPolicy::default());
    let mut world = World::new(job);
    world.launch();
    below_its_minimum(&mut world);
    world.reconcile();
    assert_eq!(
        world.status().notice.as_ref().map(|n| n.kind),
        Some(NoticeKind::Suspend)
    );
    // Being reclaimed too, it still runs and may save: the run goes on suspending.
    world.disrupt("mnist-worker-0");
    let plan = world.reconcile();
    assert!(
        !plan
            .apply
            .iter()
            .any(|child| matches!(child, Child::Pod(_))),
        "the suspending run creates no worker: the resumed run creates its own"
    );
    assert!(reasons(&plan).contains(&"WorkerLost".to_string()));
}

#[test]
fn the_launcher_exiting_during_the_grace_period_is_part_of_the_suspend() {
    for (exit_code, case) in [(1, "a failed launcher"), (0, "a launcher that succeeded")] {
        let mut world = running(ElasticPolicy::default());
        world.job.spec.restart_policy = Some(JobRestartPolicy::OnFailure);
        world.job.spec.backoff_limit = Some(0);
        below_its_minimum(&mut world);
        world.reconcile();
        world.advance(20);
        world.exit("mnist-launcher", exit_code);
        let plan = world.reconcile();
        assert_eq!(world.status().phase, Some(JobPhase::Suspended), "{case}");
        assert_eq!(
            world.status().restart_count,
            0,
            "{case}: no restart counted"
        );
        assert!(
            conditions::find(&world.status().conditions, conditions::FAILED).is_none(),
            "{case}"
        );
        assert!(
            conditions::find(&world.status().conditions, conditions::SUCCEEDED).is_none(),
            "{case}"
        );
        assert!(
            deleted_pods(&plan).contains(&"mnist-worker-0".to_string()),
            "{case}"
        );
    }
}

#[test]
fn a_worker_replaced_within_the_debounce_does_not_suspend_the_job() {
    let mut world = default_running();
    world.job.spec.et_replica_specs.worker.restart_policy = Some(ReplicaRestartPolicy::OnFailure);
    world.exit("mnist-worker-1", 1);
    world.reconcile();
    world.advance(10);
    world.ready("mnist-worker-2");
    world.reconcile();
    world.advance(3600);
    let plan = world.reconcile();
    assert_eq!(world.status().notice, None);
    assert!(!reasons(&plan).contains(&"CheckpointNotice".to_string()));
    assert_eq!(world.status().phase, Some(JobPhase::Running));
}

#[test]
fn without_suspend_below_min_workers_the_job_runs_on_with_fewer() {
    let mut world = running(ElasticPolicy {
        suspend_below_min_workers: Some(false),
        ..ElasticPolicy::default()
    });
    below_its_minimum(&mut world);
    world.reconcile();
    world.advance(3600);
    world.reconcile();
    assert_eq!(world.status().notice, None);
    assert_eq!(world.status().phase, Some(JobPhase::Running));
}

#[test]
fn spec_suspend_suspends_with_the_same_notice_and_holds_until_cleared() {
    let mut world = default_running();
    world.job.spec.suspend = Some(true);
    world.reconcile();
    let notice = world.status().notice.clone().unwrap();
    assert_eq!(
        (notice.kind, notice.reason.as_str()),
        (NoticeKind::Suspend, "Suspended")
    );
    assert_eq!(shown(&world, "mnist-worker-1").as_ref(), Some(&notice));
    world.advance(300);
    world.reconcile();
    assert_eq!(suspended(&world), Some((true, "Suspended".into())));
    assert!(world.pods.is_empty(), "every pod is deleted");
    world.advance(86_400);
    let plan = world.reconcile();
    assert!(
        pod_names(&plan).is_empty(),
        "nothing is created while suspended"
    );
    assert_eq!(
        world.status().run.unwrap_or_default(),
        0,
        "no new run until it is unsuspended"
    );

    world.job.spec.suspend = Some(false);
    let plan = world.reconcile();
    assert_eq!(pod_names(&plan), ["mnist-worker-2", "mnist-worker-3"]);
    assert_eq!(suspended(&world), Some((false, "Resumed".into())));
    assert!(reasons(&plan).contains(&"TrainingJobResumed".to_string()));
    assert_eq!(world.status().run, Some(1));
    assert_eq!(world.status().phase, Some(JobPhase::Created));
    world.ready("mnist-worker-2");
    world.ready("mnist-worker-3");
    world.reconcile();
    assert_eq!(
        env_of(&world, "mnist-launcher", "ETO_RESUME").as_deref(),
        Some("true")
    );
}

#[test]
fn a_job_created_suspended_creates_nothing_until_unsuspended() {
    let mut job = training_job();
    job.spec.suspend = Some(true);
    let mut world = World::new(job);
    let plan = world.reconcile();
    assert!(
        plan.apply.is_empty() && plan.create_ssh_secret.is_none(),
        "{plan:#?}"
    );
    assert_eq!(world.status().phase, Some(JobPhase::Suspended));
    assert_eq!(suspended(&world), Some((true, "Suspended".into())));
    world.job.spec.suspend = Some(false);
    let plan = world.reconcile();
    assert_eq!(pod_names(&plan), ["mnist-worker-0", "mnist-worker-1"]);
    assert!(plan.create_ssh_secret.is_some());
    // It never ran: it starts afresh, with nothing to resume.
    assert_eq!(world.status().notice, None);
    assert_eq!(world.status().run.unwrap_or_default(), 0);
    assert_eq!(
        plan.events
            .iter()
            .find(|e| e.reason == "TrainingJobResumed")
            .map(|e| e.note.as_str()),
        Some("TrainingJob mnist unsuspended: the job starts")
    );
}

#[test]
fn the_job_supervisors_annotation_suspends_like_spec_suspend() {
    let mut world = default_running();
    world.job.metadata.annotations =
        Some([(JOB_SUSPENDED_ANNOTATION.to_string(), "true".to_string())].into());
    world.reconcile();
    assert_eq!(
        world.status().notice.as_ref().map(|n| n.reason.as_str()),
        Some("Suspended")
    );
}

#[test]
fn spec_suspend_while_waiting_below_the_minimum_deletes_the_waiting_workers() {
    let mut world = default_running();
    below_its_minimum(&mut world);
    world.reconcile();
    world.advance(300);
    world.reconcile();
    world.reconcile();
    assert!(
        world.pods.contains_key("mnist-worker-2"),
        "waiting for capacity"
    );
    world.job.spec.suspend = Some(true);
    let plan = world.reconcile();
    assert_eq!(deleted_pods(&plan), ["mnist-worker-2", "mnist-worker-3"]);
    assert_eq!(suspended(&world), Some((true, "Suspended".into())));
    world.reconcile();
    assert!(world.pods.is_empty());
}

#[test]
fn a_job_suspended_by_spec_never_turns_into_one_suspended_below_the_minimum() {
    let mut world = default_running();
    world.job.spec.suspend = Some(true);
    world.reconcile();
    world.exit("mnist-worker-1", 1);
    world.advance(300);
    world.reconcile();
    world.advance(3600);
    world.reconcile();
    assert_eq!(suspended(&world), Some((true, "Suspended".into())));
}

#[test]
fn the_active_deadline_does_not_run_while_suspended() {
    let mut world = default_running();
    world.job.spec.active_deadline_seconds = Some(100);
    world.job.spec.suspend = Some(true);
    world.job.spec.elastic_policy = Some(ElasticPolicy {
        checkpoint_grace_seconds: Some(0),
        ..ElasticPolicy::default()
    });
    world.advance(10);
    world.reconcile();
    world.advance(10_000);
    world.reconcile();
    assert_eq!(
        world.status().phase,
        Some(JobPhase::Suspended),
        "no deadline while suspended"
    );
    world.job.spec.suspend = Some(false);
    world.reconcile();
    world.advance(99);
    world.reconcile();
    assert_ne!(
        world.status().phase,
        Some(JobPhase::Failed),
        "99 s after the resume"
    );
    world.advance(1);
    world.reconcile();
    assert_eq!(world.status().phase, Some(JobPhase::Failed));
}

#[test]
fn max_wait_bounds_the_wait_for_workers_after_a_suspend_below_the_minimum() {
    let mut world = running(ElasticPolicy {
        max_wait_seconds: Some(600),
        ..ElasticPolicy::default()
    });
    below_its_minimum(&mut world);
    world.reconcile();
    world.advance(300);
    world.reconcile();
    world.reconcile();
    world.advance(599);
    world.reconcile();
    assert_eq!(world.status().phase, Some(JobPhase::Suspended));
    world.advance(1);
    world.reconcile();
    assert_eq!(world.status().phase, Some(JobPhase::Failed));
    assert_eq!(
        conditions::find(&world.status().conditions, conditions::FAILED)
            .and_then(|f| f.reason.clone())
            .as_deref(),
        Some(WAITING_RESOURCE_TIMEOUT)
    );
}

/// `job` with 3 workers, at least 1, running with every pod ready.
fn three_needing_one(mut job: eto_api::TrainingJob) -> World {
    job.spec.et_replica_specs.worker.replicas = Some(3);
    job.spec.et_replica_specs.worker.min_replicas = Some(1);
    let mut world = World::new(job);
    world.launch_with(3);
    world
}

#[test]
fn a_disrupted_worker_gets_a_reclaim_notice_of_its_own_while_the_job_runs_on() {
    let mut world = three_needing_one(training_job());
    world.disrupt("mnist-worker-2");
    world.reconcile();
    let reclaim = shown(&world, "mnist-worker-2").expect("its own notice");
    assert_eq!(
        (reclaim.kind, reclaim.reason.as_str()),
        (NoticeKind::Reclaim, "Disrupted")
    );
    assert_eq!(shown(&world, "mnist-worker-0"), None, "the others train on");
    assert_eq!(world.status().notice, None);
    world.advance(5);
    assert!(
        world.reconcile().is_empty(),
        "the notice keeps the time it was first posted"
    );
}

#[test]
fn a_job_suspended_before_its_launcher_started_gets_its_workers_back_when_unsuspended() {
    // Kueue's preemption of a job still waiting for GPUs: it never had a launcher.
    let mut world = World::new(training_job());
    world.reconcile();
    assert_eq!(world.pods.len(), 2, "two workers waiting for capacity");
    world.job.spec.suspend = Some(true);
    world.reconcile();
    world.reconcile();
    assert!(world.pods.is_empty());
    assert_eq!(world.status().phase, Some(JobPhase::Suspended));

    world.job.spec.suspend = Some(false);
    let plan = world.reconcile();
    assert_eq!(pod_names(&plan), ["mnist-worker-2", "mnist-worker-3"]);
    assert_eq!(
        world.status().target_workers,
        ["mnist-worker-2", "mnist-worker-3"]
    );
}

#[test]
fn a_launcher_created_but_not_recorded_is_taken_as_created() {
    // The operator created the launcher and stopped before recording it in the status.
    let mut world = default_running();
    let mut status = world.status().clone();
    status
        .conditions
        .retain(|condition| condition.type_ != conditions::LAUNCHER_CREATED);
    world.job.status = Some(status);
    world.reconcile();
    assert!(conditions::is_true(
        &world.status().conditions,
        conditions::LAUNCHER_CREATED
    ));

    // So a suspend and resume starts a new run that resumes from the checkpoint.
    world.job.spec.suspend = Some(true);
    world.reconcile();
    world.advance(300);
    world.reconcile();
    world.reconcile();
    world.job.spec.suspend = Some(false);
    let plan = world.reconcile();
    assert_eq!(world.status().run, Some(1));
    assert_eq!(pod_names(&plan), ["mnist-worker-2", "mnist-worker-3"]);
}

/// A running job of four workers that needs three, replacing lost workers under `policy`.
fn four_needing_three(policy: ReplicaRestartPolicy, job_policy: JobRestartPolicy) -> World {
    let mut job = training_job();
    job.spec.et_replica_specs.worker.replicas = Some(4);
    job.spec.et_replica_specs.worker.min_replicas = Some(3);
    job.spec.et_replica_specs.worker.restart_policy = Some(policy);
    job.spec.restart_policy = Some(job_policy);
    let mut world = World::new(job);
    world.launch_with(4);
    assert_eq!(world.status().phase, Some(JobPhase::Running));
    world
}

#[test]
fn workers_reclaimed_below_the_minimum_while_they_still_run_get_the_notice_at_once() {
    for policy in [ReplicaRestartPolicy::Never, ReplicaRestartPolicy::OnFailure] {
        let mut world = four_needing_three(policy, JobRestartPolicy::Never);
        // Being reclaimed, their pods still run: the group holds together until Horovod's
        // next commit, and its training can save.
        world.disrupt("mnist-worker-2");
        world.disrupt("mnist-worker-3");
        let plan = world.reconcile();
        let notice = world
            .status()
            .notice
            .clone()
            .unwrap_or_else(|| panic!("{policy:?}: a notice at once"));
        assert_eq!(
            (notice.kind, notice.reason.as_str(), notice.since.0),
            (NoticeKind::Suspend, "BelowMinWorkers", world.now),
            "{policy:?}"
        );
        assert_eq!(
            notice.deadline.as_ref().unwrap().0,
            world.now + jiff::SignedDuration::from_secs(300),
            "{policy:?}: the whole grace period"
        );
        assert!(
            notice.message.contains("2 workers are lost for certain"),
            "{policy:?}: {}",
            notice.message
        );
        assert_eq!(shown(&world, "mnist-launcher").as_ref(), Some(&notice));
        assert!(reasons(&plan).contains(&"CheckpointNotice".to_string()));

        // A reconcile later they still run, out of host discovery: the run still suspends.
        world.advance(1);
        let plan = world.reconcile();
        assert!(deleted_pods(&plan).is_empty(), "{policy:?}");
        assert_eq!(world.status().notice.as_ref(), Some(&notice), "{policy:?}");
    }
}

#[test]
fn workers_gone_below_the_minimum_suspend_the_job_at_once() {
    // (how two of the four workers go, the worker restart policy)
    type Loss = fn(&mut World, &str);
    let losses: [(&str, Loss); 2] = [
        ("killed with their node", |world, pod| {
            world.lose_with_node(pod)
        }),
        ("gone", |world, pod| world.went(pod)),
    ];
    for (how, lose) in losses {
        for policy in [ReplicaRestartPolicy::Never, ReplicaRestartPolicy::OnFailure] {
            let mut world = four_needing_three(policy, JobRestartPolicy::Never);
            lose(&mut world, "mnist-worker-2");
            lose(&mut world, "mnist-worker-3");
            let plan = world.reconcile();
            // Horovod holds the two left in its rendezvous until a third comes, deaf to a
            // notice: nothing of the run can save.
            assert_eq!(
                suspended(&world),
                Some((true, "BelowMinWorkers".into())),
                "{how}, {policy:?}"
            );
            assert_eq!(world.status().run, Some(1), "{how}, {policy:?}: a new run");
            let deleted = grace_of_deleted_pods(&plan);
            assert!(
                deleted.contains(&("mnist-worker-0".to_string(), Some(5)))
                    && deleted.contains(&("mnist-launcher".to_string(), Some(5))),
                "{how}, {policy:?}: stopped now, {deleted:?}"
            );
            assert!(
                !reasons(&plan).contains(&"CheckpointNotice".to_string()),
                "{how}, {policy:?}"
            );
            // Each worker that took the job below its minimum is named, and blacklisted,
            // although no reconcile of a suspending run comes to record it.
            for lost in ["mnist-worker-2", "mnist-worker-3"] {
                let said = plan.events.iter().any(|event| {
                    event.reason == "WorkerLost"
                        && event.note.starts_with(&format!("worker {lost} "))
                        && event.note.contains("not replaced: the job is suspended")
                });
                assert!(said, "{how}, {policy:?}: {lost} in {:?}", plan.events);
                assert!(
                    world
                        .status()
                        .blacklist
                        .iter()
                        .any(|entry| entry.pod == lost && entry.node.is_some()),
                    "{how}, {policy:?}: {lost} blacklisted with its node"
                );
            }
            let survivor = |entry: &eto_api::job_status::BlacklistEntry| {
                ["mnist-worker-0", "mnist-worker-1"].contains(&entry.pod.as_str())
            };
            assert!(
                !world.status().blacklist.iter().any(survivor),
                "{how}, {policy:?}: the survivors are suspended, not lost"
            );
        }
    }
}

#[test]
fn a_replacement_ready_while_the_job_suspends_stays_out_of_host_discovery() {
    let mut world = four_needing_three(ReplicaRestartPolicy::OnFailure, JobRestartPolicy::Never);
    world.lose_with_node("mnist-worker-3");
    world.reconcile();
    assert!(world.pods.contains_key("mnist-worker-4"), "a replacement");
    // One more is being reclaimed, still running: the job suspends, its group intact.
    world.disrupt("mnist-worker-2");
    world.reconcile();
    assert_eq!(
        world.status().notice.as_ref().map(|n| n.kind),
        Some(NoticeKind::Suspend)
    );
    // The replacement comes up while the group should be saving: joining it would make the
    // group re-form instead.
    world.ready("mnist-worker-4");
    world.reconcile();
    assert_eq!(
        world.launcher_hostfile().unwrap(),
        "mnist-worker-0.mnist-workers:1\nmnist-worker-1.mnist-workers:1\n"
    );
    assert_eq!(
        world.status().notice.as_ref().map(|n| n.kind),
        Some(NoticeKind::Suspend),
        "still suspending"
    );
}

#[test]
fn a_worker_lost_for_certain_that_leaves_the_minimum_suspends_nothing() {
    let mut world = four_needing_three(ReplicaRestartPolicy::OnFailure, JobRestartPolicy::Never);
    world.disrupt("mnist-worker-3");
    world.reconcile();
    assert_eq!(world.status().notice, None, "three of three are left");
}

#[test]
fn an_ordinary_failure_below_the_minimum_waits_out_below_min_seconds() {
    let mut world = four_needing_three(ReplicaRestartPolicy::OnFailure, JobRestartPolicy::Never);
    world.exit("mnist-worker-2", 1);
    world.exit("mnist-worker-3", 1);
    let plan = world.reconcile();
    assert_eq!(world.status().notice, None, "its replacements may come");
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(30)));
    world.advance(30);
    let plan = world.reconcile();
    // Two of four failed, and Horovod holds the other two until a third comes: nothing of
    // the run can save, so it is suspended now rather than after the grace period.
    assert_eq!(suspended(&world), Some((true, "BelowMinWorkers".into())));
    assert_eq!(
        grace_of_deleted_pods(&plan),
        [
            ("mnist-launcher".to_string(), Some(5)),
            ("mnist-worker-0".to_string(), Some(5)),
            ("mnist-worker-1".to_string(), Some(5)),
            ("mnist-worker-2".to_string(), Some(5)),
            ("mnist-worker-3".to_string(), Some(5)),
            ("mnist-worker-4".to_string(), Some(5)),
            ("mnist-worker-5".to_string(), Some(5)),
        ]
    );
}

/// The pods `plan` deletes, with the grace period each is given.
fn grace_of_deleted_pods(plan: &Plan) -> Vec<(String, Option<i64>)> {
    plan.delete
        .iter()
        .filter(|deletion| deletion.kind == ChildKind::Pod)
        .map(|deletion| (deletion.name.clone(), deletion.grace_seconds))
        .collect()
}

#[test]
fn a_launcher_that_fails_soon_after_workers_are_lost_completes_a_suspend() {
    // (the job's restart policy, whether the loss is certain)
    for job_policy in [JobRestartPolicy::Never, JobRestartPolicy::OnFailure] {
        for certain in [true, false] {
            let case = format!("{job_policy:?}, certain {certain}");
            let mut world = four_needing_three(ReplicaRestartPolicy::OnFailure, job_policy);
            if certain {
                // Reclaimed with their node, and the launcher quits before eto looks.
                world.lose_with_node("mnist-worker-2");
                world.lose_with_node("mnist-worker-3");
            } else {
                world.exit("mnist-worker-2", 1);
                world.exit("mnist-worker-3", 1);
                world.reconcile();
                assert_eq!(world.status().notice, None, "{case}: debouncing");
                world.advance(2);
            }
            world.exit("mnist-launcher", 1);
            let plan = world.reconcile();
            let status = world.status();
            assert_eq!(status.phase, Some(JobPhase::Suspended), "{case}");
            assert_eq!(
                suspended(&world),
                Some((true, "BelowMinWorkers".into())),
                "{case}"
            );
            assert_eq!(status.restart_count, 0, "{case}: no restart counted");
            assert!(
                conditions::find(&status.conditions, conditions::FAILED).is_none(),
                "{case}"
            );
            let message = conditions::find(&status.conditions, conditions::SUSPENDED)
                .and_then(|s| s.message.clone())
                .unwrap();
            assert!(
                message.contains("the launcher failed (exit code 1, Error) while only 2 of the 3 workers it needs"),
                "{case}: {message}"
            );
            let event = plan
                .events
                .iter()
                .find(|e| e.reason == "TrainingJobSuspended")
                .unwrap_or_else(|| panic!("{case}: {:?}", reasons(&plan)));
            assert!(event.note.contains("the launcher failed"), "{case}");
            assert!(
                deleted_pods(&plan).contains(&"mnist-worker-0".to_string()),
                "{case}: every pod of the run goes"
            );
            assert_eq!(status.run, Some(1), "{case}: a new run resumes");

            // The new run asks for its workers; capacity returns, and its launcher resumes
            // from the checkpoint.
            world.reconcile();
            let workers = world.status().target_workers.clone();
            assert_eq!(workers.len(), 4, "{case}");
            for worker in &workers {
                world.ready(worker);
            }
            world.reconcile();
            assert_eq!(
                env_of(&world, "mnist-launcher", "ETO_RESUME").as_deref(),
                Some("true"),
                "{case}"
            );
            assert_eq!(world.status().restart_count, 0, "{case}");
        }
    }
}

#[test]
fn a_launcher_that_fails_with_its_minimum_ready_fails_the_job_as_before() {
    let mut world = four_needing_three(ReplicaRestartPolicy::OnFailure, JobRestartPolicy::Never);
    // A worker's own failure: no platform's loss the launcher's could be the consequence of.
    world.exit("mnist-worker-3", 1);
    world.reconcile();
    world.exit("mnist-launcher", 1);
    world.reconcile();
    assert_eq!(world.status().phase, Some(JobPhase::Failed));

    let mut world =
        four_needing_three(ReplicaRestartPolicy::OnFailure, JobRestartPolicy::OnFailure);
    world.exit("mnist-launcher", 1);
    world.reconcile();
    assert_eq!(world.status().restart_count, 1, "restarted, as before");
}

#[test]
fn a_launcher_that_succeeds_before_any_notice_finished_the_training() {
    let mut world = four_needing_three(ReplicaRestartPolicy::OnFailure, JobRestartPolicy::Never);
    world.exit("mnist-worker-3", 1);
    world.exit("mnist-worker-2", 1);
    world.reconcile();
    world.exit("mnist-launcher", 0);
    world.reconcile();
    assert_eq!(world.status().phase, Some(JobPhase::Succeeded));
}

#[test]
fn without_suspend_below_min_workers_a_launcher_failure_below_the_minimum_fails_the_job() {
    let mut world = running(ElasticPolicy {
        suspend_below_min_workers: Some(false),
        ..ElasticPolicy::default()
    });
    world.exit("mnist-worker-1", 1);
    world.reconcile();
    world.exit("mnist-launcher", 1);
    world.reconcile();
    assert_eq!(world.status().phase, Some(JobPhase::Failed));
}

#[test]
fn certain_losses_seen_one_reconcile_apart_get_the_notice_at_the_second() {
    let mut world = four_needing_three(ReplicaRestartPolicy::OnFailure, JobRestartPolicy::Never);
    world.lose_with_node("mnist-worker-3");
    world.reconcile();
    assert_eq!(world.status().notice, None, "three of three are left");
    assert!(
        world
            .status()
            .target_workers
            .contains(&"mnist-worker-4".to_string()),
        "a replacement is asked for"
    );
    // The second worker of the reclaimed node is seen a reconcile later: the replacement,
    // never ready, does not make up for it.
    world.lose_with_node("mnist-worker-2");
    world.reconcile();
    let notice = world.status().notice.clone().expect("a notice at once");
    assert_eq!(notice.since.0, world.now);
}

#[test]
fn a_worker_that_was_ready_and_may_come_back_holds_off_the_notice() {
    let mut world = four_needing_three(ReplicaRestartPolicy::OnFailure, JobRestartPolicy::Never);
    // One worker's node goes NotReady (it may come back), another is reclaimed.
    world.running_not_ready("mnist-worker-2");
    world.lose_with_node("mnist-worker-3");
    world.reconcile();
    assert_eq!(
        world.status().notice,
        None,
        "debounced: worker-2 may come back"
    );
}

fn stops_of(plan: &Plan) -> Vec<(String, NoticeKind, u16)> {
    plan.stops
        .iter()
        .map(|stop| (stop.pod.clone(), stop.notice, stop.port))
        .collect()
}

#[test]
fn the_kubeai_stop_goes_with_a_suspend_notice_to_every_running_pod_once() {
    let mut world = running(ElasticPolicy {
        kubeai_stop: Some(true),
        kubeai_port: Some(19009),
        ..ElasticPolicy::default()
    });
    world.job.spec.suspend = Some(true);
    let plan = world.reconcile();
    assert_eq!(
        stops_of(&plan),
        [
            ("mnist-launcher".to_string(), NoticeKind::Suspend, 19009),
            ("mnist-worker-0".to_string(), NoticeKind::Suspend, 19009),
            ("mnist-worker-1".to_string(), NoticeKind::Suspend, 19009),
        ]
    );
    world.advance(5);
    assert!(
        world.reconcile().stops.is_empty(),
        "once per pod and notice"
    );
}

#[test]
fn a_pod_opts_in_to_the_kubeai_stop_by_its_annotation_and_no_opt_in_sends_nothing() {
    let mut job = training_job();
    job.spec.et_replica_specs.worker.template.metadata = Some(
        serde_json::from_value(serde_json::json!({"annotations": {
            "job-supervisor.kube-ai.io/managed-by-job-supervisor": "true"}}))
        .unwrap(),
    );
    let mut world = three_needing_one(job);
    // A reclaimed worker gets the stop with its own notice; its peers train on.
    world.disrupt("mnist-worker-2");
    let plan = world.reconcile();
    assert_eq!(
        stops_of(&plan),
        [("mnist-worker-2".to_string(), NoticeKind::Reclaim, 9009)]
    );

    // Without the annotation or the field, nothing is sent.
    let mut world = default_running();
    world.job.spec.suspend = Some(true);
    let plan = world.reconcile();
    assert!(!deleted_pods(&plan).is_empty() || world.status().notice.is_some());
    assert!(plan.stops.is_empty());
}

#[test]
fn a_pod_gets_the_kubeai_stop_while_it_runs_being_deleted_or_not_but_not_once_stopped() {
    let time = |world: &World, seconds: i64| {
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            world.now + jiff::SignedDuration::from_secs(seconds),
        )
    };
    // Being deleted, within its grace period: eto's PID 1 keeps its training running.
    let mut world = running(ElasticPolicy {
        kubeai_stop: Some(true),
        ..ElasticPolicy::default()
    });
    world.pod("mnist-worker-0").metadata.deletion_timestamp = Some(time(&world, 30));
    world.job.spec.suspend = Some(true);
    let plan = world.reconcile();
    assert_eq!(
        stops_of(&plan),
        [
            ("mnist-launcher".to_string(), NoticeKind::Suspend, 9009),
            ("mnist-worker-0".to_string(), NoticeKind::Suspend, 9009),
            ("mnist-worker-1".to_string(), NoticeKind::Suspend, 9009)
        ]
    );

    // Its grace period over: it is being killed, nothing listens any more.
    let mut world = running(ElasticPolicy {
        kubeai_stop: Some(true),
        ..ElasticPolicy::default()
    });
    world.pod("mnist-worker-0").metadata.deletion_timestamp = Some(time(&world, 0));
    world.job.spec.suspend = Some(true);
    let plan = world.reconcile();
    assert_eq!(
        stops_of(&plan),
        [
            ("mnist-launcher".to_string(), NoticeKind::Suspend, 9009),
            ("mnist-worker-1".to_string(), NoticeKind::Suspend, 9009)
        ]
    );
}
