//! Pods that fail on their own (a command that exits, an image that is never pulled, a
//! missing Secret) against the simulated cluster: eto backs their replacements off instead of
//! churning pods, says why on the job, creates pods of a fixed template at once, and still
//! replaces at once what the platform takes.

use std::time::Duration;

use eto_api::common::{ConditionStatus, JobCondition};
use eto_api::{MPIJob, PyTorchJob, TrainingJob};
use eto_controller::metrics::PodFailureLabels;
use eto_sim::nodes::containers::{EXIT_AFTER, TERMINATION_MESSAGE};
use eto_tests::env::{Env, JobYaml, WAIT, pod_ready, sim_config};
use eto_tests::poll;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};

/// A TrainingJob of `replicas` Workers, `min` of them needed, replaced when they fail, whose
/// Worker template has `template` (YAML lines under `template:`, indented by 8) before its
/// spec and `container` (lines under the Worker's container, indented by 12).
fn training_job(name: &str, replicas: u32, min: u32, template: &str, container: &str) -> String {
    JobYaml {
        name,
        replicas,
        min,
        max: None,
        extra_spec: "",
        worker_policy: "OnFailure",
    }
    .render()
    .replace(
        "      template:\n        spec:\n          containers:\n          - name: worker\n            image: horovod/horovod:0.28.1\n",
        &format!(
            "      template:\n{template}        spec:\n          containers:\n          - name: worker\n            image: horovod/horovod:0.28.1\n{container}"
        ),
    )
}

/// The pods ever created for `job`'s Workers: their indices are never used twice, and those
/// a back-off holds are taken but not created yet.
async fn workers_created(env: &Env, job: &str) -> usize {
    let job = env.jobs().get(job).await.unwrap();
    let status = job.status.unwrap_or_default();
    let taken = usize::try_from(status.next_worker_index.unwrap_or_default()).unwrap_or(0);
    let held: usize = status.backoff.iter().map(|b| b.waiting.len()).sum();
    taken - held
}

fn condition<'a>(conditions: &'a [JobCondition], type_: &str) -> Option<&'a JobCondition> {
    conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == ConditionStatus::True)
}

/// Waits until `job`'s condition `PodsFailing` holds with `reason`; returns its message.
async fn pods_failing(env: &Env, job: &str, reason: &str) -> String {
    let job = env
        .wait_job(job, &format!("PodsFailing {reason}"), |job| {
            job.status
                .as_ref()
                .and_then(|s| condition(&s.conditions, "PodsFailing"))
                .is_some_and(|c| c.reason.as_deref() == Some(reason))
        })
        .await;
    let status = job.status.unwrap();
    condition(&status.conditions, "PodsFailing")
        .and_then(|c| c.message.clone())
        .unwrap_or_default()
}

fn pod_failures(env: &Env, kind: &str, role: &str, reason: &str) -> u64 {
    env.operator
        .as_ref()
        .expect("the operator runs")
        .metrics
        .pod_failures
        .get_or_create(&PodFailureLabels {
            kind: kind.into(),
            role: role.into(),
            reason: reason.into(),
        })
        .get()
}

#[tokio::test]
async fn workers_whose_command_fails_at_once_are_backed_off_not_churned() {
    let env = Env::start(sim_config(2, 8)).await;
    let annotations = format!(
        "        metadata:\n          annotations:\n            {EXIT_AFTER}: 1s\n            {TERMINATION_MESSAGE}: \"Traceback (most recent call last):\\nModuleNotFoundError: No module named 'trian'\"\n"
    );
    env.apply_job(&training_job("typo", 2, 1, &annotations, ""))
        .await;
    let started = std::time::Instant::now();
    // Said within seconds of the second failure, with the code and the training's last words.
    let message = pods_failing(&env, "typo", "CrashLoopBackOff").await;
    let said = started.elapsed();
    assert!(
        message.contains("container worker exited with code 1 (Error)")
            && message.contains("ModuleNotFoundError: No module named 'trian'")
            && message.contains("failures of Worker pods in a row"),
        "{message}"
    );
    assert!(said < WAIT, "said after {said:?}");
    let event = poll::until("a Warning event says it", WAIT, async || {
        env.event_notes("typo", "CrashLoopBackOff")
            .await
            .into_iter()
            .next()
    })
    .await;
    assert!(event.contains("exited with code 1"), "{event}");
    tokio::time::sleep(Duration::from_secs(25).saturating_sub(started.elapsed())).await;
    let created = workers_created(&env, "typo").await;
    // Two Workers, replaced at once after their first failure, 10 s after their second:
    // three each in 25 s. Replaced at once every time, they were 46.
    assert!(
        (4..=6).contains(&created),
        "{created} Workers created in 25 s"
    );
    assert!(pod_failures(&env, "TrainingJob", "Worker", "Error") >= 4);
}

