//! Against a real cluster (the one KUBECONFIG names): `cargo test -p eto-tests --test integration
//! cluster:: -- --ignored`. Each test installs the CRDs, runs the operator in-process for a scratch
//! namespace, and checks what only a real kubelet can show: the launcher's
//! `/etc/edl/discover_hosts.sh` follows the workers, and a notice reaches the workers'
//! `/etc/edl/notice` (these need pulls of `busybox`, or `ETO_TEST_POD_PATCH`, below); and what
//! only a real API server checks: that every pod eto writes is valid, here the replacements of
//! workers that failed on several nodes (this one needs nodes with `nvidia.com/gpu` and pods
//! that run on them, which a fake kubelet's nodes give); and that the `kubeai` SDK, run by the
//! test on this machine, hears eto's stop through a real API server's pod proxy; and that a
//! worker on a node tainted for a spot reclaim gets its Reclaim notice (eto's Node watch); and
//! that kube-controller-manager's HPA controller scales a PyTorchJob through the autoscaler eto
//! makes from `elasticPolicy.metrics`, while a metric kube-apiserver would refuse is reported.
//!
//! `ETO_TEST_POD_PATCH`, when set, is a JSON merge patch applied to the pod templates of the
//! real-kubelet tests, and `ETO_TEST_IMAGE` replaces their image: on the loopback harness, for
//! example, `{"nodeSelector": {"harness/real-kubelet": "true"}, "hostNetwork": true,
//! "tolerations": [{"key": "harness/real-kubelet", "operator": "Exists"}]}` and
//! `harness.local/busybox:v1` (pulled `Never`).

use std::time::{Duration, Instant};

use eto_api::TrainingJob;
use eto_tests::autoscaled::autoscaled_pytorch_job;
use eto_tests::nodes::{cordon_every_node, set_taint, uncordon};
use eto_tests::poll::until;
use eto_tests::scratch::{Scratch, phase_of};
use futures::FutureExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, LogParams, Patch, PatchParams};

const JOB: &str = r#"
apiVersion: kai.alibabacloud.com/v1alpha1
kind: TrainingJob
metadata:
  name: discovery
spec:
  etReplicaSpecs:
    launcher:
      template:
        spec:
          containers:
          - name: launcher
            image: busybox:1.36
            command: ["sh", "-c", "while true; do echo ==; /etc/edl/discover_hosts.sh; sleep 0.2; done"]
    worker:
      replicas: 2
      minReplicas: 1
      restartPolicy: Always
      template:
        spec:
          containers:
          - name: worker
            image: busybox:1.36
            command: ["sleep", "3600"]
"#;

/// The hosts of the last complete block the launcher printed.
async fn discovered(pods: &Api<Pod>) -> Option<Vec<String>> {
    let logs = pods
        .logs(
            "discovery-launcher",
            &LogParams {
                tail_lines: Some(50),
                ..LogParams::default()
            },
        )
        .await
        .ok()?;
    let blocks: Vec<&str> = logs.split("==\n").collect();
    let last_complete = blocks.get(blocks.len().checked_sub(2)?)?;
    Some(last_complete.lines().map(String::from).collect())
}

/// Applies the job `yaml` in `scratch` with its pods made to run on a real kubelet (see
/// [`for_this_cluster`]).
async fn apply_on_real_kubelet(scratch: &Scratch, yaml: &str) {
    scratch
        .apply_job(for_this_cluster(serde_saphyr::from_str(yaml).unwrap()))
        .await;
}

/// `job` with `ETO_TEST_POD_PATCH` merged into its pod templates' specs and `ETO_TEST_IMAGE`
/// as its containers' image (see the module documentation).
fn for_this_cluster(job: TrainingJob) -> TrainingJob {
    let patch: Option<serde_json::Value> = std::env::var("ETO_TEST_POD_PATCH")
        .ok()
        .map(|text| serde_json::from_str(&text).expect("ETO_TEST_POD_PATCH is JSON"));
    let image = std::env::var("ETO_TEST_IMAGE").ok();
    let mut value = serde_json::to_value(job).unwrap();
    for role in ["launcher", "worker"] {
        let spec = &mut value["spec"]["etReplicaSpecs"][role]["template"]["spec"];
        if let Some(patch) = &patch {
            json_patch::merge(spec, patch);
        }
        if let Some(image) = &image {
            for container in spec["containers"].as_array_mut().into_iter().flatten() {
                container["image"] = serde_json::json!(image);
                container["imagePullPolicy"] = serde_json::json!("Never");
            }
        }
    }
    serde_json::from_value(value).unwrap()
}

