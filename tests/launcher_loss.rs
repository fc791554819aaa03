//! A spot reclaim of the launcher's node, end to end on the simulated cluster: the launcher
//! is a CPU pod on spot capacity (seed 001's `--launcher-selector=instance_type=spot-launcher`),
//! its node is reclaimed without warning or announced two minutes ahead, and the job ends
//! `Running` again with a new launcher that resumes from the checkpoint, `restartCount` 0,
//! never `Failed`; for a TrainingJob and for an MPIJob. And a launcher left to the scheduler
//! goes to on-demand capacity.

use std::time::{Duration, Instant};

use eto_api::MPIJob;
use eto_api::common::ConditionStatus;
use eto_api::job_status::{JobPhase, Notice, NoticeKind};
use eto_api::well_known::NOTICE_ANNOTATION;
use eto_sim::nodes::warnings::Warning;
use eto_sim::{NodeSpec, SimConfig};
use eto_tests::env::{Env, JobYaml, in_phase, sim_config};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

/// The label seed 001 puts its launchers on, and the spot label of their nodes.
const LAUNCHER_POOL: (&str, &str) = ("instance_type", "spot-launcher");
const SPOT: (&str, &str) = ("karpenter.sh/capacity-type", "spot");

fn spot_gpu_node(name: &str) -> NodeSpec {
    NodeSpec::gpu(name, 2).label(SPOT.0, SPOT.1)
}

fn launcher_node(name: &str) -> NodeSpec {
    NodeSpec::gpu(name, 0)
        .label(SPOT.0, SPOT.1)
        .label(LAUNCHER_POOL.0, LAUNCHER_POOL.1)
}

/// An on-demand CPU node, spot GPU nodes for 6 workers, and one spot launcher node. The pods
/// of a node that vanished stay `Failed` a moment before they are collected, as a real pod
/// garbage collector leaves them for 40 s or more.
fn cluster() -> SimConfig {
    let mut config = SimConfig {
        nodes: vec![
            NodeSpec::gpu("on-demand", 0),
            spot_gpu_node("spot-a"),
            spot_gpu_node("spot-b"),
            spot_gpu_node("spot-c"),
            launcher_node("spot-launcher-0"),
        ],
        ..sim_config(0, 0)
    };
    config.kubelet.orphan_gc_delay = Duration::from_secs(2);
    config
}

/// Seed 001's job, small: 4 workers needing 3, replaced when lost, the launcher on the spot
/// launcher pool.
fn training_job(name: &str) -> String {
    JobYaml {
        name,
        replicas: 4,
        min: 3,
        max: None,
        extra_spec: "\n  restartPolicy: OnFailure\n  backoffLimit: 3",
        worker_policy: "Always",
    }
    .render()
    .replace(
        "      template:\n        spec:\n          containers:\n          - name: launcher",
        &format!(
            "      template:\n        spec:\n          nodeSelector:\n            {}: {}\n          containers:\n          - name: launcher",
            LAUNCHER_POOL.0, LAUNCHER_POOL.1
        ),
    )
}

fn notice_of(pod: &Pod) -> Option<Notice> {
    serde_json::from_str(pod.annotations().get(NOTICE_ANNOTATION)?).ok()
}

fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

fn env_value(pod: &Pod, name: &str) -> Option<String> {
    pod.spec.as_ref()?.containers[0]
        .env
        .iter()
        .flatten()
        .find(|var| var.name == name)?
        .value
        .clone()
}

