//! Pods that fail on their own, on a real cluster (KUBECONFIG; `#[ignore]`d): a real kubelet's
//! reasons for an image never pulled, a missing Secret and a command that exits, as eto reads
//! and reports them; a fixed template that replaces the stuck pods; and Workers whose command
//! fails at once, backed off rather than churned, for each kind eto serves.
//!
//! The pods run where `ETO_TEST_POD_PATCH` (a JSON merge patch of their pod specs) and
//! `ETO_TEST_IMAGE` (an image present on the node, pulled `Never`) say, as in `cluster.rs`:
//! on the loopback harness, its real node and `harness.local/busybox:v1`.
//!
//! `cargo test -p eto-tests --test integration failing_pods_real:: -- --ignored --nocapture
//! --test-threads 1`

use std::time::{Duration, Instant};

use eto_api::{MPIJob, PyTorchJob, TrainingJob};
use eto_tests::poll::until;
use eto_tests::scratch::Scratch;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// A kind of job under test: its resource, a job of two Workers and the pod that coordinates
/// its runs (from the pod specs given), and the merge patch of its Workers' template.
struct Case {
    resource: ApiResource,
    job: fn(&str, Value, Value) -> Value,
    /// The merge patch of the job that puts `template` in its Workers' template.
    worker_template: fn(Value) -> Value,
}

/// The pod spec every test pod starts from: placed and pulled as the cluster needs, running
/// `command`.
fn pod_spec(command: &[&str]) -> Value {
    let image = std::env::var("ETO_TEST_IMAGE").unwrap_or("busybox:1.36".into());
    let mut spec = json!({"containers": [{
        "name": "pytorch", "image": image, "imagePullPolicy": "IfNotPresent", "command": command
    }]});
    if std::env::var("ETO_TEST_IMAGE").is_ok() {
        spec["containers"][0]["imagePullPolicy"] = json!("Never");
    }
    if let Ok(patch) = std::env::var("ETO_TEST_POD_PATCH") {
        let patch: Value = serde_json::from_str(&patch).expect("ETO_TEST_POD_PATCH is JSON");
        json_patch::merge(&mut spec, &patch);
    }
    spec
}

fn training_job(name: &str, coordinator: Value, worker: Value) -> Value {
    json!({"apiVersion": "kai.alibabacloud.com/v1alpha1", "kind": "TrainingJob",
        "metadata": {"name": name},
        "spec": {"etReplicaSpecs": {
            "launcher": {"template": {"spec": coordinator}},
            "worker": {"replicas": 2, "minReplicas": 1, "restartPolicy": "OnFailure",
                "template": {"spec": worker}}}}})
}

fn mpi_job(name: &str, coordinator: Value, worker: Value) -> Value {
    json!({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {"slotsPerWorker": 1, "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": {"spec": coordinator}},
            "Worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": {"spec": worker}}}}})
}

fn pytorch_job(name: &str, mut coordinator: Value, mut worker: Value) -> Value {
    // Its pods declare the Master's port: on a host's network, two would not fit one node.
    for spec in [&mut coordinator, &mut worker] {
        spec.as_object_mut().map(|spec| spec.remove("hostNetwork"));
    }
    json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": {"spec": coordinator}},
            "Worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": {"spec": worker}}}}})
}

fn cases() -> [(&'static str, Case); 3] {
    [
        (
            "TrainingJob",
            Case {
                resource: ApiResource::erase::<TrainingJob>(&()),
                job: training_job,
                worker_template: |spec| json!({"spec": {"etReplicaSpecs": {"worker": {"template": {"spec": spec}}}}}),
            },
        ),
        (
            "MPIJob",
            Case {
                resource: ApiResource::erase::<MPIJob>(&()),
                job: mpi_job,
                worker_template: |spec| json!({"spec": {"mpiReplicaSpecs": {"Worker": {"template": {"spec": spec}}}}}),
            },
        ),
        (
            "PyTorchJob",
            Case {
                resource: ApiResource::erase::<PyTorchJob>(&()),
                job: pytorch_job,
                worker_template: |spec| json!({"spec": {"pytorchReplicaSpecs": {"Worker": {"template": {"spec": spec}}}}}),
            },
        ),
    ]
}

/// The condition `type_` of `job`, if it holds: its reason and message.
fn holding(job: &DynamicObject, type_: &str) -> Option<(String, String)> {
    job.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_ && c["status"] == "True")
        .map(|c| {
            (
                c["reason"].as_str().unwrap_or_default().to_string(),
                c["message"].as_str().unwrap_or_default().to_string(),
            )
        })
}

