//! MPIJobs against the simulated cluster: mpi-operator's TensorFlow benchmarks example to
//! Succeeded, worker failures, `kubectl scale`, Kueue's suspend and admission, jobs another
//! controller manages, and jobs stored under mpi-operator's own CRD.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use eto_api::MPIJob;
use eto_api::common::ConditionStatus;
use eto_api::common::ReplicaType;
use eto_controller::metrics::Outcome;
use eto_sim::NodeSpec;
use eto_tests::env::{Env, WAIT, pod_ready, sim_config};
use eto_tests::poll;
use eto_tests::workspace_root;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

fn example(file: &str) -> String {
    std::fs::read_to_string(workspace_root().join("examples").join(file)).unwrap()
}

fn mpi_jobs(env: &Env) -> Api<MPIJob> {
    Api::default_namespaced(env.client.clone())
}

/// Whether `job` has condition `type_` with status True.
fn has(job: &MPIJob, type_: &str) -> bool {
    job.status.as_ref().is_some_and(|status| {
        status
            .conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == ConditionStatus::True)
    })
}

fn reason_of(job: &MPIJob, type_: &str) -> Option<String> {
    job.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)?
        .reason
        .clone()
}

/// The pods of `job` with `role` (`launcher` or `worker`), by mpi-operator's labels.
async fn pods_of(env: &Env, job: &str, role: &str) -> Vec<Pod> {
    env.pods()
        .list(&ListParams::default().labels(&format!(
            "training.kubeflow.org/job-name={job},training.kubeflow.org/job-role={role}"
        )))
        .await
        .unwrap()
        .items
}

/// Waits until the launcher Job of `job` runs a ready pod, and returns that pod.
async fn running_launcher(env: &Env, job: &str) -> Pod {
    let selector = format!("batch.kubernetes.io/job-name={job}-launcher");
    poll::until(
        &format!("a ready launcher pod of {job}"),
        WAIT,
        async || {
            let pods = env
                .pods()
                .list(&ListParams::default().labels(&selector))
                .await
                .unwrap();
            pods.items.into_iter().find(|p| pod_ready(Some(p)))
        },
    )
    .await
}

/// The discovery lines the launcher's pod of `job` shows in `/etc/mpi/ready_hosts`.
fn ready_hosts(launcher: &Pod) -> Vec<String> {
    launcher
        .annotations()
        .get("eto.dev/hostfile")
        .map(|hosts| hosts.lines().map(String::from).collect())
        .unwrap_or_default()
}

/// Waits until the launcher's pod of `job` lists exactly `hosts` (pod names) for discovery.
async fn wait_ready_hosts(env: &Env, job: &str, hosts: &[&str]) {
    let launcher = running_launcher(env, job).await.name_any();
    let expected: Vec<String> = hosts
        .iter()
        .map(|pod| format!("{pod}.{job}.default.svc:1"))
        .collect();
    env.wait_pod(&launcher, &format!("lists {hosts:?}"), |pod| {
        pod.is_some_and(|pod| ready_hosts(pod) == expected)
    })
    .await;
}

/// Reconciles that ended without error so far.
fn reconciles_ok(env: &Env) -> impl Fn() -> u64 {
    let metrics = Arc::clone(&env.operator.as_ref().unwrap().metrics);
    move || {
        metrics
            .reconciliations
            .get_or_create(&Outcome {
                result: "ok".into(),
            })
            .get()
    }
}

