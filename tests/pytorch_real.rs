//! PyTorchJobs under a real `torchrun` on a real cluster: the pods and Services eto builds for
//! a Master and two Workers, applied by hand, train with torchrun's static rendezvous
//! configured by nothing but the environment eto gives them; the PyTorchJob CRD installs on
//! a real API server, which judges jobs by its rules; and eto runs a PyTorchJob to
//! `Succeeded`, through the loss of a Worker's pod (a new run, the same names) and through a
//! Worker's training failing under `OnFailure` (the kubelet restarts it in its pod); and an
//! elastic job around eto's rendezvous store trains on through worker 0's eviction, and
//! suspends below its minimum and resumes from its checkpoint (which needs
//! `ETO_E2E_CHECKPOINT_ROOT`, a directory the test and the pods' node share, as in `e2e.rs`).
//!
//! Needs a real cluster with a pod network and cluster DNS (`#[ignore]`d), and an image with
//! torch's `torchrun` (`examples/horovod/Dockerfile` has Debian's) named by `ETO_E2E_IMAGE`,
//! placed as the e2e tests place theirs (`ETO_E2E_PULL_POLICY`, `ETO_E2E_POD_PATCH`, see
//! `e2e.rs`):
//! `cargo test -p eto-tests --test integration pytorch_real:: -- --ignored --nocapture`.

use std::time::Duration;

use eto_api::PyTorchJob;
use eto_api::job_status::BlacklistEntry;
use eto_api::pytorch_job::PyTorchReplicaType;
use eto_engine::kind::pytorch_job::{Defaulted, pod::pod, service::service};
use eto_tests::nodes::set_unschedulable;
use eto_tests::poll::until;
use eto_tests::scratch::Scratch;
use eto_tests::step_log::now;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, LogParams, PostParams};

/// Checks what every rank sees: the world size torchrun reports, and the all-reduced sum of
/// `rank + 1`, which is `world * (world + 1) / 2` when every rank took part.
pub(crate) const DDP_CHECK: &str = r#"
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
print(f"eto-ddp: rank={rank} world={world} env_world={os.environ['WORLD_SIZE']} sum={int(value.item())}", flush=True)
dist.destroy_process_group()
"#;

/// A pod template whose container `pytorch` runs `script` under torchrun, in the image
/// `ETO_E2E_IMAGE` names, placed as `ETO_E2E_POD_PATCH` says. The container's command starts
/// with `torchrun`, as a user's does (`command: ["torchrun", "train.py"]`), so that eto's
/// gate starts the agent before it opens (`eto_engine::joining`); the script is the training
/// process's `python3 -u -c` (`--no_python`), which runs it as torchrun runs a file.
pub(crate) fn torchrun_template(script: &str) -> serde_json::Value {
    let mut template = shell_template("");
    // Debian bookworm's torch 1.13 under Python 3.11 cannot read its own default of
    // `--redirects` and `--tee` ("0": Python 3.11 no longer lists a flag's zero member), so
    // the command names a local rank the pod does not have; nothing else is passed.
    template["spec"]["containers"][0]["command"] = serde_json::json!([
        "torchrun",
        "--redirects",
        "1:0",
        "--tee",
        "1:0",
        "--no_python",
        "python3",
        "-u",
        "-c",
        script
    ]);
    template
}

/// A pod template whose container `pytorch` runs the shell `command`, in the image
/// `ETO_E2E_IMAGE` names, pulled as `ETO_E2E_PULL_POLICY` says and placed as
/// `ETO_E2E_POD_PATCH` says.
pub(crate) fn shell_template(command: &str) -> serde_json::Value {
    let image = std::env::var("ETO_E2E_IMAGE").expect("ETO_E2E_IMAGE names an image with torchrun");
    let pull = std::env::var("ETO_E2E_PULL_POLICY").unwrap_or("IfNotPresent".into());
    let patch: serde_json::Value = std::env::var("ETO_E2E_POD_PATCH")
        .map(|text| serde_json::from_str(&text).expect("ETO_E2E_POD_PATCH is JSON"))
        .unwrap_or_default();
    let mut template = serde_json::json!({"spec": {
        "containers": [{
            "name": "pytorch",
            "image": image,
            "imagePullPolicy": pull,
            "command": ["sh", "-c", command]
        }]
    }});
    json_patch::merge(&mut template["spec"], &patch);
    template
}

#[tokio::test]
#[ignore = "needs cluster"]
async fn a_master_and_two_workers_train_with_the_environment_eto_gives_them() {
    let scratch = Scratch::start("pytorch-contract").await;
    let template = torchrun_template(DDP_CHECK);
    let job: PyTorchJob = serde_json::from_value(serde_json::json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "ddp", "namespace": scratch.namespace, "uid": "not-stored"},
        "spec": {
            "nprocPerNode": "1",
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "Never", "template": template},
                "Worker": {"replicas": 2, "restartPolicy": "Never", "template": template}
            }
        }
    }))
    .unwrap();
    let defaulted = Defaulted::of(&job);
    let pods = scratch.pods();
    let services: Api<Service> = Api::namespaced(scratch.client.clone(), &scratch.namespace);
    let members = [
        (PyTorchReplicaType::Master, 0),
        (PyTorchReplicaType::Worker, 0),
        (PyTorchReplicaType::Worker, 1),
    ];
    for (type_, index) in members {
        // The job is not stored (the operator does not serve the kind here): its children
        // carry no owner reference, which the garbage collector would follow to nothing.
        let mut service = service(&job, &defaulted, type_, index).unwrap();
        service.metadata.owner_references = None;
        services
            .create(&PostParams::default(), &service)
            .await
            .unwrap();
        let mut pod: Pod = pod(&job, &defaulted, type_, index, None).unwrap();
        pod.metadata.owner_references = None;
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    let names = ["ddp-master-0", "ddp-worker-0", "ddp-worker-1"];
    let mut ranks = Vec::new();
    for name in names {
        let phase = until(
            &format!("{name} finishes"),
            Duration::from_secs(300),
            async || {
                let pod = pods.get(name).await.ok()?;
                let phase = pod.status?.phase?;
                matches!(phase.as_str(), "Succeeded" | "Failed").then_some(phase)
            },
        )
        .await;
        let log = pods.logs(name, &LogParams::default()).await.unwrap();
        println!("{name} ({phase}):\n{log}");
        assert_eq!(phase, "Succeeded", "{name}: {log}");
        let line = log
            .lines()
            .find(|line| line.starts_with("eto-ddp:"))
            .unwrap_or_else(|| panic!("{name} printed no result: {log}"));
        assert!(
            line.ends_with("world=3 env_world=3 sum=6"),
            "{name}: every rank sees three and the sum of all: {line}"
        );
        ranks.push(line.split_whitespace().nth(1).unwrap().to_string());
    }
    assert_eq!(
        ranks,
        ["rank=0", "rank=1", "rank=2"],
        "master first, workers by index"
    );
    scratch.end().await;
}

/// The PyTorchJob CRD installs on a real API server, whose CEL cost estimate accepts its
/// rules, and the server judges jobs as the schema's unit tests say.
#[tokio::test]
#[ignore = "needs cluster"]
async fn the_pytorchjob_crd_installs_and_its_rules_judge_on_a_real_api_server() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::CustomResourceExt;
    use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams};
    use kube::core::ApiResource;

    let client = kube::Client::try_default()
        .await
        .expect("KUBECONFIG names a cluster");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = PyTorchJob::crd();
    let name = crd.metadata.name.clone().unwrap();
    crds.patch(
        &name,
        &PatchParams::apply("eto-test").force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("the API server accepts the CRD and its CEL rules");
    until(
        "the CRD is established",
        Duration::from_secs(30),
        async || {
            let crd = crds.get(&name).await.ok()?;
            crd.status?
                .conditions?
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
                .then_some(())
        },
    )
    .await;
    let jobs: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::erase::<PyTorchJob>(&()),
    );
    let pod = serde_json::json!({"spec": {"containers": [{"name": "pytorch", "image": "torch"}]}});
    let job = |specs: serde_json::Value, run_policy: serde_json::Value| {
        serde_json::from_value::<DynamicObject>(serde_json::json!({
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "ddp"},
            "spec": {"pytorchReplicaSpecs": specs, "runPolicy": run_policy}
        }))
        .unwrap()
    };
    let dry_run = PatchParams::apply("eto-test").dry_run();
    let judged = async |object: DynamicObject| {
        jobs.patch("ddp", &dry_run, &Patch::Apply(&object))
            .await
            .err()
            .map(|error| error.to_string())
    };
    let accepted = job(
        serde_json::json!({"Master": {"replicas": 1, "template": pod}, "Worker": {"replicas": 2, "template": pod}}),
        serde_json::json!({"managedBy": "kubeflow.org/training-operator"}),
    );
    assert_eq!(judged(accepted).await, None);
    let rejected = [
        (
            job(
                serde_json::json!({"worker": {"template": pod}}),
                serde_json::json!({}),
            ),
            "the replica types are Master and Worker",
        ),
        (
            job(
                serde_json::json!({"Master": {"replicas": 2, "template": pod}}),
                serde_json::json!({}),
            ),
            "Master.replicas must be set to 1",
        ),
        (
            job(
                serde_json::json!({"Worker": {"replicas": 0, "template": pod}}),
                serde_json::json!({}),
            ),
            "Worker.replicas must be at least 1",
        ),
        (
            job(
                serde_json::json!({"Worker": {"template": pod}}),
                serde_json::json!({"managedBy": "kubeflow.org/mpi-operator"}),
            ),
            "managedBy must be kubeflow.org/training-operator or kueue.x-k8s.io/multikueue",
        ),
    ];
    for (object, message) in rejected {
        let error = judged(object).await.expect("the API server rejects it");
        assert!(error.contains(message), "{message}: {error}");
    }
    crds.delete(&name, &DeleteParams::default()).await.unwrap();
}

/// Trains 20 steps of half a second, each an all-reduce of `rank + 1`, printing each step on
/// rank 0, then what every rank saw. With `CRASH_RANK` set, that rank exits with code 1 at
/// step 5 of its first attempt (a file in `/scratch`, an emptyDir that outlives a
/// container's restart, remembers it).
const DDP_STEPS: &str = r#"
import os, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
crash = os.environ.get("CRASH_RANK")
for step in range(20):
    if crash == str(rank) and step == 5 and not os.path.exists("/scratch/crashed"):
        open("/scratch/crashed", "w").close()
        print(f"eto-ddp-crash: rank {rank} exits with code 1", flush=True)
        os._exit(1)
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    if rank == 0:
        print(f"eto-ddp-step: {step}", flush=True)
    time.sleep(0.5)
print(f"eto-ddp: rank={rank} world={world} env_world={os.environ['WORLD_SIZE']} sum={int(value.item())}", flush=True)
dist.destroy_process_group()
"#;

/// A PyTorchJob `ddp` of a Master and two Workers running [`DDP_STEPS`] under torchrun, as
/// training-operator v1's users write it, placed as `ETO_E2E_POD_PATCH` says.
fn ddp_job(namespace: &str) -> serde_json::Value {
    let template = torchrun_template(DDP_STEPS);
    serde_json::json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "ddp", "namespace": namespace},
        "spec": {
            "nprocPerNode": "1",
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template},
                "Worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": template}
            }
        }
    })
}

/// Applies PyTorchJob `job` (named `ddp`) in the scratch namespace.
pub(crate) async fn apply_ddp(scratch: &Scratch, job: serde_json::Value) {
    let jobs: Api<PyTorchJob> = Api::namespaced(scratch.client.clone(), &scratch.namespace);
    let job: PyTorchJob = serde_json::from_value(job).unwrap();
    jobs.patch(
        "ddp",
        &kube::api::PatchParams::apply("eto-test").force(),
        &kube::api::Patch::Apply(&job),
    )
    .await
    .unwrap();
}

