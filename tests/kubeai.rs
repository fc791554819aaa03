//! The `kubeai` SDK's stop signal against the simulated cluster: the real SDK from PyPI turns
//! `check_alive()` false when its job falls below its minimum, before the job's pods are
//! deleted; a reclaimed worker gets the signal and its peers do not; nothing is sent without
//! an opt-in; a pod that never answers does not delay a suspend.
//!
//! The SDK is installed once into `target/tools/` with `pip`; without `pip` (or the network)
//! the test that needs it fails and says why.

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use eto_api::job_status::JobPhase;
use eto_sim::{NodeSpec, SimConfig};
use eto_tests::env::{Env, JobYaml, WAIT, in_phase, sim_config};
use eto_tests::{poll, tools};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

const KUBEAI_VERSION: &str = "0.1.0";

/// What a stand-in for the SDK in one pod received: the paths requested.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<String>>>);

impl Received {
    fn paths(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A listener standing in for the SDK of one pod: it records each request's path and answers
/// `ok` as the SDK does, or never answers.
async fn stand_in(answers: bool) -> (SocketAddr, Received) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let received = Received::default();
    let record = received.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let record = record.clone();
            tokio::spawn(async move {
                let mut request = vec![0_u8; 1024];
                let read = stream.read(&mut request).await.unwrap_or(0);
                let line = String::from_utf8_lossy(&request[..read]).to_string();
                let path = line
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or_default()
                    .to_string();
                record
                    .0
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(path);
                if answers {
                    let _ = stream.write_all(b"ok").await;
                } else {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
            });
        }
    });
    (address, received)
}

/// A job of `replicas` one-GPU workers, at least `min`, whose pods opt in to the stop with
/// the seed's annotation when `opted_in`, with `policy` under `elasticPolicy`.
fn job(name: &str, replicas: u32, min: u32, opted_in: bool, policy: &str) -> String {
    let yaml = JobYaml {
        name,
        replicas,
        min,
        max: None,
        extra_spec: &format!("\n  elasticPolicy:\n{policy}"),
        worker_policy: "Never",
    }
    .render();
    if opted_in {
        // The seed's annotation, on both templates, as Arena renders `--annotation`.
        yaml.replace(
            "      template:\n",
            "      template:\n        metadata:\n          annotations:\n            job-supervisor.kube-ai.io/managed-by-job-supervisor: \"true\"\n",
        )
    } else {
        yaml
    }
}

