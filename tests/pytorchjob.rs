//! PyTorchJobs against the simulated cluster: a training-operator v1 job (a Master and two
//! Workers) to Succeeded with v1's objects and status, what `arena submit pytorchjob`
//! renders, Kueue's suspend, admission and preemption, a Worker the platform takes, one
//! whose training fails under `ExitCode`, a job of Workers only, and an elastic job whose
//! rendezvous eto hosts (worker 0 lost, grown through its replicas, its store lost, its
//! rendezvous closed after a lost Worker), and one with v1's autoscaler from
//! `elasticPolicy.metrics`.

use eto_api::PyTorchJob;
use eto_api::common::ConditionStatus;
use eto_api::pytorch_job::PyTorchReplicaType;
use eto_engine::kind::pytorch_job::replica_groups;
use eto_tests::autoscaled::autoscaled_pytorch_job;
use eto_tests::env::{Env, pod_ready, sim_config};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

const JOB: &str = "mnist";

/// A PyTorchJob as training-operator v1's examples write it: a Master and two Workers, each
/// running torchrun in a container named `pytorch`, nothing defaulted.
const V1_JOB: &str = r#"
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: mnist
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
            command: ["torchrun", "/opt/mnist/src/mnist.py", "--epochs=1"]
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: pytorch
            image: kubeflow/pytorch-dist-mnist:latest
            command: ["torchrun", "/opt/mnist/src/mnist.py", "--epochs=1"]
"#;

const PODS: [&str; 3] = ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"];

fn last_condition(job: &PyTorchJob) -> Option<String> {
    Some(job.status.as_ref()?.conditions.last()?.type_.clone())
}

fn has(job: &PyTorchJob, type_: &str) -> bool {
    job.status.as_ref().is_some_and(|status| {
        status
            .conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == ConditionStatus::True)
    })
}

fn env_of(pod: &Pod, name: &str) -> Option<String> {
    pod.spec.as_ref()?.containers[0]
        .env
        .iter()
        .flatten()
        .find(|var| var.name == name)?
        .value
        .clone()
}

/// The pods `names`, once each is ready.
async fn ready(env: &Env, names: &[&str]) -> Vec<Pod> {
    let mut pods = Vec::new();
    for name in names {
        pods.push(env.wait_pod(name, "is ready", pod_ready).await.unwrap());
    }
    pods
}

async fn all_ready(env: &Env) -> Vec<Pod> {
    ready(env, &PODS).await
}

#[tokio::test]
async fn a_v1_job_runs_with_v1s_objects_and_succeeds_with_its_master() {
    let env = Env::start(sim_config(2, 8)).await;
    env.apply::<PyTorchJob>(V1_JOB).await;
    let pods = all_ready(&env).await;
    for (pod, rank) in pods.iter().zip(["0", "1", "2"]) {
        assert_eq!(env_of(pod, "RANK").as_deref(), Some(rank));
        assert_eq!(env_of(pod, "WORLD_SIZE").as_deref(), Some("3"));
        assert_eq!(
            env_of(pod, "MASTER_ADDR").as_deref(),
            Some("mnist-master-0")
        );
        assert_eq!(env_of(pod, "PET_NNODES").as_deref(), Some("3"));
        assert_eq!(
            pod.metadata.labels.as_ref().unwrap()["training.kubeflow.org/operator-name"],
            "pytorchjob-controller"
        );
    }
    let services: Api<Service> = Api::default_namespaced(env.client.clone());
    for name in PODS {
        let service = services.get(name).await.unwrap();
        assert_eq!(
            service.spec.unwrap().cluster_ip.as_deref(),
            Some("None"),
            "{name}: a headless Service named like its pod"
        );
    }
    let running = env
        .wait::<PyTorchJob>(JOB, "runs", |job| has(job, "Running"))
        .await;
    assert_eq!(last_condition(&running).as_deref(), Some("Running"));
    let status = running.status.unwrap();
    assert_eq!(
        status.replica_statuses[&PyTorchReplicaType::Worker].active,
        2
    );
    assert!(status.start_time.is_some());

    env.cluster
        .succeed_pod("default", "mnist-master-0")
        .unwrap();
    let done = env
        .wait::<PyTorchJob>(JOB, "succeeds", |job| has(job, "Succeeded"))
        .await;
    assert_eq!(last_condition(&done).as_deref(), Some("Succeeded"));
    let status = done.status.unwrap();
    assert!(status.completion_time.is_some());
    assert_eq!(
        status.conditions.last().unwrap().reason.as_deref(),
        Some("PyTorchJobSucceeded")
    );
}

#[tokio::test]
async fn kueue_creates_it_suspended_admits_it_with_its_node_selector_and_preempts_it() {
    let env = Env::start(sim_config(2, 8)).await;
    // Kueue's webhook suspends the job as it is created.
    let mut job: serde_json::Value = serde_saphyr::from_str(V1_JOB).unwrap();
    job["metadata"]["labels"] = json!({"kueue.x-k8s.io/queue-name": "team"});
    job["spec"]["runPolicy"] = json!({"suspend": true});
    env.apply::<PyTorchJob>(&serde_json::to_string(&job).unwrap())
        .await;
    let suspended = env
        .wait::<PyTorchJob>(JOB, "is suspended", |job| has(job, "Suspended"))
        .await;
    assert_eq!(last_condition(&suspended).as_deref(), Some("Suspended"));
    assert!(
        env.pods()
            .get_opt("mnist-master-0")
            .await
            .unwrap()
            .is_none()
    );

    // Admission: Kueue merges its node selector and tolerations into each template and
    // unsuspends.
    let jobs: Api<PyTorchJob> = Api::default_namespaced(env.client.clone());
    let selector = json!({"template": {"spec": {
        "nodeSelector": {"cloud.example/flavor": "on-demand"},
        "tolerations": [{"key": "cloud.example/reserved", "operator": "Exists"}]
    }}});
    jobs.patch(
        JOB,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {
            "runPolicy": {"suspend": false},
            "pytorchReplicaSpecs": {"Master": selector, "Worker": selector}
        }})),
    )
    .await
    .unwrap();
    for name in PODS {
        let pod = env
            .wait_pod(name, "is created", |pod| pod.is_some())
            .await
            .unwrap();
        let spec = pod.spec.unwrap();
        assert_eq!(
            spec.node_selector.unwrap()["cloud.example/flavor"],
            "on-demand"
        );
        assert!(
            spec.tolerations
                .unwrap_or_default()
                .iter()
                .any(|t| t.key.as_deref() == Some("cloud.example/reserved")),
            "{name}: Kueue's toleration"
        );
    }
    env.wait::<PyTorchJob>(JOB, "resumes", |job| {
        job.status.as_ref().is_some_and(|status| {
            status
                .conditions
                .iter()
                .any(|c| c.type_ == "Suspended" && c.status == ConditionStatus::False)
        })
    })
    .await;

    // Preemption: suspended again, every pod goes at once.
    jobs.patch(
        JOB,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"runPolicy": {"suspend": true}}})),
    )
    .await
    .unwrap();
    for name in PODS {
        env.wait_pod(name, "is deleted", |pod| pod.is_none()).await;
    }
    let preempted = env
        .wait::<PyTorchJob>(JOB, "is suspended", |job| has(job, "Suspended"))
        .await;
    assert!(!has(&preempted, "Failed"));
}