/// Applies `job` and waits until it ends; returns it.
pub(crate) async fn run_to_the_end(
    scratch: &Scratch,
    job: serde_json::Value,
    meanwhile: impl AsyncFnOnce(&Api<Pod>),
) -> PyTorchJob {
    let jobs: Api<PyTorchJob> = Api::namespaced(scratch.client.clone(), &scratch.namespace);
    apply_ddp(scratch, job).await;
    meanwhile(&scratch.pods()).await;
    until("the job ends", Duration::from_secs(600), async || {
        let job = jobs.get("ddp").await.ok()?;
        let ended = job.status.as_ref()?.conditions.iter().any(|c| {
            matches!(c.type_.as_str(), "Succeeded" | "Failed")
                && c.status == eto_api::common::ConditionStatus::True
        });
        ended.then_some(job)
    })
    .await
}

/// What the Master and the two Workers print when every rank took part: the world of
/// three, and the all-reduced sum of `rank + 1`.
const EVERY_RANK_SAW_ALL: [&str; 3] = [
    "eto-ddp: rank=0 world=3 env_world=3 sum=6",
    "eto-ddp: rank=1 world=3 env_world=3 sum=6",
    "eto-ddp: rank=2 world=3 env_world=3 sum=6",
];

/// What each rank printed last, read from its pod's log.
async fn results(pods: &Api<Pod>) -> Vec<String> {
    let mut results = Vec::new();
    for name in ["ddp-master-0", "ddp-worker-0", "ddp-worker-1"] {
        let log = pods.logs(name, &LogParams::default()).await.unwrap();
        println!("{name}:\n{log}");
        let line = log
            .lines()
            .find(|line| line.starts_with("eto-ddp:"))
            .unwrap_or_else(|| panic!("{name} printed no result: {log}"));
        results.push(line.to_string());
    }
    results
}

/// The job's condition types, after asserting that `Succeeded` is the newest.
pub(crate) fn succeeded_last(job: &PyTorchJob) -> Vec<String> {
    let types = condition_types(job);
    assert_eq!(
        types.last().map(String::as_str),
        Some("Succeeded"),
        "{types:?}"
    );
    types
}

/// Asserts that `job` succeeded, never failed, and had no restart counted.
fn succeeded_with_nothing_counted(job: &PyTorchJob) {
    let types = succeeded_last(job);
    assert!(!types.iter().any(|t| t == "Failed"), "{types:?}");
    let status = job.status.as_ref().unwrap();
    assert_eq!(status.eto.restart_count.unwrap_or(0), 0, "nothing counted");
}

/// Asserts that `job` never failed and succeeded in its second run, started without counting
/// a failure, whose Workers (as `printed` shows) met at the new run's rendezvous and went on
/// from the checkpoint.
fn succeeded_in_one_uncounted_new_run(job: &PyTorchJob, printed: &str) {
    succeeded_with_nothing_counted(job);
    assert_eq!(job.status.as_ref().unwrap().eto.run, Some(1), "one new run");
    let resumed: Vec<&str> = starts(printed)
        .into_iter()
        .filter(|line| field(line, "run_id=").is_some_and(|id| id.ends_with("-1")))
        .collect();
    assert!(
        !resumed.is_empty() && resumed.iter().all(|line| !line.contains("from_step=0 ")),
        "the new run met at its own rendezvous and went on from the checkpoint: {resumed:#?}"
    );
}

pub(crate) fn condition_types(job: &PyTorchJob) -> Vec<String> {
    job.status
        .iter()
        .flat_map(|status| &status.conditions)
        .map(|c| c.type_.clone())
        .collect()
}

#[tokio::test]
#[ignore = "needs cluster"]
async fn eto_runs_a_pytorchjob_of_a_master_and_two_workers_to_succeeded() {
    let scratch = Scratch::start("pytorchjob").await;
    let job = run_to_the_end(&scratch, ddp_job(&scratch.namespace), async |_| {}).await;
    succeeded_last(&job);
    assert_eq!(results(&scratch.pods()).await, EVERY_RANK_SAW_ALL);
    scratch.end().await;
}

#[tokio::test]
#[ignore = "needs cluster"]
async fn a_worker_deleted_mid_training_comes_back_under_its_name_and_the_job_succeeds() {
    let scratch = Scratch::start("pytorchjob-loss").await;
    let job = run_to_the_end(&scratch, ddp_job(&scratch.namespace), async |pods| {
        until("the master trains", Duration::from_secs(300), async || {
            let log = pods
                .logs("ddp-master-0", &LogParams::default())
                .await
                .ok()?;
            log.contains("eto-ddp-step: 5").then_some(())
        })
        .await;
        pods.delete("ddp-worker-1", &Default::default())
            .await
            .unwrap();
    })
    .await;
    succeeded_last(&job);
    let status = job.status.unwrap();
    assert_eq!(
        status.eto.restart_count.unwrap_or(0),
        0,
        "a deletion counts nothing"
    );
    assert_eq!(status.eto.run, Some(1), "one new run");
    assert_eq!(results(&scratch.pods()).await, EVERY_RANK_SAW_ALL);
    scratch.end().await;
}

#[tokio::test]
#[ignore = "needs cluster"]
async fn a_worker_that_fails_under_on_failure_restarts_in_its_pod_and_the_job_succeeds() {
    let scratch = Scratch::start("pytorchjob-onfailure").await;
    let mut job = ddp_job(&scratch.namespace);
    let mut template = torchrun_template(DDP_STEPS);
    template["spec"]["volumes"] = serde_json::json!([{"name": "scratch", "emptyDir": {}}]);
    let container = &mut template["spec"]["containers"][0];
    container["volumeMounts"] = serde_json::json!([{"name": "scratch", "mountPath": "/scratch"}]);
    container["env"] = serde_json::json!([{"name": "CRASH_RANK", "value": "2"}]);
    for replica in ["Master", "Worker"] {
        job["spec"]["pytorchReplicaSpecs"][replica]["template"] = template.clone();
    }
    let job = run_to_the_end(&scratch, job, async |_| {}).await;
    succeeded_last(&job);
    let status = job.status.unwrap();
    assert_eq!(
        status.eto.run.unwrap_or(0),
        0,
        "the kubelet restarted it in its pod"
    );
    let pods = scratch.pods();
    let worker = pods.get("ddp-worker-1").await.unwrap();
    let restarts = worker
        .status
        .and_then(|s| s.container_statuses)
        .map(|statuses| statuses[0].restart_count)
        .unwrap_or(0);
    assert!(restarts >= 1, "ddp-worker-1 restarted in place: {restarts}");
    let master = pods
        .logs("ddp-master-0", &LogParams::default())
        .await
        .unwrap();
    assert!(master.contains(EVERY_RANK_SAW_ALL[0]), "{master}");
    scratch.end().await;
}

/// Elastic training under torchrun: 80 steps of half a second, each an all-reduce, every
/// rank saving the step it reached in its pod (`/tmp/eto-step`) and every (re)start resuming
/// from the furthest step any rank saved. Each start prints the world it trained in; rank 0
/// prints each step; each rank prints what it saw at the end.
const ELASTIC_STEPS: &str = r#"
import os, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
path = "/tmp/eto-step"
saved = int(open(path).read()) if os.path.exists(path) else 0
start = torch.tensor([float(saved)])
dist.all_reduce(start, op=dist.ReduceOp.MAX)
step = int(start.item())
print(f"eto-elastic-start: rank={rank} world={world} from_step={step} run_id={os.environ['TORCHELASTIC_RUN_ID']}", flush=True)
while step < 80:
    value = torch.tensor([1.0])
    dist.all_reduce(value)
    step += 1
    with open(path, "w") as saved:
        saved.write(str(step))
    if rank == 0:
        print(f"eto-elastic-step: {step} world={int(value.item())}", flush=True)
    time.sleep(0.5)
print(f"eto-elastic-done: rank={rank} world={world} steps={step}", flush=True)
dist.destroy_process_group()
"#;

/// The log of pod `name`, or nothing if it has none (yet, or any more).
pub(crate) async fn log_of(pods: &Api<Pod>, name: &str) -> String {
    pods.logs(name, &LogParams::default())
        .await
        .unwrap_or_default()
}

/// The logs of every pod of the namespace, each printed under its name.
pub(crate) async fn every_log(pods: &Api<Pod>) -> String {
    let mut printed = String::new();
    for pod in pods.list(&Default::default()).await.unwrap() {
        let name = pod.metadata.name.unwrap_or_default();
        let log = log_of(pods, &name).await;
        println!("{name}:\n{log}");
        printed.push_str(&log);
    }
    printed
}

/// The start lines `log` printed.
pub(crate) fn starts(log: &str) -> Vec<&str> {
    marked(log, "eto-elastic-start:")
}

/// The start and save lines `log` printed, one per line.
fn starts_and_saves(log: &str) -> String {
    marked(log, "eto-elastic-s")
        .into_iter()
        .filter(|line| {
            line.starts_with("eto-elastic-start") || line.starts_with("eto-elastic-saved")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The lines `log` printed that carry `marker`, from it on: torchrun may put the local rank
/// before what a training process prints (`[default0]:`).
pub(crate) fn marked<'a>(log: &'a str, marker: &str) -> Vec<&'a str> {
    log.lines()
        .filter_map(|line| line.find(marker).map(|at| &line[at..]))
        .collect()
}

/// The value of `key` (`from_step=`, `run_id=`, ...) in a line the training printed.
pub(crate) fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|word| word.strip_prefix(key))
}

/// Asserts that each of the Workers `names` started once, then once more in a group that
/// re-formed with `world` Workers; prints its log and its restarts under `change`. Returns
/// the start line of each one's re-formed group.
async fn re_formed_once(pods: &Api<Pod>, names: &[&str], world: &str, change: &str) -> Vec<String> {
    let mut again = Vec::new();
    for name in names {
        let log = log_of(pods, name).await;
        println!("{name}:\n{log}");
        let started = starts(&log);
        println!(
            "{change}: {name} restarted {} time(s)",
            started.len().saturating_sub(1)
        );
        assert_eq!(
            started.len(),
            2,
            "{name}: one start, and one re-formed group: {started:#?}"
        );
        assert_eq!(field(started[1], "world="), Some(world), "{started:#?}");
        again.push(started[1].to_string());
    }
    again
}

/// Waits until rank 0 of the first three Workers of `ddp` printed its tenth step.
async fn ten_steps_trained(pods: &Api<Pod>) {
    until("the workers train", Duration::from_secs(300), async || {
        for name in ["ddp-worker-0", "ddp-worker-1", "ddp-worker-2"] {
            if log_of(pods, name).await.contains("eto-elastic-step: 10 ") {
                return Some(());
            }
        }
        None
    })
    .await;
}

/// Sets the Worker replicas of `ddp` through its scale subresource, as `kubectl scale` does.
pub(crate) async fn scale_workers(jobs: &Api<PyTorchJob>, replicas: i32) {
    let scale = serde_json::json!({"spec": {"replicas": replicas}});
    jobs.patch_scale(
        "ddp",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&scale),
    )
    .await
    .unwrap();
}

/// An elastic PyTorchJob `ddp` whose rendezvous eto hosts: three Workers of `template`
/// between two and four, with eto's elastic `settings`.
pub(crate) fn elastic_job(
    namespace: &str,
    template: serde_json::Value,
    settings: serde_json::Value,
) -> serde_json::Value {
    let mut policy = serde_json::json!({"minReplicas": 2, "maxReplicas": 4, "maxRestarts": 10});
    json_patch::merge(&mut policy, &settings);
    serde_json::json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "ddp", "namespace": namespace},
        "spec": {
            "nprocPerNode": "1",
            "elasticPolicy": policy,
            "pytorchReplicaSpecs": {
                "Worker": {"replicas": 3, "restartPolicy": "OnFailure", "template": template}
            }
        }
    })
}

