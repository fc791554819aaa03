//! Elastic behaviour against the simulated cluster: waiting for capacity, draining workers
//! before they are deleted, and keeping replacements off failing nodes. ScaleIn and ScaleOut
//! requests are in `scaling.rs`.

use std::time::Duration;

use eto_api::common::ConditionStatus;
use eto_api::job_status::JobPhase;
use eto_sim::NodeSpec;
use eto_tests::env::{Env, WAIT, in_phase, job_yaml, pod_ready, sim_config, spot_nodes};
use eto_tests::history::PodHistory;
use eto_tests::poll;
use kube::api::{Patch, PatchParams};

#[tokio::test]
async fn a_job_that_cannot_get_its_minimum_fails_at_max_wait_and_one_without_a_limit_waits_on() {
    // Two GPUs; each job needs three ready workers to start.
    let env = Env::start(sim_config(1, 2)).await;
    env.apply_job(&job_yaml(
        "impatient",
        3,
        3,
        "\n  elasticPolicy:\n    maxWaitSeconds: 2",
        "Never",
    ))
    .await;
    env.apply_job(&job_yaml("patient", 3, 3, "", "Never")).await;

    let failed = env
        .wait_job("impatient", "fails", in_phase(JobPhase::Failed))
        .await;
    let condition = failed
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Failed")
        .unwrap();
    assert_eq!(condition.reason.as_deref(), Some("WaitingResourceTimeout"));
    let message = condition.message.unwrap();
    assert!(message.contains("for 3 ready workers"), "{message}");
    assert!(
        message.contains("ready,") && message.contains("pending"),
        "{message}"
    );
    for index in 0..3 {
        env.wait_pod(&format!("impatient-worker-{index}"), "is deleted", |pod| {
            pod.is_none()
        })
        .await;
    }

    // It waited as long as the first one and keeps waiting.
    let patient = env.jobs().get("patient").await.unwrap().status.unwrap();
    assert_eq!(patient.phase, Some(JobPhase::Created));
    assert!(
        env.event_reasons("patient")
            .await
            .iter()
            .all(|r| r != "WaitingResourceTimeout")
    );
}

/// The node worker `pod` of the default namespace was scheduled to, once it is ready.
async fn node_of_ready(env: &Env, pod: &str) -> String {
    let pod = env.wait_pod(pod, "is ready", pod_ready).await.unwrap();
    pod.spec.unwrap().node_name.unwrap()
}

#[tokio::test]
async fn a_replacement_avoids_the_node_its_predecessor_failed_on_while_another_fits() {
    // Two nodes of two GPUs: bin packing puts both workers on gpu-node-0.
    let env = Env::start(sim_config(2, 2)).await;
    env.apply_job(&job_yaml("cooled", 2, 1, "", "OnFailure"))
        .await;
    env.wait_job("cooled", "runs", in_phase(JobPhase::Running))
        .await;
    assert_eq!(node_of_ready(&env, "cooled-worker-0").await, "gpu-node-0");
    assert_eq!(node_of_ready(&env, "cooled-worker-1").await, "gpu-node-0");

    env.cluster
        .fail_pod("default", "cooled-worker-0", 1, "Error")
        .unwrap();
    // gpu-node-0 has a free GPU again, and bin packing alone would choose it.
    assert_eq!(node_of_ready(&env, "cooled-worker-2").await, "gpu-node-1");
    let status = env.jobs().get("cooled").await.unwrap().status.unwrap();
    let cooling: Vec<&str> = status
        .nodes_in_cooldown
        .iter()
        .map(|n| n.node.as_str())
        .collect();
    assert_eq!(cooling, ["gpu-node-0"]);
}

#[tokio::test]
async fn a_replacement_still_runs_on_a_node_in_cooldown_when_no_other_fits() {
    let env = Env::start(sim_config(1, 2)).await;
    env.apply_job(&job_yaml("cornered", 2, 1, "", "OnFailure"))
        .await;
    env.wait_job("cornered", "runs", in_phase(JobPhase::Running))
        .await;
    env.cluster
        .fail_pod("default", "cornered-worker-0", 1, "Error")
        .unwrap();
    assert_eq!(node_of_ready(&env, "cornered-worker-2").await, "gpu-node-0");
}