#[tokio::test]
async fn a_worker_the_platform_takes_fails_nothing_and_the_next_run_keeps_the_ranks() {
    let env = Env::start(sim_config(2, 8)).await;
    env.apply::<PyTorchJob>(V1_JOB).await;
    let before = all_ready(&env).await;
    let old_uid = before[2].metadata.uid.clone();
    env.cluster
        .evict_pod(
            "default",
            "mnist-worker-1",
            "The node was low on resource: memory.",
        )
        .unwrap();
    // Its rank lost, the Master's training fails.
    env.cluster
        .fail_pod("default", "mnist-master-0", 1, "Error")
        .unwrap();
    let job = env
        .wait::<PyTorchJob>(JOB, "runs again", |job| {
            has(job, "Running") && job.status.as_ref().and_then(|s| s.eto.run).unwrap_or(0) >= 1
        })
        .await;
    assert!(!has(&job, "Failed"));
    assert_eq!(job.status.unwrap().eto.restart_count.unwrap_or(0), 0);
    let worker = env
        .wait_pod("mnist-worker-1", "is back, a new pod", |pod| {
            pod.is_some_and(|pod| pod.metadata.uid != old_uid && pod_ready(Some(pod)))
        })
        .await
        .unwrap();
    assert_eq!(env_of(&worker, "RANK").as_deref(), Some("2"));
}

/// What `arena submit pytorchjob --name=arena-ddp --workers=3 --gpus=1
/// --nproc-per-node=2 --clean-task-policy=Running --retry=2 --image=... "python train.py"`
/// renders with Arena's chart 0.5.2, against a CRD that has `spec.runPolicy`.
const ARENA_JOB: &str = r#"
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: arena-ddp
  namespace: default
  labels:
    app: pytorchjob
    chart: pytorchjob-0.5.2
    release: arena-ddp
    heritage: Helm
    createdBy: PyTorchJob
  annotations:
    arena.kubeflow.org/username: alice
    requestGPUsOfJobOwner: "3"
spec:
  runPolicy:
    cleanPodPolicy: Running
    backoffLimit: 2
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: Never
      template:
        metadata:
          labels:
            app: pytorchjob
            release: arena-ddp
            createdBy: PyTorchJob
            master-pod-name: arena-ddp-master-0
        spec:
          volumes:
          - name: dshm
            emptyDir: {medium: Memory, sizeLimit: 2Gi}
          containers:
          - name: pytorch
            image: registry.example/ddp:latest
            imagePullPolicy: Always
            command: ["sh", "-c", "python train.py"]
            resources:
              limits: {nvidia.com/gpu: "1"}
            env:
            - {name: workers, value: "3"}
            - {name: gpus, value: "1"}
            - {name: PET_NPROC_PER_NODE, value: "2"}
            volumeMounts:
            - {mountPath: /dev/shm, name: dshm}
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        metadata:
          labels:
            app: pytorchjob
            release: arena-ddp
            createdBy: PyTorchJob
        spec:
          volumes:
          - name: dshm
            emptyDir: {medium: Memory, sizeLimit: 2Gi}
          containers:
          - name: pytorch
            image: registry.example/ddp:latest
            imagePullPolicy: Always
            command: ["sh", "-c", "python train.py"]
            resources:
              limits: {nvidia.com/gpu: "1"}
            env:
            - {name: workers, value: "3"}
            - {name: gpus, value: "1"}
            - {name: PET_NPROC_PER_NODE, value: "2"}
            volumeMounts:
            - {mountPath: /dev/shm, name: dshm}
"#;

#[tokio::test]
async fn arenas_rendered_job_runs_as_arena_finds_it_and_cleans_up_as_it_asked() {
    let env = Env::start(sim_config(2, 8)).await;
    env.apply::<PyTorchJob>(ARENA_JOB).await;
    for name in [
        "arena-ddp-master-0",
        "arena-ddp-worker-0",
        "arena-ddp-worker-1",
    ] {
        let pod = env.wait_pod(name, "is ready", pod_ready).await.unwrap();
        let labels = pod.metadata.labels.clone().unwrap();
        // Arena finds a job's pods by release and app, and takes a pod with v1's operator
        // label; the chief is the pod of replica type master.
        assert_eq!(labels["release"], "arena-ddp");
        assert_eq!(labels["app"], "pytorchjob");
        assert_eq!(
            labels["training.kubeflow.org/operator-name"],
            "pytorchjob-controller"
        );
        assert_eq!(
            env_of(&pod, "PET_NPROC_PER_NODE").as_deref(),
            Some("2"),
            "{name}: Arena's --nproc-per-node is kept"
        );
    }
    let master = env.pods().get("arena-ddp-master-0").await.unwrap();
    assert_eq!(
        master.metadata.labels.unwrap()["training.kubeflow.org/replica-type"],
        "master"
    );
    env.wait::<PyTorchJob>("arena-ddp", "runs", |job| has(job, "Running"))
        .await;
    env.cluster
        .succeed_pod("default", "arena-ddp-master-0")
        .unwrap();
    env.wait::<PyTorchJob>("arena-ddp", "succeeds", |job| has(job, "Succeeded"))
        .await;
    // cleanPodPolicy: Running deletes the Workers still running.
    for name in ["arena-ddp-worker-0", "arena-ddp-worker-1"] {
        env.wait_pod(name, "is deleted", |pod| pod.is_none()).await;
    }
}

#[tokio::test]
async fn a_worker_whose_training_exits_with_its_own_code_under_exit_code_fails_the_job() {
    let env = Env::start(sim_config(2, 8)).await;
    let mut job: serde_json::Value = serde_saphyr::from_str(V1_JOB).unwrap();
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = json!("ExitCode");
    env.apply::<PyTorchJob>(&serde_json::to_string(&job).unwrap())
        .await;
    all_ready(&env).await;
    env.cluster
        .fail_pod("default", "mnist-worker-0", 1, "Error")
        .unwrap();
    let failed = env
        .wait::<PyTorchJob>(JOB, "fails", |job| has(job, "Failed"))
        .await;
    assert_eq!(last_condition(&failed).as_deref(), Some("Failed"));
    assert!(failed.status.unwrap().completion_time.is_some());
}

#[tokio::test]
async fn a_job_of_workers_only_succeeds_once_every_worker_has() {
    let env = Env::start(sim_config(2, 8)).await;
    let mut job: serde_json::Value = serde_saphyr::from_str(V1_JOB).unwrap();
    job["spec"]["pytorchReplicaSpecs"]
        .as_object_mut()
        .unwrap()
        .remove("Master");
    env.apply::<PyTorchJob>(&serde_json::to_string(&job).unwrap())
        .await;
    for name in ["mnist-worker-0", "mnist-worker-1"] {
        let pod = env.wait_pod(name, "is ready", pod_ready).await.unwrap();
        assert_eq!(env_of(&pod, "MASTER_ADDR"), None);
    }
    env.wait::<PyTorchJob>(JOB, "runs", |job| has(job, "Running"))
        .await;
    env.cluster
        .succeed_pod("default", "mnist-worker-1")
        .unwrap();
    env.cluster
        .succeed_pod("default", "mnist-worker-0")
        .unwrap();
    let done = env
        .wait::<PyTorchJob>(JOB, "succeeds", |job| has(job, "Succeeded"))
        .await;
    assert_eq!(last_condition(&done).as_deref(), Some("Succeeded"));
}

/// An elastic job whose rendezvous eto hosts: three Workers between two and four, no Master.
pub(crate) const ELASTIC_JOB: &str = r#"
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: elastic
  namespace: default
spec:
  elasticPolicy:
    minReplicas: 2
    maxReplicas: 4
    maxRestarts: 3
  pytorchReplicaSpecs:
    Worker:
      replicas: 3
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: pytorch
            image: kubeflow/pytorch-dist-mnist:latest
            command: ["torchrun", "/opt/mnist/src/mnist.py"]
            resources:
              limits: {nvidia.com/gpu: "1"}
"#;