#[tokio::test]
#[ignore = "needs cluster (KUBECONFIG): installs eto's CRDs and runs pods in a scratch namespace"]
async fn the_launchers_discovery_script_follows_the_workers_on_a_real_kubelet() {
    let scratch = Scratch::start("discovery").await;
    apply_on_real_kubelet(&scratch, JOB).await;
    let pods = scratch.pods();
    let both = [
        "discovery-worker-0.discovery-workers:1".to_string(),
        "discovery-worker-1.discovery-workers:1".to_string(),
    ];
    until(
        "the launcher lists both workers",
        Duration::from_secs(300),
        async || discovered(&pods).await.filter(|hosts| hosts == &both),
    )
    .await;

    pods.delete("discovery-worker-0", &DeleteParams::default())
        .await
        .unwrap();
    let deleted = Instant::now();
    until(
        "the launcher drops the deleted worker",
        Duration::from_secs(60),
        async || {
            discovered(&pods)
                .await
                .filter(|hosts| !hosts.contains(&both[0]))
        },
    )
    .await;
    println!(
        "the launcher's discovery script dropped the worker {:?} after its deletion",
        deleted.elapsed()
    );
    scratch.end().await;
}

/// Workers that print their `/etc/edl/notice` five times a second.
const NOTICED: &str = r#"
apiVersion: kai.alibabacloud.com/v1alpha1
kind: TrainingJob
metadata:
  name: noticed
spec:
  elasticPolicy:
    checkpointGraceSeconds: 120
  etReplicaSpecs:
    launcher:
      template:
        spec:
          containers:
          - name: launcher
            image: busybox:1.36
            command: ["sleep", "3600"]
    worker:
      replicas: 1
      template:
        spec:
          containers:
          - name: worker
            image: busybox:1.36
            command: ["sh", "-c", "while true; do cat /etc/edl/notice; echo; sleep 0.2; done"]
"#;

