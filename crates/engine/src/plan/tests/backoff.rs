//! Pods that fail on their own: their replacements back off, the job says why, a new template
//! fixes them at once, and the platform's losses are replaced at once whatever backs off.

use eto_api::common::ReplicaRestartPolicy;
use eto_api::job_status::JobPhase;
use pretty_assertions::assert_eq;

use super::*;
use crate::testing::world::{World, created_pods};

/// The Workers' back-off record: failures in a row, seconds until the next Worker, the Workers
/// held.
fn worker_backoff(world: &World) -> Option<(i32, i64, Vec<String>)> {
    world
        .status()
        .backoff
        .iter()
        .find(|record| record.role == "Worker")
        .map(|record| {
            (
                record.failures,
                record.retry_at.0.duration_since(world.now).as_secs(),
                record.waiting.clone(),
            )
        })
}

fn pods_failing(world: &World) -> Option<(bool, String, String)> {
    let condition = conditions::find(&world.status().conditions, "PodsFailing")?;
    Some((
        condition.status == eto_api::common::ConditionStatus::True,
        condition.reason.clone().unwrap_or_default(),
        condition.message.clone().unwrap_or_default(),
    ))
}

#[test]
fn workers_that_keep_failing_on_their_own_are_replaced_later_and_later() {
    let mut world = World::launched_replacing_failed_workers();
    // (the Worker that fails, its replacement, failures in a row, the replacement's wait)
    let steps = [
        ("mnist-worker-0", "mnist-worker-2", 1, 0),
        ("mnist-worker-2", "mnist-worker-3", 2, 10),
        ("mnist-worker-3", "mnist-worker-4", 3, 20),
        ("mnist-worker-4", "mnist-worker-5", 4, 40),
    ];
    for (failing, replacement, failures, wait) in steps {
        world.exit(failing, 1);
        let plan = world.reconcile();
        let (counted, retry_in, held) = worker_backoff(&world).expect("a back-off");
        assert_eq!((counted, retry_in), (failures, wait), "{failing}");
        if wait == 0 {
            assert_eq!(created_pods(&plan), [replacement], "{failing}: at once");
            assert!(held.is_empty());
            assert!(
                pods_failing(&world).is_none(),
                "a first failure sets no condition"
            );
        } else {
            assert!(created_pods(&plan).is_empty(), "{failing}: {plan:#?}");
            assert_eq!(held, [replacement]);
            // In the target, pending: the job holds to its size.
            assert!(
                world
                    .status()
                    .target_workers
                    .contains(&replacement.to_string())
            );
            assert_eq!(plan.requeue_after, Some(Duration::from_secs(wait as u64)));
            let lost = plan
                .events
                .iter()
                .find(|e| e.reason == WORKER_LOST)
                .expect("a WorkerLost event");
            assert!(lost.note.contains("back off"), "{}", lost.note);
            let (holds, reason, message) = pods_failing(&world).expect("PodsFailing");
            assert!(holds);
            assert_eq!(reason, "CrashLoopBackOff");
            assert!(
                message.contains(&format!(
                    "Worker {failing}: container main exited with code 1 (Error)"
                )) && message.contains(&format!("{failures} failures of Worker pods in a row")),
                "{message}"
            );
            assert!(reasons(&plan).contains(&"CrashLoopBackOff".to_string()));
            // The other Worker trains: the job runs, degraded, not stalled.
            assert_eq!(world.status().phase, Some(JobPhase::Running));
            assert_eq!(condition(&world, conditions::STALLED).0, false);
            world.advance(wait - 1);
            assert!(
                created_pods(&world.reconcile()).is_empty(),
                "{failing}: not yet"
            );
            world.advance(1);
            assert_eq!(created_pods(&world.reconcile()), [replacement], "{failing}");
            assert!(worker_backoff(&world).unwrap().2.is_empty());
        }
        world.ready(replacement);
        world.reconcile();
    }
    assert_eq!(
        world.reconcile().tallies.pod_failures,
        Vec::<(&str, String)>::new(),
        "a failure is counted once"
    );
}