/// Worker 0 of an elastic job whose rendezvous eto hosts (three Workers between two and
/// four) is evicted mid-training: with v1's wiring its agent hosted the rendezvous and every
/// worker would have gone with it; under eto the others re-form the group and train on from
/// the step they reached, a replacement joins under a new name, and the job succeeds in the
/// run it started in.
#[tokio::test]
#[ignore = "needs cluster"]
async fn an_elastic_job_trains_on_when_worker_0_is_evicted_and_a_replacement_joins() {
    let scratch = Scratch::start("pytorch-elastic").await;
    let template = torchrun_template(ELASTIC_STEPS);
    let job = elastic_job(&scratch.namespace, template, serde_json::json!({}));
    let job = run_to_the_end(&scratch, job, async |pods| {
        ten_steps_trained(pods).await;
        // Evicted, as a drain or a preemption takes a pod.
        pods.evict("ddp-worker-0", &Default::default())
            .await
            .unwrap();
    })
    .await;
    let pods = scratch.pods();
    let printed = every_log(&pods).await;
    succeeded_last(&job);
    let status = job.status.unwrap();
    assert_eq!(status.eto.run.unwrap_or(0), 0, "the run went on");
    assert_eq!(status.eto.restart_count.unwrap_or(0), 0);
    let starts = starts(&printed);
    let run_ids: std::collections::BTreeSet<_> = starts
        .iter()
        .filter_map(|line| field(line, "run_id="))
        .collect();
    assert_eq!(run_ids.len(), 1, "one rendezvous throughout: {starts:#?}");
    let resumed: Vec<&&str> = starts
        .iter()
        .filter(|line| field(line, "from_step=").is_some_and(|step| step != "0"))
        .collect();
    assert!(
        resumed.len() >= 2,
        "the survivors re-formed the group and went on from the step they reached: {starts:#?}"
    );
    let replacement = log_of(&pods, "ddp-worker-3").await;
    assert!(
        replacement
            .lines()
            .filter(|line| line.starts_with("eto-elastic-start:"))
            .all(|line| !line.contains("from_step=0 ")),
        "the replacement joined the training where it was: {replacement}"
    );
    let done: Vec<&str> = printed
        .lines()
        .filter(|line| line.starts_with("eto-elastic-done:"))
        .collect();
    assert!(
        !done.is_empty() && done.iter().all(|line| line.ends_with("steps=80")),
        "the training ended after its 80 steps: {done:#?}"
    );
    scratch.end().await;
}

/// [`ELASTIC_STEPS`] with its checkpoint in `/ckpt/step`, which every pod of the job mounts
/// from the same directory: rank 0 saves each step it finished, and every start goes on from
/// the step saved, printing its pod's host name and its torch; `TOTAL_STEPS` (80 unless set)
/// steps in all.
pub(crate) const ELASTIC_CHECKPOINTED: &str = r#"
import os, socket, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
path = "/ckpt/step"
step = int(open(path).read()) if os.path.exists(path) else 0
print(f"eto-elastic-start: rank={rank} world={world} from_step={step} run_id={os.environ['TORCHELASTIC_RUN_ID']} host={socket.gethostname()} torch={torch.__version__} at={time.time():.2f}", flush=True)
while step < int(os.environ.get("TOTAL_STEPS", "80")):
    value = torch.tensor([1.0])
    dist.all_reduce(value)
    step += 1
    if rank == 0:
        with open(path + ".tmp", "w") as saved:
            saved.write(str(step))
        os.replace(path + ".tmp", path)
        print(f"eto-elastic-step: {step} world={int(value.item())} at={time.time():.2f}", flush=True)
    time.sleep(0.5)
print(f"eto-elastic-done: rank={rank} world={world} steps={step}", flush=True)
dist.destroy_process_group()
"#;

/// A pod template running [`ELASTIC_CHECKPOINTED`], its checkpoint in a directory of this
/// machine under `ETO_E2E_CHECKPOINT_ROOT` (the pods' node must be this machine), and a
/// reader of the step it holds.
fn checkpointed_template(
    scratch: &Scratch,
) -> (serde_json::Value, impl Fn() -> Option<u32> + use<>) {
    let mut template = torchrun_template(ELASTIC_CHECKPOINTED);
    let saved = mount_a_checkpoint_directory(scratch, &mut template);
    (template, saved)
}

/// Mounts a directory of this machine under `ETO_E2E_CHECKPOINT_ROOT`, one per scratch
/// namespace, at `/ckpt` in the first container of `template` (the pods' node must be this
/// machine); returns a reader of the step the training wrote to `/ckpt/step`.
pub(crate) fn mount_a_checkpoint_directory(
    scratch: &Scratch,
    template: &mut serde_json::Value,
) -> impl Fn() -> Option<u32> + use<> {
    let root = std::env::var("ETO_E2E_CHECKPOINT_ROOT").unwrap_or("/tmp/eto-e2e".into());
    let checkpoint = format!("{root}/{}", scratch.namespace);
    push(
        &mut template["spec"]["volumes"],
        serde_json::json!({"name": "ckpt",
            "hostPath": {"path": checkpoint, "type": "DirectoryOrCreate"}}),
    );
    push(
        &mut template["spec"]["containers"][0]["volumeMounts"],
        serde_json::json!({"name": "ckpt", "mountPath": "/ckpt"}),
    );
    move || {
        std::fs::read_to_string(format!("{checkpoint}/step"))
            .ok()
            .and_then(|step| step.trim().parse::<u32>().ok())
    }
}

/// Appends `value` to the JSON list `list`, which may not exist yet.
fn push(list: &mut serde_json::Value, value: serde_json::Value) {
    if list.is_null() {
        *list = serde_json::json!([]);
    }
    list.as_array_mut().unwrap().push(value);
}

/// Two of the three Workers of an elastic job (two to four) are evicted while no node takes
/// a new pod (a spot reclaim on a full cluster): the job is `Suspended`, never `Failed`; once
/// capacity returns it resumes in a new run, at a new rendezvous, from the step its
/// checkpoint holds, and succeeds.
#[tokio::test]
#[ignore = "needs cluster"]
async fn an_elastic_job_below_its_minimum_suspends_and_resumes_from_its_checkpoint() {
    let scratch = Scratch::start("pytorch-suspend").await;
    let (template, saved) = checkpointed_template(&scratch);
    let settings = serde_json::json!({"belowMinSeconds": 5, "checkpointGraceSeconds": 15});
    let job = elastic_job(&scratch.namespace, template, settings);
    let jobs: Api<PyTorchJob> = Api::namespaced(scratch.client.clone(), &scratch.namespace);
    let client = scratch.client.clone();
    let job = run_to_the_end(&scratch, job, async |pods| {
        until("the workers train", Duration::from_secs(300), async || {
            (saved()? >= 10).then_some(())
        })
        .await;
        let node = pods
            .get("ddp-worker-2")
            .await
            .unwrap()
            .spec
            .unwrap()
            .node_name;
        let node: Vec<String> = node.into_iter().collect();
        set_unschedulable(&client, &node, true).await;
        for name in ["ddp-worker-0", "ddp-worker-1"] {
            pods.evict(name, &Default::default()).await.unwrap();
        }
        let suspended = until("the job suspends", Duration::from_secs(120), async || {
            let job = jobs.get("ddp").await.ok()?;
            let status = job.status?;
            let suspended = status.conditions.iter().any(|c| {
                c.type_ == "Suspended" && c.status == eto_api::common::ConditionStatus::True
            });
            (suspended || status.eto.run.unwrap_or(0) >= 1).then_some(())
        })
        .await;
        let suspended_at = saved().unwrap_or_default();
        println!("suspended {suspended:?} with step {suspended_at} saved");
        set_unschedulable(&client, &node, false).await;
        let back = std::time::Instant::now();
        until(
            "the resumed run trains",
            Duration::from_secs(300),
            async || (saved()? > suspended_at).then_some(()),
        )
        .await;
        println!(
            "below the minimum: capacity back -> first resumed step saved: {:.1} s",
            back.elapsed().as_secs_f64()
        );
    })
    .await;
    let printed = every_log(&scratch.pods()).await;
    succeeded_in_one_uncounted_new_run(&job, &printed);
    assert!(
        printed
            .lines()
            .any(|line| line.starts_with("eto-elastic-done:") && line.ends_with("steps=80")),
        "the training ended: {printed}"
    );
    scratch.end().await;
}

/// An elastic job of three Workers (two to four) scaled to four mid-training, as
/// `kubectl scale` does: the new Worker joins, and the group re-forms once, with four.
#[tokio::test]
#[ignore = "needs cluster"]
async fn an_elastic_job_scaled_out_re_forms_its_group_once() {
    let scratch = Scratch::start("pytorch-scale").await;
    let job = elastic_job(
        &scratch.namespace,
        torchrun_template(ELASTIC_STEPS),
        serde_json::json!({}),
    );
    let jobs: Api<PyTorchJob> = Api::namespaced(scratch.client.clone(), &scratch.namespace);
    let job = run_to_the_end(&scratch, job, async |pods| {
        ten_steps_trained(pods).await;
        scale_workers(&jobs, 4).await;
    })
    .await;
    let pods = scratch.pods();
    succeeded_last(&job);
    let originals = ["ddp-worker-0", "ddp-worker-1", "ddp-worker-2"];
    re_formed_once(&pods, &originals, "4", "scale-out 3 -> 4").await;
    let joined = log_of(&pods, "ddp-worker-3").await;
    println!("ddp-worker-3:\n{joined}");
    assert_eq!(starts(&joined).len(), 1, "{joined}");
    scratch.end().await;
}

/// Mounts eto's notice helper (`python/eto_notice.py` of this repository, put in a ConfigMap
/// of the scratch namespace) at `/opt/eto-helper` in the first container of `template`.
pub(crate) async fn mount_the_notice_helper(scratch: &Scratch, template: &mut serde_json::Value) {
    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(scratch.client.clone(), &scratch.namespace);
    let helper =
        std::fs::read_to_string(eto_tests::workspace_root().join("python/eto_notice.py")).unwrap();
    let config_map = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "eto-helper"}, "data": {"eto_notice.py": helper}
    }))
    .unwrap();
    config_maps
        .create(&PostParams::default(), &config_map)
        .await
        .unwrap();
    push(
        &mut template["spec"]["volumes"],
        serde_json::json!({"name": "helper", "configMap": {"name": "eto-helper"}}),
    );
    push(
        &mut template["spec"]["containers"][0]["volumeMounts"],
        serde_json::json!({"name": "helper", "mountPath": "/opt/eto-helper"}),
    );
}

/// Saves its step only when eto asks (through `python/eto_notice.py`, mounted from this
/// repository): every rank polls the notice each step and they agree by an all-reduce; rank 0
/// saves and says so, and every rank waits for the change. Rank 0 also appends each step it
/// reached to `/ckpt/steps.log` (the ground truth of what was trained, whoever held rank 0).
const ELASTIC_ON_NOTICE: &str = r#"
import os, socket, sys, time, torch, torch.distributed as dist
sys.path.insert(0, "/opt/eto-helper")
import eto_notice
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
path = "/ckpt/step"
def save(step):
    with open(path + ".tmp", "w") as saved:
        saved.write(str(step))
    os.replace(path + ".tmp", path)