#[tokio::test]
#[ignore = "needs cluster (KUBECONFIG): installs eto's CRDs and runs pods in a scratch namespace"]
async fn a_suspend_notice_reaches_the_workers_file_on_a_real_kubelet() {
    let scratch = Scratch::start("notice").await;
    apply_on_real_kubelet(&scratch, NOTICED).await;
    scratch
        .wait_running("noticed", Duration::from_secs(300))
        .await;
    scratch.suspend("noticed").await;
    let posted = Instant::now();
    let pods = scratch.pods();
    until(
        "the worker's /etc/edl/notice shows the suspend notice",
        Duration::from_secs(60),
        async || {
            let params = LogParams {
                tail_lines: Some(5),
                ..LogParams::default()
            };
            let logs = pods.logs("noticed-worker-0", &params).await.ok()?;
            logs.contains(r#""kind":"Suspend""#).then_some(())
        },
    )
    .await;
    println!(
        "the worker read the suspend notice {:?} after spec.suspend was set",
        posted.elapsed()
    );
    scratch.end().await;
}

/// The job of [`NOTICED`], named `kubeai`, whose worker opts in to the `kubeai` stop. On the
/// loopback harness its pods run on a fake kubelet's nodes, whose pod IPs (10.244.x.y) the API
/// server's pod proxy reaches on this machine, where the test runs the SDK; a real kubelet's
/// `hostNetwork` pods there have the IP 127.0.0.1, which kube-apiserver refuses to proxy to
/// ("address not allowed").
fn kubeai_job() -> TrainingJob {
    let mut job: TrainingJob = serde_saphyr::from_str(NOTICED).unwrap();
    job.metadata.name = Some("kubeai".into());
    job.spec.et_replica_specs.worker.template.metadata = Some(
        serde_json::from_value(serde_json::json!({"annotations": {
            "job-supervisor.kube-ai.io/managed-by-job-supervisor": "true"}}))
        .unwrap(),
    );
    job
}

#[tokio::test]
#[ignore = "needs cluster (KUBECONFIG) whose API server's pod proxy reaches port 9009 of this machine as the worker's (the loopback harness's fake kubelet nodes)"]
async fn the_kubeai_sdk_hears_the_stop_through_a_real_api_servers_pod_proxy() {
    let mut training = crate::kubeai::TrainingLoop::start().await;
    let scratch = Scratch::start("kubeai").await;
    scratch.apply_job(kubeai_job()).await;
    scratch
        .wait_running("kubeai", Duration::from_secs(300))
        .await;
    scratch.suspend("kubeai").await;
    let posted = Instant::now();
    training.stopped().await;
    println!(
        "the SDK's check_alive() turned false {:?} after spec.suspend was set",
        posted.elapsed()
    );
    let worker = scratch.pods().get("kubeai-worker-0").await.unwrap();
    assert!(
        worker.metadata.deletion_timestamp.is_none(),
        "the worker still runs in its grace period"
    );
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(scratch.client.clone(), &scratch.namespace);
    let note = until(
        "the stop is reported",
        Duration::from_secs(30),
        async || {
            events
                .list(&Default::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find(|event| event.reason.as_deref() == Some("KubeaiStop"))?
                .message
        },
    )
    .await;
    assert!(
        note.ends_with("with the Suspend notice to 1 pod: 1 acknowledged"),
        "{note}"
    );
    scratch.end().await;
}

/// Workers of one GPU each that fail when the test says so, on a fake kubelet's nodes.
const FAILING: &str = r#"
apiVersion: kai.alibabacloud.com/v1alpha1
kind: TrainingJob
metadata:
  name: failing
spec:
  etReplicaSpecs:
    launcher:
      template:
        spec:
          containers:
          - name: launcher
            image: busybox:1.36
            command: ["sleep", "3600"]
    worker:
      replicas: 2
      minReplicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: worker
            image: busybox:1.36
            command: ["sleep", "3600"]
            resources:
              limits:
                nvidia.com/gpu: "1"
"#;

/// Fails pod `name` as a kubelet reports an error exit: phase `Failed`, exit code 1.
async fn fail_worker(pods: &Api<Pod>, name: &str) {
    end_pod(pods, name, "worker", 1, false).await;
}

/// Ends pod `name`, whose container is `container`, with `exit_code`, as a kubelet reports it;
/// `with_node` adds `DisruptionTarget=True`, as when the pod's node went away with it.
async fn end_pod(pods: &Api<Pod>, name: &str, container: &str, exit_code: i32, with_node: bool) {
    let mut conditions =
        vec![serde_json::json!({"type": "Ready", "status": "False", "reason": "PodFailed"})];
    if with_node {
        conditions.push(
            serde_json::json!({"type": "DisruptionTarget", "status": "True",
            "reason": "DeletionByPodGC", "message": "PodGC: node no longer exists"}),
        );
    }
    let status = serde_json::json!({"status": {
        "phase": "Failed",
        "conditions": conditions,
        "containerStatuses": [{"name": container, "image": "busybox:1.36", "imageID": "", "ready": false,
            "restartCount": 0, "state": {"terminated": {"exitCode": exit_code, "reason": "Error"}}}]
    }});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
}

/// The node of pod `name` once it runs.
async fn running_on(pods: &Api<Pod>, name: &str) -> String {
    until(
        &format!("{name} runs"),
        Duration::from_secs(60),
        async || {
            let pod = pods.get(name).await.ok()?;
            let running = pod.status.as_ref()?.phase.as_deref() == Some("Running");
            running.then_some(pod.spec?.node_name?)
        },
    )
    .await
}

#[tokio::test]
#[ignore = "needs cluster (KUBECONFIG) with four or more nodes of nvidia.com/gpu and a kubelet running their pods (a fake one will do)"]
async fn workers_failing_on_two_then_three_nodes_are_replaced_off_those_nodes() {
    let scratch = Scratch::start("cooldown").await;
    scratch.apply(FAILING).await;
    let pods = scratch.pods();
    let mut failed_on = vec![running_on(&pods, "failing-worker-0").await];
    running_on(&pods, "failing-worker-1").await;
    fail_worker(&pods, "failing-worker-0").await;
    // Each replacement is created (kube-apiserver accepts its affinity) and placed off every
    // node a worker failed on; the second and third have two and three nodes to avoid.
    for (failing, replacement) in [
        (None, "failing-worker-2"),
        (Some("failing-worker-2"), "failing-worker-3"),
        (Some("failing-worker-3"), "failing-worker-4"),
    ] {
        if let Some(failing) = failing {
            failed_on.push(running_on(&pods, failing).await);
            fail_worker(&pods, failing).await;
        }
        let node = running_on(&pods, replacement).await;
        assert!(
            !failed_on.contains(&node),
            "{replacement} runs on {node}, which is in cooldown ({failed_on:?})"
        );
    }
    // The status recording the third node is written after the pod that avoids it.
    let jobs = scratch.jobs();
    let status = until(
        "three nodes are in cooldown",
        Duration::from_secs(10),
        async || {
            let status = jobs.get("failing").await.ok()?.status?;
            (status.nodes_in_cooldown.len() == 3).then_some(status)
        },
    )
    .await;
    let stalled = status.conditions.iter().find(|c| c.type_ == "Stalled");
    assert!(
        stalled.is_none_or(|c| c.status == eto_api::common::ConditionStatus::False),
        "{stalled:?}"
    );
    scratch.end().await;
}

/// Four workers of one GPU each, three needed, on a fake kubelet's nodes; eto's defaults for
/// the rest (a 30 s debounce and a 300 s grace period).
const QUITTING: &str = r#"
apiVersion: kai.alibabacloud.com/v1alpha1
kind: TrainingJob
metadata:
  name: quitter
spec:
  etReplicaSpecs:
    launcher:
      template:
        spec:
          containers:
          - name: launcher
            image: busybox:1.36
            command: ["sleep", "3600"]
    worker:
      replicas: 4
      minReplicas: 3
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: worker
            image: busybox:1.36
            command: ["sleep", "3600"]
            resources:
              limits:
                nvidia.com/gpu: "1"
"#;

#[tokio::test]
#[ignore = "needs cluster (KUBECONFIG) with nodes for four workers of nvidia.com/gpu and a kubelet running their pods (a fake one will do)"]
async fn a_launcher_that_quits_after_a_reclaim_below_the_minimum_suspends_and_resumes() {
    use eto_api::job_status::JobPhase;
    let scratch = Scratch::start("quitter").await;
    scratch.apply(QUITTING).await;
    let (pods, jobs) = (scratch.pods(), scratch.jobs());
    scratch
        .wait_running("quitter", Duration::from_secs(120))
        .await;
    // Two workers go with their node; the training code quits two seconds later. No node
    // takes a new pod meanwhile, as on a cluster out of capacity: on nodes with room, the
    // replacements would be ready at once and the job would never drop below its minimum.
    let cordoned = cordon_every_node(&scratch.client).await;
    let (pods_now, jobs_now) = (&pods, &jobs);
    let below_minimum = std::panic::AssertUnwindSafe(async {
        end_pod(pods_now, "quitter-worker-2", "worker", 137, true).await;
        end_pod(pods_now, "quitter-worker-3", "worker", 137, true).await;
        let lost = Instant::now();
        until(
            "the suspend notice is out",
            Duration::from_secs(10),
            async || {
                let job = jobs_now.get("quitter").await.ok()?;
                job.status?.notice.filter(|n| n.reason == "BelowMinWorkers")
            },
        )
        .await;
        println!(
            "the suspend notice was out {:?} after the loss",
            lost.elapsed()
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        end_pod(pods_now, "quitter-launcher", "launcher", 1, false).await;
        until(
            "the job is suspended",
            Duration::from_secs(30),
            async || {
                let job = jobs_now.get("quitter").await.ok()?;
                (phase_of(&job)? == JobPhase::Suspended).then_some(())
            },
        )
        .await;
    })
    .catch_unwind()
    .await;
    uncordon(&scratch.client, &cordoned).await;
    if let Err(failed) = below_minimum {
        std::panic::resume_unwind(failed);
    }
    let job = until("the job resumes", Duration::from_secs(120), async || {
        let job = jobs.get("quitter").await.ok()?;
        let status = job.status.as_ref()?;
        (status.phase? == JobPhase::Running && status.run == Some(1)).then_some(job)
    })
    .await;
    let status = job.status.unwrap();
    assert_eq!(status.restart_count, 0);
    assert!(status.conditions.iter().all(|c| c.type_ != "Failed"));
    scratch.end().await;
}

#[tokio::test]
#[ignore = "needs cluster (KUBECONFIG) with two or more nodes of nvidia.com/gpu and a kubelet running their pods (a fake one will do); taints one of them for a moment"]
async fn a_worker_on_a_node_tainted_for_a_spot_reclaim_is_told_at_once() {
    let scratch = Scratch::start("warned").await;
    let mut job = failing_named("warned");
    // A warning on the launcher's node suspends the whole job (see the launcher tests); this
    // test is about a worker's own notice, so the launcher keeps off the workers' nodes.
    let launcher = job.spec.et_replica_specs.launcher.template.spec.as_mut();
    launcher.expect("the launcher has a pod spec").affinity = Some(
        serde_json::from_value(serde_json::json!({"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {
                    "training-job-name": "warned",
                    "training-job-role": "worker"
                }},
                "topologyKey": "kubernetes.io/hostname"
            }]
        }}))
        .unwrap(),
    );
    scratch.apply_job(job).await;
    scratch
        .wait_running("warned", Duration::from_secs(120))
        .await;
    let pods = scratch.pods();
    let node = running_on(&pods, "warned-worker-0").await;
    set_taint(&scratch.client, &node, "karpenter.sh/disrupted", true).await;
    let tainted = Instant::now();
    let notice = until(
        "worker-0 shows its Reclaim notice",
        Duration::from_secs(30),
        async || {
            let pod = pods.get("warned-worker-0").await.ok()?;
            let json = pod.metadata.annotations?.get("eto.dev/notice")?.clone();
            let notice: eto_api::job_status::Notice = serde_json::from_str(&json).ok()?;
            (notice.reason == "NodeWarning").then_some(notice)
        },
    )
    .await;
    println!(
        "the worker's Reclaim notice was out {:?} after its node was tainted",
        tainted.elapsed()
    );
    assert!(notice.message.contains(&node), "{}", notice.message);
    // The API server adds no time to the taint: the warning starts when eto first saw it, and
    // the status keeps that start.
    let jobs = scratch.jobs();
    let listed = until(
        "the status lists the warned node",
        Duration::from_secs(30),
        async || {
            let status = jobs.get("warned").await.ok()?.status?;
            status.node_warnings.first().cloned()
        },
    )
    .await;
    assert_eq!(
        (listed.node.as_str(), listed.workers.as_slice()),
        (node.as_str(), ["warned-worker-0".to_string()].as_slice())
    );
    assert_eq!(
        listed.deadline.0.duration_since(listed.since.0),
        jiff::SignedDuration::from_secs(120)
    );
    set_taint(&scratch.client, &node, "karpenter.sh/disrupted", false).await;
    // A real kubelet starts the replacement at once, so worker-0 may be deleted in the same
    // second its notice is taken back: its pod may be gone by the time this looks.
    until(
        "the withdrawn warning takes the notice back",
        Duration::from_secs(30),
        async || {
            let pod = pods.get_opt("warned-worker-0").await.ok()?;
            pod.is_none_or(|pod| {
                !pod.metadata
                    .annotations
                    .unwrap_or_default()
                    .contains_key("eto.dev/notice")
            })
            .then_some(())
        },
    )
    .await;
    // The worker returns in place of a replacement not ready yet, or, the replacement having
    // joined, its pod is deleted.
    let outcome = until(
        "worker-0 returns or goes",
        Duration::from_secs(30),
        async || {
            let status = jobs.get("warned").await.ok()?.status?;
            let back = status
                .current_workers
                .iter()
                .any(|w| w == "warned-worker-0");
            let gone = pods
                .get_opt("warned-worker-0")
                .await
                .ok()?
                .is_none_or(|pod| pod.metadata.deletion_timestamp.is_some());
            (status.node_warnings.is_empty() && (back || gone)).then_some(back)
        },
    )
    .await;
    println!(
        "after the warning was withdrawn, worker-0 {}",
        if outcome { "returned" } else { "was deleted" }
    );
    scratch.end().await;
}