#[tokio::test]
async fn an_elastic_job_keeps_its_rendezvous_when_worker_0_goes_and_grows_to_its_replicas() {
    let env = Env::start(sim_config(2, 8)).await;
    env.apply::<PyTorchJob>(ELASTIC_JOB).await;
    let store = env
        .wait_pod("elastic-rdzv", "is ready", pod_ready)
        .await
        .unwrap();
    let store_spec = store.spec.unwrap();
    assert_eq!(
        store_spec.containers[0].resources.as_ref().unwrap().limits,
        None,
        "the store asks for no GPU"
    );
    let workers = ["elastic-worker-0", "elastic-worker-1", "elastic-worker-2"];
    for worker in ready(&env, &workers).await {
        assert_eq!(
            env_of(&worker, "PET_RDZV_ENDPOINT").as_deref(),
            Some("elastic-rdzv.elastic-workers:29400")
        );
        assert_eq!(env_of(&worker, "PET_NNODES").as_deref(), Some("2:4"));
    }
    let services: Api<Service> = Api::default_namespaced(env.client.clone());
    services.get("elastic-workers").await.unwrap();
    env.wait::<PyTorchJob>("elastic", "runs", |job| has(job, "Running"))
        .await;

    env.cluster
        .evict_pod(
            "default",
            "elastic-worker-0",
            "The node was low on resource: memory.",
        )
        .unwrap();
    let replacement = env
        .wait_pod("elastic-worker-3", "replaces worker 0", pod_ready)
        .await
        .unwrap();
    let survivor = env
        .wait_pod("elastic-worker-1", "still runs", pod_ready)
        .await
        .unwrap();
    assert_eq!(
        env_of(&replacement, "PET_RDZV_ID"),
        env_of(&survivor, "PET_RDZV_ID"),
        "the replacement joins the run's rendezvous"
    );
    let job = env
        .wait::<PyTorchJob>("elastic", "runs on", |job| has(job, "Running"))
        .await;
    assert!(!has(&job, "Failed"));
    assert_eq!(
        job.status.unwrap().eto.run.unwrap_or(0),
        0,
        "the run goes on"
    );

    let scale = json!({"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 4}}}});
    let jobs: Api<PyTorchJob> = Api::default_namespaced(env.client.clone());
    jobs.patch("elastic", &PatchParams::default(), &Patch::Merge(&scale))
        .await
        .unwrap();
    env.wait_pod("elastic-worker-4", "grows the job to four", pod_ready)
        .await
        .unwrap();

    env.cluster
        .succeed_pod("default", "elastic-worker-1")
        .unwrap();
    env.wait::<PyTorchJob>("elastic", "succeeds with its first worker", |job| {
        has(job, "Succeeded")
    })
    .await;
    env.wait_pod("elastic-rdzv", "goes with the job's end", |pod| {
        pod.is_none()
    })
    .await;
}

/// A full group with a spare (`maxReplicas: 3`, `spareReplicas: 1`): eto keeps four Workers,
/// each preferring a node without another of the job's; a lost one is replaced, and the job
/// keeps its spare.
#[tokio::test]
async fn a_full_group_keeps_its_spare_through_a_loss() {
    let env = Env::start(sim_config(2, 8)).await;
    let job = ELASTIC_JOB.replace("maxReplicas: 4", "maxReplicas: 3\n    spareReplicas: 1");
    env.apply::<PyTorchJob>(&job).await;
    let workers = [
        "elastic-worker-0",
        "elastic-worker-1",
        "elastic-worker-2",
        "elastic-worker-3",
    ];
    for worker in ready(&env, &workers).await {
        assert_eq!(env_of(&worker, "PET_NNODES").as_deref(), Some("2:3"));
        assert_eq!(
            env_of(&worker, "PET_RDZV_CONF").as_deref(),
            Some("is_host=false,join_timeout=31536000")
        );
        let spread = worker
            .spec
            .and_then(|spec| spec.affinity)
            .and_then(|affinity| affinity.pod_anti_affinity);
        assert!(spread.is_some(), "a preference for a node of its own");
    }
    let spares = |job: &PyTorchJob| {
        let workers = job.status.as_ref()?.eto.workers.clone()?;
        Some((workers.desired, workers.ready, workers.spares?))
    };
    env.wait::<PyTorchJob>("elastic", "keeps a spare", |job| {
        spares(job) == Some((3, 4, 1))
    })
    .await;

    env.cluster
        .evict_pod(
            "default",
            "elastic-worker-1",
            "The node was low on resource: memory.",
        )
        .unwrap();
    env.wait_pod("elastic-worker-4", "replaces the lost Worker", pod_ready)
        .await
        .unwrap();
    let job = env
        .wait::<PyTorchJob>("elastic", "keeps its spare", |job| {
            spares(job) == Some((3, 4, 1))
        })
        .await;
    assert!(!has(&job, "Failed"));
}

#[tokio::test]
async fn losing_the_rendezvous_store_resumes_the_job_in_a_new_run_failing_nothing() {
    let env = Env::start(sim_config(2, 8)).await;
    env.apply::<PyTorchJob>(ELASTIC_JOB).await;
    let pods = [
        "elastic-rdzv",
        "elastic-worker-0",
        "elastic-worker-1",
        "elastic-worker-2",
    ];
    ready(&env, &pods).await;
    env.cluster
        .fail_pod("default", "elastic-rdzv", 137, "OOMKilled")
        .unwrap();
    let job = env
        .wait::<PyTorchJob>("elastic", "runs again", |job| {
            has(job, "Running") && job.status.as_ref().and_then(|s| s.eto.run).unwrap_or(0) >= 1
        })
        .await;
    assert!(!has(&job, "Failed"));
    assert_eq!(job.status.unwrap().eto.restart_count.unwrap_or(0), 0);
    let worker = env
        .wait_pod("elastic-worker-3", "is a worker of the new run", pod_ready)
        .await
        .unwrap();
    assert!(
        env_of(&worker, "PET_RDZV_ID").is_some_and(|id| id.ends_with("-1")),
        "a new run, a new rendezvous id"
    );
    env.wait_pod("elastic-rdzv", "is a new store", pod_ready)
        .await
        .unwrap();
}

/// How many of `job`'s workers are ready, by its status.
fn ready_workers(job: &PyTorchJob) -> i32 {
    job.status
        .as_ref()
        .and_then(|status| status.eto.workers.as_ref())
        .map_or(0, |workers| workers.ready)
}

/// Reclaims `nodes` at once and waits until job `name` is back to `ready` ready Worker pods
/// with `lost` of them blacklisted; asserts that it ran on in its first run, never `Failed`
/// nor `Suspended`.
async fn reclaim_and_recover(env: &Env, name: &str, nodes: &[String], ready: i32, lost: usize) {
    for node in nodes {
        env.cluster
            .reclaim_node(node, std::time::Duration::ZERO)
            .unwrap();
    }
    let job = env
        .wait::<PyTorchJob>(name, &format!("is back to {ready} ready pods"), |job| {
            ready_workers(job) == ready
                && job
                    .status
                    .as_ref()
                    .is_some_and(|status| status.eto.blacklist.len() == lost)
        })
        .await;
    assert!(has(&job, "Running") && !has(&job, "Failed") && !has(&job, "Suspended"));
    let run = job.status.and_then(|status| status.eto.run);
    assert_eq!(run.unwrap_or(0), 0, "the run goes on");
}

#[tokio::test]
async fn a_128_worker_elastic_job_losing_two_nodes_at_once_trains_on_and_replaces_them() {
    let env = Env::start(sim_config(18, 8)).await;
    let wide = ELASTIC_JOB
        .replace("name: elastic", "name: wide")
        .replace("minReplicas: 2", "minReplicas: 96")
        .replace("maxReplicas: 4", "maxReplicas: 144")
        .replace("replicas: 3", "replicas: 128");
    env.apply::<PyTorchJob>(&wide).await;
    env.wait::<PyTorchJob>("wide", "runs with 128 workers", |job| {
        has(job, "Running") && ready_workers(job) == 128
    })
    .await;
    let pods: Vec<Pod> = env.pods().list(&Default::default()).await.unwrap().items;
    let node_of = |pod: &Pod| pod.spec.as_ref().and_then(|s| s.node_name.clone());
    let store_node = pods
        .iter()
        .find(|pod| pod.metadata.name.as_deref() == Some("wide-rdzv"))
        .and_then(node_of);
    let mut nodes: Vec<String> = pods.iter().filter_map(node_of).collect();
    nodes.sort();
    nodes.dedup();
    let reclaimed: Vec<String> = nodes
        .into_iter()
        .filter(|node| Some(node) != store_node.as_ref())
        .take(2)
        .collect();
    let lost = pods
        .iter()
        .filter(|pod| node_of(pod).is_some_and(|node| reclaimed.contains(&node)))
        .count();
    assert_eq!(lost, 16, "two full nodes of workers");
    reclaim_and_recover(&env, "wide", &reclaimed, 128, 16).await;
    let indices: Vec<u32> = env
        .pods()
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .filter_map(|pod| eto_engine::names::worker_index("wide", pod.metadata.name.as_deref()?))
        .collect();
    let replacements = indices.iter().filter(|index| **index >= 128).count();
    assert_eq!(
        replacements, 16,
        "each replaced under a new name: {indices:?}"
    );
}

/// A stand-in for the report of a rendezvous store: answers every request with the body the
/// test puts in the returned cell.
pub(crate) async fn report_stand_in() -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::Mutex<String>>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let body = std::sync::Arc::new(std::sync::Mutex::new(
        r#"{"saved": [], "rendezvous": null}"#.to_string(),
    ));
    let answer = body.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut request = vec![0_u8; 4096];
            let _ = stream.read(&mut request).await;
            let text = answer.lock().unwrap().clone();
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                text.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
        }
    });
    (address, body)
}