#[tokio::test]
async fn mpi_operators_tensorflow_benchmarks_example_runs_to_succeeded() {
    let env = Env::start(sim_config(2, 8)).await;
    env.apply::<MPIJob>(&example("mpijob-tensorflow-benchmarks.yaml"))
        .await;
    const JOB: &str = "tensorflow-benchmarks";
    for worker in [
        "tensorflow-benchmarks-worker-0",
        "tensorflow-benchmarks-worker-1",
    ] {
        env.wait_pod(worker, "is ready", pod_ready).await;
    }
    let launcher = running_launcher(&env, JOB).await;
    assert_eq!(
        launcher.labels()["training.kubeflow.org/job-role"],
        "launcher"
    );
    assert_eq!(
        launcher.labels()["training.kubeflow.org/operator-name"],
        "mpi-operator"
    );
    let jobs: Api<Job> = Api::default_namespaced(env.client.clone());
    let launcher_job = jobs.get("tensorflow-benchmarks-launcher").await.unwrap();
    assert_eq!(launcher_job.owner_references()[0].kind, "MPIJob");
    assert_eq!(
        env.config_map_hostfile(JOB).await.as_deref(),
        Some(
            "tensorflow-benchmarks-worker-0.tensorflow-benchmarks.default.svc slots=1\n\
             tensorflow-benchmarks-worker-1.tensorflow-benchmarks.default.svc slots=1\n"
        )
    );
    wait_ready_hosts(
        &env,
        JOB,
        &[
            "tensorflow-benchmarks-worker-0",
            "tensorflow-benchmarks-worker-1",
        ],
    )
    .await;
    env.wait::<MPIJob>(JOB, "runs", |job| has(job, "Running"))
        .await;

    env.cluster
        .succeed_pod("default", &launcher.name_any())
        .unwrap();
    let done = env
        .wait::<MPIJob>(JOB, "succeeds", |job| has(job, "Succeeded"))
        .await;
    assert_eq!(
        reason_of(&done, "Succeeded").as_deref(),
        Some("MPIJobSucceeded")
    );
    let status = done.status.unwrap();
    assert!(status.completion_time.is_some() && status.start_time.is_some());
    assert_eq!(status.replica_statuses[&ReplicaType::Launcher].succeeded, 1);
    // cleanPodPolicy: Running deletes the workers; the launcher stays for its logs.
    for worker in [
        "tensorflow-benchmarks-worker-0",
        "tensorflow-benchmarks-worker-1",
    ] {
        env.wait_pod(worker, "is deleted", |pod| pod.is_none())
            .await;
    }
    assert!(
        env.pods()
            .get_opt(&launcher.name_any())
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn a_failed_worker_is_replaced_and_an_evicted_one_fails_nothing() {
    let env = Env::start(sim_config(2, 8)).await;
    env.apply::<MPIJob>(&example("mpijob-elastic-horovod.yaml"))
        .await;
    const JOB: &str = "elastic-horovod";
    let first: Vec<String> = (0..4).map(|i| format!("{JOB}-worker-{i}")).collect();
    let first: Vec<&str> = first.iter().map(String::as_str).collect();
    wait_ready_hosts(&env, JOB, &first).await;

    env.cluster
        .fail_pod("default", "elastic-horovod-worker-0", 1, "Error")
        .unwrap();
    env.cluster
        .evict_pod(
            "default",
            "elastic-horovod-worker-1",
            "The node was low on resource: memory.",
        )
        .unwrap();
    wait_ready_hosts(
        &env,
        JOB,
        &[
            "elastic-horovod-worker-2",
            "elastic-horovod-worker-3",
            "elastic-horovod-worker-4",
            "elastic-horovod-worker-5",
        ],
    )
    .await;
    let job = mpi_jobs(&env).get(JOB).await.unwrap();
    assert!(has(&job, "Running") && !has(&job, "Failed"), "{job:#?}");
    let blacklisted: Vec<String> = job
        .status
        .unwrap()
        .eto
        .blacklist
        .into_iter()
        .map(|entry| entry.pod)
        .collect();
    assert_eq!(
        blacklisted,
        ["elastic-horovod-worker-0", "elastic-horovod-worker-1"]
    );
}

/// `kubectl scale mpijob/<job> --replicas=<n>`, or, where kubectl is not installed, the
/// request it sends: a merge patch of the scale subresource.
async fn kubectl_scale(env: &Env, job: &str, replicas: u32) {
    let kubeconfig = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("mpijob-scale-{job}.kubeconfig"));
    std::fs::write(&kubeconfig, env.cluster.kubeconfig()).unwrap();
    let args = [
        "scale".to_string(),
        format!("mpijob/{job}"),
        format!("--replicas={replicas}"),
    ];
    // kubectl blocks; the simulated cluster must keep serving it meanwhile.
    let ran = tokio::task::spawn_blocking(move || {
        Command::new("kubectl")
            .args(args)
            .env("KUBECONFIG", &kubeconfig)
            .output()
    })
    .await
    .unwrap();
    match ran {
        Ok(output) => assert!(
            output.status.success(),
            "kubectl scale failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            mpi_jobs(env)
                .patch_scale(
                    job,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"replicas": replicas}})),
                )
                .await
                .unwrap();
        }
        Err(error) => panic!("cannot run kubectl: {error}"),
    }
}