/// The job of [`FAILING`] under the name `name`.
fn failing_named(name: &str) -> TrainingJob {
    let mut job: TrainingJob = serde_saphyr::from_str(FAILING).unwrap();
    job.metadata.name = Some(name.into());
    job
}

/// Waits until the job `name` runs again in a new run after its launcher's loss, and checks
/// it was suspended for it and never failed nor restarted.
async fn resumed_after_launcher_loss(scratch: &Scratch, name: &str, lost: Instant) {
    use eto_api::job_status::JobPhase;
    let jobs = scratch.jobs();
    let job = until(
        "the job runs again in a new run",
        Duration::from_secs(120),
        async || {
            let job = jobs.get(name).await.ok()?;
            let status = job.status.as_ref()?;
            (status.phase? == JobPhase::Running && status.run == Some(1)).then_some(job)
        },
    )
    .await;
    println!(
        "{name}: running again {:?} after the launcher's loss",
        lost.elapsed()
    );
    let status = job.status.unwrap();
    assert_eq!(status.restart_count, 0);
    assert!(status.conditions.iter().all(|c| c.type_ != "Failed"));
    let suspended = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Suspended")
        .unwrap();
    assert_eq!(suspended.reason.as_deref(), Some("Resumed"));
    let launcher = scratch
        .pods()
        .get(&format!("{name}-launcher"))
        .await
        .unwrap();
    let resume = launcher.spec.unwrap().containers[0]
        .env
        .iter()
        .flatten()
        .find(|var| var.name == "ETO_RESUME")
        .and_then(|var| var.value.clone());
    assert_eq!(resume.as_deref(), Some("true"));
}

