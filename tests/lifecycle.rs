//! The operator starting on a cluster that already has jobs, in every state, while its caches
//! list at different speeds.

// Test code: a panic is a test failure with its message.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use eto_api::TrainingJob;
use eto_api::training_job::JobPhase;
use eto_sim::{Fault, FaultAction, Verb};
use eto_tests::env::{Env, in_phase, job_yaml, sim_config, slow_list};
use kube::api::{Patch, PatchParams};

/// Jobs created by [`existing_jobs`], with the phase each must reach.
struct World {
    expected: Vec<(String, JobPhase)>,
}

impl World {
    fn expect(&mut self, name: &str, phase: JobPhase) {
        if let Some(entry) = self.expected.iter_mut().find(|(n, _)| n == name) {
            entry.1 = phase;
        } else {
            self.expected.push((name.into(), phase));
        }
    }

    /// Creates `count` jobs named `<prefix>-<i>` and expects them to run.
    async fn create(&mut self, env: &Env, prefix: &str, count: usize) -> Vec<String> {
        let mut names = Vec::new();
        for index in 0..count {
            let name = format!("{prefix}-{index}");
            env.apply_job(&job_yaml(&name, 2, 1, "", "Always")).await;
            self.expect(&name, JobPhase::Running);
            names.push(name);
        }
        names
    }

    /// Changes every job's spec (a generation the operator has not seen) while it is down.
    async fn touch_every_job(&self, env: &Env, round: u32) {
        for (name, _) in &self.expected {
            env.jobs()
                .patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(
                        serde_json::json!({"spec": {"activeDeadlineSeconds": 86_400 + round}}),
                    ),
                )
                .await
                .unwrap();
        }
    }

    /// Waits until the operator has reconciled every job at its current generation, and each
    /// reached the phase it should.
    async fn wait_all_reconciled(&self, env: &Env) {
        for (name, phase) in &self.expected {
            let generation = env.jobs().get(name).await.unwrap().metadata.generation;
            env.wait_job(name, &format!("is reconciled and {phase:?}"), |job| {
                let status = job.status.as_ref();
                status.and_then(|s| s.observed_generation) == generation
                    && status.and_then(|s| s.phase) == Some(*phase)
            })
            .await;
        }
    }
}

/// With the operator running, then stopped: jobs that run, succeeded, failed, were only partly
/// created (workers but no ConfigMap, no launcher and no status), finished while the operator
/// was down, lost a worker while it was down, and were created while it was down. Every job's
/// generation is one the operator has not seen. Leaves the operator stopped.
async fn existing_jobs(env: &mut Env) -> World {
    let mut world = World {
        expected: Vec::new(),
    };
    let running = world.create(env, "running", 6).await;
    let succeeded = world.create(env, "succeeded", 2).await;
    let failed = world.create(env, "failed", 2).await;
    for name in running.iter().chain(&succeeded).chain(&failed) {
        env.wait_job(name, "runs", in_phase(JobPhase::Running))
            .await;
    }
    for name in &succeeded {
        env.cluster
            .succeed_pod("default", &format!("{name}-launcher"))
            .unwrap();
        world.expect(name, JobPhase::Succeeded);
    }
    for name in &failed {
        env.cluster
            .fail_pod("default", &format!("{name}-launcher"), 1, "Error")
            .unwrap();
        world.expect(name, JobPhase::Failed);
    }
    for (name, phase) in &world.expected {
        env.wait_job(name, "settles", in_phase(*phase)).await;
    }

    // Partly created: every ConfigMap write fails, so a reconcile creates the workers and
    // fails before the ConfigMap, the launcher and the status.
    env.cluster.inject(Fault {
        action: FaultAction::Fail(500),
        remaining: u32::MAX,
        method: None,
        path_contains: Some("/configmaps/".into()),
        verb: Some(Verb::Patch),
    });
    let partial = world.create(env, "partial", 6).await;
    for name in &partial {
        let created = tokio::time::timeout(eto_tests::env::WAIT, async {
            while env.worker_names(name).await.len() < 2 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        created
            .await
            .expect("the partial job's workers are created");
    }
    env.stop_operator().await;
    env.cluster.clear_faults();
    for name in &partial {
        let job: TrainingJob = env.jobs().get(name).await.unwrap();
        assert!(job.status.is_none(), "{name} has no status yet");
    }

    // While the operator is down.
    world.create(env, "unseen", 8).await;
    env.cluster
        .fail_pod("default", "running-0-worker-0", 1, "Error")
        .unwrap();
    env.cluster
        .succeed_pod("default", "running-1-launcher")
        .unwrap();
    world.expect("running-1", JobPhase::Succeeded);
    world.touch_every_job(env, 0).await;
    world
}

/// The regression test of an operator that, started on a cluster with several jobs, reconciled
/// one of them and never the others: every reconcile waited for the caches to finish listing,
/// and the caches' readiness signal woke only one of several waiters.
#[tokio::test]
async fn an_operator_started_on_existing_jobs_reconciles_every_one_whichever_cache_lists_last() {
    let mut env = Env::start(sim_config(8, 8)).await;
    let mut world = existing_jobs(&mut env).await;
    assert!(world.expected.len() >= 20);

    // First with the simulated cluster's ordinary list latency (jobs list before pods).
    env.start_operator();
    world.wait_all_reconciled(&env).await;
    assert_eq!(
        env.worker_names("running-0").await,
        [
            "running-0-worker-0",
            "running-0-worker-1",
            "running-0-worker-2"
        ],
        "the worker that failed while the operator was down is replaced"
    );

    // Then with one cache far slower than the others, each in turn.
    let slow_caches = [
        slow_list("/api/v1/pods", 1, Duration::from_millis(1500)),
        slow_list("/api/v1/secrets", 1, Duration::from_millis(1500)),
        // The operator lists TrainingJobs twice as it starts: once to check the CRD, then
        // to fill its cache.
        slow_list("v1alpha1/trainingjobs", 2, Duration::from_millis(1500)),
    ];
    for (round, slow) in (1..).zip(slow_caches) {
        env.stop_operator().await;
        world.create(&env, &format!("round-{round}"), 1).await;
        world.touch_every_job(&env, round).await;
        env.cluster.inject(slow);
        env.start_operator();
        world.wait_all_reconciled(&env).await;
        env.cluster.clear_faults();
    }
}
