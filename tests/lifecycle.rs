//! The operator starting on a cluster that already has jobs, in every state, while its caches
//! list at different speeds; and the operator stopping while reconciles are under way.

use std::time::Duration;

use eto_api::TrainingJob;
use eto_api::job_status::JobPhase;
use eto_sim::{Fault, FaultAction, Verb};
use eto_tests::env::{Env, FOREVER, hanging_pod_writes, in_phase, job_yaml, sim_config, slow_list};
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
        writes_only: false,
        skip: 0,
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

#[tokio::test]
async fn the_operator_stops_on_shutdown_while_its_caches_are_still_listing() {
    let mut env = Env::start(sim_config(4, 8)).await;
    for index in 0..4 {
        env.apply_job(&job_yaml(&format!("job-{index}"), 2, 1, "", "Never"))
            .await;
    }
    for index in 0..4 {
        env.wait_job(&format!("job-{index}"), "runs", in_phase(JobPhase::Running))
            .await;
    }
    env.stop_operator().await;
    // The pod cache does not finish its first list before the operator is told to stop.
    env.cluster
        .inject(slow_list("/api/v1/pods", u32::MAX, FOREVER));
    env.start_operator();
    env.jobs()
        .patch(
            "job-0",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"activeDeadlineSeconds": 86_400}})),
        )
        .await
        .unwrap();
    // `stop_operator` fails the test unless the operator stops within its wait.
    env.stop_operator().await;
}

#[tokio::test]
async fn the_operator_stops_on_shutdown_while_a_reconcile_waits_for_the_api_server() {
    let mut env = Env::start(sim_config(2, 8)).await;
    // Every pod write hangs: the reconcile of the new job is stuck in its first pod apply.
    env.cluster.inject(hanging_pod_writes(u32::MAX));
    env.apply_job(&job_yaml("stuck", 2, 1, "", "Never")).await;
    env.wait_worker_service("stuck").await;
    env.stop_operator().await;
}

#[tokio::test]
async fn a_reconcile_stuck_on_the_api_server_is_abandoned_and_retried() {
    let mut env = Env::start(sim_config(2, 8)).await;
    env.stop_operator().await;
    env.start_operator_with(eto_controller::Settings {
        reconcile_timeout: Duration::from_secs(1),
        ..eto_controller::Settings::default()
    });
    // The first pod write never gets an answer.
    env.cluster.inject(hanging_pod_writes(1));
    env.apply_job(&job_yaml("unlucky", 2, 1, "", "Never")).await;
    env.wait_job("unlucky", "runs", in_phase(JobPhase::Running))
        .await;
    let metrics = &env.operator.as_ref().unwrap().metrics;
    let abandoned = metrics
        .reconciliations
        .get_or_create(&eto_controller::metrics::Outcome {
            result: "timeout".into(),
        })
        .get();
    assert_eq!(abandoned, 1, "the stuck reconcile was abandoned once");
}

#[tokio::test]
async fn a_job_whose_writes_hang_does_not_hold_up_another() {
    let env = Env::start(sim_config(2, 8)).await;
    // Every pod write of job "stalled" hangs: its reconcile waits on the API server.
    env.cluster.inject(Fault {
        path_contains: Some("/pods/stalled-".into()),
        ..hanging_pod_writes(u32::MAX)
    });
    env.apply_job(&job_yaml("stalled", 2, 1, "", "Never")).await;
    env.wait_worker_service("stalled").await;
    env.apply_job(&job_yaml("brisk", 2, 1, "", "Never")).await;
    env.wait_job("brisk", "runs", in_phase(JobPhase::Running))
        .await;
    assert!(
        env.worker_names("stalled").await.is_empty(),
        "the stalled job's pod writes still hang"
    );
}

/// The job's live workers (not finished, not being deleted), sorted by name.
async fn live_workers(env: &Env, job: &str) -> Vec<String> {
    let mut names = Vec::new();
    for name in env.worker_names(job).await {
        if let Some(pod) = env.pods().get_opt(&name).await.unwrap()
            && !eto_engine::pods::is_finished(&pod)
            && pod.metadata.deletion_timestamp.is_none()
        {
            names.push(name);
        }
    }
    names.sort();
    names
}

