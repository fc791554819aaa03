//! Suspending and resuming jobs against the simulated cluster: below the minimum after a spot
//! reclaim, by `spec.suspend`, by the job supervisor's annotation, and from creation.

use std::time::Duration;

use eto_api::common::ConditionStatus;
use eto_api::job_status::{JobPhase, Notice, NoticeKind};
use eto_sim::{NodeSpec, SimConfig};
use eto_tests::env::{Env, JobYaml, WAIT, in_phase, pod_ready, sim_config};
use eto_tests::poll;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use kube::api::Api;

/// A job of `replicas` one-GPU workers, at least `min`, with `policy` under `elasticPolicy`.
fn job(name: &str, replicas: u32, min: u32, policy: &str, worker_policy: &str) -> String {
    JobYaml {
        name,
        replicas,
        min,
        max: None,
        extra_spec: &format!("\n  elasticPolicy:\n{policy}"),
        worker_policy,
    }
    .render()
}

/// The notice pod `name` shows in `/etc/edl/notice`, if any.
fn notice_of(pod: &Pod) -> Option<Notice> {
    let json = pod.metadata.annotations.as_ref()?.get("eto.dev/notice")?;
    Some(serde_json::from_str(json).expect("a notice is JSON"))
}

async fn wait_notice(env: &Env, pod: &str, kind: NoticeKind) -> Notice {
    let shown = env
        .wait_pod(pod, &format!("shows a {kind:?} notice"), |pod| {
            pod.and_then(notice_of).is_some_and(|n| n.kind == kind)
        })
        .await;
    notice_of(&shown.unwrap()).unwrap()
}