step = int(open(path).read()) if os.path.exists(path) else 0
print(f"eto-elastic-start: rank={rank} world={world} from_step={step} run_id={os.environ['TORCHELASTIC_RUN_ID']} host={socket.gethostname()} at={time.time():.2f}", flush=True)
while step < 60:
    asked = torch.tensor([1.0 if eto_notice.checkpoint_requested() else 0.0])
    dist.all_reduce(asked, op=dist.ReduceOp.MAX)
    if asked.item():
        notice = eto_notice.asking_notice()
        if rank == 0:
            save(step)
            heard = eto_notice.saved(step)
            print(f"eto-elastic-saved: {step} kind={notice and notice['kind']} heard={heard}", flush=True)
        eto_notice.wait_for_change()
        continue
    value = torch.tensor([1.0])
    dist.all_reduce(value)
    step += 1
    if rank == 0:
        print(f"eto-elastic-step: {step} world={int(value.item())}", flush=True)
        with open("/ckpt/steps.log", "a") as logged:
            logged.write(f"step={step} at={time.time():.3f}\n")
    time.sleep(0.5)
if rank == 0:
    save(step)
print(f"eto-elastic-done: rank={rank} world={world} steps={step}", flush=True)
dist.destroy_process_group()
"#;

/// A Worker of an elastic job (three, two to four) evicted mid-training, its training saving
/// only what a notice asks for, in the documented loop with eto's helper ([`ELASTIC_ON_NOTICE`]): torchrun forwards
/// the SIGTERM, the helper makes it a notice, eto asks the other Workers to save and keeps
/// the group together until it did, while the replacement starts and waits at its gate; the
/// group re-forms once, with the replacement, from the step it reached. Asserts that no step
/// is trained twice (each step rank 0 reached is logged once), that the group re-formed once
/// without the evicted Worker, and that the job succeeds in the run it started in; prints the
/// seconds from the eviction to the next new step, and every pause after it.
async fn an_evicted_worker_saves_with_the_group(name: &str, victim: Victim) {
    let scratch = Scratch::start(name).await;
    let (job, logged) = saving_on_notice(&scratch).await;
    let mut evicted = None;
    let job = run_to_the_end(&scratch, job, async |pods| {
        fifteen_steps_trained(&logged).await;
        let pod = victim.among(pods).await;
        let at = now();
        let before = logged().last().map_or(0, |(step, _)| *step);
        Taken::Evicted.take(pods, &pod).await;
        until(
            "a new step after the eviction",
            Duration::from_secs(300),
            async || {
                logged()
                    .into_iter()
                    .find(|(step, when)| *when > at && *step > before + 1)
                    .map(|_| ())
            },
        )
        .await;
        evicted = Some((pod, at, before));
    })
    .await;
    let (pod, at, before) = evicted.unwrap();
    let steps = logged();
    let printed = every_log(&scratch.pods()).await;
    let (counts, twice) = trained_twice(&steps);
    let last_before = steps
        .iter()
        .filter(|(_, when)| *when <= at)
        .map(|(step, _)| *step)
        .max()
        .unwrap_or(0);
    let resumed = first_step_after_a_pause(&steps, at);
    // Every pause of the training from the eviction on: one per re-formation.
    let paused: Vec<f64> = steps
        .windows(2)
        .filter(|pair| pair[1].1 > at && pair[1].1 - pair[0].1 > 2.0)
        .map(|pair| pair[1].1 - pair[0].1)
        .collect();
    println!(
        "{name}: {pod} evicted at step {before} (last logged before it: {last_before}); the training printed:\n{}\nsteps trained twice: {twice:?}; the first step after the pause: {resumed:?}, {:.1} s after the eviction; pauses after it: {paused:.1?} s",
        starts_and_saves(&printed),
        resumed.map_or(f64::NAN, |(_, when)| when - at)
    );
    assert!(twice.is_empty(), "steps trained twice: {twice:?}");
    // The replacement started while the group saved and joined it as it re-formed.
    re_formed_once_without(&starts_after(&printed, at), std::slice::from_ref(&pod));
    assert_eq!(
        counts.keys().copied().collect::<Vec<_>>(),
        (1..=60).collect::<Vec<_>>(),
        "every step trained once"
    );
    let status = job.status.clone().unwrap();
    succeeded_last(&job);
    assert_eq!(status.eto.run.unwrap_or(0), 0, "the run went on");
    scratch.end().await;
}

/// An elastic job (three Workers, two to four) training [`ELASTIC_ON_NOTICE`] with eto's
/// helper, and what reads the steps its rank 0 logged (see [`steps_logged`]).
async fn saving_on_notice(
    scratch: &Scratch,
) -> (serde_json::Value, impl Fn() -> Vec<(u32, f64)> + use<>) {
    let mut template = torchrun_template(ELASTIC_ON_NOTICE);
    let _ = mount_a_checkpoint_directory(scratch, &mut template);
    mount_the_notice_helper(scratch, &mut template).await;
    let job = elastic_job(&scratch.namespace, template, serde_json::json!({}));
    (job, steps_logged(scratch))
}

/// Waits until `logged` (see [`steps_logged`]) holds 15 steps.
async fn fifteen_steps_trained(logged: &impl Fn() -> Vec<(u32, f64)>) {
    until("15 steps trained", Duration::from_secs(300), async || {
        (logged().len() >= 15).then_some(())
    })
    .await;
}

/// The steps rank 0 of [`ELASTIC_ON_NOTICE`] logged so far, with when (seconds since the
/// epoch), from the job's checkpoint directory under `ETO_E2E_CHECKPOINT_ROOT`.
fn steps_logged(scratch: &Scratch) -> impl Fn() -> Vec<(u32, f64)> + use<> {
    let root = std::env::var("ETO_E2E_CHECKPOINT_ROOT").unwrap_or("/tmp/eto-e2e".into());
    let steps_log = std::path::PathBuf::from(format!("{root}/{}/steps.log", scratch.namespace));
    move || {
        std::fs::read_to_string(&steps_log)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| {
                let step = field(line, "step=")?.parse().ok()?;
                let at = field(line, "at=")?.parse().ok()?;
                Some((step, at))
            })
            .collect()
    }
}

/// How often each step of `steps` was logged, and the steps logged more than once.
fn trained_twice(steps: &[(u32, f64)]) -> (std::collections::BTreeMap<u32, u32>, Vec<u32>) {
    let mut counts = std::collections::BTreeMap::new();
    for (step, _) in steps {
        *counts.entry(*step).or_insert(0) += 1;
    }
    let twice = counts
        .iter()
        .filter(|(_, count)| **count > 1)
        .map(|(step, _)| *step)
        .collect();
    (counts, twice)
}

/// The training processes' start lines (`eto-elastic-start`) in `printed` after `at`.
fn starts_after(printed: &str, at: f64) -> Vec<&str> {
    marked(printed, "eto-elastic-start")
        .into_iter()
        .filter(|line| {
            field(line, "at=")
                .and_then(|when| when.parse::<f64>().ok())
                .is_some_and(|when| when > at)
        })
        .collect()
}

/// Asserts that `starts` (see [`starts_after`]) are one start of every process of a group of
/// three Workers, one process each, none of them the Workers that `left`: the group
/// re-formed once, with the Workers that took their places.
fn re_formed_once_without(starts: &[&str], left: &[String]) {
    let hosts: std::collections::BTreeSet<&str> = starts
        .iter()
        .filter_map(|line| field(line, "host="))
        .collect();
    assert_eq!(starts.len(), 3, "the group re-formed once: {starts:#?}");
    assert_eq!(hosts.len(), 3, "{starts:#?}");
    for gone in left {
        assert!(!hosts.contains(gone.as_str()), "{gone} left: {starts:#?}");
    }
}

/// The first step of `steps` logged more than 2 s after the one before it, from the last
/// step before `at` on: the group trained on to its save, paused while it re-formed, and
/// trained again.
fn first_step_after_a_pause(steps: &[(u32, f64)], at: f64) -> Option<(u32, f64)> {
    let from = steps.iter().filter(|(_, when)| *when <= at).count();
    steps[from.saturating_sub(1)..]
        .windows(2)
        .find_map(|pair| (pair[1].1 - pair[0].1 > 2.0).then_some(pair[1]))
}

/// A node under Workers of an elastic job (three, two to four) is warned by a spot handler
/// (`karpenter.sh/disrupted`) mid-training, the training saving only what a notice asks for
/// ([`ELASTIC_ON_NOTICE`]). The warned Workers train on while their replacements start on the
/// other node and wait at their gates; then the group saves, the warned Workers leave, the
/// replacements' training starts, and the group re-forms once, with them: every survivor
/// starts its training once after the warning, every new Worker once, nothing is trained
/// twice, and the job succeeds in its run. Prints the seconds from the warning to the save,
/// and from the save to the next step. Needs two real nodes.
#[tokio::test]
#[ignore = "needs cluster"]
async fn warned_workers_train_on_until_their_replacements_wait_and_the_group_re_forms_once() {
    let scratch = Scratch::start("warned-handover").await;
    let (job, logged) = saving_on_notice(&scratch).await;
    let mut warned = None;
    let job = run_to_the_end(&scratch, job, async |pods| {
        fifteen_steps_trained(&logged).await;
        // A node of Workers without the rendezvous store, the one pod the run cannot lose.
        let node_of = |pod: &Pod| pod.spec.as_ref().and_then(|s| s.node_name.clone());
        let store = pods.get("ddp-rdzv").await.unwrap();
        let workers: Vec<Pod> = pods
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|pod| {
                pod.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.contains("-worker-"))
            })
            .collect();
        let node = workers
            .iter()
            .filter_map(node_of)
            .find(|node| Some(node) != node_of(&store).as_ref())
            .expect("a Worker on another node than the store's");
        let on_node: Vec<String> = workers
            .iter()
            .filter(|pod| node_of(pod).as_ref() == Some(&node))
            .filter_map(|pod| pod.metadata.name.clone())
            .collect();
        let at = now();
        eto_tests::nodes::set_taint(&scratch.client, &node, "karpenter.sh/disrupted", true).await;
        until(
            "a new step after the group re-formed",
            Duration::from_secs(300),
            async || first_step_after_a_pause(&logged(), at).map(|_| ()),
        )
        .await;
        eto_tests::nodes::set_taint(&scratch.client, &node, "karpenter.sh/disrupted", false).await;
        warned = Some((node, on_node, at));
    })
    .await;
    let (node, on_node, at) = warned.unwrap();
    let steps = logged();
    let pods = scratch.pods();
    let printed = every_log(&pods).await;
    let (counts, twice) = trained_twice(&steps);
    let saved_at = steps
        .iter()
        .zip(steps.iter().skip(1))
        .find(|(a, b)| a.1 > at && b.1 - a.1 > 2.0)
        .map(|(a, _)| a.1);
    let trained_on = steps.iter().filter(|(_, when)| *when > at).count();
    let resumed = first_step_after_a_pause(&steps, at);
    let starts = starts_after(&printed, at);
    println!(
        "warned {node} under {on_node:?}; the training printed:\n{}\nsteps trained twice: {twice:?}; \
         the group trained on for {:.1} s after the warning, the first step after its pause \
         came {:.1} s after the last one before it ({resumed:?})",
        starts_and_saves(&printed),
        saved_at.map_or(f64::NAN, |saved| saved - at),
        match (resumed, saved_at) {
            (Some((_, when)), Some(saved)) => when - saved,
            _ => f64::NAN,
        },
    );
    assert!(twice.is_empty(), "steps trained twice: {twice:?}");
    assert_eq!(
        counts.keys().copied().collect::<Vec<_>>(),
        (1..=60).collect::<Vec<_>>(),
        "every step trained once"
    );
    assert!(trained_on > 1, "the group trained on after the warning");
    re_formed_once_without(&starts, &on_node);
    // The group saved the step it reached (group rank 0 asked by the Checkpoint notice, or
    // by its own Reclaim on a warned node; its log may have gone with its pod), and every
    // process of the re-formed group resumed from it.
    let paused_at = resumed.and_then(|(step, _)| step.checked_sub(1));
    for start in &starts {
        assert_eq!(
            field(start, "from_step=").and_then(|step| step.parse().ok()),
            paused_at,
            "{starts:#?}"
        );
    }
    let status = job.status.clone().unwrap();
    succeeded_last(&job);
    assert_eq!(status.eto.run.unwrap_or(0), 0, "the run went on");
    scratch.end().await;
}