#[test]
fn workers_that_fail_together_count_as_one_failure() {
    let mut world = World::launched_replacing_failed_workers();
    world.exit("mnist-worker-0", 1);
    world.exit("mnist-worker-1", 1);
    let plan = world.reconcile();
    assert_eq!(worker_backoff(&world).map(|b| b.0), Some(1));
    assert_eq!(created_pods(&plan), ["mnist-worker-2", "mnist-worker-3"]);
    assert_eq!(
        plan.tallies.pod_failures.len(),
        2,
        "each pod's failure is counted"
    );
    // One failed a moment after the other, in a reconcile of its own: still one.
    let mut world = World::launched_replacing_failed_workers();
    world.exit("mnist-worker-0", 1);
    world.reconcile();
    world.exit("mnist-worker-1", 1);
    world.reconcile();
    assert_eq!(worker_backoff(&world).map(|b| b.0), Some(1));
    assert!(world.pods.contains_key("mnist-worker-3"), "at once");
    // Their replacements failing together are the second failure.
    world.exit("mnist-worker-2", 1);
    world.exit("mnist-worker-3", 1);
    world.reconcile();
    let (failures, wait, held) = worker_backoff(&world).unwrap();
    assert_eq!((failures, wait), (2, 10));
    assert_eq!(held, ["mnist-worker-4", "mnist-worker-5"]);
}

#[test]
fn what_the_platform_takes_during_a_back_off_is_replaced_at_once() {
    // Three Workers, one needed: the job trains on while one slot backs off.
    let mut job = training_job();
    job.spec.et_replica_specs.worker.replicas = Some(3);
    job.spec.et_replica_specs.worker.min_replicas = Some(1);
    job.spec.et_replica_specs.worker.restart_policy = Some(ReplicaRestartPolicy::OnFailure);
    let mut world = World::new(job);
    world.launch_with(3);
    world.exit("mnist-worker-0", 1);
    world.reconcile();
    world.ready("mnist-worker-3");
    world.exit("mnist-worker-3", 1);
    world.reconcile();
    assert_eq!(worker_backoff(&world).unwrap().2, ["mnist-worker-4"]);
    // A spot reclaim takes a Worker that trains.
    world.lose_with_node("mnist-worker-1");
    let plan = world.reconcile();
    assert_eq!(created_pods(&plan), ["mnist-worker-5"], "replaced at once");
    let (failures, _, held) = worker_backoff(&world).unwrap();
    assert_eq!(failures, 2, "the platform's loss is no failure of the code");
    assert_eq!(
        held,
        ["mnist-worker-4"],
        "the failed one's replacement still waits"
    );
}

/// Two Workers, one needed, replaced when they fail: Worker 0 failed, then its replacement,
/// whose own replacement (Worker 3) waits 10 s.
fn backing_off() -> World {
    let mut world = World::launched_replacing_failed_workers();
    world.exit("mnist-worker-0", 1);
    world.reconcile();
    world.ready("mnist-worker-2");
    world.exit("mnist-worker-2", 1);
    world.reconcile();
    world
}

#[test]
fn a_new_template_ends_the_back_off_and_its_workers_come_at_once() {
    let mut world = backing_off();
    assert!(!world.pods.contains_key("mnist-worker-3"));
    world
        .job
        .spec
        .et_replica_specs
        .worker
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0]
        .image = Some("horovod/horovod:0.28.1-fixed".into());
    world.job.metadata.generation = Some(2);
    let plan = world.reconcile();
    assert_eq!(
        created_pods(&plan),
        ["mnist-worker-3"],
        "at once, from the new template"
    );
    assert!(reasons(&plan).contains(&"BackoffEnded".to_string()));
    assert_eq!(worker_backoff(&world), None);
    assert_eq!(
        pods_failing(&world).map(|c| (c.0, c.1)),
        Some((false, "PodsRun".into()))
    );
}

