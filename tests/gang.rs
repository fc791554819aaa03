//! Gang scheduling against the simulated cluster, whose scheduler places a PodGroup's pods only
//! when at least its `minMember` fit together: a job admitted at its minimum and growing above
//! it, two elastic jobs competing for too few GPUs, suspend and resume, a scheduler whose
//! PodGroup API is missing (all with Volcano), and an MPIJob with the scheduler-plugins
//! coscheduling plugin.

use std::time::Duration;

use eto_api::MPIJob;
use eto_api::job_status::JobPhase;
use eto_controller::Settings;
use eto_engine::pod_group::GangScheduler;
use eto_sim::NodeSpec;
use eto_tests::env::{Env, JobYaml, in_phase, pod_ready, sim_config};
use eto_tests::pod_groups;
use eto_tests::workspace_root;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::WatchParams;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::wait::await_condition;

const WAIT: Duration = Duration::from_secs(30);

/// A cluster of `nodes` one-GPU nodes with eto gang-scheduling through Volcano, whose PodGroup
/// CRD is installed when `installed`.
async fn volcano_env(nodes: usize, installed: bool) -> Env {
    let mut env = Env::start(sim_config(nodes, 1)).await;
    env.stop_operator().await;
    if installed {
        pod_groups::install(&env.client, &GangScheduler::Volcano).await;
    }
    env.start_operator_with(Settings {
        gang: Some(GangScheduler::Volcano),
        ..Settings::default()
    });
    env
}

/// A job of `replicas` one-GPU workers, between `min` and `max`, that checkpoints for a
/// second before it suspends.
fn elastic_job(name: &str, replicas: u32, min: u32, max: u32) -> String {
    JobYaml {
        name,
        replicas,
        min,
        max: Some(max),
        extra_spec: "\n  elasticPolicy:\n    checkpointGraceSeconds: 1",
        worker_policy: "Never",
    }
    .render()
}

/// The PodGroups of `scheduler` in namespace `default`.
fn groups_of(env: &Env, scheduler: &GangScheduler) -> Api<DynamicObject> {
    let resource = eto_controller::pod_groups::resource(scheduler);
    Api::namespaced_with(env.client.clone(), "default", &resource)
}

/// Volcano's PodGroups in namespace `default`.
fn groups(env: &Env) -> Api<DynamicObject> {
    groups_of(env, &GangScheduler::Volcano)
}

/// Waits until PodGroup `name` satisfies `condition` (`None`: it does not exist).
async fn wait_group(
    env: &Env,
    name: &str,
    what: &str,
    condition: impl Fn(Option<&DynamicObject>) -> bool + Send + 'static,
) {
    let wait = await_condition(groups(env), name, move |group: Option<&DynamicObject>| {
        condition(group)
    });
    if tokio::time::timeout(WAIT, wait).await.is_err() {
        let group = groups(env).get_opt(name).await.ok().flatten();
        panic!("timed out waiting until PodGroup {name} {what}; it is now: {group:#?}");
    }
}

fn min_member(group: Option<&DynamicObject>) -> Option<i64> {
    group?.data["spec"]["minMember"].as_i64()
}

/// The ready workers of `job`.
async fn ready_workers(env: &Env, job: &str) -> Vec<String> {
    let pods = env
        .pods()
        .list(
            &ListParams::default()
                .labels(&format!("training-job-name={job},training-job-role=worker")),
        )
        .await
        .unwrap();
    pods.items
        .iter()
        .filter(|pod| pod_ready(Some(pod)))
        .filter_map(|pod| pod.metadata.name.clone())
        .collect()
}

#[tokio::test]
async fn a_job_is_admitted_at_its_minimum_and_grows_above_it() {
    let env = volcano_env(2, true).await;
    env.apply_job(&elastic_job("mnist", 3, 2, 3)).await;
    env.wait_job("mnist", "runs", in_phase(JobPhase::Running))
        .await;
    wait_group(&env, "mnist", "counts the launcher", |group| {
        min_member(group) == Some(3)
    })
    .await;
    let group = groups(&env).get("mnist").await.unwrap();
    assert_eq!(group.data["spec"]["minResources"]["nvidia.com/gpu"], "2");
    let worker = env.pods().get("mnist-worker-0").await.unwrap();
    assert_eq!(
        worker.spec.unwrap().scheduler_name.as_deref(),
        Some("volcano")
    );
    assert_eq!(ready_workers(&env, "mnist").await.len(), 2);
    let third: Pod = env.pods().get("mnist-worker-2").await.unwrap();
    assert!(!pod_ready(Some(&third)), "two GPUs for three workers");

    // A node appears: the worker above the minimum runs without waiting for a gang.
    env.cluster.add_node(&NodeSpec::gpu("gpu-new", 1)).unwrap();
    env.wait_pod("mnist-worker-2", "is ready", pod_ready).await;
}