/// The pod holding group rank 0 is evicted: it saves the step the group reached, with it.
#[tokio::test]
#[ignore = "needs cluster"]
async fn an_evicted_group_rank_0_saves_with_the_group_and_nothing_is_trained_twice() {
    an_evicted_worker_saves_with_the_group("evicted-saves-rank0", Victim::GroupRankZero).await;
}

/// Another Worker is evicted: the group's rank 0 saves, and the evicted one leaves after.
#[tokio::test]
#[ignore = "needs cluster"]
async fn an_evicted_worker_waits_for_the_groups_save_and_nothing_is_trained_twice() {
    an_evicted_worker_saves_with_the_group("evicted-saves-other", Victim::Another).await;
}

/// A Worker removed from an elastic job (three Workers, two to four, scaled to two as
/// `kubectl scale` does) leaves only after the group saved: every Worker is told to
/// checkpoint, rank 0 saves and says so through eto's helper, the Worker leaves on that word
/// (long before `drainSeconds`), and the group re-forms once, with two, from the saved step:
/// nothing is trained twice.
#[tokio::test]
#[ignore = "needs cluster"]
async fn a_worker_scaled_in_leaves_once_the_group_saved_and_nothing_is_trained_twice() {
    let scratch = Scratch::start("pytorch-regroup").await;
    let (mut template, saved) = checkpointed_template(&scratch);
    template["spec"]["containers"][0]["command"] =
        torchrun_template(ELASTIC_ON_NOTICE)["spec"]["containers"][0]["command"].clone();
    mount_the_notice_helper(&scratch, &mut template).await;
    let job = elastic_job(
        &scratch.namespace,
        template,
        serde_json::json!({"drainSeconds": 300}),
    );
    let jobs: Api<PyTorchJob> = Api::namespaced(scratch.client.clone(), &scratch.namespace);
    let job = run_to_the_end(&scratch, job, async |pods| {
        ten_steps_trained(pods).await;
        scale_workers(&jobs, 2).await;
        let notice = until(
            "the group is told to save",
            Duration::from_secs(60),
            async || jobs.get("ddp").await.ok()?.status?.eto.notice,
        )
        .await;
        println!("notice: {notice:?}");
        assert_eq!(notice.kind, eto_api::job_status::NoticeKind::Checkpoint);
        let deadline = notice.deadline.expect("a deadline").0;
        until(
            "the removed Worker goes",
            Duration::from_secs(300),
            async || {
                let gone = match pods.get_opt("ddp-worker-2").await.ok()? {
                    None => true,
                    Some(pod) => pod.metadata.deletion_timestamp.is_some(),
                };
                gone.then_some(())
            },
        )
        .await;
        assert!(
            jiff::Timestamp::now() < deadline,
            "it left on the training's word, before drainSeconds were over"
        );
        println!("step saved when it left: {:?}", saved());
        // The status shows the group that re-formed, as the store reports it: a round after
        // the first, complete, nobody waiting. (While it re-forms, the first round may show
        // the two agents left with one waiting for the next.)
        let rendezvous = until("the group re-forms", Duration::from_secs(120), async || {
            let shown = jobs.get("ddp").await.ok()?.status?.rendezvous?;
            (shown.round >= 1 && shown.complete && shown.waiting == 0).then_some(shown)
        })
        .await;
        println!("the rendezvous eto shows: {rendezvous:?}");
        assert_eq!(
            rendezvous.agents, 2,
            "the group re-formed without the removed Worker"
        );
    })
    .await;
    let pods = scratch.pods();
    let printed = every_log(&pods).await;
    succeeded_last(&job);
    let saved_lines: Vec<&str> = printed
        .lines()
        .filter(|line| line.starts_with("eto-elastic-saved:"))
        .collect();
    assert_eq!(saved_lines.len(), 1, "{saved_lines:#?}");
    assert!(
        saved_lines[0].ends_with("kind=Checkpoint heard=True"),
        "{saved_lines:#?}"
    );
    let saved_step: u32 = saved_lines[0]
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let survivors = ["ddp-worker-0", "ddp-worker-1"];
    for again in re_formed_once(&pods, &survivors, "2", "scale-in 3 -> 2").await {
        assert_eq!(
            field(&again, "from_step=").and_then(|s| s.parse().ok()),
            Some(saved_step),
            "{again}"
        );
    }
    // Rank 0 of the first group printed its steps and what it saved in one pod's log.
    let mut saver_log = String::new();
    for name in ["ddp-worker-0", "ddp-worker-1", "ddp-worker-2"] {
        let log = log_of(&pods, name).await;
        if log.contains("eto-elastic-saved:") {
            saver_log = log;
        }
    }
    // Every step its first group trained, before the group re-formed.
    let trained_before: u32 = saver_log
        .lines()
        .skip_while(|line| !line.starts_with("eto-elastic-start:"))
        .skip(1)
        .take_while(|line| !line.starts_with("eto-elastic-start:"))
        .filter_map(|line| line.strip_prefix("eto-elastic-step: "))
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .max()
        .unwrap_or_default();
    println!(
        "scale-in 3 -> 2: saved at step {saved_step}, trained up to {trained_before} before it: {} steps trained twice",
        trained_before.saturating_sub(saved_step)
    );
    assert!(
        trained_before <= saved_step,
        "nothing beyond the saved step was trained before the group re-formed"
    );
    scratch.end().await;
}

/// An elastic job of two Workers (two to four, torchrun's last call shortened to 5 s) scaled
/// to four: the two new Workers wait behind their gate until both run, start together, and
/// the group re-forms once, with four.
#[tokio::test]
#[ignore = "needs cluster"]
async fn two_workers_added_at_once_join_the_group_together() {
    let scratch = Scratch::start("pytorch-batch").await;
    let mut job = elastic_job(
        &scratch.namespace,
        torchrun_template(ELASTIC_STEPS),
        serde_json::json!({"rdzvConf": [{"key": "last_call_timeout", "value": "5"}]}),
    );
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 2.into();
    let jobs: Api<PyTorchJob> = Api::namespaced(scratch.client.clone(), &scratch.namespace);
    let job = run_to_the_end(&scratch, job, async |pods| {
        ten_steps_trained(pods).await;
        scale_workers(&jobs, 4).await;
    })
    .await;
    succeeded_last(&job);
    let pods = scratch.pods();
    let originals = ["ddp-worker-0", "ddp-worker-1"];
    re_formed_once(&pods, &originals, "4", "scale-out 2 -> 4").await;
    for name in ["ddp-worker-2", "ddp-worker-3"] {
        let log = log_of(&pods, name).await;
        println!("{name}:\n{log}");
        assert_eq!(starts(&log).len(), 1, "{log}");
        let opened = pods
            .get(name)
            .await
            .unwrap()
            .metadata
            .annotations
            .unwrap_or_default();
        assert_eq!(
            opened
                .get(eto_api::well_known::START_ANNOTATION)
                .map(String::as_str),
            Some("go"),
            "{name} started through its gate"
        );
    }
    scratch.end().await;
}

/// What losing a Worker of an elastic job cost, as a benchmark prints it.
pub(crate) struct LossCost {
    /// Seconds from the loss to the first step trained after it.
    pub(crate) seconds_to_next_step: f64,
    /// Seconds from the loss to the first step trained by a group of three again.
    pub(crate) seconds_to_whole: f64,
    /// Times the training started again after the loss (one per re-formed group).
    pub(crate) restarts: usize,
    /// Steps the job had saved and trained again.
    pub(crate) steps_redone: u32,
    /// Runs the job started after its first.
    pub(crate) new_runs: i32,
    /// The job's last condition.
    pub(crate) outcome: String,
}

/// Runs [`ELASTIC_CHECKPOINTED`] as an elastic job with `settings` (rendezvous and eto's),
/// takes `victim` as `taken` once 10 steps are saved, and measures what it cost.
pub(crate) async fn measure_loss(
    name: &str,
    settings: serde_json::Value,
    victim: Victim,
    taken: Taken,
) -> LossCost {
    let scratch = Scratch::start(name).await;
    let (template, saved) = checkpointed_template(&scratch);
    let job = elastic_job(&scratch.namespace, template, settings);
    let mut cost = (0.0, 0, 0.0);
    let job = run_to_the_end(&scratch, job, async |pods| {
        until("10 steps are saved", Duration::from_secs(300), async || {
            (saved()? >= 10).then_some(())
        })
        .await;
        let pod = victim.among(pods).await;
        let before = saved().unwrap_or_default();
        let lost_at = now();
        let lost = std::time::Instant::now();
        taken.take(pods, &pod).await;
        until(
            "a step after the loss",
            Duration::from_secs(600),
            async || {
                let step = saved()?;
                // Saving steps at or below the last one before the loss is training again.
                (step > before).then_some(())
            },
        )
        .await;
        cost = (lost.elapsed().as_secs_f64(), before, lost_at);
    })
    .await;
    let lost_at = cost.2;
    let printed = every_log(&scratch.pods()).await;
    let resumed_from = starts(&printed)
        .into_iter()
        .filter_map(|line| field(line, "from_step=")?.parse::<u32>().ok())
        .filter(|step| *step > 0)
        .min()
        .unwrap_or(0);
    let at = |line: &str| field(line, "at=").and_then(|at| at.parse::<f64>().ok());
    let whole_at = printed_steps(&printed)
        .into_iter()
        .filter(|&(_, world, when)| world == 3 && when > lost_at)
        .map(|(_, _, when)| when)
        .fold(f64::INFINITY, f64::min);
    let status = job.status.clone().unwrap_or_default();
    let result = LossCost {
        seconds_to_next_step: cost.0,
        seconds_to_whole: whole_at - lost_at,
        restarts: starts(&printed)
            .into_iter()
            .filter(|line| field(line, "rank=") == Some("0") && at(line) > Some(lost_at))
            .count(),
        steps_redone: cost.1.saturating_sub(resumed_from),
        new_runs: status.eto.run.unwrap_or(0),
        outcome: condition_types(&job).last().cloned().unwrap_or_default(),
    };
    scratch.end().await;
    result
}

