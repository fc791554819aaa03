//! TrainJobs against the simulated cluster: Trainer's `torch-distributed` runtime and a
//! TrainJob written for it, static to `Complete` with JobSet's labels and Trainer's status,
//! Kueue's suspend and admission, an elastic one that loses a node and replaces it, and what
//! a missing runtime and a patch naming a step the runtime lacks get.

use eto_api::TrainJob;
use eto_api::train_job::TrainJobStatus;
use eto_tests::env::{Env, pod_ready, sim_config};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::ListParams;

const JOB: &str = "mnist";

fn train_job(trainer: serde_json::Value) -> String {
    serde_json::json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": JOB, "namespace": "default"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer}
    })
    .to_string()
}

/// Installs Trainer's `torch-distributed` runtime (see `eto_tests::trainer_runtime`).
async fn install_runtime(env: &Env) {
    eto_tests::trainer_runtime::install_torch_distributed(&env.client).await;
}

fn status(job: &TrainJob) -> TrainJobStatus {
    job.status.clone().unwrap_or_default()
}

fn holds(job: &TrainJob, type_: &str) -> bool {
    status(job)
        .conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// The message of the job's `Stalled` condition.
fn stalled_message(job: &TrainJob) -> String {
    status(job)
        .eto_conditions
        .iter()
        .find(|c| c.type_ == "Stalled")
        .and_then(|c| c.message.clone())
        .unwrap_or_default()
}

fn eto_holds(job: &TrainJob, type_: &str) -> bool {
    status(job)
        .eto_conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == eto_api::common::ConditionStatus::True)
}

/// Whether pod `name` exists.
async fn exists(env: &Env, name: &str) -> bool {
    env.pods().get_opt(name).await.unwrap().is_some()
}

/// The job's node pods, as the `kubeflow` SDK lists them.
async fn sdk_pods(env: &Env) -> Vec<Pod> {
    let selector = format!(
        "jobset.sigs.k8s.io/jobset-name={JOB},jobset.sigs.k8s.io/replicatedjob-name in (dataset-initializer, model-initializer, launcher, node)"
    );
    env.pods()
        .list(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items
}

#[tokio::test]
async fn a_static_job_of_the_upstream_runtime_runs_its_nodes_and_completes() {
    let env = Env::start(sim_config(2, 8)).await;
    install_runtime(&env).await;
    env.apply::<TrainJob>(&train_job(serde_json::json!({
        "numNodes": 2, "command": ["torchrun", "train.py"]
    })))
    .await;
    for pod in ["mnist-master-0", "mnist-worker-0"] {
        env.wait_pod(pod, "is ready", pod_ready).await.unwrap();
    }
    let mut indices: Vec<String> = sdk_pods(&env)
        .await
        .iter()
        .map(|pod| pod.labels()["batch.kubernetes.io/job-completion-index"].clone())
        .collect();
    indices.sort();
    assert_eq!(
        indices,
        ["0", "1"],
        "the SDK finds both nodes with their ranks"
    );
    let running = env
        .wait::<TrainJob>(JOB, "runs", |job| eto_holds(job, "Running"))
        .await;
    assert_eq!(
        status(&running).conditions,
        Vec::new(),
        "no condition of Trainer's while it runs"
    );
    assert_eq!(status(&running).jobs_status[0].active, 1);
    env.cluster
        .succeed_pod("default", "mnist-worker-0")
        .unwrap();
    env.cluster
        .succeed_pod("default", "mnist-master-0")
        .unwrap();
    let done = env
        .wait::<TrainJob>(JOB, "completes", |job| holds(job, "Complete"))
        .await;
    assert_eq!(
        status(&done).conditions.last().map(|c| c.type_.as_str()),
        Some("Complete"),
        "the State column shows Complete"
    );
    assert_eq!(status(&done).jobs_status[0].succeeded, 1);
}

#[tokio::test]
async fn kueue_creates_it_suspended_and_admits_it_with_its_patch() {
    let env = Env::start(sim_config(2, 8)).await;
    install_runtime(&env).await;
    let mut job: serde_json::Value =
        serde_json::from_str(&train_job(serde_json::json!({"numNodes": 2}))).unwrap();
    job["spec"]["suspend"] = serde_json::json!(true);
    env.apply::<TrainJob>(&job.to_string()).await;
    let suspended = env
        .wait::<TrainJob>(JOB, "is suspended", |job| holds(job, "Suspended"))
        .await;
    assert_eq!(status(&suspended).conditions[0].reason, "Suspended");
    assert!(!exists(&env, "mnist-master-0").await);
    // Kueue admits it: its node selector as a runtime patch, then resumes it.
    job["spec"]["suspend"] = serde_json::json!(false);
    job["spec"]["runtimePatches"] = serde_json::json!([{"manager": "kueue.x-k8s.io/manager",
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"name": "node",
            "template": {"spec": {"template": {"spec": {"nodeSelector": {"pool": "a"}}}}}}]}}}}]);
    env.apply::<TrainJob>(&job.to_string()).await;
    let pod = env
        .wait_pod("mnist-master-0", "is created", |pod| pod.is_some())
        .await
        .unwrap();
    assert_eq!(
        pod.spec.unwrap().node_selector.unwrap()["pool"],
        "a",
        "the patch reaches the pods"
    );
    let resumed = env
        .wait::<TrainJob>(JOB, "is resumed", |job| {
            status(job)
                .conditions
                .iter()
                .any(|c| c.type_ == "Suspended" && c.status == "False")
        })
        .await;
    assert_eq!(status(&resumed).conditions[0].reason, "Resumed");
}