/// [`ELASTIC_JOB`] with eto's elastic `settings` (lines of `elasticPolicy`) running on a
/// cluster of `config`, its store's report answered by a [`report_stand_in`], whose body the
/// returned cell holds.
async fn running_with_report(
    config: eto_sim::SimConfig,
    settings: &str,
) -> (Env, std::sync::Arc<std::sync::Mutex<String>>) {
    let env = Env::start(config).await;
    let (address, report) = report_stand_in().await;
    env.cluster
        .forward_pod_port("default", "elastic-rdzv", 29401, address);
    let job = ELASTIC_JOB.replace("maxRestarts: 3", &format!("maxRestarts: 3\n    {settings}"));
    env.apply::<PyTorchJob>(&job).await;
    ready(
        &env,
        &["elastic-worker-0", "elastic-worker-1", "elastic-worker-2"],
    )
    .await;
    env.wait_pod("elastic-rdzv", "is ready", pod_ready)
        .await
        .unwrap();
    env.wait::<PyTorchJob>("elastic", "runs", |job| has(job, "Running"))
        .await;
    (env, report)
}

/// Makes eto read the store's report of the job `elastic` now: it reads a running job's
/// report every 30 s, and at any change to the job.
async fn read_the_report_now(env: &Env) {
    let jobs: Api<PyTorchJob> = Api::default_namespaced(env.client.clone());
    let poke = json!({"metadata": {"annotations": {"example.com/poke": "1"}}});
    jobs.patch("elastic", &PatchParams::default(), &Patch::Merge(&poke))
        .await
        .unwrap();
}

/// The notice pod `pod` shows, if any.
fn notice_on(pod: &Pod) -> Option<eto_api::job_status::Notice> {
    let annotations = pod.metadata.annotations.as_ref()?;
    serde_json::from_str(annotations.get(eto_api::well_known::NOTICE_ANNOTATION)?).ok()
}

/// Warns the node under worker 1 of a running [`ELASTIC_JOB`] with a spot handler's taint, and
/// waits until each of its three Workers shows a notice (the group saves for the handover);
/// returns the node, the warning and the notices, worker 0's first.
async fn warn_worker_1s_node(
    env: &Env,
) -> (
    String,
    eto_sim::nodes::warnings::Warning,
    Vec<eto_api::job_status::Notice>,
) {
    let leaving = env.pods().get("elastic-worker-1").await.unwrap();
    let node = leaving.spec.unwrap().node_name.unwrap();
    let warning = eto_sim::nodes::warnings::Warning {
        taint: Some("karpenter.sh/disrupted".into()),
        ..Default::default()
    };
    env.cluster.warn_node(&node, &warning).unwrap();
    let mut shown = Vec::new();
    for worker in ["elastic-worker-0", "elastic-worker-1", "elastic-worker-2"] {
        let pod = env
            .wait_pod(worker, "shows a notice", |pod| {
                pod.and_then(notice_on).is_some()
            })
            .await
            .unwrap();
        shown.push(notice_on(&pod).unwrap());
    }
    (node, warning, shown)
}

/// As below, but the warning is withdrawn while the group saves for the handover: worker 1,
/// still a member of the group, stays, and the replacement that waited at its gate, which
/// never joined, goes; the notice is taken down and the group trains on without re-forming.
#[tokio::test]
async fn a_warning_withdrawn_while_the_group_saves_keeps_the_warned_worker_and_not_its_replacement()
{
    let (env, _report) = running_with_report(sim_config(4, 1), "drainSeconds: 600").await;
    let (node, warning, _) = warn_worker_1s_node(&env).await;
    let replacement = env.pods().get("elastic-worker-3").await.unwrap();
    assert!(
        !eto_engine::joining::is_open(&replacement),
        "it waits at its gate"
    );

    env.cluster.withdraw_node_warning(&node, &warning).unwrap();
    env.wait_pod("elastic-worker-3", "is deleted", |pod| {
        pod.is_none_or(|pod| pod.metadata.deletion_timestamp.is_some())
    })
    .await;
    let job = env
        .wait::<PyTorchJob>("elastic", "takes the notice down", |job| {
            job.status.as_ref().is_some_and(|s| s.eto.notice.is_none())
        })
        .await;
    let status = job.status.unwrap().eto;
    assert_eq!(
        status.target_workers,
        ["elastic-worker-0", "elastic-worker-1", "elastic-worker-2"]
    );
    assert!(status.draining_workers.is_empty(), "{status:?}");
    let worker_1 = env.pods().get("elastic-worker-1").await.unwrap();
    assert!(worker_1.metadata.deletion_timestamp.is_none(), "it stays");
    assert_eq!(
        notice_on(&worker_1),
        None,
        "its own notice is taken down too"
    );
}