/// Benchmark: a Worker of an elastic job of three (two to four) lost at step 10, three ways
/// (the pod holding group rank 0 force-deleted, another Worker force-deleted, the pod holding
/// group rank 0 evicted), around eto's rendezvous store, with one spare Worker beside a group
/// of three (`maxReplicas: 3`, `spareReplicas: 1`), and with v1's wiring (the store in worker
/// 0's agent, `rdzvHost: ddp-worker-0`), the same script checkpointing every step. Prints, for
/// each, the seconds from the loss to the next step and to the first step of a group of three
/// again, the training's restarts, the steps trained twice and the runs restarted; asserts
/// only that every job succeeds.
#[tokio::test]
#[ignore = "needs cluster"]
async fn benchmark_a_lost_worker_with_etos_store_and_with_v1s_wiring() {
    let cases = [
        (
            "group rank 0 force-deleted",
            "rank0-gone",
            Victim::GroupRankZero,
            Taken::ForceDeleted,
        ),
        (
            "another Worker force-deleted",
            "other-gone",
            Victim::Another,
            Taken::ForceDeleted,
        ),
        (
            "group rank 0 evicted",
            "rank0-evicted",
            Victim::GroupRankZero,
            Taken::Evicted,
        ),
    ];
    let mut costs = Vec::new();
    for (case, name, victim, taken) in cases {
        let eto = measure_loss(
            &format!("bench-eto-{name}"),
            serde_json::json!({}),
            victim,
            taken,
        )
        .await;
        let spare = measure_loss(
            &format!("bench-spare-{name}"),
            serde_json::json!({"maxReplicas": 3, "spareReplicas": 1}),
            victim,
            taken,
        )
        .await;
        let v1 = measure_loss(
            &format!("bench-v1-{name}"),
            serde_json::json!({"rdzvHost": "ddp-worker-0"}),
            victim,
            taken,
        )
        .await;
        costs.push((case, eto, spare, v1));
    }
    println!(
        "| loss at step 10 | next step: eto, eto with a spare, v1's wiring | three train again: eto, spare, v1 | training restarts: eto, spare, v1 | steps trained twice: eto, spare, v1 | runs restarted: eto, spare, v1 |"
    );
    println!("|---|---|---|---|---|---|");
    for (case, eto, spare, v1) in &costs {
        println!(
            "| {case} | {:.1} s, {:.1} s, {:.1} s | {:.1} s, {:.1} s, {:.1} s | {}, {}, {} | {}, {}, {} | {}, {}, {} |",
            eto.seconds_to_next_step,
            spare.seconds_to_next_step,
            v1.seconds_to_next_step,
            eto.seconds_to_whole,
            spare.seconds_to_whole,
            v1.seconds_to_whole,
            eto.restarts,
            spare.restarts,
            v1.restarts,
            eto.steps_redone,
            spare.steps_redone,
            v1.steps_redone,
            eto.new_runs,
            spare.new_runs,
            v1.new_runs
        );
    }
    for (case, eto, spare, v1) in &costs {
        assert_eq!(eto.outcome, "Succeeded", "{case}, eto's store");
        assert_eq!(
            spare.outcome, "Succeeded",
            "{case}, eto's store with a spare"
        );
        assert_eq!(v1.outcome, "Succeeded", "{case}, v1's wiring");
    }
}

/// What scaling out a running group cost it, as a benchmark prints it.
struct ScaleOutCost {
    /// The longest time the checkpointed step did not pass its highest, from the scale-out
    /// until the training's end, in seconds: the group's stall.
    longest_stall: f64,
    /// Steps the job had saved and trained again.
    steps_redone: u32,
    /// Times a training process of group rank 0 started again after the scale-out, and
    /// containers of the job restarted by their kubelet.
    restarts: (usize, i32),
    /// The job's last condition.
    outcome: String,
}

/// Runs [`ELASTIC_CHECKPOINTED`] as an elastic job of `from` Workers (two to four) with
/// `settings`, scales it to `to` once 10 steps are saved, and measures what the running group
/// paid, from the checkpointed step (read every 50 ms until the training ends) and what the
/// training printed.
async fn measure_scale_out(
    name: &str,
    settings: serde_json::Value,
    from: i32,
    to: i32,
) -> ScaleOutCost {
    let scratch = Scratch::start(name).await;
    let (template, saved) = checkpointed_template(&scratch);
    let mut job = elastic_job(&scratch.namespace, template, settings);
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = from.into();
    let jobs: Api<PyTorchJob> = Api::namespaced(scratch.client.clone(), &scratch.namespace);
    let mut scaled = (0.0, 0, 0.0);
    let job = run_to_the_end(&scratch, job, async |_| {
        until("10 steps are saved", Duration::from_secs(300), async || {
            (saved()? >= 10).then_some(())
        })
        .await;
        let before = saved().unwrap_or_default();
        let at = now();
        scale_workers(&jobs, to).await;
        let (mut highest, mut since) = (before, std::time::Instant::now());
        let mut longest = 0.0_f64;
        let deadline = std::time::Instant::now() + Duration::from_secs(600);
        // ELASTIC_CHECKPOINTED trains 80 steps.
        while highest < 80 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if let Some(step) = saved().filter(|step| *step > highest) {
                longest = longest.max(since.elapsed().as_secs_f64());
                (highest, since) = (step, std::time::Instant::now());
            }
        }
        scaled = (at, before, longest);
    })
    .await;
    let (scaled_at, before, longest_stall) = scaled;
    let pods = scratch.pods();
    let printed = every_log(&pods).await;
    let at = |line: &str| field(line, "at=").and_then(|at| at.parse::<f64>().ok());
    let after: Vec<&str> = starts(&printed)
        .into_iter()
        .filter(|line| at(line) > Some(scaled_at))
        .collect();
    let resumed_from = after
        .iter()
        .filter_map(|line| field(line, "from_step=")?.parse::<u32>().ok())
        .min()
        .unwrap_or(before);
    let container_restarts = pods
        .list(&Default::default())
        .await
        .unwrap()
        .into_iter()
        .flat_map(|pod| {
            pod.status
                .and_then(|s| s.container_statuses)
                .unwrap_or_default()
        })
        .map(|status| status.restart_count)
        .sum();
    let cost = ScaleOutCost {
        longest_stall,
        steps_redone: before.saturating_sub(resumed_from),
        restarts: (
            after
                .iter()
                .filter(|line| field(line, "rank=") == Some("0"))
                .count(),
            container_restarts,
        ),
        outcome: condition_types(&job).last().cloned().unwrap_or_default(),
    };
    scratch.end().await;
    cost
}

/// Benchmark: an elastic job (two to four) scaled out at step 10 by one Worker (3 -> 4) and
/// by two (2 -> 4), around eto's rendezvous store and with v1's wiring. Prints, for each, the
/// running group's longest stall from the scale-out on, the steps it trained twice and its
/// restarts; asserts only that every job succeeds.
#[tokio::test]
#[ignore = "needs cluster"]
async fn benchmark_scaling_out_a_running_group() {
    let mut costs = Vec::new();
    for (case, name, from, to) in [
        ("by one, 3 -> 4", "one", 3, 4),
        ("by two, 2 -> 4", "two", 2, 4),
    ] {
        let eto = measure_scale_out(
            &format!("bench-eto-out-{name}"),
            serde_json::json!({}),
            from,
            to,
        )
        .await;
        let v1 = measure_scale_out(
            &format!("bench-v1-out-{name}"),
            serde_json::json!({"rdzvHost": "ddp-worker-0"}),
            from,
            to,
        )
        .await;
        costs.push((case, eto, v1));
    }
    println!(
        "| scale-out at step 10 | longest stall: eto, v1's wiring | steps trained twice: eto, v1 | training restarts (containers restarted): eto, v1 |"
    );
    println!("|---|---|---|---|");
    for (case, eto, v1) in &costs {
        println!(
            "| {case} | {:.1} s, {:.1} s | {}, {} | {} ({}), {} ({}) |",
            eto.longest_stall,
            v1.longest_stall,
            eto.steps_redone,
            v1.steps_redone,
            eto.restarts.0,
            eto.restarts.1,
            v1.restarts.0,
            v1.restarts.1
        );
    }
    for (case, eto, v1) in &costs {
        assert_eq!(eto.outcome, "Succeeded", "{case}, eto's store");
        assert_eq!(v1.outcome, "Succeeded", "{case}, v1's wiring");
    }
}

/// How a Worker is taken from a running group.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Taken {
    /// Its pod force-deleted (`--grace-period=0 --force`): gone from the API at once, its
    /// processes killed, as a node that vanishes takes them.
    ForceDeleted,
    /// Evicted through the Eviction API, as a drain or a spot handler does: SIGTERM, then its
    /// grace period.
    Evicted,
}

/// Which Worker is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Victim {
    /// The pod holding group rank 0, as the training printed it.
    GroupRankZero,
    /// Another one.
    Another,
}

impl Victim {
    /// The pod of the group's members this victim is now (a spare, whose training never
    /// started, is none).
    async fn among(self, pods: &Api<Pod>) -> String {
        let rank_zero = group_rank_zero(pods).await;
        if self == Victim::GroupRankZero {
            return rank_zero;
        }
        let mut names: Vec<String> = pods
            .list(&Default::default())
            .await
            .unwrap()
            .into_iter()
            .filter_map(|pod| pod.metadata.name)
            .filter(|name| name.starts_with("ddp-worker-") && *name != rank_zero)
            .collect();
        names.sort();
        for name in names {
            if !starts(&log_of(pods, &name).await).is_empty() {
                return name;
            }
        }
        panic!("no member of the group but its rank 0")
    }
}

impl Taken {
    /// Takes `pod` this way.
    async fn take(self, pods: &Api<Pod>, pod: &str) {
        match self {
            Taken::ForceDeleted => {
                let now = kube::api::DeleteParams {
                    grace_period_seconds: Some(0),
                    ..Default::default()
                };
                pods.delete(pod, &now).await.unwrap();
            }
            Taken::Evicted => {
                pods.evict(pod, &Default::default()).await.unwrap();
            }
        }
    }
}

/// What losing a Worker cost a running group, as the training printed it.
struct WorkerLoss {
    /// The pod taken.
    pod: String,
    /// Seconds from the loss to the first step saved after it.
    seconds_to_next_step: f64,
    /// Steps saved before the loss and trained again.
    steps_redone: u32,
    /// The training's own lines about the loss: rank 0's step before it, the starts after it.
    lines: Vec<String>,
}

/// The pod whose training is rank 0 of the group now: the host of the newest start line
/// with `rank=0`, by its time.
async fn group_rank_zero(pods: &Api<Pod>) -> String {
    let mut newest: Option<(f64, String)> = None;
    for pod in pods.list(&Default::default()).await.unwrap() {
        let name = pod.metadata.name.unwrap_or_default();
        for line in starts(&log_of(pods, &name).await) {
            let at: f64 = field(line, "at=")
                .and_then(|at| at.parse().ok())
                .unwrap_or(0.0);
            if field(line, "rank=") == Some("0") && newest.as_ref().is_none_or(|(t, _)| at > *t) {
                newest = Some((at, field(line, "host=").unwrap_or_default().to_string()));
            }
        }
    }
    newest.expect("a rank 0 started").1
}