/// Waits until `job`'s `PodsFailing` holds with `reason`; returns its message and how long it
/// took from `since`.
async fn failing_with(
    jobs: &Api<DynamicObject>,
    job: &str,
    reason: &str,
    since: Instant,
) -> (String, f64) {
    let message = until(
        &format!("{job}: PodsFailing {reason}"),
        Duration::from_secs(180),
        async || {
            let object = jobs.get(job).await.ok()?;
            holding(&object, "PodsFailing")
                .filter(|(r, _)| r == reason)
                .map(|(_, message)| message)
        },
    )
    .await;
    (message, since.elapsed().as_secs_f64())
}

/// The names and uids of `job`'s Worker pods that exist now (a job whose Workers are its
/// ranks gives a new run's the same names).
async fn worker_pods(scratch: &Scratch, job: &str) -> Vec<(String, String)> {
    let mut pods: Vec<(String, String)> = scratch
        .pods()
        .list(&Default::default())
        .await
        .unwrap()
        .into_iter()
        .filter_map(|pod| Some((pod.metadata.name?, pod.metadata.uid?)))
        .filter(|(name, _)| name.starts_with(&format!("{job}-worker-")))
        .collect();
    pods.sort();
    pods
}

/// What a user goes through with a first job of each kind, on a real kubelet: an image that
/// is never pulled, then a Secret the environment names that does not exist, then a command
/// that fails at once, each said on the job in the kubelet's words and each fixed by a new
/// template whose pods come at once; the stuck pods are not churned meanwhile.
#[tokio::test]
#[ignore = "needs cluster (KUBECONFIG): installs eto's CRDs and runs pods in a scratch namespace"]
async fn a_first_jobs_mistakes_are_said_and_a_new_template_fixes_them_for_every_kind() {
    let scratch = Scratch::start("mistakes").await;
    let sleeps = pod_spec(&["sleep", "3600"]);
    for (kind, case) in cases() {
        let name = format!("first-{}", kind.to_lowercase());
        let jobs: Api<DynamicObject> =
            Api::namespaced_with(scratch.client.clone(), &scratch.namespace, &case.resource);
        let mut unpulled = sleeps.clone();
        unpulled["containers"][0]["image"] = json!("example.invalid/none:v1");
        unpulled["containers"][0]["imagePullPolicy"] = json!("Always");
        let mut job = (case.job)(&name, sleeps.clone(), unpulled);
        job["metadata"]["namespace"] = json!(scratch.namespace);
        let started = Instant::now();
        jobs.patch(
            &name,
            &PatchParams::apply("eto-test").force(),
            &Patch::Apply(&job),
        )
        .await
        .unwrap();
        let (message, seconds) = failing_with(&jobs, &name, "ImagePullBackOff", started).await;
        println!(
            "{kind}: ImagePullBackOff said {seconds:.1} s after the job was created: {message}"
        );
        assert!(message.contains("example.invalid/none:v1"), "{message}");
        let stuck = worker_pods(&scratch, &name).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(
            worker_pods(&scratch, &name).await,
            stuck,
            "{kind}: not churned"
        );

        // The image fixed, but the environment names a Secret that does not exist.
        let mut secretive = sleeps.clone();
        secretive["containers"][0]["env"] = json!([{"name": "WANDB_API_KEY",
            "valueFrom": {"secretKeyRef": {"name": format!("{name}-wandb"), "key": "key"}}}]);
        let fixed_at = Instant::now();
        jobs.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge((case.worker_template)(secretive)),
        )
        .await
        .unwrap();
        let (message, seconds) =
            failing_with(&jobs, &name, "CreateContainerConfigError", fixed_at).await;
        println!(
            "{kind}: CreateContainerConfigError said {seconds:.1} s after the new template: {message}"
        );
        assert!(
            message.contains(&format!("secret \"{name}-wandb\" not found")),
            "{message}"
        );
        let replaced = until(
            &format!("{kind}: the pods stuck on the old template are replaced"),
            Duration::from_secs(60),
            async || {
                let now = worker_pods(&scratch, &name).await;
                let uids = |pods: &[(String, String)]| -> Vec<String> {
                    pods.iter().map(|(_, uid)| uid.clone()).collect()
                };
                (now.len() == stuck.len()
                    && uids(&now).iter().all(|uid| !uids(&stuck).contains(uid)))
                .then_some(now)
            },
        )
        .await;
        println!(
            "{kind}: {stuck:?} replaced by {replaced:?} within {:.1} s of the new template",
            fixed_at.elapsed().as_secs_f64()
        );

        // The Secret comes: the same pods start.
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": format!("{name}-wandb"), "namespace": scratch.namespace},
            "stringData": {"key": "k"}}))
        .unwrap();
        Api::<Secret>::namespaced(scratch.client.clone(), &scratch.namespace)
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
        let came = Instant::now();
        until(
            &format!("{kind}: PodsFailing clears once the Secret exists"),
            Duration::from_secs(180),
            async || {
                let object = jobs.get(&name).await.ok()?;
                holding(&object, "PodsFailing").is_none().then_some(())
            },
        )
        .await;
        println!(
            "{kind}: the Workers ran {:.1} s after their Secret was created",
            came.elapsed().as_secs_f64()
        );
        assert_eq!(
            worker_pods(&scratch, &name).await,
            replaced,
            "{kind}: the same pods"
        );
        jobs.delete(&name, &Default::default()).await.unwrap();
    }
    scratch.end().await;
}