/// Whether the pod reads the annotation `eto.dev/notice` as the file `notice` of the volume
/// mounted at `/etc/edl`.
fn shows_notice_file(pod: &Pod) -> bool {
    let spec = pod.spec.as_ref().unwrap();
    let mounted: Vec<&str> = spec.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .filter(|m| m.mount_path == "/etc/edl")
        .map(|m| m.name.as_str())
        .collect();
    let volumes = spec
        .volumes
        .iter()
        .flatten()
        .filter(|v| mounted.contains(&v.name.as_str()));
    let value = serde_json::to_value(volumes.collect::<Vec<_>>())
        .unwrap()
        .to_string();
    value.contains(r#""path":"notice""#) && value.contains("metadata.annotations['eto.dev/notice']")
}

/// Merges `patch` into job `name`.
fn env_value(pod: &Pod, name: &str) -> Option<String> {
    pod.spec.as_ref().unwrap().containers[0]
        .env
        .iter()
        .flatten()
        .find(|var| var.name == name)
        .and_then(|var| var.value.clone())
}

/// A CPU node for launchers and two spot nodes of two GPUs.
fn on_demand_and_two_spot_nodes() -> SimConfig {
    SimConfig {
        nodes: vec![
            NodeSpec::gpu("on-demand", 0),
            NodeSpec::gpu("spot-a", 2),
            NodeSpec::gpu("spot-b", 2),
        ],
        ..sim_config(0, 0)
    }
}

#[tokio::test]
async fn a_reclaim_storm_below_the_minimum_suspends_the_job_and_new_nodes_resume_it() {
    // Once the workers fill the spot nodes, every node has as many GPUs free for the launcher
    // (none, and it needs none); ties go by name, so it lands on the on-demand node.
    let env = Env::start(on_demand_and_two_spot_nodes()).await;
    env.apply_job(&job(
        "storm",
        4,
        3,
        "    belowMinSeconds: 1\n    checkpointGraceSeconds: 3",
        "Always",
    ))
    .await;
    env.wait_job("storm", "runs with four workers", |job| {
        job.status.as_ref().is_some_and(|s| {
            s.phase == Some(JobPhase::Running) && s.workers.as_ref().is_some_and(|w| w.ready == 4)
        })
    })
    .await;
    let on = |node: &str| {
        let env = &env;
        let node = node.to_string();
        async move {
            let pods = env.pods().list(&Default::default()).await.unwrap().items;
            pods.into_iter()
                .filter(|p| p.spec.as_ref().unwrap().node_name.as_deref() == Some(node.as_str()))
                .map(|p| p.metadata.name.unwrap())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(on("on-demand").await, ["storm-launcher"]);
    let doomed = on("spot-b").await;
    let healthy = on("spot-a").await;
    assert_eq!((doomed.len(), healthy.len()), (2, 2));

    // Half the workers go: two of the three needed are left.
    env.cluster
        .reclaim_node("spot-b", Duration::from_secs(60))
        .unwrap();
    let notice = wait_notice(&env, "storm-launcher", NoticeKind::Suspend).await;
    assert_eq!(notice.reason, "BelowMinWorkers");
    assert!(notice.deadline.is_some());
    for worker in &healthy {
        assert_eq!(wait_notice(&env, worker, NoticeKind::Suspend).await, notice);
    }
    // The reclaimed workers hear that the whole job stops too: Horovod's rank 0 may be one of
    // them, and it is the one that saves.
    for worker in &doomed {
        assert_eq!(wait_notice(&env, worker, NoticeKind::Suspend).await, notice);
    }
    let launcher = env.pods().get("storm-launcher").await.unwrap();
    assert!(shows_notice_file(&launcher));
    assert!(shows_notice_file(
        &env.pods().get(&healthy[0]).await.unwrap()
    ));

    let job = env
        .wait_job("storm", "is suspended", in_phase(JobPhase::Suspended))
        .await;
    let suspended = job
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Suspended")
        .unwrap();
    assert_eq!(
        (suspended.status, suspended.reason.as_deref()),
        (ConditionStatus::True, Some("BelowMinWorkers"))
    );
    env.wait_pod("storm-launcher", "is deleted", |pod| pod.is_none())
        .await;
    assert!(
        env.event_reasons("storm")
            .await
            .contains(&"TrainingJobSuspended".to_string())
    );

    // Capacity returns: the new run's workers are scheduled and a resume launcher starts.
    env.cluster
        .add_node(&NodeSpec::gpu("autoscaled", 2))
        .unwrap();
    let job = env
        .wait_job("storm", "runs again", in_phase(JobPhase::Running))
        .await;
    let status = job.status.unwrap();
    assert_eq!(status.restart_count, 0, "a resume is no restart");
    assert_eq!(status.run, Some(1));
    let launcher = env
        .wait_pod("storm-launcher", "runs", pod_ready)
        .await
        .unwrap();
    assert_eq!(env_value(&launcher, "ETO_RESUME").as_deref(), Some("true"));
    assert_eq!(
        notice_of(&launcher).map(|n| n.kind),
        Some(NoticeKind::Resume)
    );
    let workers = env.worker_names("storm").await;
    let new_run: Vec<&String> = workers
        .iter()
        .filter(|w| !doomed.contains(w) && !healthy.contains(w))
        .collect();
    assert_eq!(
        new_run.len(),
        4,
        "four workers under new names: {workers:?}"
    );
    assert!(
        env.event_reasons("storm")
            .await
            .contains(&"TrainingJobResumed".to_string())
    );
    let metrics = &env.operator.as_ref().unwrap().metrics;
    let below_min = eto_controller::metrics::ReasonLabels {
        kind: "TrainingJob".into(),
        reason: "BelowMinWorkers".into(),
    };
    assert_eq!(
        (
            metrics.suspends.get_or_create(&below_min).get(),
            metrics.resumes.get_or_create(&below_min).get()
        ),
        (1, 1),
        "one suspend below the minimum, and its resume"
    );
}

#[tokio::test]
async fn a_single_worker_failing_and_being_replaced_does_not_suspend_the_job() {
    let env = Env::start(sim_config(2, 8)).await;
    env.apply_job(&job("steady", 2, 2, "    belowMinSeconds: 2", "OnFailure"))
        .await;
    env.wait_job("steady", "runs", in_phase(JobPhase::Running))
        .await;
    env.cluster
        .fail_pod("default", "steady-worker-0", 1, "Error")
        .unwrap();
    env.wait_pod("steady-worker-2", "is ready", pod_ready).await;
    let job = env
        .wait_job("steady", "has two ready workers again", |job| {
            job.status
                .as_ref()
                .and_then(|s| s.workers.as_ref())
                .is_some_and(|w| w.ready == 2)
        })
        .await;
    let status = job.status.unwrap();
    assert_eq!(status.notice, None);
    assert_eq!(status.phase, Some(JobPhase::Running));
    assert!(
        !env.event_reasons("steady")
            .await
            .contains(&"CheckpointNotice".to_string())
    );
}

#[tokio::test]
async fn spec_suspend_suspends_after_the_notice_and_clearing_it_resumes() {
    let env = Env::start(sim_config(2, 8)).await;
    env.apply_job(&job(
        "paused",
        2,
        1,
        "    checkpointGraceSeconds: 1",
        "Never",
    ))
    .await;
    env.wait_job("paused", "runs", in_phase(JobPhase::Running))
        .await;
    env.patch_job("paused", serde_json::json!({"spec": {"suspend": true}}))
        .await;
    let notice = wait_notice(&env, "paused-worker-0", NoticeKind::Suspend).await;
    assert_eq!(notice.reason, "Suspended");
    env.wait_job("paused", "is suspended", in_phase(JobPhase::Suspended))
        .await;
    for pod in ["paused-launcher", "paused-worker-0", "paused-worker-1"] {
        env.wait_pod(pod, "is deleted", |pod| pod.is_none()).await;
    }
    assert!(
        env.worker_names("paused").await.is_empty(),
        "nothing is created while suspended"
    );

    env.patch_job("paused", serde_json::json!({"spec": {"suspend": false}}))
        .await;
    env.wait_job("paused", "runs again", in_phase(JobPhase::Running))
        .await;
    let launcher = env
        .wait_pod("paused-launcher", "runs", pod_ready)
        .await
        .unwrap();
    assert_eq!(env_value(&launcher, "ETO_RESUME").as_deref(), Some("true"));
    assert_eq!(
        env.worker_names("paused").await,
        ["paused-worker-2", "paused-worker-3"]
    );
}

#[tokio::test]
async fn a_job_created_suspended_creates_nothing_until_unsuspended() {
    let env = Env::start(sim_config(2, 8)).await;
    env.apply_job(&job(
        "queued",
        2,
        1,
        "    drainSeconds: 1\n  suspend: true",
        "Never",
    ))
    .await;
    env.wait_job("queued", "is suspended", in_phase(JobPhase::Suspended))
        .await;
    assert!(
        env.pods()
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let services: Api<Service> = Api::default_namespaced(env.client.clone());
    assert!(services.get_opt("queued-workers").await.unwrap().is_none());
    let config_maps: Api<ConfigMap> = Api::default_namespaced(env.client.clone());
    assert!(
        config_maps
            .get_opt("queued-config")
            .await
            .unwrap()
            .is_none()
    );

    env.patch_job("queued", serde_json::json!({"spec": {"suspend": false}}))
        .await;
    env.wait_job("queued", "runs", in_phase(JobPhase::Running))
        .await;
}

#[tokio::test]
async fn the_job_supervisors_annotation_suspends_and_resumes_the_job() {
    let env = Env::start(sim_config(2, 8)).await;
    env.apply_job(&job(
        "supervised",
        2,
        1,
        "    checkpointGraceSeconds: 1",
        "Never",
    ))
    .await;
    env.wait_job("supervised", "runs", in_phase(JobPhase::Running))
        .await;
    env.patch_job("supervised", serde_json::json!({"metadata": {"annotations": {"job-supervisor.kube-ai.io/job-suspended": "true"}}})).await;
    env.wait_job("supervised", "is suspended", in_phase(JobPhase::Suspended))
        .await;
    env.wait_pod("supervised-launcher", "is deleted", |pod| pod.is_none())
        .await;
    env.patch_job("supervised", serde_json::json!({"metadata": {"annotations": {"job-supervisor.kube-ai.io/job-suspended": "false"}}})).await;
    env.wait_job("supervised", "runs again", in_phase(JobPhase::Running))
        .await;
}

/// Applies job `name` with four workers, replaced on failure, of which it needs three, and
/// waits until it runs with all four ready: two losses take it below its minimum.
async fn run_four_needing_three(env: &Env, name: &str) {
    env.apply_job(
        &JobYaml {
            name,
            replicas: 4,
            min: 3,
            max: None,
            extra_spec: "",
            worker_policy: "OnFailure",
        }
        .render(),
    )
    .await;
    env.wait_job(name, "runs with four workers", |job| {
        job.status.as_ref().is_some_and(|s| {
            s.phase == Some(JobPhase::Running) && s.workers.as_ref().is_some_and(|w| w.ready == 4)
        })
    })
    .await;
}

#[tokio::test]
async fn a_reclaim_that_leaves_the_group_below_its_minimum_suspends_at_once_and_resumes() {
    // The defaults: belowMinSeconds 30 and checkpointGraceSeconds 300, longer than this test
    // waits for anything: only a suspend at once is in time.
    let env = Env::start(on_demand_and_two_spot_nodes()).await;
    run_four_needing_three(&env, "quitter").await;

    // The node goes with two workers (Failed, exit 137, DisruptionTarget): Horovod holds the
    // two left until a third comes, and nothing of the run can save. The job is suspended
    // within the wait, long before the grace period (a notice may go out a reconcile before,
    // while the node's taint is seen ahead of its pods' end).
    env.cluster.reclaim_node("spot-b", Duration::ZERO).unwrap();
    let job = env
        .wait_job("quitter", "is suspended", in_phase(JobPhase::Suspended))
        .await;
    let status = job.status.unwrap();
    assert_eq!(status.restart_count, 0);
    assert!(status.conditions.iter().all(|c| c.type_ != "Failed"));
    // The two workers that went with the node are named, whichever way it suspended.
    let lost: Vec<&str> = status
        .blacklist
        .iter()
        .filter(|entry| entry.node.as_deref() == Some("spot-b"))
        .map(|entry| entry.pod.as_str())
        .collect();
    assert_eq!(lost.len(), 2, "{:?}", status.blacklist);
    for pod in lost {
        said_lost(&env, "quitter", pod).await;
    }

    env.cluster
        .add_node(&NodeSpec::gpu("autoscaled", 2))
        .unwrap();
    let job = env
        .wait_job("quitter", "runs again", in_phase(JobPhase::Running))
        .await;
    let status = job.status.unwrap();
    assert_eq!(status.restart_count, 0, "a resume is no restart");
    assert_eq!(status.run, Some(1));
    let launcher = env
        .wait_pod("quitter-launcher", "runs", pod_ready)
        .await
        .unwrap();
    assert_eq!(env_value(&launcher, "ETO_RESUME").as_deref(), Some("true"));
}

/// Waits until a `WorkerLost` event of `job` names worker `pod`.
async fn said_lost(env: &Env, job: &str, pod: &str) {
    let named = format!("worker {pod} ");
    poll::until(
        &format!("a WorkerLost event names {pod}"),
        WAIT,
        async || {
            let notes = env.event_notes(job, "WorkerLost").await;
            notes
                .iter()
                .any(|note| note.starts_with(&named))
                .then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn workers_evicted_below_the_minimum_are_named_as_the_job_suspends_at_once() {
    let env = Env::start(sim_config(2, 4)).await;
    run_four_needing_three(&env, "pressed").await;
    // The first eviction is replaced; the second leaves two in Horovod's rendezvous, which
    // cannot save: the job suspends at once, with no notice and no reconcile of a suspending
    // run to record the loss that caused it.
    for worker in ["pressed-worker-1", "pressed-worker-2"] {
        env.cluster
            .evict_pod("default", worker, "The node was low on resource: memory.")
            .unwrap();
    }
    let job = env
        .wait_job("pressed", "is suspended", in_phase(JobPhase::Suspended))
        .await;
    let blacklisted: Vec<String> = job
        .status
        .unwrap()
        .blacklist
        .into_iter()
        .map(|entry| entry.pod)
        .collect();
    for worker in ["pressed-worker-1", "pressed-worker-2"] {
        assert!(
            blacklisted.iter().any(|pod| pod == worker),
            "{blacklisted:?}"
        );
        said_lost(&env, "pressed", worker).await;
    }
}

#[tokio::test]
async fn a_launcher_that_quits_before_any_notice_below_the_minimum_suspends_the_job() {
    // An ordinary worker failure starts the 30 s debounce; the launcher quits within it. The
    // worker is not replaced, so the job stays below its minimum until the launcher quits.
    let env = Env::start(sim_config(1, 4)).await;
    env.apply_job(&job(
        "early",
        4,
        4,
        "    checkpointGraceSeconds: 300",
        "Never",
    ))
    .await;
    env.wait_job("early", "runs", in_phase(JobPhase::Running))
        .await;
    env.cluster
        .fail_pod("default", "early-worker-0", 1, "Error")
        .unwrap();
    env.wait_job("early", "is below its minimum", |job| {
        job.status.as_ref().is_some_and(|s| {
            s.conditions.iter().any(|c| {
                c.type_ == "WorkersReady" && c.reason.as_deref() == Some("BelowMinWorkers")
            })
        })
    })
    .await;
    env.cluster
        .fail_pod("default", "early-launcher", 1, "Error")
        .unwrap();
    let job = env
        .wait_job("early", "is suspended", in_phase(JobPhase::Suspended))
        .await;
    let status = job.status.unwrap();
    assert_eq!(status.restart_count, 0);
    let suspended = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Suspended")
        .unwrap();
    assert!(
        suspended.message.as_deref().is_some_and(|m| m
            .contains("the launcher failed (exit code 1, Error) while only 3 of the 4 workers")),
        "{suspended:?}"
    );
}