#[test]
fn a_worker_that_runs_ten_minutes_ends_the_back_off() {
    let mut world = backing_off();
    world.advance(10);
    world.reconcile();
    world.runs("mnist-worker-3");
    let plan = world.reconcile();
    assert!(
        plan.requeue_after <= Some(Duration::from_secs(600)),
        "looks again by then: {:?}",
        plan.requeue_after
    );
    world.advance(599);
    world.reconcile();
    assert_eq!(worker_backoff(&world).map(|b| b.0), Some(2));
    world.advance(1);
    world.reconcile();
    assert_eq!(worker_backoff(&world), None, "the code works");
    assert_eq!(pods_failing(&world).map(|c| c.0), Some(false));
    // The next failure is a first one again: replaced at once.
    world.exit("mnist-worker-3", 1);
    let plan = world.reconcile();
    assert_eq!(created_pods(&plan), ["mnist-worker-4"]);
}

#[test]
fn workers_failing_past_the_backoff_limit_fail_the_job() {
    let mut world = World::launched_replacing_failed_workers();
    world.job.spec.backoff_limit = Some(2);
    for (failing, replacement) in [(0, 2), (2, 3)] {
        world.exit(&format!("mnist-worker-{failing}"), 1);
        world.reconcile();
        world.advance(60);
        world.reconcile();
        assert_ne!(world.status().phase, Some(JobPhase::Failed), "{failing}");
        world.ready(&format!("mnist-worker-{replacement}"));
        world.reconcile();
    }
    world.exit("mnist-worker-3", 1);
    world.reconcile();
    let plan = world.reconcile();
    assert_eq!(world.status().phase, Some(JobPhase::Failed));
    let (failed, reason) = condition(&world, conditions::FAILED);
    assert!(failed);
    assert_eq!(reason, "TrainingJobFailed");
    let message = conditions::find(&world.status().conditions, conditions::FAILED)
        .and_then(|c| c.message.clone())
        .unwrap_or_default();
    assert!(
        message.contains("Worker pods failed 3 times in a row, more than its backoffLimit (2)")
            && message.contains("container main exited with code 1"),
        "{message}"
    );
    assert!(deleted_pods(&plan).contains(&"mnist-worker-1".to_string()));
}

#[test]
fn a_worker_left_down_by_its_policy_is_no_retry_and_counts_nothing() {
    let mut world = running();
    world.exit("mnist-worker-1", 1);
    world.reconcile();
    assert_eq!(worker_backoff(&world), None);
}

#[test]
fn a_suspend_below_the_minimum_does_not_bring_back_the_workers_a_back_off_holds() {
    let mut job = training_job();
    job.spec.et_replica_specs.worker.restart_policy = Some(ReplicaRestartPolicy::OnFailure);
    job.spec.elastic_policy = Some(eto_api::elastic::ElasticPolicy {
        below_min_seconds: Some(1),
        checkpoint_grace_seconds: Some(1),
        ..Default::default()
    });
    let mut world = World::new(job);
    world.launch();
    world.exit("mnist-worker-0", 1);
    world.exit("mnist-worker-1", 1);
    world.reconcile();
    world.ready("mnist-worker-2");
    world.ready("mnist-worker-3");
    world.reconcile();
    world.exit("mnist-worker-2", 1);
    world.exit("mnist-worker-3", 1);
    world.reconcile();
    assert_eq!(worker_backoff(&world).unwrap().2.len(), 2);
    // Too few Workers: the job suspends and a new run starts.
    for _ in 0..4 {
        world.advance(1);
        world.reconcile();
    }
    world.pods.retain(|name, _| !name.contains("launcher"));
    world.reconcile();
    let (_, wait, held) = worker_backoff(&world).unwrap();
    assert_eq!(
        held.len(),
        2,
        "as many of the new run's Workers wait: {held:?}"
    );
    assert!(
        held.iter().all(|worker| !world.pods.contains_key(worker)),
        "{held:?} not created while {wait}s remain"
    );
    world.advance(wait);
    world.reconcile();
    assert!(held.iter().all(|worker| world.pods.contains_key(worker)));
}