/// Whether the job `name` was ever refused a pod or stalled: its events say so.
async fn never_stalled(env: &Env, name: &str) {
    let reasons = env.event_reasons(name).await;
    assert!(
        !reasons.iter().any(|r| r == "PodRejected"),
        "no pod of {name} was refused: {reasons:?}"
    );
    let status = env.jobs().get(name).await.unwrap().status.unwrap();
    let stalled = status.conditions.iter().find(|c| c.type_ == "Stalled");
    assert!(
        stalled.is_none_or(|c| c.status == ConditionStatus::False),
        "{stalled:?}"
    );
}

#[tokio::test]
async fn replacements_after_failures_on_two_then_three_nodes_are_created_and_placed_off_them() {
    // Four nodes of two GPUs: bin packing puts both workers on gpu-node-0, and each
    // replacement on the first node (by name) outside the cooldowns.
    let env = Env::start(sim_config(4, 2)).await;
    env.apply_job(&job_yaml("failing", 2, 1, "", "OnFailure"))
        .await;
    env.wait_job("failing", "runs", in_phase(JobPhase::Running))
        .await;
    assert_eq!(node_of_ready(&env, "failing-worker-0").await, "gpu-node-0");
    let mut cooling = vec!["gpu-node-0"];
    // (the worker that fails, its replacement, where the replacement runs, the back-off
    // before it: each replacement fails in turn, so they come later and later)
    let failures = [
        ("failing-worker-0", "failing-worker-2", "gpu-node-1", 0),
        ("failing-worker-2", "failing-worker-3", "gpu-node-2", 10),
        ("failing-worker-3", "failing-worker-4", "gpu-node-3", 20),
    ];
    for (failing, replacement, expected_node, back_off) in failures {
        env.cluster
            .fail_pod("default", failing, 1, "Error")
            .unwrap();
        let failed_at = std::time::Instant::now();
        let node = poll::until(
            &format!("{replacement} runs"),
            WAIT + Duration::from_secs(back_off),
            async || {
                let pod = env.pods().get_opt(replacement).await.ok()??;
                pod_ready(Some(&pod)).then(|| pod.spec?.node_name)?
            },
        )
        .await;
        assert_eq!(node, expected_node, "{replacement} avoids {cooling:?}");
        let waited = failed_at.elapsed();
        assert!(
            waited >= Duration::from_secs(back_off).saturating_sub(Duration::from_secs(1)),
            "{replacement} came {waited:?} after the failure, before its back-off of {back_off}s"
        );
        cooling.push(expected_node);
    }
    let status = env.jobs().get("failing").await.unwrap().status.unwrap();
    let nodes: Vec<&str> = status
        .nodes_in_cooldown
        .iter()
        .map(|n| n.node.as_str())
        .collect();
    assert_eq!(nodes, ["gpu-node-0", "gpu-node-1", "gpu-node-2"]);
    never_stalled(&env, "failing").await;
}

