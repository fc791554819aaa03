//! torchrun's SIGTERM path with eto's settings, against a real torchrun that reads
//! `TORCH_ELASTIC_SHUTDOWN_TIMEOUT` (PyTorch 2.12 and later): `ETO_TORCHRUN=<path to
//! torchrun> cargo test -p eto-tests --test integration torchrun_shutdown:: -- --ignored`.
//!
//! An eviction, a drain or a node shutdown sends SIGTERM to torchrun, which forwards it to the
//! training processes and kills them after its shutdown timeout. eto gives an elastic Worker
//! `terminationGracePeriodSeconds = checkpointGraceSeconds` and that timeout a little less,
//! so that training code saving on SIGTERM has the time: here a real torchrun, run with the
//! environment eto puts into a Worker, lets a save that takes 6 s finish, and kills the same
//! save with a shorter timeout.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use eto_api::PyTorchJob;
use eto_engine::build::Job;
use eto_engine::kind::JobRef;
use eto_engine::kind::pytorch_job::objects::SHUTDOWN_TIMEOUT_ENV;
use eto_tests::poll::until;
use serde_json::json;

/// How long the training code takes to save after SIGTERM.
const SAVE_SECONDS: u64 = 6;

/// Training code that saves on SIGTERM, taking [`SAVE_SECONDS`], and says when it is ready.
const TRAIN: &str = r#"
import os, signal, sys, time
def save(signum, frame):
    time.sleep(float(os.environ["SAVE_SECONDS"]))
    print("saved", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, save)
open(os.environ["READY_FILE"], "w").close()
while True:
    time.sleep(0.1)
"#;

fn torchrun() -> PathBuf {
    let path = std::env::var_os("ETO_TORCHRUN")
        .map(PathBuf::from)
        .expect("ETO_TORCHRUN names a torchrun of PyTorch 2.12 or later");
    assert!(path.exists(), "{} does not exist", path.display());
    path
}

/// The grace period and the environment eto gives Worker 0 of an elastic job whose
/// rendezvous it hosts, with `checkpointGraceSeconds: 20`.
fn workers_shutdown_settings() -> (i64, String) {
    let job: PyTorchJob = serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "ddp", "namespace": "default", "uid": "u-1"},
        "spec": {
            "elasticPolicy": {"minReplicas": 1, "maxReplicas": 2, "checkpointGraceSeconds": 20},
            "pytorchReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "pytorch", "image": "pytorch", "command": ["torchrun", "train.py"]}
            ]}}}}
        }
    }))
    .unwrap();
    let spec = JobRef::PyTorch(&job).validate().unwrap();
    let pod = Job {
        job: JobRef::PyTorch(&job),
        spec: &spec,
        run: 0,
        notice: None,
        gang: None,
    }
    .worker_pod(0, &[])
    .unwrap();
    let pod_spec = pod.spec.unwrap();
    let timeout = pod_spec.containers[0]
        .env
        .iter()
        .flatten()
        .find(|var| var.name == SHUTDOWN_TIMEOUT_ENV)
        .and_then(|var| var.value.clone())
        .expect("eto sets torchrun's shutdown timeout");
    (pod_spec.termination_grace_period_seconds.unwrap(), timeout)
}

/// Runs `train.py` under torchrun with `TORCH_ELASTIC_SHUTDOWN_TIMEOUT=shutdown_timeout`,
/// sends torchrun SIGTERM once the training runs, and returns whether the training saved
/// and how long torchrun took to exit.
async fn stopped(case: &str, shutdown_timeout: &str) -> (bool, Duration) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("torchrun-shutdown")
        .join(case);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("train.py"), TRAIN).unwrap();
    let ready = dir.join("ready");
    let child = Command::new(torchrun())
        .args([
            "--standalone",
            "--nnodes",
            "1",
            "--nproc-per-node",
            "1",
            "train.py",
        ])
        .current_dir(&dir)
        .env(SHUTDOWN_TIMEOUT_ENV, shutdown_timeout)
        .env("SAVE_SECONDS", SAVE_SECONDS.to_string())
        .env("READY_FILE", &ready)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("torchrun starts");
    until("the training runs", Duration::from_secs(120), async || {
        ready.exists().then_some(())
    })
    .await;
    let terminated = Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let elapsed = terminated.elapsed();
    let saved = String::from_utf8_lossy(&output.stdout).contains("saved");
    (saved, elapsed)
}

#[tokio::test]
#[ignore = "needs torchrun of PyTorch 2.12 or later (ETO_TORCHRUN)"]
async fn torchrun_gives_training_that_saves_on_sigterm_the_time_eto_sets() {
    let (grace, timeout) = workers_shutdown_settings();
    assert_eq!((grace, timeout.as_str()), (20, "10"));
    let (saved, took) = stopped("eto", &timeout).await;
    println!(
        "eto's settings (grace {grace} s, {SHUTDOWN_TIMEOUT_ENV}={timeout}): saved={saved}, torchrun exited {took:?} after SIGTERM"
    );
    assert!(saved, "the save of {SAVE_SECONDS} s finished");
    let (saved, took) = stopped("short", "2").await;
    println!("{SHUTDOWN_TIMEOUT_ENV}=2: saved={saved}, torchrun exited {took:?} after SIGTERM");
    assert!(!saved, "a shorter timeout cuts the save: torchrun reads it");
}