#[tokio::test]
async fn an_elastic_job_replaces_a_lost_node_and_keeps_training() {
    let env = Env::start(sim_config(2, 8)).await;
    install_runtime(&env).await;
    env.apply::<TrainJob>(&train_job(serde_json::json!({
        "numNodes": 3,
        "elasticPolicy": {"minNodes": 2, "maxNodes": 3}
    })))
    .await;
    for pod in ["mnist-worker-0", "mnist-worker-1", "mnist-worker-2"] {
        env.wait_pod(pod, "is ready", pod_ready).await.unwrap();
    }
    env.pods()
        .delete("mnist-worker-0", &Default::default())
        .await
        .unwrap();
    env.wait_pod("mnist-worker-3", "replaces the lost node", pod_ready)
        .await
        .unwrap();
    let job = env
        .wait::<TrainJob>(JOB, "lists the lost node", |job| {
            !status(job).eto.blacklist.is_empty()
        })
        .await;
    assert!(
        !holds(&job, "Failed"),
        "a node the platform took fails nothing"
    );
    let replacement = env.pods().get("mnist-worker-3").await.unwrap();
    assert_eq!(
        replacement.labels()["batch.kubernetes.io/job-completion-index"],
        "3"
    );
}

#[tokio::test]
async fn a_missing_runtime_stalls_the_job_until_it_is_created() {
    let env = Env::start(sim_config(2, 8)).await;
    env.apply::<TrainJob>(&train_job(serde_json::json!({"numNodes": 1})))
        .await;
    let stalled = env
        .wait::<TrainJob>(JOB, "stalls", |job| eto_holds(job, "Stalled"))
        .await;
    let message = stalled_message(&stalled);
    assert!(
        message.contains(
            "spec.runtimeRef.name: ClusterTrainingRuntime torch-distributed does not exist"
        ),
        "{message}"
    );
    assert!(
        env.event_reasons(JOB)
            .await
            .contains(&"InvalidSpec".to_string())
    );
    install_runtime(&env).await;
    env.wait_pod(
        "mnist-master-0",
        "is created once the runtime exists",
        |pod| pod.is_some(),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_patch_naming_a_step_the_runtime_lacks_creates_nothing_and_names_the_field() {
    let env = Env::start(sim_config(2, 8)).await;
    install_runtime(&env).await;
    let mut job: serde_json::Value =
        serde_json::from_str(&train_job(serde_json::json!({"numNodes": 1}))).unwrap();
    job["spec"]["runtimePatches"] = serde_json::json!([{"manager": "me",
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"name": "launcher"}]}}}}]);
    env.apply::<TrainJob>(&job.to_string()).await;
    let stalled = env
        .wait::<TrainJob>(JOB, "stalls", |job| eto_holds(job, "Stalled"))
        .await;
    let message = stalled_message(&stalled);
    assert!(
        message.contains(
            "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].name"
        ),
        "{message}"
    );
    assert!(
        env.pods()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

/// A TrainingRuntime of the job's namespace with Trainer's two initializers before the nodes,
/// the model's waiting for the dataset's, as Trainer's torchtune runtimes have them.
const RUNTIME_WITH_INITIALIZERS: &str = r#"
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata:
  name: torch-with-initializers
  namespace: default
spec:
  mlPolicy:
    numNodes: 1
    torch: {}
  template:
    spec:
      replicatedJobs:
        - name: dataset-initializer
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer
            spec:
              template:
                spec:
                  containers:
                    - name: dataset-initializer
                      image: ghcr.io/kubeflow/trainer/dataset-initializer
        - name: model-initializer
          dependsOn:
            - name: dataset-initializer
              status: Complete
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: model-initializer
            spec:
              template:
                spec:
                  containers:
                    - name: model-initializer
                      image: ghcr.io/kubeflow/trainer/model-initializer
        - name: node
          dependsOn:
            - name: dataset-initializer
              status: Complete
            - name: model-initializer
              status: Complete
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: trainer
            spec:
              template:
                spec:
                  containers:
                    - name: node
                      image: pytorch/pytorch:2.13.0
"#;

#[tokio::test]
async fn initializers_run_in_order_before_the_nodes() {
    let env = Env::start(sim_config(2, 8)).await;
    env.apply::<eto_api::TrainingRuntime>(RUNTIME_WITH_INITIALIZERS)
        .await;
    env.apply::<TrainJob>(
        &serde_json::json!({
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": JOB, "namespace": "default"},
            "spec": {
                "runtimeRef": {"name": "torch-with-initializers", "kind": "TrainingRuntime"},
                "initializer": {"dataset": {"storageUri": "hf://tatsu-lab/alpaca"}},
                "trainer": {"numNodes": 1}
            }
        })
        .to_string(),
    )
    .await;
    let dataset = env
        .wait_pod("mnist-dataset-initializer-0", "is created", |pod| {
            pod.is_some()
        })
        .await
        .unwrap();
    let container = &dataset.spec.unwrap().containers[0];
    assert_eq!(
        container.env.as_ref().unwrap()[0].value.as_deref(),
        Some("hf://tatsu-lab/alpaca")
    );
    assert!(!exists(&env, "mnist-model-initializer-0").await);
    env.cluster
        .succeed_pod("default", "mnist-dataset-initializer-0")
        .unwrap();
    env.wait_pod("mnist-model-initializer-0", "is created", |pod| {
        pod.is_some()
    })
    .await;
    assert!(!exists(&env, "mnist-master-0").await);
    env.cluster
        .succeed_pod("default", "mnist-model-initializer-0")
        .unwrap();
    env.wait_pod(
        "mnist-master-0",
        "starts once both initializers are done",
        |pod| pod.is_some(),
    )
    .await;
    let job = env
        .wait::<TrainJob>(JOB, "is prepared", |job| eto_holds(job, "Prepared"))
        .await;
    assert!(!holds(&job, "Failed"));
}