/// The job's pods of the role `role` (`launcher` or `worker`), under its kind's labels (a TrainingJob's or an MPIJob's).
async fn pods_of(env: &Env, job: &str, role: &str) -> Vec<Pod> {
    let selector = if role == "launcher" {
        format!("training.kubeflow.org/job-name={job},training.kubeflow.org/job-role=launcher")
    } else {
        format!("training.kubeflow.org/job-name={job},training.kubeflow.org/job-role=worker")
    };
    let mpi = env
        .pods()
        .list(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items;
    if !mpi.is_empty() {
        return mpi;
    }
    let selector = format!("training-job-name={job},training-job-role={role}");
    env.pods()
        .list(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items
}

/// Karpenter's warning on the launcher's node, two minutes ahead of its reclaim.
fn announce_launcher_node(env: &Env) -> Instant {
    env.cluster
        .announce_reclaim(
            "spot-launcher-0",
            &Warning::karpenter(),
            Duration::from_secs(120),
            Duration::from_secs(30),
        )
        .unwrap();
    Instant::now()
}

/// After the launcher's loss: the job is suspended for it, not failed; a new launcher node
/// comes (the autoscaler), and the job runs again from its checkpoint with `restartCount` 0.
async fn resumes_training_job(env: &Env, name: &str, lost: Instant) {
    let suspended = env
        .wait_job(
            name,
            "is suspended for its launcher",
            in_phase(JobPhase::Suspended),
        )
        .await;
    let status = suspended.status.unwrap();
    let condition = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Suspended")
        .unwrap();
    assert_eq!(condition.reason.as_deref(), Some("LauncherDisrupted"));
    assert!(
        condition
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("spot-launcher-0"),
        "the condition names the node: {condition:?}"
    );
    assert_eq!(status.restart_count, 0);
    println!("{name}: suspended {:?} after the loss", lost.elapsed());
    // The cluster autoscaler brings a launcher node for the pending launcher.
    env.cluster
        .add_node(&launcher_node("spot-launcher-1"))
        .unwrap();
    let running = env
        .wait_job(name, "runs again", in_phase(JobPhase::Running))
        .await;
    println!("{name}: running again {:?} after the loss", lost.elapsed());
    let status = running.status.unwrap();
    assert_eq!(status.restart_count, 0, "no restart counted");
    assert!(
        !status.conditions.iter().any(|c| c.type_ == "Failed"),
        "never failed: {:?}",
        status.conditions
    );
    let launcher = env.pods().get(&format!("{name}-launcher")).await.unwrap();
    assert_eq!(node_of(&launcher), Some("spot-launcher-1"));
    assert_eq!(env_value(&launcher, "ETO_RESUME").as_deref(), Some("true"));
    assert_eq!(
        notice_of(&launcher).map(|n| (n.kind, n.reason)),
        Some((NoticeKind::Resume, "LauncherDisrupted".to_string()))
    );
    let notes = env.event_notes(name, "LauncherDisrupted").await;
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("spot-launcher-0"), "{notes:?}");
}

#[tokio::test]
async fn a_training_job_whose_launcher_node_is_reclaimed_without_warning_resumes() {
    let env = Env::start(cluster()).await;
    env.apply_job(&training_job("unwarned")).await;
    env.wait_job("unwarned", "runs", in_phase(JobPhase::Running))
        .await;
    let launcher = env.pods().get("unwarned-launcher").await.unwrap();
    assert_eq!(node_of(&launcher), Some("spot-launcher-0"));
    // The node vanishes: its pods are Failed, exit 137, DisruptionTarget, at once.
    env.cluster
        .reclaim_node("spot-launcher-0", Duration::ZERO)
        .unwrap();
    resumes_training_job(&env, "unwarned", Instant::now()).await;
}

#[tokio::test]
async fn a_training_job_whose_launcher_node_is_announced_checkpoints_every_pod_first() {
    let env = Env::start(cluster()).await;
    env.apply_job(&training_job("warned")).await;
    env.wait_job("warned", "runs", in_phase(JobPhase::Running))
        .await;
    let workers = pods_of(&env, "warned", "worker").await;
    assert_eq!(workers.len(), 4);
    let announced = announce_launcher_node(&env);
    // The launcher and every worker are told to checkpoint, with the node's deadline.
    let launcher = env
        .wait_pod("warned-launcher", "shows the Suspend notice", |pod| {
            pod.and_then(notice_of)
                .is_some_and(|n| n.kind == NoticeKind::Suspend)
        })
        .await
        .unwrap();
    let notice = notice_of(&launcher).unwrap();
    println!(
        "warned: the launcher read its Suspend notice {:?} after the announcement",
        announced.elapsed()
    );
    assert_eq!(notice.reason, "LauncherDisrupted");
    let lead = notice
        .deadline
        .as_ref()
        .unwrap()
        .0
        .duration_since(notice.since.0);
    assert!(
        lead <= jiff::SignedDuration::from_secs(121),
        "capped by the node's deadline (two minutes), not checkpointGraceSeconds: {lead:?}"
    );
    for worker in &workers {
        let shown = env
            .wait_pod(&worker.name_any(), "shows the Suspend notice", |pod| {
                pod.and_then(notice_of)
                    .is_some_and(|n| n.kind == NoticeKind::Suspend)
            })
            .await
            .unwrap();
        assert_eq!(notice_of(&shown), Some(notice.clone()));
    }
    let job = env.jobs().get("warned").await.unwrap();
    assert_eq!(
        job.status.unwrap().phase,
        Some(JobPhase::Running),
        "the GPUs still train while they checkpoint"
    );
    // Rank 0 saved, every process exited, and so did horovodrun.
    env.cluster
        .fail_pod("default", "warned-launcher", 1, "Error")
        .unwrap();
    resumes_training_job(&env, "warned", announced).await;
}

#[tokio::test]
async fn a_launcher_left_to_the_scheduler_goes_to_on_demand_capacity() {
    let env = Env::start(cluster()).await;
    let yaml = JobYaml {
        name: "placed",
        replicas: 2,
        min: 2,
        max: None,
        extra_spec: "",
        worker_policy: "Never",
    }
    .render();
    env.apply_job(&yaml).await;
    env.wait_job("placed", "runs", in_phase(JobPhase::Running))
        .await;
    let launcher = env.pods().get("placed-launcher").await.unwrap();
    assert_eq!(node_of(&launcher), Some("on-demand"));
}

fn mpi_jobs(env: &Env) -> Api<MPIJob> {
    Api::default_namespaced(env.client.clone())
}

fn mpi_job(name: &str) -> String {
    format!(
        r#"
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: {name}
spec:
  slotsPerWorker: 1
  runPolicy:
    backoffLimit: 0
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          nodeSelector:
            {}: {}
          containers:
          - name: launcher
            image: horovod/horovod:0.28.1
            command: ["horovodrun", "-np", "2", "python", "train.py"]
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: worker
            image: horovod/horovod:0.28.1
            resources:
              limits:
                nvidia.com/gpu: 1
"#,
        LAUNCHER_POOL.0, LAUNCHER_POOL.1
    )
}

fn condition<'a>(job: &'a MPIJob, type_: &str) -> Option<&'a eto_api::common::JobCondition> {
    job.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == ConditionStatus::True)
}