/// Three Workers on three one-GPU nodes, a fourth node free: the node under worker 1
/// announces it goes. Worker 1 trains on while its replacement starts off the warned node and
/// waits at its gate; then every Worker is told to save (worker 1 with its own `Reclaim`
/// notice), nothing is deleted until the training code's word reaches eto through the store's
/// report (long before `drainSeconds`), and then worker 1 goes and its replacement's training
/// starts in the same moment, to join the group that re-forms once.
#[tokio::test]
async fn a_warned_node_under_one_worker_lets_the_group_save_before_it_leaves() {
    use eto_api::job_status::NoticeKind;
    // Pods take two seconds to go once deleted, as a real kubelet stopping torchrun does.
    let mut config = sim_config(4, 1);
    config.kubelet.termination_delay = std::time::Duration::from_secs(2);
    let (env, report) = running_with_report(config, "drainSeconds: 600").await;
    let (node, _, shown) = warn_worker_1s_node(&env).await;
    assert_eq!(
        shown.iter().map(|n| n.kind).collect::<Vec<_>>(),
        [
            NoticeKind::Checkpoint,
            NoticeKind::Reclaim,
            NoticeKind::Checkpoint
        ]
    );
    let since = serde_json::to_value(&shown[0].since).unwrap();
    let names = |pods: Vec<Pod>| -> Vec<String> {
        pods.into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| p.metadata.name)
            .collect()
    };
    let before = names(env.pods().list(&Default::default()).await.unwrap().items);
    assert_eq!(
        before,
        [
            "elastic-rdzv",
            "elastic-worker-0",
            "elastic-worker-1",
            "elastic-worker-2",
            "elastic-worker-3"
        ],
        "nothing goes while the group saves; the replacement came before"
    );
    let gate_open = |pod: &Pod| eto_engine::joining::is_open(pod);
    let replacement = env.pods().get("elastic-worker-3").await.unwrap();
    assert!(!gate_open(&replacement), "it waits at its gate");
    assert_ne!(
        replacement.spec.as_ref().unwrap().node_name.as_deref(),
        Some(node.as_str())
    );

    *report.lock().unwrap() =
        json!({"saved": [{"pod": "elastic-worker-0", "step": 40, "since": since}], "rendezvous": null})
            .to_string();
    env.wait_pod("elastic-worker-1", "is deleted", |pod| {
        pod.is_some_and(|pod| pod.metadata.deletion_timestamp.is_some())
    })
    .await;
    // While it goes, the group stays told to wait, and the replacement's training starts.
    let jobs: Api<PyTorchJob> = Api::default_namespaced(env.client.clone());
    let status = jobs.get("elastic").await.unwrap().status.unwrap();
    assert!(status.eto.notice.is_some(), "{status:?}");
    env.wait_pod("elastic-worker-3", "opens its gate", |pod| {
        pod.is_some_and(gate_open)
    })
    .await;
    let pods: Api<Pod> = env.pods();
    assert!(pods.get_opt("elastic-worker-4").await.unwrap().is_none());
    let job = env
        .wait::<PyTorchJob>("elastic", "takes the notice down", |job| {
            job.status.as_ref().is_some_and(|s| s.eto.notice.is_none())
        })
        .await;
    assert!(has(&job, "Running") && !has(&job, "Failed"));
    assert_eq!(
        job.status.unwrap().eto.run.unwrap_or(0),
        0,
        "the run goes on"
    );
}

/// Three Workers on three one-GPU nodes, a fourth node free, the store reporting a formed
/// round of the three: worker 1 is evicted through the API, as `kubectl drain` does, with a
/// grace period of 30 s that its containers use to the end. Its replacement is created at
/// once, while the group saves, and waits at its shut gate; it starts its training when the
/// training code says it saved, while the evicted pod is still going, to join the group as it
/// re-forms without worker 1.
#[tokio::test]
async fn an_evicted_workers_replacement_starts_while_the_group_saves_and_joins_as_it_re_forms() {
    let mut config = sim_config(4, 1);
    config.kubelet.termination_delay = std::time::Duration::from_secs(30);
    let (env, report) = running_with_report(config, "drainSeconds: 600").await;
    let member = |host: &str| json!({"host": host, "heartbeat_age": 0.5});
    let formed = json!({"round": 1, "complete": true, "closed": false, "participants": 3,
        "waiting": 0, "members": [member("elastic-worker-0"), member("elastic-worker-1"),
        member("elastic-worker-2")]});
    *report.lock().unwrap() = json!({"saved": [], "rendezvous": formed}).to_string();
    read_the_report_now(&env).await;
    env.wait::<PyTorchJob>("elastic", "shows the formed round", |job| {
        job.status
            .as_ref()
            .and_then(|s| s.rendezvous.as_ref())
            .is_some_and(|r| r.complete)
    })
    .await;

    let answer =
        eto_tests::eviction::evict(&env.client, "default", "elastic-worker-1", Some(30)).await;
    assert_eq!(answer["status"], "Success");
    let notice = env
        .wait_pod("elastic-worker-0", "is told to save", |pod| {
            pod.and_then(notice_on).is_some()
        })
        .await
        .and_then(|pod| notice_on(&pod))
        .unwrap();
    let replacement = env
        .wait_pod(
            "elastic-worker-3",
            "starts while the group saves",
            pod_ready,
        )
        .await
        .unwrap();
    assert!(
        !eto_engine::joining::is_open(&replacement),
        "it waits at its gate"
    );
    let evicted = env.pods().get("elastic-worker-1").await.unwrap();
    assert!(evicted.metadata.deletion_timestamp.is_some(), "still going");

    let since = serde_json::to_value(&notice.since).unwrap();
    *report.lock().unwrap() = json!({"saved": [{"pod": "elastic-worker-0", "step": 40,
        "since": since}], "rendezvous": formed})
    .to_string();
    env.wait_pod("elastic-worker-3", "opens its gate", |pod| {
        pod.is_some_and(eto_engine::joining::is_open)
    })
    .await;
    assert!(
        env.pods()
            .get_opt("elastic-worker-1")
            .await
            .unwrap()
            .is_some(),
        "the replacement starts while the evicted pod still goes"
    );
    let jobs: Api<PyTorchJob> = Api::default_namespaced(env.client.clone());
    let job = jobs.get("elastic").await.unwrap();
    assert!(has(&job, "Running") && !has(&job, "Failed"));
    assert_eq!(
        job.status.unwrap().eto.run.unwrap_or(0),
        0,
        "the run goes on"
    );
}

/// A group below its minimum is told to save, and once its grace is over the job suspends in
/// a new run, while its store still tells the last step of the run before: the goodput
/// ledger keeps that report as run 0's and counts none of its steps again (the same report
/// read in the new run is not a stretch of training that went back to step 1).
#[tokio::test]
async fn the_last_step_reported_before_a_suspend_is_not_counted_again_in_the_next_run() {
    use eto_api::job_status::NoticeKind;
    let settings = "belowMinSeconds: 1\n    checkpointGraceSeconds: 3";
    // One GPU per node, no node to spare: Workers whose nodes go are not replaced.
    let (env, report) = running_with_report(sim_config(3, 1), settings).await;
    let ledger = |job: &PyTorchJob| job.status.as_ref().and_then(|s| s.eto.goodput.clone());
    env.wait::<PyTorchJob>("elastic", "trains, as its pods show", |job| {
        ledger(job)
            .is_some_and(|l| l.current == Some(eto_api::job_status::GoodputBucket::Productive))
    })
    .await;
    let (first_at, at) = (
        jiff::Timestamp::now() - jiff::SignedDuration::from_secs(20),
        jiff::Timestamp::now(),
    );
    let progress =
        json!({"step": 40, "at": at, "first_step": 1, "first_at": first_at, "total": 1000});
    *report.lock().unwrap() =
        json!({"saved": [], "rendezvous": null, "progress": progress}).to_string();
    read_the_report_now(&env).await;
    env.wait::<PyTorchJob>("elastic", "records step 40", |job| {
        ledger(job)
            .and_then(|l| l.latest)
            .is_some_and(|latest| latest.step == 40)
    })
    .await;
    for worker in ["elastic-worker-1", "elastic-worker-2"] {
        let pod = env.pods().get(worker).await.unwrap();
        let node = pod.spec.unwrap().node_name.unwrap();
        env.cluster
            .reclaim_node(&node, std::time::Duration::ZERO)
            .unwrap();
    }
    env.wait_pod(
        "elastic-worker-0",
        "is told to save before the suspend",
        |pod| {
            pod.and_then(notice_on)
                .is_some_and(|n| n.kind == NoticeKind::Suspend)
        },
    )
    .await;
    let job = env
        .wait::<PyTorchJob>("elastic", "suspends in a new run", |job| {
            job.status.as_ref().and_then(|s| s.eto.run).unwrap_or(0) >= 1
        })
        .await;
    let ledger = ledger(&job).unwrap();
    assert_eq!(ledger.retrained_steps, 0, "{ledger:#?}");
    assert_eq!(ledger.highest_step, Some(40));
    assert_eq!(ledger.latest.map(|latest| latest.run), Some(0));
    assert!(!has(&job, "Failed"));
}