#[tokio::test]
async fn kubectl_scale_mpijob_grows_and_shrinks_the_workers_and_discovery() {
    let env = Env::start(sim_config(2, 8)).await;
    // Removed workers get a second, not the default 30, to leave the training.
    let quick_drain = example("mpijob-elastic-horovod.yaml").replace(
        "    suspendBelowMinWorkers: true\n",
        "    suspendBelowMinWorkers: true\n    drainSeconds: 1\n",
    );
    assert!(quick_drain.contains("drainSeconds: 1"));
    env.apply::<MPIJob>(&quick_drain).await;
    const JOB: &str = "elastic-horovod";
    let names: Vec<String> = (0..6).map(|i| format!("{JOB}-worker-{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    wait_ready_hosts(&env, JOB, &names[..4]).await;

    kubectl_scale(&env, JOB, 6).await;
    wait_ready_hosts(&env, JOB, &names).await;
    let scale = mpi_jobs(&env).get_scale(JOB).await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(6));

    kubectl_scale(&env, JOB, 3).await;
    wait_ready_hosts(&env, JOB, &names[..3]).await;
    for removed in &names[3..] {
        env.wait_pod(removed, "is deleted after draining", |pod| pod.is_none())
            .await;
    }
    let job = env
        .wait::<MPIJob>(JOB, "reports 3 active workers", |job| {
            job.status.as_ref().is_some_and(|s| {
                s.replica_statuses
                    .get(&ReplicaType::Worker)
                    .is_some_and(|w| w.active == 3)
            })
        })
        .await;
    assert!(has(&job, "Running"));
}

#[tokio::test]
async fn a_job_created_suspended_starts_where_kueue_admits_it() {
    let env = Env::start(sim_config(1, 8)).await;
    const JOB: &str = "tensorflow-benchmarks";
    let suspended = example("mpijob-tensorflow-benchmarks.yaml").replace(
        "  runPolicy:\n    cleanPodPolicy: Running\n",
        "  runPolicy:\n    cleanPodPolicy: Running\n    suspend: true\n",
    );
    assert!(suspended.contains("suspend: true"));
    env.apply::<MPIJob>(&suspended).await;
    let job = env
        .wait::<MPIJob>(JOB, "is suspended", |job| has(job, "Suspended"))
        .await;
    assert_eq!(
        reason_of(&job, "Suspended").as_deref(),
        Some("MPIJobSuspended")
    );
    assert!(pods_of(&env, JOB, "worker").await.is_empty());
    let jobs: Api<Job> = Api::default_namespaced(env.client.clone());
    assert!(
        jobs.get_opt("tensorflow-benchmarks-launcher")
            .await
            .unwrap()
            .is_none()
    );

    // Kueue admits the job to a flavor of spot nodes: it writes the flavor's node selector
    // and a label into both templates, then unsuspends.
    env.cluster
        .add_node(&NodeSpec::gpu("spot-a100-0", 8).label("pool", "spot-a100"))
        .unwrap();
    let admitted = json!({"spec": {
        "runPolicy": {"suspend": false},
        "mpiReplicaSpecs": {
            "Launcher": {"template": {"metadata": {"labels": {"kueue.x-k8s.io/podset": "launcher"}},
                "spec": {"nodeSelector": {"pool": "spot-a100"}}}},
            "Worker": {"template": {"metadata": {"labels": {"kueue.x-k8s.io/podset": "worker"}},
                "spec": {"nodeSelector": {"pool": "spot-a100"}}}},
        },
    }});
    mpi_jobs(&env)
        .patch(JOB, &PatchParams::default(), &Patch::Merge(admitted))
        .await
        .unwrap();
    for worker in [
        "tensorflow-benchmarks-worker-0",
        "tensorflow-benchmarks-worker-1",
    ] {
        let pod = env.wait_pod(worker, "is ready", pod_ready).await.unwrap();
        assert_eq!(pod.labels()["kueue.x-k8s.io/podset"], "worker");
        let spec = pod.spec.unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("spot-a100-0"));
        assert_eq!(spec.node_selector.unwrap()["pool"], "spot-a100");
    }
    let launcher = running_launcher(&env, JOB).await;
    assert_eq!(launcher.labels()["kueue.x-k8s.io/podset"], "launcher");
    assert_eq!(
        launcher.spec.unwrap().node_name.as_deref(),
        Some("spot-a100-0")
    );
    let job = env
        .wait::<MPIJob>(JOB, "runs", |job| has(job, "Running"))
        .await;
    assert!(!has(&job, "Suspended"));
}