#[test]
fn a_worker_whose_image_is_never_pulled_is_said_on_the_job_and_left_alone() {
    let mut world = World::new(training_job());
    world.reconcile();
    world.ready("mnist-worker-0");
    world.waits(
        "mnist-worker-1",
        "ImagePullBackOff",
        "Back-off pulling image \"example.invalid/none:v1\"",
    );
    let plan = world.reconcile();
    let (holds, reason, message) = pods_failing(&world).expect("PodsFailing");
    assert!(holds);
    assert_eq!(reason, "ImagePullBackOff");
    assert_eq!(
        message,
        "Worker mnist-worker-1: container main waits in ImagePullBackOff: Back-off pulling image \"example.invalid/none:v1\""
    );
    assert_eq!(
        condition(&world, conditions::STALLED),
        (true, "ImagePullBackOff".into()),
        "it cannot train"
    );
    assert_eq!(
        plan.events
            .iter()
            .filter(|e| e.reason == "ImagePullBackOff" && e.warning)
            .count(),
        1
    );
    assert_eq!(
        plan.tallies.pod_failures,
        [("Worker", "ImagePullBackOff".to_string())]
    );
    assert!(deleted_pods(&plan).is_empty() && created_pods(&plan).is_empty());
    // Said once, not churned.
    world.advance(60);
    let again = world.reconcile();
    assert!(again.is_empty(), "{again:#?}");
    // Its image pulled after all: the condition clears.
    world.ready("mnist-worker-1");
    world.reconcile();
    assert_eq!(
        pods_failing(&world).map(|c| (c.0, c.1)),
        Some((false, "PodsRun".into()))
    );
    assert_eq!(condition(&world, conditions::STALLED).0, false);
}

#[test]
fn a_new_template_replaces_the_workers_stuck_on_the_old_one() {
    let mut world = World::new(training_job());
    world.reconcile();
    world.ready("mnist-worker-0");
    world.waits(
        "mnist-worker-1",
        "CreateContainerConfigError",
        "secret \"wandb\" not found",
    );
    world.reconcile();
    // A spec change that is no template change replaces nothing.
    world.job.spec.et_replica_specs.worker.min_replicas = Some(1);
    world.job.metadata.generation = Some(2);
    let plan = world.reconcile();
    assert!(deleted_pods(&plan).is_empty());
    // The fix: the Secret's name.
    let container = &mut world
        .job
        .spec
        .et_replica_specs
        .worker
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0];
    container.image = Some("horovod/horovod:0.28.1-b".into());
    world.job.metadata.generation = Some(3);
    let plan = world.reconcile();
    assert_eq!(deleted_pods(&plan), ["mnist-worker-1"]);
    assert_eq!(created_pods(&plan), ["mnist-worker-2"]);
    assert!(reasons(&plan).contains(&"TemplateChanged".to_string()));
    assert!(world.status().blacklist.is_empty(), "not a loss");
    // The Worker that runs keeps running.
    assert!(world.pods.contains_key("mnist-worker-0"));
}

#[test]
fn a_launcher_stuck_on_an_old_template_starts_a_new_run_from_the_new_one() {
    let mut world = running();
    world.waits("mnist-launcher", "ErrImagePull", "no such host");
    world.reconcile();
    assert_eq!(
        pods_failing(&world).map(|c| (c.0, c.1)),
        Some((true, "ErrImagePull".into()))
    );
    let spec = world
        .job
        .spec
        .et_replica_specs
        .launcher
        .template
        .spec
        .as_mut()
        .unwrap();
    spec.containers[0].image = Some("horovod/horovod:0.28.1-b".into());
    let plan = world.reconcile();
    assert_eq!(world.status().run, Some(1));
    assert_eq!(world.status().restart_count, 0, "nothing counted");
    assert!(deleted_pods(&plan).contains(&"mnist-launcher".to_string()));
}