/// Worker 1 of a running group is force-deleted; the survivors' agents close the rendezvous
/// (the store's report says so) and their containers crash-loop: eto ends the run at once,
/// without waiting `belowMinSeconds` or a grace period for containers that run no training,
/// and the next run resumes at a rendezvous of its own, nothing counted.
#[tokio::test]
async fn a_rendezvous_closed_after_a_lost_worker_starts_the_next_run_at_once() {
    let settings = "belowMinSeconds: 600\n    checkpointGraceSeconds: 600";
    let (env, report) = running_with_report(sim_config(2, 8), settings).await;

    let pods: Api<Pod> = env.pods();
    let now = kube::api::DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    pods.delete("elastic-worker-1", &now).await.unwrap();
    env.wait_pod("elastic-worker-3", "replaces worker 1", |pod| pod.is_some())
        .await;
    *report.lock().unwrap() = json!({"saved": [], "rendezvous": {"round": 1, "complete": false,
        "closed": true, "participants": 0, "waiting": 0}})
    .to_string();
    for survivor in ["elastic-worker-0", "elastic-worker-2"] {
        env.cluster.crash_loop_pod("default", survivor, 1).unwrap();
    }
    let suspended = env
        .wait::<PyTorchJob>("elastic", "ends the run", |job| {
            job.status.as_ref().and_then(|s| s.eto.run).unwrap_or(0) >= 1
        })
        .await;
    let condition = suspended
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "Suspended")
        .cloned()
        .expect("a Suspended condition");
    assert_eq!(condition.reason.as_deref(), Some("GroupLost"));
    let message = condition.message.unwrap_or_default();
    assert!(
        message.contains("rendezvous was closed in round 1"),
        "{message}"
    );
    *report.lock().unwrap() = r#"{"saved": [], "rendezvous": null}"#.to_string();
    let job = env
        .wait::<PyTorchJob>("elastic", "runs again", |job| {
            has(job, "Running") && !has(job, "Suspended")
        })
        .await;
    assert!(!has(&job, "Failed"));
    assert_eq!(job.status.unwrap().eto.restart_count.unwrap_or(0), 0);
    let of_new_run: Vec<Pod> = pods
        .list(
            &kube::api::ListParams::default()
                .labels(&format!("{}=1", eto_api::well_known::RUN_LABEL)),
        )
        .await
        .unwrap()
        .items;
    let ids: Vec<Option<String>> = of_new_run
        .iter()
        .filter(|pod| pod.metadata.name.as_deref() != Some("elastic-rdzv"))
        .map(|pod| env_of(pod, "PET_RDZV_ID"))
        .collect();
    assert!(
        ids.len() >= 2
            && ids
                .iter()
                .all(|id| id.as_ref().is_some_and(|id| id.ends_with("-1"))),
        "the new run's Workers meet at a rendezvous of their own: {ids:?}"
    );
}

/// The status page of a TorchFT Lighthouse whose next quorum is in `next` (what follows `Next
/// quorum status:`), after quorum 3 of three groups at step 40.
pub(crate) fn lighthouse_page(next: &str) -> String {
    format!(
        "Current quorum_id: 3 <br>\nNext quorum status: {next}\n\n<h3>Previous Quorum</h3>\nNum participants: 3 <br>\n<div class=\"member\">Step: 40 <br/></div>\n<h2>Heartbeats</h2>\n"
    )
}

/// Three TorchFT replica groups and a spare, nodes cordoned, lose two groups and the spare at
/// once: the job is told to save, with an hour of grace. The one group left then waits, as its
/// Lighthouse reports, in a quorum that needs two groups: stuck inside a step, it can neither
/// save nor hear the notice, so the suspend completes at once instead of after the hour, and
/// the job waits for capacity in a new run.
#[tokio::test]
async fn replica_groups_stuck_below_their_minimum_are_suspended_without_waiting_out_the_grace() {
    use eto_api::job_status::NoticeKind;
    let env = Env::start(sim_config(2, 8)).await;
    let (address, page) = report_stand_in().await;
    *page.lock().unwrap() = lighthouse_page(
        "Fast quorum found! [3/3 participants healthy][3 heartbeating][shrink_only=false]",
    );
    env.cluster
        .forward_pod_port("default", "ft-lighthouse", 29510, address);
    let job = ELASTIC_JOB.replace("name: elastic", "name: ft").replace(
        "maxReplicas: 4",
        "maxReplicas: 4\n    spareReplicas: 1\n    checkpointGraceSeconds: 3600\n    replicaGroups: {}",
    );
    env.apply::<PyTorchJob>(&job).await;
    let workers = ["ft-worker-0", "ft-worker-1", "ft-worker-2", "ft-worker-3"];
    ready(&env, &workers).await;
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(env.client.clone());
    let nodes: Vec<String> = nodes
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|node| node.metadata.name)
        .collect();
    eto_tests::nodes::set_unschedulable(&env.client, &nodes, true).await;
    let now = kube::api::DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    for lost in ["ft-worker-0", "ft-worker-1", "ft-worker-3"] {
        env.pods().delete(lost, &now).await.unwrap();
    }
    env.wait_pod("ft-worker-2", "is told to save", |pod| {
        pod.and_then(notice_on)
            .is_some_and(|n| n.kind == NoticeKind::Suspend)
    })
    .await;
    *page.lock().unwrap() = lighthouse_page(
        "New quorum not ready, only have 1 participants, need min_replicas 2 [1/1 participants healthy][1 heartbeating][shrink_only=false]",
    );
    let job = env
        .wait::<PyTorchJob>("ft", "suspends before its grace ends", |job| {
            has(job, "Suspended")
        })
        .await;
    assert!(!has(&job, "Failed"));
    let status = job.status.unwrap();
    let suspended = status.conditions.iter().find(|c| c.type_ == "Suspended");
    assert_eq!(
        suspended.and_then(|c| c.reason.as_deref()),
        Some("BelowMinWorkers")
    );
    assert_eq!(
        status.eto.run,
        Some(1),
        "it waits for capacity in a new run"
    );
}

/// Waits until the autoscaler `name` is gone.
async fn autoscaler_gone(env: &Env, name: &str) {
    let api: Api<HorizontalPodAutoscaler> = Api::default_namespaced(env.client.clone());
    let gone =
        kube::runtime::wait::await_condition(api, name, |hpa: Option<&HorizontalPodAutoscaler>| {
            hpa.is_none()
        });
    tokio::time::timeout(std::time::Duration::from_secs(30), gone)
        .await
        .expect("the autoscaler goes")
        .expect("the watch");
}