/// Runs [`ELASTIC_CHECKPOINTED`] for `total_steps` as an elastic job of three Workers (two to
/// four) with the environment eto gives it where the container and the job set nothing
/// (`settings` aside), takes `victim` as `taken` once 10 steps are saved, and returns what it
/// cost and the job once it ended. Asserts that the group trained again and grew back to
/// three (the status's rendezvous, as the store reports it).
async fn lose_a_worker(
    scratch: &Scratch,
    victim: Victim,
    taken: Taken,
    settings: serde_json::Value,
) -> (WorkerLoss, PyTorchJob) {
    let (mut template, saved) = checkpointed_template(scratch);
    template["spec"]["containers"][0]["env"] =
        serde_json::json!([{"name": "TOTAL_STEPS", "value": "160"}]);
    let mut policy = serde_json::json!({"maxRestarts": null});
    json_patch::merge(&mut policy, &settings);
    let job = elastic_job(&scratch.namespace, template, policy);
    let jobs: Api<PyTorchJob> = Api::namespaced(scratch.client.clone(), &scratch.namespace);
    let mut loss = None;
    let job = run_to_the_end(scratch, job, async |pods| {
        until("10 steps are saved", Duration::from_secs(300), async || {
            (saved()? >= 10).then_some(())
        })
        .await;
        let pod = victim.among(pods).await;
        let before = saved().unwrap_or_default();
        let lost_at = now();
        let taken_at = std::time::Instant::now();
        taken.take(pods, &pod).await;
        println!(
            "{pod} (group rank 0: {}) {taken:?} at step {before}",
            victim == Victim::GroupRankZero
        );
        until(
            "a step after the loss",
            Duration::from_secs(420),
            async || (saved()? > before).then_some(()),
        )
        .await;
        let seconds = taken_at.elapsed().as_secs_f64();
        println!("{pod} {taken:?}: next step {seconds:.1} s after the loss");
        let regrown = until(
            "the group grows back to three",
            Duration::from_secs(420),
            async || {
                let shown = jobs.get("ddp").await.ok()?.status?.rendezvous?;
                (shown.agents == 3 && shown.complete && shown.round >= 1).then_some(shown)
            },
        )
        .await;
        println!("the rendezvous once grown back: {regrown:?}");
        loss = Some((pod, seconds, before, lost_at));
    })
    .await;
    let (pod, seconds, before, lost_at) = loss.unwrap();
    let pods = scratch.pods();
    let printed = every_log(&pods).await;
    let resumed_from = starts(&printed)
        .into_iter()
        .filter(|line| field(line, "at=").and_then(|at| at.parse::<f64>().ok()) > Some(lost_at))
        .filter_map(|line| field(line, "from_step=")?.parse::<u32>().ok())
        .min()
        .unwrap_or(before);
    let mut lines: Vec<String> = marked(&printed, "eto-elastic-step:")
        .into_iter()
        .filter(|line| {
            line.split_whitespace()
                .nth(1)
                .and_then(|step| step.parse::<u32>().ok())
                .is_some_and(|step| step == before || step == before + 1)
        })
        .map(String::from)
        .collect();
    let mut after: Vec<&str> = starts(&printed)
        .into_iter()
        .filter(|line| field(line, "at=").and_then(|at| at.parse::<f64>().ok()) > Some(lost_at))
        .collect();
    after.sort_by(|a, b| field(a, "at=").cmp(&field(b, "at=")));
    lines.extend(after.into_iter().map(String::from));
    (
        WorkerLoss {
            pod,
            seconds_to_next_step: seconds,
            steps_redone: before.saturating_sub(resumed_from),
            lines,
        },
        job,
    )
}

/// Asserts that the job succeeded in the run it started in, and trained to its end.
async fn went_on_in_its_run(scratch: &Scratch, job: &PyTorchJob) {
    succeeded_last(job);
    let status = job.status.clone().unwrap();
    assert_eq!(status.eto.run.unwrap_or(0), 0, "the run went on");
    assert_eq!(status.eto.restart_count.unwrap_or(0), 0);
    let printed = every_log(&scratch.pods()).await;
    assert!(
        marked(&printed, "eto-elastic-done:")
            .iter()
            .any(|line| line.ends_with("steps=160")),
        "the training ended after its 160 steps"
    );
}

/// Losing one Worker of a group whose rendezvous eto hosts, `victim` `taken`: the survivors
/// re-form the group and train on from the step they reached, and it grows back to three
/// when the replacement joins (in the same round, when it comes within the last call);
/// the job succeeds in the run it started in. Prints the training's lines and the seconds
/// from the loss to the next step.
async fn the_group_trains_through(name: &str, victim: Victim, taken: Taken) {
    let scratch = Scratch::start(name).await;
    let (loss, job) = lose_a_worker(&scratch, victim, taken, serde_json::json!({})).await;
    println!(
        "{name}: {} {taken:?}: next step {:.1} s later, {} step(s) trained twice; the training printed:\n{}",
        loss.pod,
        loss.seconds_to_next_step,
        loss.steps_redone,
        loss.lines.join("\n")
    );
    let after: Vec<&String> = loss
        .lines
        .iter()
        .filter(|line| line.starts_with("eto-elastic-start:"))
        .collect();
    assert!(
        after.len() >= 2
            && after.iter().all(|line| {
                field(line, "from_step=").and_then(|step| step.parse::<u32>().ok()) > Some(0)
            }),
        "the survivors re-formed the group and went on from the step they reached: {after:#?}"
    );
    went_on_in_its_run(&scratch, &job).await;
    scratch.end().await;
}

/// The pod holding group rank 0 (as the training prints it) is force-deleted mid-training:
/// the others re-form the group and train on, whatever torch (on torch 2.5 and later, its
/// agent held the store their workers formed their group with, see
/// `TORCH_DISABLE_SHARE_RDZV_TCP_STORE` in `kind/pytorch_job/env.rs`).
#[tokio::test]
#[ignore = "needs cluster"]
async fn the_group_trains_on_when_the_pod_of_group_rank_0_is_force_deleted() {
    the_group_trains_through("rank0-gone", Victim::GroupRankZero, Taken::ForceDeleted).await;
}

/// Another Worker is force-deleted mid-training: the others train on (each agent spends a
/// restart on it, of the 100 eto gives it where `maxRestarts` is unset).
#[tokio::test]
#[ignore = "needs cluster"]
async fn the_group_trains_on_when_another_worker_is_force_deleted() {
    the_group_trains_through("other-gone", Victim::Another, Taken::ForceDeleted).await;
}

/// The pod of group rank 0 is evicted (SIGTERM, its grace period): the others train on.
#[tokio::test]
#[ignore = "needs cluster"]
async fn the_group_trains_on_when_the_pod_of_group_rank_0_is_evicted() {
    the_group_trains_through("rank0-evicted", Victim::GroupRankZero, Taken::Evicted).await;
}

/// A job that spends no restart (`maxRestarts: 0`, set by its user) loses a Worker to a force
/// deletion. Two outcomes race, and both keep the job alive with nothing counted:
///
/// - eto's store takes the lost agent out and tells the others to re-form before their
///   training fails in its collective with it: torchrun counts a change of the group against
///   no restart, so the group re-forms from the step it reached, in its run (torch 2.x's
///   agents, which look every 0.1 s, mostly win this way);
/// - the others' training fails first: each agent, its restarts spent, exits, and the first to
///   do so closes the rendezvous. eto sees the store report it closed and starts the next run
///   at once (reason `GroupLost`: no `belowMinSeconds`, no grace period for containers that
///   run no training), which resumes from the checkpoint.
///
/// Asserts whichever came: never `Failed`, no restart counted, and the training going on
/// from a saved step; prints which one it was.
#[tokio::test]
#[ignore = "needs cluster"]
async fn a_worker_lost_under_max_restarts_0_re_forms_the_group_or_ends_the_run_at_once() {
    let scratch = Scratch::start("closed").await;
    let (template, saved) = checkpointed_template(&scratch);
    let mut job = elastic_job(
        &scratch.namespace,
        template,
        serde_json::json!({"maxRestarts": 0, "checkpointGraceSeconds": 300, "belowMinSeconds": 300}),
    );
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"] =
        serde_json::json!([{"name": "TOTAL_STEPS", "value": "60"}]);
    let jobs: Api<PyTorchJob> = Api::namespaced(scratch.client.clone(), &scratch.namespace);
    let job = run_to_the_end(&scratch, job, async |pods| {
        until("10 steps are saved", Duration::from_secs(300), async || {
            (saved()? >= 10).then_some(())
        })
        .await;
        let before = saved().unwrap_or_default();
        let taken_at = std::time::Instant::now();
        let now = kube::api::DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        pods.delete("ddp-worker-1", &now).await.unwrap();
        // torch 1.13's agents wait at their exit barrier for every agent of the round,
        // the lost one too, for 300 s before they exit and close it; 2.x's do not.
        let ended = until(
            "the run ends, or its group saves a new step",
            Duration::from_secs(420),
            async || {
                let status = jobs.get("ddp").await.ok()?.status?;
                if status.eto.run.unwrap_or(0) >= 1 {
                    return Some(Some(status));
                }
                (saved()? > before).then_some(None)
            },
        )
        .await;
        let Some(suspended) = ended else {
            println!(
                "the group re-formed in its run and saved a new step {:.1} s after the loss",
                taken_at.elapsed().as_secs_f64()
            );
            return;
        };
        let reason = suspended
            .conditions
            .iter()
            .find(|c| c.type_ == "Suspended")
            .and_then(|c| c.reason.clone());
        println!(
            "the run ended {:.1} s after the loss ({reason:?}); the rendezvous last shown: {:?}",
            taken_at.elapsed().as_secs_f64(),
            suspended.rendezvous
        );
        assert_eq!(reason.as_deref(), Some("GroupLost"));
        until(
            "the next run trains",
            Duration::from_secs(300),
            async || (saved()? > before).then_some(()),
        )
        .await;
        println!(
            "closed rendezvous: next step {:.1} s after the loss, in the next run",
            taken_at.elapsed().as_secs_f64()
        );
    })
    .await;
    let printed = every_log(&scratch.pods()).await;
    let run = job.status.as_ref().and_then(|status| status.eto.run);
    if run.unwrap_or(0) == 0 {
        succeeded_in_its_run_re_formed_from_a_saved_step(&job, &printed);
    } else {
        succeeded_in_one_uncounted_new_run(&job, &printed);
    }
    scratch.end().await;
}

/// Asserts that `job` succeeded in its first run with no restart counted, and that its
/// training started again after a loss from a step it had saved (not from step 0).
fn succeeded_in_its_run_re_formed_from_a_saved_step(job: &PyTorchJob, printed: &str) {
    succeeded_with_nothing_counted(job);
    let again: Vec<&str> = starts(printed)
        .into_iter()
        .filter(|line| !line.contains("from_step=0 "))
        .collect();
    assert!(
        !again.is_empty()
            && again
                .iter()
                .all(|line| field(line, "run_id=").is_some_and(|id| id.ends_with("-0"))),
        "the group re-formed in its run, from a saved step: {again:#?}"
    );
}

/// Runs the shell command in environment variable `var` with `{id}` replaced by the runtime's
/// id of `pod`'s training container (its `containerID` without the runtime's prefix).
pub(crate) async fn on_container(var: &str, pods: &Api<Pod>, pod: &str) {
    let command = std::env::var(var).unwrap_or_else(|_| panic!("{var} is set"));
    let status = pods.get(pod).await.unwrap().status.unwrap_or_default();
    let id = status
        .container_statuses
        .unwrap_or_default()
        .into_iter()
        .find_map(|c| c.container_id)
        .expect("a container id");
    let id = id.split("://").last().unwrap_or_default().to_string();
    let command = command.replace("{id}", &id);
    let done = std::process::Command::new("/bin/sh")
        .args(["-c", &command])
        .status()
        .unwrap();
    assert!(done.success(), "{command}: {done}");
}