#[tokio::test]
async fn two_elastic_jobs_competing_for_too_few_gpus_both_start_at_their_minimum() {
    let env = volcano_env(4, true).await;
    // Each wants three GPUs and needs two; there are four. The first, alone, takes three.
    env.apply_job(&elastic_job("first", 3, 2, 3)).await;
    env.wait_job("first", "runs", in_phase(JobPhase::Running))
        .await;
    wait_until_ready(&env, "first", 3).await;

    // The second's gang cannot form in the one GPU left: Volcano preempts the first's worker
    // above its minimum, and both run at their minimum, neither holding GPUs it cannot use.
    env.apply_job(&elastic_job("second", 3, 2, 3)).await;
    env.wait_job("second", "runs", in_phase(JobPhase::Running))
        .await;
    wait_until_ready(&env, "second", 2).await;
    env.wait_job("first", "runs on", in_phase(JobPhase::Running))
        .await;
    assert_eq!(ready_workers(&env, "first").await.len(), 2);
    assert!(
        env.event_reasons("first")
            .await
            .contains(&"WorkerLost".to_string()),
        "the preempted worker left the first job's host discovery"
    );
}

/// Waits until `count` workers of `job` are ready.
async fn wait_until_ready(env: &Env, job: &str, count: usize) {
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut changes = env
        .pods()
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    while ready_workers(env, job).await.len() != count {
        assert!(
            tokio::time::timeout_at(deadline, changes.next())
                .await
                .is_ok(),
            "timed out waiting until {count} workers of {job} are ready"
        );
    }
}

#[tokio::test]
async fn a_suspended_job_holds_no_group_and_a_resumed_one_gets_a_new_one() {
    let env = volcano_env(2, true).await;
    env.apply_job(&elastic_job("mnist", 2, 2, 2)).await;
    env.wait_job("mnist", "runs", in_phase(JobPhase::Running))
        .await;
    wait_group(&env, "mnist", "exists", |group| group.is_some()).await;
    let before = groups(&env).get("mnist").await.unwrap().metadata.uid;

    let suspend = |value: bool| serde_json::json!({"spec": {"suspend": value}});
    env.jobs()
        .patch(
            "mnist",
            &PatchParams::default(),
            &Patch::Merge(suspend(true)),
        )
        .await
        .unwrap();
    env.wait_job("mnist", "is suspended", in_phase(JobPhase::Suspended))
        .await;
    wait_group(&env, "mnist", "is deleted", |group| group.is_none()).await;

    env.jobs()
        .patch(
            "mnist",
            &PatchParams::default(),
            &Patch::Merge(suspend(false)),
        )
        .await
        .unwrap();
    env.wait_job("mnist", "runs again", in_phase(JobPhase::Running))
        .await;
    let after = groups(&env).get("mnist").await.unwrap().metadata.uid;
    assert_ne!(before, after, "a fresh group for the resumed run");
}

#[tokio::test]
async fn a_missing_scheduler_crd_is_reported_on_the_job_and_its_installation_picked_up() {
    let env = volcano_env(2, false).await;
    env.apply_job(&elastic_job("mnist", 2, 2, 2)).await;
    let job = env
        .wait_job("mnist", "reports the missing scheduler", |job| {
            job.status.as_ref().is_some_and(|status| {
                status.conditions.iter().any(|condition| {
                    condition.type_ == "Ready"
                        && condition.reason.as_deref() == Some("GangSchedulerMissing")
                })
            })
        })
        .await;
    let message = job
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|condition| condition.type_ == "Ready")
        .and_then(|condition| condition.message)
        .unwrap();
    assert!(
        message.contains("podgroups.scheduling.volcano.sh"),
        "{message}"
    );
    assert!(
        env.worker_names("mnist").await.is_empty(),
        "no pod is created"
    );

    pod_groups::install(&env.client, &GangScheduler::Volcano).await;
    env.wait_job(
        "mnist",
        "runs once the CRD is installed",
        in_phase(JobPhase::Running),
    )
    .await;
}

#[tokio::test]
async fn an_mpi_job_with_scheduler_plugins_gangs_its_workers_and_launcher() {
    let scheduler = GangScheduler::Coscheduling {
        scheduler_name: "scheduler-plugins-scheduler".into(),
    };
    let mut env = Env::start(sim_config(2, 1)).await;
    env.stop_operator().await;
    pod_groups::install(&env.client, &scheduler).await;
    env.start_operator_with(Settings {
        gang: Some(scheduler.clone()),
        ..Settings::default()
    });
    let example = workspace_root().join("examples/mpijob-gang.yaml");
    env.apply::<MPIJob>(&std::fs::read_to_string(example).unwrap())
        .await;
    for worker in ["gang-pi-worker-0", "gang-pi-worker-1"] {
        env.wait_pod(worker, "is ready", pod_ready).await;
    }
    let group = groups_of(&env, &scheduler).get("gang-pi").await.unwrap();
    assert_eq!(
        group.data["spec"],
        serde_json::json!({
            "minMember": 3,
            "minResources": {"nvidia.com/gpu": "2"},
            "scheduleTimeoutSeconds": 120,
        }),
        "the launcher, created with the workers, counts from the start"
    );
    let worker = env.pods().get("gang-pi-worker-0").await.unwrap();
    assert_eq!(
        worker.metadata.labels.unwrap()["scheduling.x-k8s.io/pod-group"],
        "gang-pi"
    );
    assert_eq!(
        worker.spec.unwrap().scheduler_name.as_deref(),
        Some("scheduler-plugins-scheduler")
    );
}