#[test]
fn a_launcher_that_keeps_failing_restarts_the_job_later_and_later() {
    let mut job = training_job();
    job.spec.restart_policy = Some(JobRestartPolicy::OnFailure);
    let mut world = World::new(job);
    world.launch();
    // The first failure restarts at once.
    world.exit("mnist-launcher", 1);
    world.reconcile();
    assert_eq!(world.status().run, Some(1));
    world
        .pods
        .retain(|name, _| !name.starts_with("mnist-launcher"));
    world.reconcile();
    world.ready("mnist-worker-2");
    world.ready("mnist-worker-3");
    world.reconcile();
    world.ready("mnist-launcher");
    world.reconcile();
    // The second waits 10 s, its pods left as they are.
    world.exit("mnist-launcher", 1);
    let plan = world.reconcile();
    assert_eq!(world.status().run, Some(1), "not yet");
    assert!(deleted_pods(&plan).is_empty());
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(10)));
    assert_eq!(
        condition(&world, conditions::STALLED),
        (true, "CrashLoopBackOff".into())
    );
    let (_, _, message) = pods_failing(&world).expect("PodsFailing");
    assert!(
        message.starts_with("Launcher mnist-launcher: container main exited with code 1 (Error)"),
        "{message}"
    );
    world.advance(9);
    world.reconcile();
    assert_eq!(world.status().run, Some(1));
    world.advance(1);
    world.reconcile();
    assert_eq!(world.status().run, Some(2), "restarted after its back-off");
    assert_eq!(world.status().restart_count, 2);
}

#[test]
fn ranks_stuck_on_an_old_template_start_one_new_run_from_the_new_one() {
    let mut job = crate::testing::pytorch_job();
    job.spec
        .pytorch_replica_specs
        .get_mut("Worker")
        .unwrap()
        .restart_policy = Some(ReplicaRestartPolicy::OnFailure);
    let mut world = World::pytorch(job);
    world.reconcile();
    world.ready("ddp-master-0");
    world.waits("ddp-worker-0", "ImagePullBackOff", "Back-off pulling image");
    world.waits("ddp-worker-1", "ImagePullBackOff", "Back-off pulling image");
    world.reconcile();
    let worker = world
        .pytorch_job
        .as_mut()
        .unwrap()
        .spec
        .pytorch_replica_specs
        .get_mut("Worker")
        .unwrap();
    worker
        .template
        .as_mut()
        .unwrap()
        .spec
        .as_mut()
        .unwrap()
        .containers[0]
        .image = Some("pytorch/pytorch:2.5.1-b".into());
    let plan = world.reconcile();
    let status = world.pytorch_job.as_ref().unwrap().status.as_ref().unwrap();
    assert_eq!(status.eto.run, Some(1), "one new run, not two");
    assert_eq!(status.eto.restart_count, Some(0), "counting nothing");
    assert!(deleted_pods(&plan).contains(&"ddp-worker-0".to_string()));
}

#[test]
fn workers_held_back_are_not_lost_for_certain() {
    let mut world = World::launched_replacing_failed_workers();
    world.exit("mnist-worker-0", 1);
    world.exit("mnist-worker-1", 1);
    world.reconcile();
    world.ready("mnist-worker-2");
    world.ready("mnist-worker-3");
    world.reconcile();
    world.exit("mnist-worker-2", 1);
    world.exit("mnist-worker-3", 1);
    world.reconcile();
    let plan = world.reconcile();
    assert_eq!(worker_backoff(&world).unwrap().2.len(), 2);
    assert_eq!(
        world.status().notice,
        None,
        "no Suspend notice at once: the held Workers come back ({:?})",
        reasons(&plan)
    );
}
