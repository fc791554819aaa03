//! A launcher that fails soon after the platform took a worker (see `plan/run/collateral_launcher_failure.rs`):
//! the run resumes from its checkpoint, whatever the count of ready workers; a failure with no
//! such loss before it, or long after, is the training code's.

use eto_api::common::{ConditionStatus, ReplicaRestartPolicy};
use eto_api::job_status::{JobPhase, NoticeKind};
use eto_api::training_job::JobRestartPolicy;
use pretty_assertions::assert_eq;

use crate::conditions;
use crate::testing::training_job;
use crate::testing::world::{World, reasons};

/// A running job of 3 workers needing 2, every lost worker replaced, the job never restarted.
fn running() -> World {
    let mut job = training_job();
    job.spec.et_replica_specs.worker.replicas = Some(3);
    job.spec.et_replica_specs.worker.min_replicas = Some(2);
    job.spec.et_replica_specs.worker.restart_policy = Some(ReplicaRestartPolicy::Always);
    job.spec.restart_policy = Some(JobRestartPolicy::Never);
    let mut world = World::new(job);
    world.launch_with(3);
    world
}

fn suspended_reason(world: &World) -> Option<String> {
    conditions::find(&world.status().conditions, conditions::SUSPENDED)
        .filter(|condition| condition.status == ConditionStatus::True)
        .and_then(|condition| condition.reason.clone())
}

#[test]
fn a_launcher_failing_soon_after_a_worker_was_evicted_resumes_the_job() {
    type Lose = fn(&mut World);
    let losses: [(&str, Lose, &str); 3] = [
        ("evicted", |world| world.evict("mnist-worker-1"), "evicted"),
        (
            "gone with its node",
            |world| world.lose_with_node("mnist-worker-1"),
            "disrupted",
        ),
        (
            "deleted",
            |world| {
                world.pods.remove("mnist-worker-1");
            },
            "deleted",
        ),
    ];
    for (how, lose, says) in losses {
        let mut world = running();
        lose(&mut world);
        world.reconcile();
        // The replacement is ready: the run has all three workers, and still Horovod gave up.
        world.ready("mnist-worker-3");
        world.reconcile();
        world.advance(40);
        world.exit("mnist-launcher", 1);
        let plan = world.reconcile();
        assert_eq!(world.status().phase, Some(JobPhase::Suspended), "{how}");
        assert_eq!(
            suspended_reason(&world).as_deref(),
            Some("WorkerDisrupted"),
            "{how}"
        );
        let message = conditions::find(&world.status().conditions, conditions::SUSPENDED)
            .and_then(|s| s.message.clone())
            .unwrap();
        assert!(
            message.contains(&format!(
                "the launcher failed (exit code 1, Error) 40s after worker mnist-worker-1 was lost to the platform ({says}"
            )),
            "{how}: {message}"
        );
        assert!(!reasons(&plan).iter().any(|r| r.contains("Fail")), "{how}");
        assert_eq!(world.status().restart_count, 0, "{how}");
        // The new run resumes from the checkpoint.
        world.reconcile();
        for worker in world.status().target_workers.clone() {
            world.ready(&worker);
        }
        world.reconcile();
        assert_eq!(
            crate::notice::shown(&world.pods["mnist-launcher"]).map(|n| (n.kind, n.reason)),
            Some((NoticeKind::Resume, "WorkerDisrupted".to_string())),
            "{how}"
        );
    }
}

#[test]
fn a_launcher_failing_long_after_the_loss_or_after_a_workers_own_failure_is_a_failure() {
    let mut world = running();
    world.evict("mnist-worker-1");
    world.reconcile();
    world.ready("mnist-worker-3");
    world.reconcile();
    world.advance(181);
    world.exit("mnist-launcher", 1);
    world.reconcile();
    assert_eq!(
        world.status().phase,
        Some(JobPhase::Failed),
        "after the window"
    );

    let mut world = running();
    world.exit("mnist-worker-1", 1);
    world.reconcile();
    world.ready("mnist-worker-3");
    world.reconcile();
    world.advance(10);
    world.exit("mnist-launcher", 1);
    world.reconcile();
    assert_eq!(
        world.status().phase,
        Some(JobPhase::Failed),
        "a worker's own failure is not the platform's"
    );
}