#[tokio::test]
async fn suspending_a_running_job_notifies_it_then_removes_its_pods() {
    let env = Env::start(sim_config(2, 8)).await;
    const JOB: &str = "tensorflow-benchmarks";
    env.apply::<MPIJob>(&example("mpijob-tensorflow-benchmarks.yaml"))
        .await;
    let launcher = running_launcher(&env, JOB).await;
    mpi_jobs(&env)
        .patch(
            JOB,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"runPolicy": {"suspend": true}}})),
        )
        .await
        .unwrap();
    // The training gets a checkpoint notice first; it saves a checkpoint and exits.
    env.wait_pod(&launcher.name_any(), "gets a suspend notice", |pod| {
        pod.is_some_and(|pod| pod.annotations().contains_key("eto.dev/notice"))
    })
    .await;
    env.cluster
        .succeed_pod("default", &launcher.name_any())
        .unwrap();
    let job = env
        .wait::<MPIJob>(JOB, "is suspended", |job| has(job, "Suspended"))
        .await;
    assert!(!has(&job, "Failed") && !has(&job, "Succeeded"), "{job:#?}");
    env.wait_pod(&launcher.name_any(), "is deleted", |pod| pod.is_none())
        .await;
    let jobs: Api<Job> = Api::default_namespaced(env.client.clone());
    let launcher_job = jobs
        .get_opt("tensorflow-benchmarks-launcher")
        .await
        .unwrap();
    assert!(launcher_job.is_none(), "the launcher Job is deleted");
    for worker in [
        "tensorflow-benchmarks-worker-0",
        "tensorflow-benchmarks-worker-1",
    ] {
        env.wait_pod(worker, "is deleted", |pod| pod.is_none())
            .await;
    }
}

#[tokio::test]
async fn a_job_managed_by_another_controller_is_left_alone() {
    let mut env = Env::start(sim_config(2, 8)).await;
    env.stop_operator().await;
    const JOB: &str = "tensorflow-benchmarks";
    let foreign = example("mpijob-tensorflow-benchmarks.yaml").replace(
        "  runPolicy:\n",
        "  runPolicy:\n    managedBy: kubeflow.org/mpi-operator\n",
    );
    env.apply::<MPIJob>(&foreign).await;
    env.start_operator();
    let reconciles = reconciles_ok(&env);
    let seen = tokio::time::timeout(WAIT, async {
        while reconciles() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    seen.await.expect("the operator reconciles the job");
    // A change to the job is reconciled too, and still nothing is written.
    let before = reconciles();
    mpi_jobs(&env)
        .patch(
            JOB,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": "vision"}}})),
        )
        .await
        .unwrap();
    let changed = tokio::time::timeout(WAIT, async {
        while reconciles() == before {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    changed.await.expect("the operator reconciles the change");
    let job = mpi_jobs(&env).get(JOB).await.unwrap();
    assert_eq!(job.status, None);
    assert!(
        env.pods()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert_eq!(env.operator.as_ref().unwrap().metrics.writes.get(), 0);
}

/// A CRD of `kubeflow.org/v2beta1` MPIJobs shaped like mpi-operator's: the same names and
/// subresources, a schema that keeps whatever the spec and status hold.
fn mpi_operator_style_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "mpijobs.kubeflow.org"},
        "spec": {
            "group": "kubeflow.org",
            "scope": "Namespaced",
            "names": {"kind": "MPIJob", "listKind": "MPIJobList", "plural": "mpijobs",
                "singular": "mpijob"},
            "versions": [{
                "name": "v2beta1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                    "metadata": {"type": "object"},
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                }}},
            }],
        },
    }))
    .unwrap()
}