#[tokio::test]
async fn a_spot_storm_after_failures_on_two_nodes_resumes_with_workers_created_at_once() {
    let env = Env::start(spot_nodes()).await;
    env.apply_job(&job_yaml(
        "stormy",
        4,
        3,
        "\n  elasticPolicy:\n    belowMinSeconds: 1\n    checkpointGraceSeconds: 1",
        "OnFailure",
    ))
    .await;
    env.wait_job("stormy", "runs", in_phase(JobPhase::Running))
        .await;
    // One error exit on spot-a, then one on spot-b: both nodes cool down, and every later
    // worker is created avoiding two nodes.
    for (failing, replacement) in [
        ("stormy-worker-0", "stormy-worker-4"),
        ("stormy-worker-2", "stormy-worker-5"),
    ] {
        let node = node_of_ready(&env, failing).await;
        env.cluster
            .fail_pod("default", failing, 1, "Error")
            .unwrap();
        let placed = node_of_ready(&env, replacement).await;
        assert_ne!(placed, node, "{replacement} avoids {node}");
    }
    let status = env.jobs().get("stormy").await.unwrap().status.unwrap();
    assert_eq!(
        status.nodes_in_cooldown.len(),
        2,
        "{:?}",
        status.nodes_in_cooldown
    );

    // The storm: every spot node goes at once, its pods killed with it.
    for node in ["spot-a", "spot-b", "spot-c"] {
        env.cluster.reclaim_node(node, Duration::ZERO).unwrap();
    }
    env.wait_job("stormy", "is suspended", in_phase(JobPhase::Suspended))
        .await;
    // The resumed run asks for its workers at once: pending pods are what an autoscaler
    // adds nodes for.
    env.wait_job("stormy", "has created its new run's workers", |job| {
        job.status
            .as_ref()
            .is_some_and(|s| s.run == Some(1) && s.workers.as_ref().is_some_and(|w| w.pending == 4))
    })
    .await;
    let status = env.jobs().get("stormy").await.unwrap().status.unwrap();
    for worker in &status.target_workers {
        env.wait_pod(worker, "exists", |pod| pod.is_some()).await;
    }
    env.cluster
        .add_node(&NodeSpec::gpu("autoscaled", 4))
        .unwrap();
    let job = env
        .wait_job("stormy", "runs again", in_phase(JobPhase::Running))
        .await;
    assert_eq!(job.status.unwrap().restart_count, 0);
    never_stalled(&env, "stormy").await;
}

#[tokio::test]
async fn kubectl_scale_takes_a_worker_out_of_discovery_before_deleting_it() {
    let env = Env::start(sim_config(2, 8)).await;
    env.apply_job(&job_yaml(
        "shrinking",
        3,
        1,
        "\n  elasticPolicy:\n    drainSeconds: 1",
        "Never",
    ))
    .await;
    env.wait_job("shrinking", "runs", in_phase(JobPhase::Running))
        .await;
    env.wait_pod("shrinking-launcher", "lists 3 workers", |pod| {
        pod.and_then(|p| {
            p.metadata
                .annotations
                .as_ref()?
                .get("eto.dev/hostfile")
                .cloned()
        })
        .is_some_and(|h| h.lines().count() == 3)
    })
    .await;
    let history = PodHistory::start(&env).await;
    env.jobs()
        .patch_scale(
            "shrinking",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"replicas": 2}})),
        )
        .await
        .unwrap();
    let draining = env
        .wait_job("shrinking", "drains a worker", |job| {
            job.status
                .as_ref()
                .is_some_and(|s| !s.draining_workers.is_empty())
        })
        .await;
    assert_eq!(
        draining.status.unwrap().draining_workers[0].pod,
        "shrinking-worker-2"
    );
    env.wait_pod("shrinking-worker-2", "is deleted", |pod| pod.is_none())
        .await;
    let (left, deleted) = history.left_discovery_then_deleted("shrinking", "shrinking-worker-2");
    assert!(
        left.0 < deleted.0,
        "out of discovery at {left:?}, deleted at {deleted:?}"
    );
    assert!(
        deleted.1 - left.1 >= Duration::from_millis(900),
        "drained for elasticPolicy.drainSeconds before being deleted"
    );
    let job = env
        .wait_job("shrinking", "has settled", |job| {
            job.status
                .as_ref()
                .is_some_and(|s| s.draining_workers.is_empty())
        })
        .await;
    let workers = job.status.unwrap().workers.unwrap();
    assert_eq!(
        (workers.ready, workers.desired, workers.spec_replicas),
        (2, 2, Some(2))
    );
}