#[tokio::test]
async fn metrics_give_the_job_v1s_autoscaler_which_scales_it_and_goes_while_it_is_suspended() {
    let env = Env::start(sim_config(2, 8)).await;
    let jobs: Api<PyTorchJob> = Api::default_namespaced(env.client.clone());
    let job = autoscaled_pytorch_job("elastic", (2, 4), 3);
    let job = jobs
        .patch(
            "elastic",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&job),
        )
        .await
        .unwrap();
    let hpa = env
        .wait::<HorizontalPodAutoscaler>("elastic", "is created", |_| true)
        .await;
    let owner = &hpa.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(owner.uid, job.metadata.uid.clone().unwrap());
    assert_eq!(owner.controller, Some(true));
    let spec = hpa.spec.unwrap();
    assert_eq!(
        (
            spec.scale_target_ref.api_version.as_deref(),
            spec.scale_target_ref.kind.as_str(),
            spec.scale_target_ref.name.as_str()
        ),
        (Some("kubeflow.org/v1"), "PyTorchJob", "elastic")
    );
    assert_eq!((spec.min_replicas, spec.max_replicas), (Some(2), 4));
    ready(
        &env,
        &["elastic-worker-0", "elastic-worker-1", "elastic-worker-2"],
    )
    .await;

    // What the HPA controller reads and writes: the job's scale subresource.
    let scale = jobs.get_scale("elastic").await.unwrap();
    assert!(
        scale
            .status
            .as_ref()
            .and_then(|status| status.selector.as_deref())
            .is_some_and(|selector| !selector.is_empty()),
        "the autoscaler finds the Workers it measures: {scale:?}"
    );
    let up = json!({"spec": {"replicas": 4}});
    jobs.patch_scale("elastic", &PatchParams::default(), &Patch::Merge(&up))
        .await
        .unwrap();
    env.wait_pod("elastic-worker-3", "is added by the autoscaler", pod_ready)
        .await
        .unwrap();

    // The HPA controller's status writes change nothing; an edit of its spec, or its
    // deletion, is undone.
    let autoscalers: Api<HorizontalPodAutoscaler> = Api::default_namespaced(env.client.clone());
    let status = json!({"status": {"currentReplicas": 4, "desiredReplicas": 4}});
    autoscalers
        .patch_status("elastic", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let edit = json!({"spec": {"maxReplicas": 9}});
    autoscalers
        .patch("elastic", &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .unwrap();
    let restored = env
        .wait::<HorizontalPodAutoscaler>("elastic", "is set back to maxReplicas 4", |hpa| {
            hpa.spec.as_ref().is_some_and(|spec| spec.max_replicas == 4)
        })
        .await;
    autoscalers
        .delete("elastic", &Default::default())
        .await
        .unwrap();
    env.wait::<HorizontalPodAutoscaler>("elastic", "is made again", |hpa| {
        hpa.metadata.uid != restored.metadata.uid
    })
    .await;

    let suspend = |suspend: bool| json!({"spec": {"runPolicy": {"suspend": suspend}}});
    jobs.patch(
        "elastic",
        &PatchParams::default(),
        &Patch::Merge(&suspend(true)),
    )
    .await
    .unwrap();
    autoscaler_gone(&env, "elastic").await;
    env.wait::<PyTorchJob>("elastic", "is suspended", |job| has(job, "Suspended"))
        .await;
    jobs.patch(
        "elastic",
        &PatchParams::default(),
        &Patch::Merge(&suspend(false)),
    )
    .await
    .unwrap();
    env.wait::<HorizontalPodAutoscaler>("elastic", "is back once the job resumes", |_| true)
        .await;

    // Without metrics the job keeps running, without an autoscaler.
    let drop_metrics = json!({"spec": {"elasticPolicy": {"metrics": null}}});
    jobs.patch(
        "elastic",
        &PatchParams::default(),
        &Patch::Merge(&drop_metrics),
    )
    .await
    .unwrap();
    autoscaler_gone(&env, "elastic").await;
    let job = jobs.get("elastic").await.unwrap();
    assert!(!has(&job, "Failed"));
}

/// 16 TorchFT replica groups of 8 GPUs each (`elasticPolicy.replicaGroups`) lose two nodes at
/// once: only those two groups are replaced, each under a new name with the id of the group it
/// replaces; the other 14 pods are never touched, and the run goes on.
#[tokio::test]
async fn replica_groups_losing_two_nodes_replace_only_those_groups_under_their_ids() {
    let env = Env::start(sim_config(18, 8)).await;
    let groups = ELASTIC_JOB
        .replace("name: elastic", "name: ft")
        .replace("minReplicas: 2", "minReplicas: 8")
        .replace("maxReplicas: 4", "maxReplicas: 16\n    replicaGroups: {}")
        .replace("replicas: 3", "replicas: 16")
        .replace("nvidia.com/gpu: \"1\"", "nvidia.com/gpu: \"8\"");
    env.apply::<PyTorchJob>(&groups).await;
    env.wait::<PyTorchJob>("ft", "runs with 16 groups", |job| {
        has(job, "Running") && ready_workers(job) == 16
    })
    .await;
    let group_of = |pod: &Pod| replica_groups::group_of(pod).map(|id| id.to_string());
    let pods: Vec<Pod> = env.pods().list(&Default::default()).await.unwrap().items;
    let lighthouse = pods
        .iter()
        .find(|pod| pod.metadata.name.as_deref() == Some("ft-lighthouse"))
        .expect("a Lighthouse");
    assert_eq!(
        lighthouse.spec.as_ref().unwrap().containers[0]
            .resources
            .as_ref()
            .and_then(|r| r.limits.clone()),
        None,
        "the Lighthouse asks for no GPU"
    );
    let node_of = |pod: &Pod| pod.spec.as_ref().and_then(|s| s.node_name.clone());
    let workers: Vec<&Pod> = pods.iter().filter(|pod| group_of(pod).is_some()).collect();
    let mut ids: Vec<String> = workers.iter().filter_map(|pod| group_of(pod)).collect();
    ids.sort_by_key(|id| id.parse::<u32>().unwrap());
    assert_eq!(ids, (0..16).map(|id| id.to_string()).collect::<Vec<_>>());
    let lost: Vec<&Pod> = workers
        .iter()
        .copied()
        .filter(|pod| node_of(pod) != node_of(lighthouse))
        .take(2)
        .collect();
    let lost_ids: Vec<String> = lost.iter().filter_map(|pod| group_of(pod)).collect();
    let kept: std::collections::BTreeMap<String, String> = workers
        .iter()
        .filter(|pod| !lost.iter().any(|l| l.metadata.uid == pod.metadata.uid))
        .map(|pod| {
            (
                pod.metadata.name.clone().unwrap(),
                pod.metadata.uid.clone().unwrap(),
            )
        })
        .collect();
    assert_eq!(kept.len(), 14);
    let reclaimed: Vec<String> = lost.iter().filter_map(|pod| node_of(pod)).collect();
    reclaim_and_recover(&env, "ft", &reclaimed, 16, 2).await;
    let now: Vec<Pod> = env.pods().list(&Default::default()).await.unwrap().items;
    let live = now
        .iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none() && group_of(pod).is_some());
    let mut replacements = Vec::new();
    for pod in live {
        let name = pod.metadata.name.clone().unwrap();
        match kept.get(&name) {
            Some(uid) => assert_eq!(pod.metadata.uid.as_ref(), Some(uid), "{name} untouched"),
            None => replacements.push((name, group_of(pod).unwrap())),
        }
    }
    let mut replaced_ids: Vec<String> = replacements.iter().map(|(_, id)| id.clone()).collect();
    replaced_ids.sort();
    let mut expected = lost_ids.clone();
    expected.sort();
    assert_eq!(
        replaced_ids, expected,
        "the lost groups' ids: {replacements:?}"
    );
    assert!(
        replacements.iter().all(|(name, _)| {
            eto_engine::names::worker_index("ft", name).is_some_and(|index| index >= 16)
        }),
        "under new names: {replacements:?}"
    );
}