#[tokio::test]
#[ignore = "needs cluster (KUBECONFIG) with nodes for two workers of nvidia.com/gpu and a kubelet running their pods (a fake one will do)"]
async fn a_launcher_evicted_through_a_real_api_server_suspends_and_resumes_the_job() {
    let scratch = Scratch::start("evicted").await;
    scratch.apply_job(failing_named("evicted")).await;
    scratch
        .wait_running("evicted", Duration::from_secs(120))
        .await;
    // As `kubectl drain` evicts: kube-apiserver marks the pod DisruptionTarget, then deletes
    // it with its grace period.
    eto_tests::eviction::evict(
        &scratch.client,
        &scratch.namespace,
        "evicted-launcher",
        None,
    )
    .await;
    let evicted = Instant::now();
    resumed_after_launcher_loss(&scratch, "evicted", evicted).await;
    scratch.end().await;
}

#[tokio::test]
#[ignore = "needs cluster (KUBECONFIG) with nodes for two workers of nvidia.com/gpu and a kubelet running their pods (a fake one will do); taints one node for a moment"]
async fn a_warning_on_the_launchers_node_tells_every_pod_then_resumes_elsewhere() {
    let scratch = Scratch::start("warnedlauncher").await;
    scratch.apply_job(failing_named("wl")).await;
    scratch.wait_running("wl", Duration::from_secs(120)).await;
    let pods = scratch.pods();
    let node = running_on(&pods, "wl-launcher").await;
    set_taint(&scratch.client, &node, "karpenter.sh/disrupted", true).await;
    let tainted = Instant::now();
    let shown = async |pod: &str| {
        until(
            &format!("{pod} shows the Suspend notice"),
            Duration::from_secs(30),
            async || {
                let pod = pods.get(pod).await.ok()?;
                let json = pod.metadata.annotations?.get("eto.dev/notice")?.clone();
                let notice: eto_api::job_status::Notice = serde_json::from_str(&json).ok()?;
                (notice.reason == "LauncherDisrupted").then_some(notice)
            },
        )
        .await
    };
    let notice = shown("wl-launcher").await;
    println!(
        "wl: the launcher's Suspend notice was out {:?} after its node was tainted",
        tainted.elapsed()
    );
    assert!(notice.message.contains(&node), "{}", notice.message);
    for worker in ["wl-worker-0", "wl-worker-1"] {
        assert_eq!(shown(worker).await, notice);
    }
    // The training saved and exited.
    end_pod(&pods, "wl-launcher", "launcher", 1, false).await;
    resumed_after_launcher_loss(&scratch, "wl", tainted).await;
    let moved = running_on(&pods, "wl-launcher").await;
    set_taint(&scratch.client, &node, "karpenter.sh/disrupted", false).await;
    assert_ne!(moved, node, "the new launcher runs off the warned node");
    scratch.end().await;
}