/// A Worker freezes mid-training without closing a connection (its container paused: its
/// processes stop, its sockets stay open; a node that vanishes, a cut network look the same
/// to the others): the survivors' collective waits on it (Gloo's default timeout is 30
/// minutes), and its agent's heartbeats stop. The store takes it out of the rendezvous once
/// torchrun's own expiry passed (5 s × 3) and has the others re-form without it; they train
/// on. Thawed, it joins them again, and the job succeeds in its run. Needs `ETO_E2E_FREEZE`
/// and `ETO_E2E_THAW`, shell commands that pause and resume the container whose runtime id
/// is `{id}` (on the harness: `ctr --address <its containerd.sock> -n k8s.io tasks pause
/// {id}`, and `resume`).
#[tokio::test]
#[ignore = "needs cluster"]
async fn the_group_trains_on_when_a_worker_freezes_without_closing_its_connections() {
    let scratch = Scratch::start("frozen").await;
    let (mut template, saved) = checkpointed_template(&scratch);
    template["spec"]["containers"][0]["env"] =
        serde_json::json!([{"name": "TOTAL_STEPS", "value": "120"}]);
    let job = elastic_job(
        &scratch.namespace,
        template,
        serde_json::json!({"maxRestarts": null}),
    );
    let jobs: Api<PyTorchJob> = Api::namespaced(scratch.client.clone(), &scratch.namespace);
    let job = run_to_the_end(&scratch, job, async |pods| {
        until("10 steps are saved", Duration::from_secs(300), async || {
            (saved()? >= 10).then_some(())
        })
        .await;
        let victim = Victim::Another.among(pods).await;
        let before = saved().unwrap_or_default();
        let frozen_at = std::time::Instant::now();
        on_container("ETO_E2E_FREEZE", pods, &victim).await;
        until(
            "a step after the freeze",
            Duration::from_secs(300),
            async || (saved()? > before).then_some(()),
        )
        .await;
        let seconds = frozen_at.elapsed().as_secs_f64();
        let shown = until("the re-formation shown", Duration::from_secs(60), async || {
            let shown = jobs.get("ddp").await.ok()?.status?.rendezvous?;
            shown
                .last_reformation
                .as_ref()
                .is_some_and(|r| r.left.contains(&victim))
                .then_some(shown)
        })
        .await;
        println!(
            "frozen: {victim} frozen at step {before}, next step {seconds:.1} s later; the rendezvous: {shown:?}"
        );
        on_container("ETO_E2E_THAW", pods, &victim).await;
    })
    .await;
    let printed = every_log(&scratch.pods()).await;
    println!("{}", marked(&printed, "eto: ").join("\n"));
    succeeded_last(&job);
    scratch.end().await;
}

/// A Worker freezes and stays frozen (its container paused, never resumed): the others re-form
/// without it and train on, and once its agent has been out of the group for eto's grace
/// (`SILENT_GRACE`, 60 s) while its pod still runs, eto deletes and replaces it; the
/// replacement joins the group, which trains at its full size again, in the same run, and the
/// job succeeds. Prints the seconds from the freeze to the replacement's first step in the
/// group. Needs `ETO_E2E_FREEZE` as the test above.
#[tokio::test]
#[ignore = "needs cluster"]
async fn a_worker_frozen_for_good_is_replaced_and_its_replacement_joins_the_group() {
    let scratch = Scratch::start("frozen-for-good").await;
    let (mut template, saved) = checkpointed_template(&scratch);
    template["spec"]["containers"][0]["env"] =
        serde_json::json!([{"name": "TOTAL_STEPS", "value": "400"}]);
    let job = elastic_job(
        &scratch.namespace,
        template,
        serde_json::json!({"maxRestarts": null}),
    );
    let jobs: Api<PyTorchJob> = Api::namespaced(scratch.client.clone(), &scratch.namespace);
    let mut figures = String::new();
    let job = run_to_the_end(&scratch, job, async |pods| {
        until("10 steps are saved", Duration::from_secs(300), async || {
            (saved()? >= 10).then_some(())
        })
        .await;
        let victim = Victim::Another.among(pods).await;
        let frozen_at = std::time::Instant::now();
        on_container("ETO_E2E_FREEZE", pods, &victim).await;
        let blacklisted = blacklisted(&jobs, &victim).await;
        assert_eq!(blacklisted.reason, "Silent");
        let replaced_after = frozen_at.elapsed().as_secs_f64();
        let step = until(
            "the group trains with three Workers again",
            Duration::from_secs(300),
            async || {
                let log = every_log_quietly(pods).await;
                let steps = marked(&log, "eto-elastic-step:");
                steps
                    .iter()
                    .rev()
                    .find(|line| line.contains("world=3"))
                    .filter(|_| {
                        marked(&log, "eto-elastic-start:")
                            .iter()
                            .any(|start| !start.contains(&format!("host={victim}")) && start.contains("world=3") && !start.contains("from_step=0 "))
                    })
                    .map(|line| line.to_string())
            },
        )
        .await;
        figures = format!(
            "frozen for good: {victim} frozen; replaced {replaced_after:.1} s later (blacklisted Silent); the group trained with three Workers again {:.1} s after the freeze: {step}",
            frozen_at.elapsed().as_secs_f64()
        );
        println!("{figures}");
    })
    .await;
    println!("{figures}");
    succeeded_last(&job);
    let status = job.status.unwrap();
    assert_eq!(status.eto.run.unwrap_or(0), 0, "the run went on");
    scratch.end().await;
}

/// Waits until the blacklist of job `ddp` names `pod`, and returns its entry.
pub(crate) async fn blacklisted(jobs: &Api<PyTorchJob>, pod: &str) -> BlacklistEntry {
    until(
        &format!("{pod} is blacklisted"),
        Duration::from_secs(300),
        async || {
            let status = jobs.get("ddp").await.ok()?.status?;
            status
                .eto
                .blacklist
                .into_iter()
                .find(|entry| entry.pod == pod)
        },
    )
    .await
}

/// The steps rank 0 of [`ELASTIC_CHECKPOINTED`] printed in `log`: the step, the group's size
/// (the all-reduced count of its members) and when (seconds since the epoch).
fn printed_steps(log: &str) -> Vec<(u32, u32, f64)> {
    marked(log, "eto-elastic-step:")
        .into_iter()
        .filter_map(|line| {
            let step = line.split_whitespace().nth(1)?.parse().ok()?;
            let world = field(line, "world=")?.parse().ok()?;
            let at = field(line, "at=")?.parse().ok()?;
            Some((step, world, at))
        })
        .collect()
}

/// The node under one Worker of an elastic job stops without warning (its kubelet and
/// containerd go, its containers killed: `ETO_E2E_STOP_NODE`, a shell command run with the
/// node's name in `NODE`, for example `REAL_NODE_INDEX=1 harness/real-node-down.sh
/// --keep-node` when `NODE` is `real-node-1`), the training saving every step
/// ([`ELASTIC_CHECKPOINTED`]). Kubernetes still shows the Worker's pod `Running` on a node that
/// no longer reports. The survivors re-form without it, once its connections closed or the
/// store took its silent agent out, and train on from the step they reached; eto replaces it
/// once its agent has been out of the group for its grace (blacklisted `Silent`) or the
/// taint manager deleted its pod for the node's `unreachable` taint (`Disrupted`), the
/// replacement joins on the first node, the group trains with four again, no step is trained
/// twice, and the job succeeds in its first run. Prints the seconds from the group's last
/// step of four to the survivors' next step, to the replacement and to the group's first step
/// with four again. Needs two real nodes:
/// the store and three Workers on the first, a fourth (a scale-out) on the second; bring the
/// second up again afterwards.
#[tokio::test]
#[ignore = "needs cluster with two real nodes (harness/real-kubelet=true); stops the second (ETO_E2E_STOP_NODE)"]
async fn a_node_stopped_without_warning_under_a_worker_leaves_the_others_training() {
    let stop = std::env::var("ETO_E2E_STOP_NODE").expect("ETO_E2E_STOP_NODE stops a node");
    let scratch = Scratch::start("elastic-node-stop").await;
    let client = scratch.client.clone();
    let (home, doomed, elsewhere) = crate::torchft_real::home_and_elsewhere(&client).await;
    let (mut template, saved) = checkpointed_template(&scratch);
    template["spec"]["containers"][0]["env"] =
        serde_json::json!([{"name": "TOTAL_STEPS", "value": "400"}]);
    let job = elastic_job(&scratch.namespace, template, serde_json::json!({}));
    let jobs: Api<PyTorchJob> = Api::namespaced(client.clone(), &scratch.namespace);
    let steps_after = async |pods: &Api<Pod>, at: f64, world: u32| {
        printed_steps(&every_log_quietly(pods).await)
            .into_iter()
            .find(|&(_, size, when)| when > at && size == world)
    };
    let mut figures = String::new();
    let job = run_to_the_end(&scratch, job, async |pods| {
        until("10 steps are saved", Duration::from_secs(300), async || {
            (saved()? >= 10).then_some(())
        })
        .await;
        // A fourth Worker on the second node, everything else on the first.
        set_unschedulable(&client, std::slice::from_ref(&home), true).await;
        set_unschedulable(&client, &elsewhere, false).await;
        scale_workers(&jobs, 4).await;
        until(
            "a step of four Workers",
            Duration::from_secs(300),
            async || steps_after(pods, 0.0, 4).await,
        )
        .await;
        set_unschedulable(&client, std::slice::from_ref(&home), false).await;
        let fourth = pods.get("ddp-worker-3").await.unwrap();
        assert_eq!(
            fourth.spec.and_then(|spec| spec.node_name).as_ref(),
            Some(&doomed),
            "the fourth Worker runs on the second node"
        );
        let stopped_at = now();
        crate::torchft_real::stop_node(&stop, &doomed);
        let stop_took = now() - stopped_at;
        let (step, _, when) = until(
            "a step of the three survivors",
            Duration::from_secs(300),
            async || steps_after(pods, stopped_at, 3).await,
        )
        .await;
        // The stop command kills the containers at its end: the group of four trains on
        // until then.
        let last_of_four = printed_steps(&every_log_quietly(pods).await)
            .into_iter()
            .filter(|&(_, size, at)| size == 4 && at < when)
            .map(|(_, _, at)| at)
            .fold(stopped_at, f64::max);
        // Out of the group for its grace (Silent), or deleted by the taint manager once its
        // toleration of the node's unreachable taint ran out (Disrupted): whichever is first.
        let blacklisted = blacklisted(&jobs, "ddp-worker-3").await;
        assert!(
            ["Silent", "Disrupted"].contains(&blacklisted.reason.as_str()),
            "{blacklisted:?}"
        );
        let replaced_at = now();
        let (again, _, again_at) = until(
            "a step of four Workers again",
            Duration::from_secs(300),
            async || steps_after(pods, when, 4).await,
        )
        .await;
        figures = format!(
            "node stopped: {doomed} stopped in {stop_took:.1} s under ddp-worker-3; the \
             survivors' first step (step {step}) {:.1} s after the last step of four; \
             ddp-worker-3 blacklisted {} {:.1} s after that step; four Workers trained \
             again {:.1} s after it (step {again})",
            when - last_of_four,
            blacklisted.reason,
            replaced_at - last_of_four,
            again_at - last_of_four
        );
        println!("{figures}");
    })
    .await;
    set_unschedulable(&client, &elsewhere, false).await;
    let pods = scratch.pods();
    let printed = every_log(&pods).await;
    println!("{}", marked(&printed, "eto-elastic-start:").join("\n"));
    println!("{figures}");
    let mut steps: Vec<u32> = printed_steps(&printed).iter().map(|s| s.0).collect();
    let printed_count = steps.len();
    steps.sort_unstable();
    steps.dedup();
    assert_eq!(steps.len(), printed_count, "no step trained twice");
    let replacement = marked(&printed, "eto-elastic-start:")
        .into_iter()
        .find(|line| field(line, "host=") == Some("ddp-worker-4"))
        .map(str::to_string);
    assert!(
        replacement.is_some_and(|line| !line.contains("from_step=0 ")),
        "the replacement joined the group from its step"
    );
    succeeded_last(&job);
    assert_eq!(
        job.status.unwrap().eto.run.unwrap_or(0),
        0,
        "the run went on"
    );
    scratch.end().await;
}

/// The logs of every pod of the namespace, joined, without printing them.
async fn every_log_quietly(pods: &Api<Pod>) -> String {
    let mut printed = String::new();
    for pod in pods.list(&Default::default()).await.unwrap() {
        let name = pod.metadata.name.unwrap_or_default();
        printed.push_str(&log_of(pods, &name).await);
    }
    printed
}