#[tokio::test]
async fn a_worker_image_never_pulled_is_said_and_left_alone_until_a_new_template_fixes_it() {
    let env = Env::start(sim_config(2, 8)).await;
    let yaml = training_job("unpulled", 2, 2, "", "").replace(
        "image: horovod/horovod:0.28.1\n            resources",
        "image: example.invalid/none:v1\n            resources",
    );
    assert!(yaml.contains("example.invalid"));
    env.apply_job(&yaml).await;
    let message = pods_failing(&env, "unpulled", "ImagePullBackOff").await;
    assert!(
        message.contains("Back-off pulling image \"example.invalid/none:v1\""),
        "{message}"
    );
    let job = env.jobs().get("unpulled").await.unwrap();
    let status = job.status.unwrap();
    let stalled = condition(&status.conditions, "Stalled").expect("Stalled");
    assert_eq!(stalled.reason.as_deref(), Some("ImagePullBackOff"));
    assert!(pod_failures(&env, "TrainingJob", "Worker", "ImagePullBackOff") >= 1);
    // Not churned: the same two Workers wait.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(workers_created(&env, "unpulled").await, 2);
    assert_eq!(
        env.worker_names("unpulled").await,
        ["unpulled-worker-0", "unpulled-worker-1"]
    );

    // The fix: a new image. New Workers of the new template run at once.
    env.patch_job(
        "unpulled",
        serde_json::json!({"spec": {"etReplicaSpecs": {"worker": {"template": {"spec": {"containers": [
            {"name": "worker", "image": "horovod/horovod:0.28.1", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}}}}),
    )
    .await;
    let fixed_at = std::time::Instant::now();
    for worker in ["unpulled-worker-2", "unpulled-worker-3"] {
        env.wait_pod(worker, "runs", pod_ready).await;
    }
    eprintln!(
        "a fixed template to Running Workers: {:.1} s",
        fixed_at.elapsed().as_secs_f64()
    );
    env.wait_job("unpulled", "PodsFailing clears", |job| {
        job.status
            .as_ref()
            .is_some_and(|s| condition(&s.conditions, "PodsFailing").is_none())
    })
    .await;
    for stuck in ["unpulled-worker-0", "unpulled-worker-1"] {
        env.wait_pod(stuck, "is replaced", |pod| pod.is_none())
            .await;
    }
}

#[tokio::test]
async fn a_worker_whose_secret_is_missing_waits_and_starts_once_it_exists() {
    let env = Env::start(sim_config(1, 8)).await;
    let env_var = "            env:\n            - name: WANDB_API_KEY\n              valueFrom:\n                secretKeyRef: {name: wandb, key: key}\n";
    env.apply_job(&training_job("secretive", 1, 1, "", env_var))
        .await;
    let message = pods_failing(&env, "secretive", "CreateContainerConfigError").await;
    assert_eq!(
        message,
        "Worker secretive-worker-0: container worker waits in CreateContainerConfigError: secret \"wandb\" not found"
    );
    let secrets: Api<Secret> = Api::default_namespaced(env.client.clone());
    let secret: Secret = serde_json::from_value(
        serde_json::json!({"metadata": {"name": "wandb"}, "stringData": {"key": "k"}}),
    )
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    env.wait_pod("secretive-worker-0", "runs", pod_ready).await;
    env.wait_job("secretive", "PodsFailing clears", |job| {
        job.status
            .as_ref()
            .is_some_and(|s| condition(&s.conditions, "PodsFailing").is_none())
    })
    .await;
    assert_eq!(workers_created(&env, "secretive").await, 1, "the same pod");
}

#[tokio::test]
async fn a_spot_reclaim_during_a_back_off_is_replaced_at_once() {
    // Worker 0's slot fails on its own, the two others train.
    let env = Env::start(sim_config(2, 8)).await;
    env.apply_job(&training_job("degraded", 3, 1, "", "")).await;
    for worker in 0..3 {
        env.wait_pod(&format!("degraded-worker-{worker}"), "runs", pod_ready)
            .await;
    }
    env.cluster
        .fail_pod("default", "degraded-worker-0", 1, "Error")
        .unwrap();
    env.wait_pod("degraded-worker-3", "runs", pod_ready).await;
    env.cluster
        .fail_pod("default", "degraded-worker-3", 1, "Error")
        .unwrap();
    let message = pods_failing(&env, "degraded", "CrashLoopBackOff").await;
    assert!(message.contains("degraded-worker-4"), "{message}");
    // The node of Worker 1 goes without notice.
    let node = env
        .pods()
        .get("degraded-worker-1")
        .await
        .unwrap()
        .spec
        .unwrap()
        .node_name
        .unwrap();
    let reclaimed_at = std::time::Instant::now();
    env.cluster.reclaim_node(&node, Duration::ZERO).unwrap();
    // Its Workers are replaced at once; the failed one's replacement still waits.
    let replacement = poll::until("a replacement of the reclaimed Workers", WAIT, async || {
        let job: TrainingJob = env.jobs().get("degraded").await.ok()?;
        let status = job.status?;
        status
            .target_workers
            .iter()
            .find(|w| w.as_str() > "degraded-worker-4" && w.len() >= "degraded-worker-5".len())
            .cloned()
    })
    .await;
    env.wait_pod(&replacement, "exists", |pod| pod.is_some())
        .await;
    assert!(
        reclaimed_at.elapsed() < Duration::from_secs(8),
        "{replacement} created {:?} after the reclaim, within the 10 s back-off",
        reclaimed_at.elapsed()
    );
    assert!(
        env.pods()
            .get_opt("degraded-worker-4")
            .await
            .unwrap()
            .is_none(),
        "the failed Worker's replacement still backs off"
    );
}

#[tokio::test]
async fn mpijob_workers_that_fail_at_once_back_off() {
    let env = Env::start(sim_config(2, 8)).await;
    let job: MPIJob = env
        .apply(&format!(
            r#"
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: pi
  namespace: default
spec:
  slotsPerWorker: 1
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - name: launcher
            image: mpioperator/mpi-pi:openmpi
            command: ["mpirun", "-n", "2", "/home/mpiuser/pi"]
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        metadata:
          annotations:
            {EXIT_AFTER}: 1s
        spec:
          containers:
          - name: worker
            image: mpioperator/mpi-pi:openmpi
"#
        ))
        .await;
    assert_eq!(job.metadata.name.as_deref(), Some("pi"));
    let jobs: Api<MPIJob> = Api::default_namespaced(env.client.clone());
    let failing = poll::until(
        "PodsFailing on the MPIJob",
        Duration::from_secs(30),
        async || {
            let job = jobs.get("pi").await.ok()?;
            let status = job.status?;
            condition(&status.conditions, "PodsFailing")
                .filter(|c| c.reason.as_deref() == Some("CrashLoopBackOff"))
                .and_then(|c| c.message.clone())
        },
    )
    .await;
    assert!(failing.starts_with("Worker pi-worker-"), "{failing}");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let job = jobs.get("pi").await.unwrap();
    let next = job
        .status
        .unwrap()
        .eto
        .next_worker_index
        .unwrap_or_default();
    assert!(next <= 6, "{next} Workers created");
}

#[tokio::test]
async fn a_pytorchjob_master_whose_command_fails_is_said_and_not_churned() {
    let env = Env::start(sim_config(2, 8)).await;
    let _: PyTorchJob = env
        .apply(
            r#"
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: broken
  namespace: default
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: pytorch
            image: kubeflow/pytorch-dist-mnist:latest
            command: ["false"]
    Worker:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: pytorch
            image: kubeflow/pytorch-dist-mnist:latest
            command: ["torchrun", "/opt/mnist/src/mnist.py"]
"#,
        )
        .await;
    let jobs: Api<PyTorchJob> = Api::default_namespaced(env.client.clone());
    let failing = poll::until(
        "PodsFailing on the PyTorchJob",
        Duration::from_secs(30),
        async || {
            let job = jobs.get("broken").await.ok()?;
            let status = job.status?;
            condition(&status.conditions, "PodsFailing").and_then(|c| c.message.clone())
        },
    )
    .await;
    assert_eq!(
        failing,
        "Master broken-master-0: container pytorch waits in CrashLoopBackOff: it exited with code 1"
    );
    // The kubelet restarts it in place: eto creates nothing more.
    let before = env
        .pods()
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .len();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = env
        .pods()
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .len();
    assert_eq!(before, after);
}