const MPI_LAUNCHED: &str = r#"
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: mpil
spec:
  slotsPerWorker: 1
  runPolicy:
    backoffLimit: 0
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - name: launcher
            image: busybox:1.36
            command: ["sleep", "3600"]
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: worker
            image: busybox:1.36
            command: ["sleep", "3600"]
            resources:
              limits:
                nvidia.com/gpu: "1"
"#;

#[tokio::test]
#[ignore = "needs cluster (KUBECONFIG) with nodes for two workers of nvidia.com/gpu and a kubelet running their pods (a fake one will do)"]
async fn an_mpijobs_launcher_lost_with_its_node_fails_neither_its_job_nor_the_mpijob() {
    use eto_api::MPIJob;
    use k8s_openapi::api::batch::v1::Job;
    let scratch = Scratch::start("mpilauncher").await;
    let mpi_jobs: Api<MPIJob> = Api::namespaced(scratch.client.clone(), &scratch.namespace);
    let job: MPIJob = serde_saphyr::from_str(MPI_LAUNCHED).unwrap();
    mpi_jobs
        .patch(
            "mpil",
            &PatchParams::apply("eto-test").force(),
            &Patch::Apply(&job),
        )
        .await
        .unwrap();
    let condition = |job: &MPIJob, type_: &str| {
        job.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == type_ && c.status == eto_api::common::ConditionStatus::True)
        })
    };
    until("the MPIJob runs", Duration::from_secs(120), async || {
        let job = mpi_jobs.get("mpil").await.ok()?;
        condition(&job, "Running").then_some(())
    })
    .await;
    let launchers: Api<Job> = Api::namespaced(scratch.client.clone(), &scratch.namespace);
    let first = launchers.get("mpil-launcher").await.unwrap();
    assert!(
        first.spec.unwrap().pod_failure_policy.is_some(),
        "kube-apiserver kept the launcher Job's pod failure policy"
    );
    let pods = scratch.pods();
    let launcher_pod = until(
        "the launcher's pod runs",
        Duration::from_secs(60),
        async || {
            let listed = pods
                .list(
                    &kube::api::ListParams::default()
                        .labels("training.kubeflow.org/job-role=launcher"),
                )
                .await
                .ok()?;
            listed
                .items
                .into_iter()
                .find(|pod| pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .and_then(|pod| pod.metadata.name)
        },
    )
    .await;
    // Gone with its node, as the pod garbage collector leaves such a pod.
    end_pod(&pods, &launcher_pod, "launcher", 137, true).await;
    let lost = Instant::now();
    let job = until(
        "the MPIJob runs again in a new run",
        Duration::from_secs(120),
        async || {
            let job = mpi_jobs.get("mpil").await.ok()?;
            let status = job.status.as_ref()?;
            (condition(&job, "Running")
                && !condition(&job, "Suspended")
                && status.eto.run == Some(1))
            .then_some(job)
        },
    )
    .await;
    println!(
        "mpil: running again {:?} after the launcher's loss",
        lost.elapsed()
    );
    let status = job.status.unwrap();
    assert_eq!(status.eto.restart_count.unwrap_or(0), 0);
    assert!(!condition(&mpi_jobs.get("mpil").await.unwrap(), "Failed"));
    let second = launchers.get("mpil-launcher").await.unwrap();
    assert_ne!(
        second.metadata.uid, first.metadata.uid,
        "a new launcher Job"
    );
    scratch.end().await;
}