/// A training loop as seed 001 writes it, with the real SDK: `kubeai.init()`, then
/// `check_alive()` before every batch until it turns false.
pub(crate) struct TrainingLoop {
    _process: tokio::process::Child,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl TrainingLoop {
    /// Starts the loop and waits until the SDK listens on 9009.
    pub(crate) async fn start() -> Self {
        let package = tools::python_package("kubeai", KUBEAI_VERSION, "kubeai/elastic.py");
        let mut process = tokio::process::Command::new("python3")
            .arg("-c")
            .arg(
                "import sys, time\nimport kubeai.elastic as kubeai\nkubeai.init()\nprint('started', flush=True)\n\
                 while kubeai.check_alive():\n    time.sleep(0.05)\nprint('stopped', flush=True)\n",
            )
            .env("PYTHONPATH", &package)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("python3 runs");
        let mut lines = BufReader::new(process.stdout.take().unwrap()).lines();
        assert_eq!(lines.next_line().await.unwrap().as_deref(), Some("started"));
        // The SDK's server starts in a thread of its own: wait until it listens.
        poll::until("the kubeai SDK listens on 9009", WAIT, async || {
            tokio::net::TcpStream::connect("127.0.0.1:9009").await.ok()
        })
        .await;
        Self {
            _process: process,
            lines,
        }
    }

    /// Waits until `check_alive()` has turned false.
    pub(crate) async fn stopped(&mut self) {
        let stopped = tokio::time::timeout(WAIT, self.lines.next_line())
            .await
            .expect("the training loop stops within the wait")
            .unwrap();
        assert_eq!(stopped.as_deref(), Some("stopped"));
    }
}

async fn running(env: &Env, name: &str) {
    env.wait_job(name, "runs", in_phase(JobPhase::Running))
        .await;
}

#[tokio::test]
async fn the_real_kubeai_sdk_hears_the_stop_before_its_pods_are_deleted() {
    let env = Env::start(sim_config(1, 2)).await;
    // The SDK listens on 0.0.0.0:9009, which stands for port 9009 of every pod here.
    env.cluster
        .forward_every_pod_port(9009, SocketAddr::from(([127, 0, 0, 1], 9009)));
    let mut training = TrainingLoop::start().await;
    env.apply_job(&job(
        "sdk",
        2,
        2,
        true,
        "    belowMinSeconds: 1\n    checkpointGraceSeconds: 60",
    ))
    .await;
    running(&env, "sdk").await;
    env.patch_job("sdk", serde_json::json!({"spec": {"suspend": true}}))
        .await;
    training.stopped().await;
    // It heard it with the notice, while its pods still run: the grace period has just begun.
    for pod in ["sdk-launcher", "sdk-worker-0"] {
        assert!(
            env.pods().get_opt(pod).await.unwrap().is_some(),
            "{pod} is not deleted yet"
        );
    }
    let job = env.jobs().get("sdk").await.unwrap();
    assert_eq!(job.status.unwrap().phase, Some(JobPhase::Running));
    // The Event is written once the stop was sent, which the SDK may hear first.
    poll::until("the stop's Event is recorded", WAIT, async || {
        let notes = env.event_notes("sdk", "KubeaiStop").await;
        notes
            .iter()
            .any(|n| n.contains("acknowledged") && n.contains("Suspend notice"))
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_reclaimed_worker_gets_the_stop_and_its_peers_do_not() {
    let config = SimConfig {
        nodes: vec![
            NodeSpec::gpu("on-demand", 0),
            NodeSpec::gpu("spot-a", 2),
            NodeSpec::gpu("spot-b", 1),
        ],
        ..sim_config(0, 0)
    };
    let env = Env::start(config).await;
    let mut received = Vec::new();
    for pod in [
        "reclaimed-worker-0",
        "reclaimed-worker-1",
        "reclaimed-worker-2",
        "reclaimed-launcher",
    ] {
        let (address, got) = stand_in(true).await;
        env.cluster.forward_pod_port("default", pod, 9009, address);
        received.push((pod, got));
    }
    env.apply_job(&job("reclaimed", 3, 1, true, "    belowMinSeconds: 30"))
        .await;
    running(&env, "reclaimed").await;
    let on_b: Vec<String> = env
        .pods()
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.spec.as_ref().unwrap().node_name.as_deref() == Some("spot-b"))
        .map(|p| p.metadata.name.unwrap())
        .collect();
    assert_eq!(on_b.len(), 1, "one worker on spot-b: {on_b:?}");
    env.cluster
        .reclaim_node("spot-b", Duration::from_secs(60))
        .unwrap();
    let doomed = on_b[0].as_str();
    let got = &received.iter().find(|(pod, _)| *pod == doomed).unwrap().1;
    poll::until("the reclaimed worker gets the stop", WAIT, async || {
        (got.paths() == ["/stop"]).then_some(())
    })
    .await;
    for (pod, got) in received.iter().filter(|(pod, _)| *pod != doomed) {
        assert!(got.paths().is_empty(), "{pod} trains on: {:?}", got.paths());
    }
}

#[tokio::test]
async fn without_an_opt_in_nothing_is_sent() {
    let env = Env::start(sim_config(1, 2)).await;
    let (address, got) = stand_in(true).await;
    env.cluster.forward_every_pod_port(9009, address);
    env.apply_job(&job("silent", 2, 2, false, "    checkpointGraceSeconds: 1"))
        .await;
    running(&env, "silent").await;
    env.patch_job("silent", serde_json::json!({"spec": {"suspend": true}}))
        .await;
    env.wait_job("silent", "is suspended", in_phase(JobPhase::Suspended))
        .await;
    assert!(got.paths().is_empty(), "{:?}", got.paths());
    assert!(env.event_notes("silent", "KubeaiStop").await.is_empty());
}

#[tokio::test]
async fn a_manual_suspend_sends_the_stop_and_a_pod_that_never_answers_does_not_delay_it() {
    let env = Env::start(sim_config(1, 2)).await;
    let (silent, silent_got) = stand_in(false).await;
    let (answering, answering_got) = stand_in(true).await;
    env.cluster
        .forward_pod_port("default", "manual-worker-0", 9009, silent);
    env.cluster.forward_every_pod_port(9009, answering);
    // The field, not the annotation, opts every pod in.
    env.apply_job(&job(
        "manual",
        2,
        2,
        false,
        "    kubeaiStop: true\n    checkpointGraceSeconds: 2",
    ))
    .await;
    running(&env, "manual").await;
    env.patch_job("manual", serde_json::json!({"spec": {"suspend": true}}))
        .await;
    // The launcher does not exit: the suspend completes at the end of the 2 s grace period,
    // whatever the silent pod does.
    env.wait_job("manual", "is suspended", in_phase(JobPhase::Suspended))
        .await;
    assert_eq!(silent_got.paths()[0], "/stop");
    assert!(answering_got.paths().iter().all(|p| p == "/stop"));
    assert_eq!(
        answering_got.paths().len(),
        2,
        "the launcher and worker-1, once each"
    );
    let note = poll::until("the stop is reported", WAIT, async || {
        env.event_notes("manual", "KubeaiStop")
            .await
            .into_iter()
            .next()
    })
    .await;
    assert!(
        note.contains(
            "to 3 pods: 2 acknowledged; not acknowledged: manual-worker-0 (no answer within 2s)"
        ),
        "{note}"
    );
}