/// Two Workers whose command fails at once (`false`), on a real kubelet, for three minutes:
/// their replacements back off (at once, then 10 s doubling) rather than being created two a
/// second; the job says so within seconds, naming the exit code.
#[tokio::test]
#[ignore = "needs cluster (KUBECONFIG): installs eto's CRDs and runs pods in a scratch namespace"]
async fn workers_whose_command_fails_are_backed_off_for_every_kind() {
    let scratch = Scratch::start("false").await;
    let seconds = std::env::var("ETO_TEST_CHURN_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(180);
    let mut handles = Vec::new();
    for (kind, case) in cases() {
        let name = format!("false-{}", kind.to_lowercase());
        let jobs: Api<DynamicObject> =
            Api::namespaced_with(scratch.client.clone(), &scratch.namespace, &case.resource);
        let mut job = (case.job)(&name, pod_spec(&["sleep", "3600"]), pod_spec(&["false"]));
        job["metadata"]["namespace"] = json!(scratch.namespace);
        jobs.patch(
            &name,
            &PatchParams::apply("eto-test").force(),
            &Patch::Apply(&job),
        )
        .await
        .unwrap();
        handles.push((kind, name, jobs, Instant::now()));
    }
    for (kind, name, jobs, started) in &handles {
        let (message, seconds) = failing_with(jobs, name, "CrashLoopBackOff", *started).await;
        println!("{kind}: said {seconds:.1} s after the job was created: {message}");
        assert!(message.contains("exited with code 1"), "{message}");
    }
    let elapsed = handles[0].3.elapsed();
    tokio::time::sleep(Duration::from_secs(seconds).saturating_sub(elapsed)).await;
    for (kind, name, jobs, _) in &handles {
        let object = jobs.get(name).await.unwrap();
        let status = &object.data["status"];
        let taken = status["nextWorkerIndex"].as_i64().unwrap_or_default();
        let backoff = &status["backoff"];
        // Indices a back-off holds are taken, their pods not created yet.
        let held = backoff
            .as_array()
            .into_iter()
            .flatten()
            .map(|b| b["waiting"].as_array().map_or(0, Vec::len))
            .sum::<usize>();
        let created = taken - i64::try_from(held).unwrap_or(0);
        println!("{kind}: {created} Worker pods created in {seconds} s; back-off {backoff}");
        assert!(
            created <= 12,
            "{kind}: {created} Worker pods in {seconds} s"
        );
        assert_eq!(
            holding(&object, "Failed"),
            None,
            "{kind}: within its backoffLimit"
        );
    }
    scratch.end().await;
}

/// The pod that coordinates each kind's runs fails at once (its command `false`): the job
/// restarts, the first time at once and then after 10 s, then 20 s, rather than two runs a
/// second, and fails once its `backoffLimit` (3 here) is spent, saying why.
#[tokio::test]
#[ignore = "needs cluster (KUBECONFIG): installs eto's CRDs and runs pods in a scratch namespace"]
async fn a_coordinator_whose_command_fails_restarts_the_job_after_a_back_off_for_every_kind() {
    let scratch = Scratch::start("coordinator").await;
    let mut watched = Vec::new();
    for (kind, case) in cases() {
        let name = format!("coordinator-{}", kind.to_lowercase());
        let jobs: Api<DynamicObject> =
            Api::namespaced_with(scratch.client.clone(), &scratch.namespace, &case.resource);
        let mut job = (case.job)(&name, pod_spec(&["false"]), pod_spec(&["sleep", "3600"]));
        job["metadata"]["namespace"] = json!(scratch.namespace);
        match kind {
            "TrainingJob" => {
                job["spec"]["restartPolicy"] = json!("OnFailure");
                job["spec"]["backoffLimit"] = json!(3);
            }
            "MPIJob" => job["spec"]["runPolicy"] = json!({"backoffLimit": 3}),
            _ => {
                // `ExitCode` makes the Master's pod `Never`: its failure is the job's to restart.
                job["spec"]["pytorchReplicaSpecs"]["Master"]["restartPolicy"] = json!("ExitCode");
                job["spec"]["runPolicy"] = json!({"backoffLimit": 3});
            }
        }
        jobs.patch(
            &name,
            &PatchParams::apply("eto-test").force(),
            &Patch::Apply(&job),
        )
        .await
        .unwrap();
        watched.push((kind, name, jobs, Instant::now(), vec![(0_i64, 0.0_f64)]));
    }
    let finished = until(
        "every job fails past its backoffLimit",
        Duration::from_secs(400),
        async || {
            let mut all = true;
            for (_, name, jobs, started, runs) in &mut watched {
                let object = jobs.get(name).await.ok()?;
                let status = &object.data["status"];
                let run = status["run"]
                    .as_i64()
                    .or_else(|| status["eto"]["run"].as_i64())
                    .unwrap_or(0);
                if runs.last().is_some_and(|(last, _)| *last != run) {
                    runs.push((run, started.elapsed().as_secs_f64()));
                }
                all &= holding(&object, "Failed").is_some();
            }
            all.then_some(())
        },
    )
    .await;
    let () = finished;
    for (kind, name, jobs, _, runs) in &watched {
        let object = jobs.get(name).await.unwrap();
        let (_, message) = holding(&object, "Failed").unwrap();
        let starts: Vec<String> = runs
            .iter()
            .map(|(run, at)| format!("run {run} at {at:.1} s"))
            .collect();
        println!("{kind}: {}; failed: {message}", starts.join(", "));
        assert_eq!(
            runs.len(),
            4,
            "{kind}: the first run and three restarts: {starts:?}"
        );
        let gaps: Vec<f64> = runs.windows(2).map(|pair| pair[1].1 - pair[0].1).collect();
        assert!(
            gaps[1] >= 10.0 && gaps[2] >= 20.0,
            "{kind}: the second restart waits 10 s, the third 20 s: {starts:?}"
        );
    }
    scratch.end().await;
}
