//! A TrainJob's life, planned with its runtime: the static group of Trainer's
//! `torch-distributed` runtime, an elastic one on eto's hosted rendezvous, Trainer's status,
//! and what a missing or unsupported runtime gets.

use eto_api::TrainJob;
use eto_api::job_status::JobPhase;
use k8s_openapi::api::core::v1::Pod;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::pytorch::env;
use crate::job::Referenced;
use crate::plan::*;
use crate::testing::world::{World, pod_names};
use crate::testing::{torch_distributed, train_job};

fn patched(patch: serde_json::Value) -> TrainJob {
    let mut value = serde_json::to_value(train_job()).unwrap();
    json_patch::merge(&mut value, &patch);
    serde_json::from_value(value).unwrap()
}

fn world(job: TrainJob) -> World {
    World::train(job, Referenced::Found(torch_distributed()))
}

fn status(world: &World) -> eto_api::TrainJobStatus {
    world
        .train_job
        .as_ref()
        .and_then(|(job, _)| job.job.status.clone())
        .expect("the job has a status")
}

fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

#[test]
fn a_static_job_of_two_nodes_runs_as_trainers_with_jobset_labels_and_the_torch_environment() {
    let mut world = world(train_job());
    let plan = world.reconcile();
    assert_eq!(pod_names(&plan), ["mnist-worker-0", "mnist-master-0"]);
    let node = |name: &str| world.pods[name].clone();
    for (name, rank) in [("mnist-master-0", "0"), ("mnist-worker-0", "1")] {
        let pod = node(name);
        assert_eq!(label(&pod, "jobset.sigs.k8s.io/jobset-name"), Some("mnist"));
        assert_eq!(
            label(&pod, "jobset.sigs.k8s.io/replicatedjob-name"),
            Some("node")
        );
        assert_eq!(
            label(&pod, "batch.kubernetes.io/job-completion-index"),
            Some(rank)
        );
        assert_eq!(
            label(&pod, "trainer.kubeflow.org/trainjob-ancestor-step"),
            Some("trainer")
        );
        assert!(
            pod.metadata
                .labels
                .iter()
                .flatten()
                .all(|(key, _)| !key.starts_with("training.kubeflow.org/")),
            "{name} carries no label of v1's"
        );
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.api_version.as_str()),
            ("TrainJob", "trainer.kubeflow.org/v1alpha1")
        );
        let container = &pod.spec.as_ref().unwrap().containers[0];
        assert_eq!(container.name, "node");
        assert_eq!(container.image.as_deref(), Some("pytorch/pytorch:2.5.1"));
        assert_eq!(env(&pod, "PET_NNODES").as_deref(), Some("2"));
        assert_eq!(env(&pod, "PET_NODE_RANK").as_deref(), Some(rank));
        assert_eq!(
            env(&pod, "PET_MASTER_ADDR").as_deref(),
            Some("mnist-master-0")
        );
        assert_eq!(env(&pod, "PET_MASTER_PORT").as_deref(), Some("29500"));
        // No GPU and no CPU asked for: `auto` becomes one process, as Trainer's runtime has it.
        assert_eq!(env(&pod, "PET_NPROC_PER_NODE").as_deref(), Some("1"));
    }
    let services: Vec<(String, serde_json::Value)> = plan
        .apply
        .iter()
        .filter_map(|child| match child {
            Child::Service(service) => Some((
                service.metadata.name.clone().unwrap(),
                serde_json::to_value(&service.spec.as_ref().unwrap().selector).unwrap(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        services,
        [
            (
                "mnist-master-0".to_string(),
                json!({"eto.dev/index": "0", "eto.dev/kind": "trainjob", "eto.dev/role": "master",
                    "jobset.sigs.k8s.io/jobset-name": "mnist"})
            ),
            (
                "mnist-worker-0".to_string(),
                json!({"eto.dev/index": "0", "eto.dev/kind": "trainjob", "eto.dev/role": "worker",
                    "jobset.sigs.k8s.io/jobset-name": "mnist"})
            ),
        ],
        "each Service selects its pod by the labels the pod carries"
    );
    for (name, service) in &world.pod_services {
        let selector = service.spec.as_ref().unwrap().selector.clone().unwrap();
        let pod = &world.pods[name];
        let labels = pod.metadata.labels.clone().unwrap();
        assert!(
            selector.iter().all(|(k, v)| labels.get(k) == Some(v)),
            "{name}"
        );
    }
}

#[test]
fn a_running_job_shows_no_trainer_condition_and_a_finished_one_is_complete() {
    let mut world = world(train_job());
    world.reconcile();
    for pod in ["mnist-master-0", "mnist-worker-0"] {
        world.ready(pod);
    }
    world.reconcile();
    let running = status(&world);
    assert_eq!(
        running.conditions,
        Vec::new(),
        "the SDK reads a running job from its pods"
    );
    assert_eq!(running.jobs_status[0].active, 1);
    assert_eq!(running.jobs_status[0].ready, 1);
    assert!(running.eto_conditions.iter().any(|c| c.type_ == "Running"));
    world.exit("mnist-master-0", 0);
    world.exit("mnist-worker-0", 0);
    world.reconcile();
    let done = status(&world);
    assert_eq!(done.eto.phase, Some(JobPhase::Succeeded));
    let last = done.conditions.last().unwrap();
    assert_eq!(
        (last.type_.as_str(), last.status.as_str()),
        ("Complete", "True")
    );
    assert_eq!(done.jobs_status[0].succeeded, 1);
}

#[test]
fn an_elastic_job_runs_its_nodes_as_workers_of_a_rendezvous_eto_hosts() {
    let job = patched(json!({"spec": {"trainer": {
        "numNodes": 3,
        "elasticPolicy": {"minNodes": 2, "maxNodes": 3}
    }}}));
    let mut world = world(job);
    let plan = world.reconcile();
    let mut names = pod_names(&plan);
    names.sort();
    assert_eq!(
        names,
        [
            "mnist-rdzv",
            "mnist-worker-0",
            "mnist-worker-1",
            "mnist-worker-2"
        ]
    );
    let worker = &world.pods["mnist-worker-2"];
    assert_eq!(env(worker, "PET_NNODES").as_deref(), Some("2:3"));
    assert_eq!(
        label(worker, "batch.kubernetes.io/job-completion-index"),
        Some("2")
    );
    assert!(
        env(worker, "PET_RDZV_ENDPOINT")
            .unwrap()
            .starts_with("mnist-rdzv.")
    );
    let store = &world.pods["mnist-rdzv"];
    assert_eq!(label(store, "eto.dev/role"), Some("rendezvous"));
    assert_eq!(
        label(store, "jobset.sigs.k8s.io/replicatedjob-name"),
        Some("rendezvous"),
        "the SDK, which lists the node steps, does not take the store for a node"
    );
    assert_eq!(
        label(store, "batch.kubernetes.io/job-completion-index"),
        None
    );
}

#[test]
fn a_job_without_its_runtime_creates_nothing_and_says_which_field() {
    let mut world = World::train(train_job(), Referenced::Missing);
    let plan = world.reconcile();
    assert_eq!(pod_names(&plan), Vec::<String>::new());
    let stalled = status(&world)
        .eto_conditions
        .into_iter()
        .find(|c| c.type_ == "Stalled")
        .unwrap();
    assert_eq!(stalled.reason.as_deref(), Some("InvalidSpec"));
    assert!(
        stalled.message.unwrap().contains(
            "spec.runtimeRef.name: ClusterTrainingRuntime torch-distributed does not exist"
        ),
    );
    assert!(
        plan.events
            .iter()
            .any(|event| event.reason == "InvalidSpec")
    );
}

/// Trainer's runtime with a dataset and a model initializer, the nodes waiting for both to
/// complete and the model's for the dataset's.
fn runtime_with_initializers() -> Referenced {
    let mut runtime = torch_distributed();
    let step = |name: &str, depends: serde_json::Value| {
        json!({"name": name, "dependsOn": depends, "template": {"metadata": {"labels": {
            "trainer.kubeflow.org/trainjob-ancestor-step": name}},
            "spec": {"template": {"spec": {"containers": [{"name": name, "image": "init"}]}}}}})
    };
    runtime["spec"]["template"]["spec"]["replicatedJobs"] = json!([
        step("dataset-initializer", json!([])),
        step("model-initializer", json!([{"name": "dataset-initializer", "status": "Complete"}])),
        {"name": "node", "dependsOn": [
            {"name": "dataset-initializer", "status": "Complete"},
            {"name": "model-initializer", "status": "Complete"}],
         "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "torch"}]}}}}}
    ]);
    Referenced::Found(runtime)
}

#[test]
fn initializers_run_one_after_the_other_before_the_nodes_and_never_again() {
    let mut world = World::train(train_job(), runtime_with_initializers());
    let plan = world.reconcile();
    assert_eq!(pod_names(&plan), ["mnist-dataset-initializer-0"]);
    let pod = &world.pods["mnist-dataset-initializer-0"];
    assert_eq!(
        label(pod, "jobset.sigs.k8s.io/replicatedjob-name"),
        Some("dataset-initializer"),
        "the SDK lists it as the job's dataset-initializer step"
    );
    assert_eq!(
        pod_names(&world.reconcile()),
        Vec::<String>::new(),
        "it runs alone"
    );
    world.exit("mnist-dataset-initializer-0", 0);
    assert_eq!(pod_names(&world.reconcile()), ["mnist-model-initializer-0"]);
    world.exit("mnist-model-initializer-0", 0);
    let plan = world.reconcile();
    let mut names = pod_names(&plan);
    names.sort();
    assert_eq!(
        names,
        ["mnist-master-0", "mnist-worker-0"],
        "the nodes start once both are done"
    );
    let prepared = status(&world)
        .eto_conditions
        .into_iter()
        .find(|c| c.type_ == "Prepared")
        .unwrap();
    assert_eq!(prepared.reason.as_deref(), Some("StepsDone"));
    let steps: Vec<(String, i32, i32)> = status(&world)
        .jobs_status
        .into_iter()
        .map(|step| (step.name, step.succeeded, step.active))
        .collect();
    assert_eq!(
        steps,
        [
            ("dataset-initializer".to_string(), 1, 0),
            ("model-initializer".to_string(), 1, 0),
            // The nodes' pods are created by this very reconcile: none counted yet.
            ("node".to_string(), 0, 0)
        ],
        "jobsStatus counts each replicated job, as JobSet does"
    );
    // Their pods gone (a clean-up by hand), the steps do not run again.
    world.pods.remove("mnist-dataset-initializer-0");
    world.pods.remove("mnist-model-initializer-0");
    assert!(
        !pod_names(&world.reconcile())
            .iter()
            .any(|name| name.contains("initializer"))
    );
}

#[test]
fn a_failed_initializer_fails_the_job_before_any_node_starts() {
    let mut world = World::train(train_job(), runtime_with_initializers());
    world.reconcile();
    world.exit("mnist-dataset-initializer-0", 1);
    world.reconcile();
    let failed = status(&world);
    assert_eq!(failed.eto.phase, Some(JobPhase::Failed));
    let condition = failed.conditions.last().unwrap();
    assert_eq!(
        (condition.type_.as_str(), condition.reason.as_str()),
        ("Failed", "PreparationFailed")
    );
    assert!(
        condition
            .message
            .contains("step dataset-initializer failed")
    );
    assert!(!world.pods.contains_key("mnist-master-0"));
}

#[test]
fn an_elastic_job_with_metrics_gets_an_autoscaler_of_its_nodes() {
    let job = patched(json!({"spec": {"trainer": {
        "numNodes": 2,
        "elasticPolicy": {"minNodes": 2, "maxNodes": 6, "metrics": [{"type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}]}
    }}}));
    let mut world = world(job);
    world.reconcile();
    for pod in ["mnist-worker-0", "mnist-worker-1", "mnist-rdzv"] {
        world.ready(pod);
    }
    world.reconcile();
    let autoscaler = world.autoscaler.clone().expect("an autoscaler");
    let spec = autoscaler.spec.unwrap();
    assert_eq!(
        (
            spec.scale_target_ref.kind.as_str(),
            spec.scale_target_ref.api_version.as_deref(),
            spec.scale_target_ref.name.as_str()
        ),
        ("TrainJob", Some("trainer.kubeflow.org/v1alpha1"), "mnist"),
        "it scales the TrainJob's numNodes through its scale subresource"
    );
    assert_eq!((spec.min_replicas, spec.max_replicas), (Some(2), 6));
    let owner = &autoscaler.metadata.owner_references.unwrap()[0];
    assert_eq!(owner.kind, "TrainJob");
}