async fn resumes_mpi_job(env: &Env, name: &str, lost: Instant) {
    let suspended = env
        .wait::<MPIJob>(name, "is suspended for its launcher", |job| {
            condition(job, "Suspended").is_some()
        })
        .await;
    assert_eq!(
        condition(&suspended, "Suspended")
            .unwrap()
            .reason
            .as_deref(),
        Some("LauncherDisrupted")
    );
    println!("{name}: suspended {:?} after the loss", lost.elapsed());
    env.cluster
        .add_node(&launcher_node("spot-launcher-1"))
        .unwrap();
    let running = env
        .wait::<MPIJob>(name, "runs again", |job| {
            condition(job, "Running").is_some() && condition(job, "Suspended").is_none()
        })
        .await;
    println!("{name}: running again {:?} after the loss", lost.elapsed());
    let status = running.status.unwrap();
    assert_eq!(
        status.eto.restart_count.unwrap_or(0),
        0,
        "no restart counted"
    );
    assert!(condition(&mpi_jobs(env).get(name).await.unwrap(), "Failed").is_none());
    let launchers = pods_of(env, name, "launcher").await;
    let running_launcher = launchers
        .iter()
        .find(|pod| node_of(pod) == Some("spot-launcher-1"))
        .unwrap_or_else(|| panic!("a new launcher: {launchers:?}"));
    assert_eq!(
        env_value(running_launcher, "ETO_RESUME").as_deref(),
        Some("true")
    );
    let launcher_job: Api<k8s_openapi::api::batch::v1::Job> =
        Api::default_namespaced(env.client.clone());
    let launcher_job = launcher_job.get(&format!("{name}-launcher")).await.unwrap();
    assert!(
        !launcher_job
            .status
            .unwrap_or_default()
            .conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Failed"),
        "the launcher Job never fails for the platform's loss"
    );
}

#[tokio::test]
async fn an_mpijob_whose_launcher_node_is_reclaimed_without_warning_resumes() {
    let env = Env::start(cluster()).await;
    env.apply::<MPIJob>(&mpi_job("unwarned-mpi")).await;
    env.wait::<MPIJob>("unwarned-mpi", "runs", |job| {
        condition(job, "Running").is_some()
    })
    .await;
    env.cluster
        .reclaim_node("spot-launcher-0", Duration::ZERO)
        .unwrap();
    resumes_mpi_job(&env, "unwarned-mpi", Instant::now()).await;
}

#[tokio::test]
async fn an_mpijob_whose_launcher_node_is_announced_checkpoints_every_pod_first() {
    let env = Env::start(cluster()).await;
    env.apply::<MPIJob>(&mpi_job("warned-mpi")).await;
    env.wait::<MPIJob>("warned-mpi", "runs", |job| {
        condition(job, "Running").is_some()
    })
    .await;
    let announced = announce_launcher_node(&env);
    let job = env
        .wait::<MPIJob>("warned-mpi", "posts the Suspend notice", |job| {
            job.status
                .as_ref()
                .and_then(|s| s.eto.notice.as_ref())
                .is_some_and(|n| n.kind == NoticeKind::Suspend)
        })
        .await;
    assert_eq!(
        job.status.unwrap().eto.notice.unwrap().reason,
        "LauncherDisrupted"
    );
    for worker in pods_of(&env, "warned-mpi", "worker").await {
        env.wait_pod(&worker.name_any(), "shows the Suspend notice", |pod| {
            pod.and_then(notice_of)
                .is_some_and(|n| n.kind == NoticeKind::Suspend)
        })
        .await
        .unwrap();
    }
    let launcher = pods_of(&env, "warned-mpi", "launcher").await.remove(0);
    env.cluster
        .fail_pod("default", &launcher.name_any(), 1, "Error")
        .unwrap();
    resumes_mpi_job(&env, "warned-mpi", announced).await;
}