#[tokio::test]
#[ignore = "needs cluster (KUBECONFIG) whose kube-controller-manager runs the HorizontalPodAutoscaler controller, with nodes of nvidia.com/gpu (a fake kubelet will do)"]
async fn v1s_autoscaler_scales_a_pytorch_job_through_a_real_hpa_controller() {
    use eto_api::PyTorchJob;
    use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
    let scratch = Scratch::start("autoscaler").await;
    let jobs: Api<PyTorchJob> = Api::namespaced(scratch.client.clone(), &scratch.namespace);
    let autoscalers: Api<HorizontalPodAutoscaler> =
        Api::namespaced(scratch.client.clone(), &scratch.namespace);
    // More Workers asked for than `maxReplicas`: the HPA brings the job down to its maximum
    // through the scale subresource before it reads any metric.
    let job = autoscaled_pytorch_job("autoscaled", (1, 2), 3);
    jobs.patch(
        "autoscaled",
        &PatchParams::apply("eto-test").force(),
        &Patch::Apply(&job),
    )
    .await
    .unwrap();
    let applied = Instant::now();
    let hpa = until(
        "the HPA controller can scale the job",
        Duration::from_secs(120),
        async || {
            let hpa = autoscalers.get("autoscaled").await.ok()?;
            let conditions = hpa.status.as_ref()?.conditions.as_ref()?;
            conditions
                .iter()
                .any(|c| c.type_ == "AbleToScale" && c.status == "True")
                .then_some(hpa)
        },
    )
    .await;
    let status = hpa.status.unwrap();
    for condition in status.conditions.iter().flatten() {
        println!(
            "autoscaled: HPA {} = {} ({}): {}",
            condition.type_,
            condition.status,
            condition.reason.as_deref().unwrap_or_default(),
            condition.message.as_deref().unwrap_or_default()
        );
    }
    let replicas = |job: &PyTorchJob| {
        job.spec
            .pytorch_replica_specs
            .get("Worker")
            .and_then(|worker| worker.replicas)
    };
    until(
        "the HPA brings the Workers to maxReplicas",
        Duration::from_secs(120),
        async || {
            let job = jobs.get("autoscaled").await.ok()?;
            (replicas(&job) == Some(2)).then_some(())
        },
    )
    .await;
    println!(
        "autoscaled: Worker.replicas 3 -> 2 by the HPA controller {:?} after the job was applied",
        applied.elapsed()
    );

    // The HPA controller writes the HPA's status at each sync, which eto does not act on;
    // an edit of its spec is undone.
    let edit = serde_json::json!({"spec": {"maxReplicas": 9}});
    autoscalers
        .patch("autoscaled", &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .unwrap();
    until(
        "eto sets the HPA back to maxReplicas 2",
        Duration::from_secs(60),
        async || {
            let hpa = autoscalers.get("autoscaled").await.ok()?;
            (hpa.spec?.max_replicas == 2).then_some(())
        },
    )
    .await;

    // A metric kube-apiserver would refuse in an HPA: the job says which field, and nothing
    // is created for it.
    let mut invalid = job.clone();
    invalid.metadata.name = Some("refused".into());
    let metric = &mut invalid
        .spec
        .elastic_policy
        .as_mut()
        .unwrap()
        .metrics
        .as_mut()
        .unwrap()[0];
    metric.resource.as_mut().unwrap().target.average_utilization = None;
    jobs.patch(
        "refused",
        &PatchParams::apply("eto-test").force(),
        &Patch::Apply(&invalid),
    )
    .await
    .unwrap();
    let message = until(
        "the job reports its metric",
        Duration::from_secs(60),
        async || {
            let job = jobs.get("refused").await.ok()?;
            let status = job.status?;
            status
                .conditions
                .into_iter()
                .find(|c| c.reason.as_deref() == Some("InvalidSpec"))?
                .message
        },
    )
    .await;
    assert!(
        message.contains("spec.elasticPolicy.metrics[0].resource.target.averageUtilization"),
        "{message}"
    );
    assert!(autoscalers.get_opt("refused").await.unwrap().is_none());
    scratch.end().await;
}

#[tokio::test]
#[ignore = "needs cluster (KUBECONFIG): dry-run creates of HorizontalPodAutoscalers in a scratch namespace"]
async fn eto_refuses_exactly_the_metrics_a_real_api_server_refuses() {
    use eto_engine::job::JobRef;
    use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
    use kube::api::PostParams;
    let scratch = Scratch::start("metrics").await;
    let autoscalers: Api<HorizontalPodAutoscaler> =
        Api::namespaced(scratch.client.clone(), &scratch.namespace);
    let target = |type_: &str, fields: serde_json::Value| {
        let mut target = serde_json::json!({"type": type_});
        json_patch::merge(&mut target, &fields);
        target
    };
    let metrics = [
        serde_json::json!({"type": "Resource", "resource": {"name": "cpu", "target": target("Utilization", serde_json::json!({"averageUtilization": 80}))}}),
        serde_json::json!({"type": "Resource", "resource": {"name": "memory", "target": target("AverageValue", serde_json::json!({"averageValue": "2Gi"}))}}),
        serde_json::json!({"type": "Resource", "resource": {"name": "cpu", "target": target("Utilization", serde_json::json!({}))}}),
        serde_json::json!({"type": "Resource", "resource": {"name": "cpu", "target": target("Utilization", serde_json::json!({"averageUtilization": 80, "averageValue": "1"}))}}),
        serde_json::json!({"type": "Resource", "resource": {"name": "cpu", "target": target("Percent", serde_json::json!({"averageUtilization": 80}))}}),
        serde_json::json!({"type": "Resource", "resource": {"name": "cpu", "target": target("Utilization", serde_json::json!({"averageUtilization": 0}))}}),
        serde_json::json!({"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "pytorch", "target": target("Utilization", serde_json::json!({"averageUtilization": 60}))}}),
        serde_json::json!({"type": "ContainerResource", "containerResource": {"name": "gpu", "container": "pytorch", "target": target("Utilization", serde_json::json!({"averageUtilization": 60}))}}),
        serde_json::json!({"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "Py_Torch", "target": target("Utilization", serde_json::json!({"averageUtilization": 60}))}}),
        serde_json::json!({"type": "Pods", "pods": {"metric": {"name": "samples"}, "target": target("AverageValue", serde_json::json!({"averageValue": 100}))}}),
        serde_json::json!({"type": "Pods", "pods": {"metric": {"name": "samples"}, "target": target("Value", serde_json::json!({"value": "3"}))}}),
        serde_json::json!({"type": "Pods", "pods": {"metric": {"name": "samples"}, "target": target("AverageValue", serde_json::json!({"averageValue": "-1"}))}}),
        serde_json::json!({"type": "Pods", "pods": {"metric": {"name": "a/b"}, "target": target("AverageValue", serde_json::json!({"averageValue": "3"}))}}),
        serde_json::json!({"type": "Pods"}),
        serde_json::json!({"type": "Cpu"}),
        serde_json::json!({"type": "Object", "object": {"describedObject": {"kind": "Service", "name": "queue"}, "metric": {"name": "depth"}, "target": target("Value", serde_json::json!({"value": "30"}))}}),
        serde_json::json!({"type": "Object", "object": {"describedObject": {"kind": "Service", "name": ""}, "metric": {"name": "depth"}, "target": target("Value", serde_json::json!({"value": "30"}))}}),
        serde_json::json!({"type": "Object", "object": {"describedObject": {"kind": "Service", "name": "queue"}, "metric": {"name": "depth"}, "target": target("Value", serde_json::json!({}))}}),
        serde_json::json!({"type": "External", "external": {"metric": {"name": "queue"}, "target": target("AverageValue", serde_json::json!({"averageValue": "500m"}))}}),
        serde_json::json!({"type": "External", "external": {"metric": {"name": "queue"}, "target": target("Value", serde_json::json!({"value": "1", "averageValue": "1"}))}}),
        serde_json::json!({"type": "Resource", "resource": {"name": "cpu", "target": target("Utilization", serde_json::json!({"averageUtilization": 80}))},
                           "pods": {"metric": {"name": "x"}, "target": target("AverageValue", serde_json::json!({"averageValue": "1"}))}}),
    ];
    let job_yaml = autoscaled_pytorch_job("autoscaled", (1, 2), 3);
    let mut disagreements = Vec::new();
    for (index, metric) in metrics.iter().enumerate() {
        let mut job = job_yaml.clone();
        job.spec.elastic_policy.as_mut().unwrap().metrics =
            Some(vec![serde_json::from_value(metric.clone()).unwrap()]);
        let eto = JobRef::new(&job)
            .validate()
            .map(drop)
            .map_err(|e| e.to_string());
        let hpa: HorizontalPodAutoscaler = serde_json::from_value(serde_json::json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": format!("m{index}")},
            "spec": {
                "scaleTargetRef": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "autoscaled"},
                "minReplicas": 1, "maxReplicas": 2, "metrics": [metric]
            }
        }))
        .unwrap();
        let dry_run = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        let server = autoscalers
            .create(&dry_run, &hpa)
            .await
            .map(drop)
            .map_err(|e| e.to_string());
        let verdict = |result: &Result<(), String>| match result {
            Ok(()) => "accepts".to_string(),
            Err(error) => format!("refuses ({error:.100})"),
        };
        println!(
            "metric {index}: eto {}; kube-apiserver {}",
            verdict(&eto),
            verdict(&server)
        );
        if eto.is_ok() != server.is_ok() {
            disagreements.push(index);
        }
    }
    assert_eq!(disagreements, Vec::<usize>::new());
    scratch.end().await;
}