/// Waits until `job` has settled on `desired` ready workers with nothing extra: its live
/// workers are exactly `status.targetWorkers`, host discovery lists exactly them, and the job
/// was never restarted.
async fn wait_consistent(env: &Env, job: &str, desired: i32) {
    let settled = eto_tests::poll::within(eto_tests::env::WAIT, async || {
        let status = env
            .jobs()
            .get(job)
            .await
            .unwrap()
            .status
            .unwrap_or_default();
        let ready = status
            .workers
            .as_ref()
            .is_some_and(|w| w.ready == desired && w.desired == desired);
        let mut target = status.target_workers.clone();
        target.sort();
        let indices: Vec<u32> = status
            .target_workers
            .iter()
            .filter_map(|name| eto_engine::names::worker_index(job, name))
            .collect();
        let consistent = ready
            && status.restart_count == 0
            && live_workers(env, job).await == target
            && env.launcher_hostfile(job).await == Some(eto_tests::env::hostfile(job, &indices));
        consistent.then_some(())
    })
    .await;
    if settled.is_none() {
        let status = env.jobs().get(job).await.unwrap().status;
        panic!(
            "{job} did not settle on {desired} workers; live workers {:?}, hostfile {:?}, status {status:#?}",
            live_workers(env, job).await,
            env.launcher_hostfile(job).await,
        );
    }
}

#[tokio::test]
async fn an_operator_killed_mid_job_again_and_again_leaves_every_job_consistent() {
    let mut env = Env::start(sim_config(4, 8)).await;
    let jobs = ["crash-0", "crash-1", "crash-2", "crash-3"];
    for job in jobs {
        env.apply_job(&job_yaml(job, 2, 1, "", "Always")).await;
    }
    for job in jobs {
        wait_consistent(&env, job, 2).await;
    }
    for desired in 3..=5 {
        // Every job loses a worker and is scaled out; the operator is killed as soon as it
        // has begun to act on it, in the middle of its reconciles.
        let before = env.worker_names(jobs[0]).await.len();
        for job in jobs {
            let target = env
                .jobs()
                .get(job)
                .await
                .unwrap()
                .status
                .unwrap()
                .target_workers;
            env.cluster
                .fail_pod("default", &target[0], 1, "Error")
                .unwrap();
            env.jobs()
                .patch(
                    job,
                    &PatchParams::default(),
                    &Patch::Merge(serde_json::json!({"spec": {"etReplicaSpecs": {"worker": {"replicas": desired}}}})),
                )
                .await
                .unwrap();
        }
        let acted = tokio::time::timeout(eto_tests::env::WAIT, async {
            while env.worker_names(jobs[0]).await.len() == before {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        acted.await.expect("the operator acts on the changes");
        env.kill_operator().await;
        env.start_operator();
        for job in jobs {
            wait_consistent(&env, job, desired).await;
        }
    }
    // Each job's goodput ledger went through the kills whole: its buckets and the open one
    // add up to its life, no second counted twice or lost, and it trained.
    for job in jobs {
        let status = env.jobs().get(job).await.unwrap().status.unwrap();
        let ledger = status.goodput.expect("a ledger");
        let now = jiff::Timestamp::now();
        let counted = eto_engine::goodput::at(&ledger, now).total();
        let lived = now.duration_since(ledger.since.0).as_secs_f64();
        assert!(
            (counted - lived).abs() < 0.05,
            "{job}: {counted} s counted in {lived} s: {ledger:#?}"
        );
        assert!(
            eto_engine::goodput::at(&ledger, now).productive > 0.0,
            "{job}: {ledger:#?}"
        );
    }
}

/// The operator starts while the API server fails its first lists of a kind's jobs (a 500
/// twice, as when it restarts): the start-up check tries again rather than ending the
/// operator, which then runs a job.
#[tokio::test]
async fn an_operator_started_while_the_api_server_fails_its_first_lists_runs() {
    let mut env = Env::start(sim_config(2, 8)).await;
    env.stop_operator().await;
    env.cluster.inject(Fault {
        action: FaultAction::Fail(500),
        remaining: 2,
        method: None,
        path_contains: Some("/trainingjobs".into()),
        verb: Some(Verb::List),
        writes_only: false,
        skip: 0,
    });
    env.start_operator();
    env.apply_job(&job_yaml("after-errors", 2, 1, "", "Never"))
        .await;
    env.wait_pod("after-errors-worker-0", "is created", |pod| pod.is_some())
        .await;
    assert_eq!(env.cluster.faults_acted(), 2, "both lists failed");
}