/// Creates MPIJob `name` from `spec_yaml` through `client` and writes `status` as mpi-operator
/// would have.
async fn stored_by_mpi_operator(client: &Client, name: &str, status: serde_json::Value) {
    let jobs: Api<kube::api::DynamicObject> = Api::default_namespaced_with(
        client.clone(),
        &kube::api::ApiResource::erase::<MPIJob>(&()),
    );
    let mut job: kube::api::DynamicObject =
        serde_saphyr::from_str(&example("mpijob-tensorflow-benchmarks.yaml")).unwrap();
    job.metadata.name = Some(name.into());
    jobs.create(&PostParams::default(), &job).await.unwrap();
    jobs.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": status})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn jobs_stored_under_mpi_operators_crd_read_back_under_etos() {
    let mut env = Env::start(sim_config(2, 8)).await;
    env.stop_operator().await;
    env.remove_crd("mpijobs.kubeflow.org").await;
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    crds.create(&PostParams::default(), &mpi_operator_style_crd())
        .await
        .unwrap();
    let condition = |type_: &str, reason: &str| {
        json!({"type": type_, "status": "True", "reason": reason, "message": "",
            "lastTransitionTime": "2026-11-20T10:00:00Z", "lastUpdateTime": "2026-11-20T10:00:00Z"})
    };
    poll::until("mpi-operator's CRD serves", WAIT, async || {
        mpi_jobs(&env)
            .list(&ListParams::default())
            .await
            .ok()
            .map(drop)
    })
    .await;
    stored_by_mpi_operator(
        &env.client,
        "finished",
        json!({
            "conditions": [condition("Created", "MPIJobCreated"), condition("Succeeded", "MPIJobSucceeded")],
            "replicaStatuses": {"Launcher": {"succeeded": 1}, "Worker": {}},
            "startTime": "2026-11-20T10:00:00Z",
            "completionTime": "2026-11-20T11:00:00Z",
        }),
    )
    .await;
    stored_by_mpi_operator(
        &env.client,
        "halfway",
        json!({
            "conditions": [condition("Created", "MPIJobCreated"), condition("Running", "MPIJobRunning")],
            "replicaStatuses": {"Launcher": {"active": 1}, "Worker": {"active": 2}},
            "startTime": "2026-11-20T10:00:00Z",
        }),
    )
    .await;

    eto_controller::install_crds(&env.client).await.unwrap();
    env.start_operator();
    let halfway = env
        .wait::<MPIJob>("halfway", "is stalled", |job| has(job, "Stalled"))
        .await;
    assert_eq!(
        reason_of(&halfway, "Stalled").as_deref(),
        Some("StartedByAnotherOperator")
    );
    assert!(has(&halfway, "Running"), "mpi-operator's conditions stay");

    let finished = env
        .wait::<MPIJob>("finished", "is reported finished", |job| has(job, "Ready"))
        .await;
    assert_eq!(
        reason_of(&finished, "Ready").as_deref(),
        Some("MPIJobSucceeded")
    );
    assert!(has(&finished, "Succeeded"));
    let status = finished.status.unwrap();
    assert_eq!(status.replica_statuses[&ReplicaType::Launcher].succeeded, 1);
    assert!(status.completion_time.is_some());
    // Nothing is started for either job, and both still take changes under eto's schema.
    assert!(
        env.pods()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    for name in ["finished", "halfway"] {
        mpi_jobs(&env)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"migrated": "true"}}})),
            )
            .await
            .unwrap();
    }
}