/// 128 pods in 16 TorchFT replica groups of eight pods (`podsPerGroup: 8`, one GPU each) lose
/// two nodes at once: every group with a pod there is replaced whole, its other pods deleted
/// and eight new pods created under new names with its id and ranks 0 to 7; the pods of every
/// other group are never touched, and the run goes on.
#[tokio::test]
async fn replica_groups_of_eight_pods_losing_two_nodes_replace_only_the_groups_they_held() {
    use std::collections::{BTreeMap, BTreeSet};
    let env = Env::start(sim_config(18, 8)).await;
    let groups = ELASTIC_JOB
        .replace("name: elastic", "name: ft")
        .replace("minReplicas: 2", "minReplicas: 8")
        .replace(
            "maxReplicas: 4",
            "maxReplicas: 16\n    replicaGroups: {podsPerGroup: 8}",
        )
        .replace("replicas: 3", "replicas: 16");
    env.apply::<PyTorchJob>(&groups).await;
    env.wait::<PyTorchJob>("ft", "runs with 128 pods in 16 groups", |job| {
        has(job, "Running") && ready_workers(job) == 128
    })
    .await;
    let pods: Vec<Pod> = env.pods().list(&Default::default()).await.unwrap().items;
    let node_of = |pod: &Pod| pod.spec.as_ref().and_then(|s| s.node_name.clone());
    let rank_of = |pod: &Pod| {
        let labels = pod.metadata.labels.as_ref()?;
        labels.get(replica_groups::RANK_LABEL)?.parse::<u32>().ok()
    };
    let workers: Vec<&Pod> = pods
        .iter()
        .filter(|pod| replica_groups::group_of(pod).is_some())
        .collect();
    let mut per_group: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for pod in &workers {
        per_group
            .entry(replica_groups::group_of(pod).unwrap())
            .or_default()
            .insert(rank_of(pod).unwrap());
    }
    assert_eq!(per_group.len(), 16);
    assert!(per_group.values().all(|ranks| *ranks == (0..8).collect()));
    let lighthouse_node = pods
        .iter()
        .find(|pod| pod.metadata.name.as_deref() == Some("ft-lighthouse"))
        .and_then(node_of);
    let mut nodes: Vec<String> = workers.iter().filter_map(|pod| node_of(pod)).collect();
    nodes.sort();
    nodes.dedup();
    let reclaimed: Vec<String> = nodes
        .into_iter()
        .filter(|node| Some(node) != lighthouse_node.as_ref())
        .take(2)
        .collect();
    let on_reclaimed = |pod: &&&Pod| node_of(pod).is_some_and(|node| reclaimed.contains(&node));
    let lost = workers.iter().filter(on_reclaimed).count();
    let hit: BTreeSet<u32> = workers
        .iter()
        .filter(on_reclaimed)
        .filter_map(|pod| replica_groups::group_of(pod))
        .collect();
    let kept: BTreeMap<String, String> = workers
        .iter()
        .filter(|pod| !hit.contains(&replica_groups::group_of(pod).unwrap()))
        .map(|pod| {
            (
                pod.metadata.name.clone().unwrap(),
                pod.metadata.uid.clone().unwrap(),
            )
        })
        .collect();
    assert_eq!(kept.len(), 128 - 8 * hit.len());
    println!("eto-sim: {lost} pods on the two nodes, of the groups {hit:?}");
    assert!(
        8 * hit.len() > lost,
        "a group hit has pods on other nodes too, which must go with it"
    );
    reclaim_and_recover(&env, "ft", &reclaimed, 128, lost).await;
    let now: Vec<Pod> = env.pods().list(&Default::default()).await.unwrap().items;
    let mut replaced: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for pod in now
        .iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
    {
        let Some(id) = replica_groups::group_of(pod) else {
            continue;
        };
        let name = pod.metadata.name.clone().unwrap();
        match kept.get(&name) {
            Some(uid) => assert_eq!(pod.metadata.uid.as_ref(), Some(uid), "{name} untouched"),
            None => {
                let index = eto_engine::names::worker_index("ft", &name).unwrap();
                assert!(index >= 128, "{name} has a new name");
                replaced
                    .entry(id)
                    .or_default()
                    .insert(rank_of(pod).unwrap());
            }
        }
    }
    assert_eq!(
        replaced.keys().copied().collect::<BTreeSet<u32>>(),
        hit,
        "the groups hit, and only they, are replaced under their ids"
    );
    assert!(
        replaced.values().all(|ranks| *ranks == (0..8).collect()),
        "each whole: {replaced:?}"
    );
}

/// Three replica groups of two pods under v1's `OnFailure`: the training of one pod fails.
/// Its pod ends rather than restarting in place (a restarted container could not rejoin its
/// group, whose partner would hold up the Lighthouse), its partner leaves with it, and the
/// group is replaced whole under new names and its id; the other groups' pods are never
/// touched, the pod that failed is blacklisted, and the job fails nothing.
#[tokio::test]
async fn a_replica_group_pod_whose_training_fails_takes_its_group_and_is_replaced_whole() {
    let env = Env::start(sim_config(3, 8)).await;
    let groups = ELASTIC_JOB.replace("name: elastic", "name: ft").replace(
        "maxReplicas: 4",
        "maxReplicas: 4\n    replicaGroups: {podsPerGroup: 2}",
    );
    env.apply::<PyTorchJob>(&groups).await;
    env.wait::<PyTorchJob>("ft", "runs with three groups of two", |job| {
        has(job, "Running") && ready_workers(job) == 6
    })
    .await;
    let names: Vec<String> = (0..6).map(|i| format!("ft-worker-{i}")).collect();
    let before: Vec<Pod> = ready(&env, &names.iter().map(String::as_str).collect::<Vec<_>>()).await;
    for pod in &before {
        assert_eq!(
            pod.spec.as_ref().unwrap().restart_policy.as_deref(),
            Some("Never"),
            "no Worker restarts in place"
        );
    }
    let failing = "ft-worker-3";
    let group = replica_groups::group_of(&before[3]).unwrap();
    let partner = before
        .iter()
        .find(|pod| {
            replica_groups::group_of(pod) == Some(group)
                && pod.metadata.name.as_deref() != Some(failing)
        })
        .and_then(|pod| pod.metadata.name.clone())
        .unwrap();
    env.cluster
        .fail_pod("default", failing, 1, "Error")
        .unwrap();
    let replacements = ready(&env, &["ft-worker-6", "ft-worker-7"]).await;
    for pod in &replacements {
        assert_eq!(
            replica_groups::group_of(pod),
            Some(group),
            "the new pair takes the failed group's id"
        );
    }
    let job = env
        .wait::<PyTorchJob>("ft", "runs with three groups again", |job| {
            has(job, "Running") && ready_workers(job) == 6
        })
        .await;
    assert!(!has(&job, "Failed"));
    let blacklisted: Vec<String> = job
        .status
        .as_ref()
        .unwrap()
        .eto
        .blacklist
        .iter()
        .map(|entry| entry.pod.clone())
        .collect();
    assert_eq!(blacklisted, [failing], "only the pod that failed");
    let now: Vec<Pod> = env.pods().list(&Default::default()).await.unwrap().items;
    for pod in before.iter().filter(|pod| {
        let name = pod.metadata.name.as_deref();
        name != Some(failing) && name != Some(partner.as_str())
    }) {
        let same = now.iter().find(|p| p.metadata.name == pod.metadata.name);
        assert_eq!(
            same.and_then(|p| p.metadata.uid.clone()),
            pod.metadata.uid.clone(),
            "{:?} untouched",
            pod.metadata.name
        );
        assert_eq!(
            same.and_then(|p| p
                .status
                .as_ref()?
                .container_statuses
                .as_ref()?
                .first()
                .map(|s| s.restart_count)),
            Some(0)
        );
    }
    let partner_now = now
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(partner.as_str()));
    assert!(
        partner_now.is_none_or(|pod| pod.metadata.deletion_timestamp.is_some()),
        "the partner left with the pod that failed"
    );
}