#[tokio::test]
async fn a_worker_the_pod_garbage_collector_marks_and_deletes_at_once_is_replaced() {
    // A node that vanishes: the pod garbage collector marks its pods and deletes them in the
    // same moment, so eto's cache may hold the pod only in the state it was deleted in.
    let env = Env::start(sim_config(2, 2)).await;
    env.apply_job(&job_yaml("vanished", 2, 1, "", "OnFailure"))
        .await;
    env.wait_job("vanished", "runs", in_phase(JobPhase::Running))
        .await;

    eto_tests::nodes::delete_as_its_node_went(&env.pods(), "vanished-worker-0").await;
    env.wait_pod("vanished-worker-0", "is gone", |pod| pod.is_none())
        .await;
    env.wait_pod("vanished-worker-2", "is created in its place", |pod| {
        pod.is_some()
    })
    .await;
    let lost = poll::until("eto says why it lost the worker", WAIT, async || {
        let notes = env.event_notes("vanished", "WorkerLost").await;
        (!notes.is_empty()).then_some(notes)
    })
    .await;
    assert!(
        lost.iter()
            .any(|note| note.contains("vanished-worker-0 was disrupted")),
        "{lost:?}"
    );
    let job = env
        .wait_job("vanished", "runs with the replacement", |job| {
            job.status.as_ref().is_some_and(|status| {
                status.target_workers == ["vanished-worker-1", "vanished-worker-2"]
            })
        })
        .await;
    assert_eq!(
        job.status.unwrap().phase,
        Some(JobPhase::Running),
        "no suspend"
    );
}

/// A node that stops reporting, kept in the API (its machine dead or cut off), leaves its
/// worker's pod `Running` but not ready until the taint manager deletes it. eto's pods
/// tolerate the node's `unreachable` taint for 30 s rather than Kubernetes's 300 s: the
/// worker is then replaced on another node and blacklisted, while its pod, which no kubelet
/// will ever end, hangs in `Terminating`.
#[tokio::test]
async fn a_worker_on_a_node_that_stopped_reporting_is_replaced_once_its_toleration_runs_out() {
    let env = Env::start(sim_config(4, 1)).await;
    env.apply_job(&job_yaml("cutoff", 3, 2, "", "OnFailure"))
        .await;
    env.wait_job("cutoff", "runs", in_phase(JobPhase::Running))
        .await;
    // A worker away from the launcher, which runs beside worker 0.
    let launcher = node_of_ready(&env, "cutoff-launcher").await;
    let node = node_of_ready(&env, "cutoff-worker-1").await;
    assert_ne!(node, launcher);
    let pod = env.pods().get("cutoff-worker-1").await.unwrap();
    let tolerations = serde_json::to_value(pod.spec.unwrap().tolerations).unwrap();
    assert!(
        tolerations
            .as_array()
            .unwrap()
            .contains(&serde_json::json!({
            "key": "node.kubernetes.io/unreachable", "operator": "Exists",
            "effect": "NoExecute", "tolerationSeconds": 30})),
        "{tolerations}"
    );
    env.cluster.stop_node(&node).unwrap();
    let stopped = std::time::Instant::now();
    let entry = poll::until(
        "cutoff-worker-1 blacklisted",
        Duration::from_secs(30) + WAIT,
        async || {
            let job = env.jobs().get("cutoff").await.ok()?;
            job.status?
                .blacklist
                .into_iter()
                .find(|entry| entry.pod == "cutoff-worker-1")
        },
    )
    .await;
    println!(
        "cutoff-worker-1 blacklisted {:?} after its node stopped: {entry:?}",
        stopped.elapsed()
    );
    assert!(
        stopped.elapsed() >= Duration::from_secs(25),
        "not before the taint manager deleted it"
    );
    assert_eq!(entry.reason, "Disrupted");
    let placed = node_of_ready(&env, "cutoff-worker-3").await;
    assert_ne!(placed, node, "the replacement runs elsewhere");
    let old = env.pods().get("cutoff-worker-1").await.unwrap();
    assert!(
        old.metadata.deletion_timestamp.is_some(),
        "its pod hangs in Terminating on the stopped node"
    );
    env.wait_job("cutoff", "runs with three", |job| {
        job.status.as_ref().is_some_and(|status| {
            status.phase == Some(JobPhase::Running)
                && status.workers.as_ref().is_some_and(|w| w.ready == 3)
        })
    })
    .await;
}
