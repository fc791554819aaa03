//! The `eto-operator` process against the simulated cluster: how it reports a failed start,
//! what its logs look like when no terminal reads them, and how it stops on SIGTERM.

// Test code: a panic is a test failure with its message.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};

use eto_tests::env::{Env, FOREVER, WAIT, hanging_pod_writes, job_yaml, sim_config, slow_list};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, ChildStdout, Command};

/// A simulated cluster with eto's CRDs and three TrainingJobs, no operator running, and a
/// kubeconfig for it in a file named after `test`.
async fn cluster_with_jobs(test: &str) -> (Env, PathBuf) {
    let mut env = Env::start(sim_config(2, 8)).await;
    env.stop_operator().await;
    for index in 0..3 {
        env.apply_job(&job_yaml(&format!("job-{index}"), 2, 1, "", "Never"))
            .await;
    }
    let kubeconfig = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{test}.kubeconfig"));
    std::fs::write(&kubeconfig, env.cluster.kubeconfig()).unwrap();
    (env, kubeconfig)
}

/// `eto-operator run` against the cluster of `kubeconfig`, its output piped.
fn operator(kubeconfig: &PathBuf, metrics_address: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_eto-operator"));
    command
        .args(["run", "--metrics-address", metrics_address])
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// Reads `stdout` until a line contains `text`; returns what was read.
async fn read_until(stdout: &mut BufReader<ChildStdout>, text: &str) -> String {
    let mut read = String::new();
    let found = tokio::time::timeout(WAIT, async {
        loop {
            let mut line = String::new();
            if stdout.read_line(&mut line).await.unwrap() == 0 {
                return false;
            }
            read.push_str(&line);
            if line.contains(text) {
                return true;
            }
        }
    })
    .await;
    assert_eq!(
        found,
        Ok(true),
        "the operator never logged {text:?}; it logged:\n{read}"
    );
    read
}

/// Sends SIGTERM to `child` and waits for it to exit; fails the test if it does not.
async fn terminate(child: &mut Child) -> ExitStatus {
    let pid = child.id().expect("the operator still runs").to_string();
    let sent = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .expect("the kill command runs");
    assert!(sent.success(), "kill -TERM {pid} failed");
    tokio::time::timeout(WAIT, child.wait())
        .await
        .expect("the operator exits after SIGTERM")
        .unwrap()
}

/// Starts the operator, waits until it logged that it runs and `under_way` resolved, sends
/// SIGTERM, and checks that it exits cleanly and logged plain text (its output is a pipe, not
/// a terminal). Returns what it logged.
async fn run_then_terminate(mut operator: Command, under_way: impl Future<Output = ()>) -> String {
    let mut child = operator.spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut logged = read_until(&mut stdout, "eto controller starting").await;
    tokio::time::timeout(WAIT, under_way)
        .await
        .expect("the operator gets under way");
    let status = terminate(&mut child).await;
    stdout.read_to_string(&mut logged).await.unwrap();
    assert!(status.success(), "{status}; it logged:\n{logged}");
    assert!(logged.contains("eto controller stopped"), "{logged}");
    assert!(
        !logged.contains('\x1b'),
        "no colour escapes when the output is not a terminal:\n{logged}"
    );
    logged
}

#[tokio::test]
async fn a_busy_metrics_address_is_named_and_the_operator_exits_non_zero() {
    let (_env, kubeconfig) = cluster_with_jobs("busy-metrics-address").await;
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = busy.local_addr().unwrap().to_string();
    let output = tokio::time::timeout(WAIT, operator(&kubeconfig, &address).output())
        .await
        .expect("the operator exits")
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains(&format!("cannot listen on {address}: ")),
        "{stderr}"
    );
}

#[tokio::test]
async fn sigterm_stops_the_operator_while_its_caches_are_still_listing() {
    let (env, kubeconfig) = cluster_with_jobs("sigterm-while-listing").await;
    env.cluster
        .inject(slow_list("/api/v1/pods", u32::MAX, FOREVER));
    let logged = run_then_terminate(operator(&kubeconfig, "127.0.0.1:0"), async {}).await;
    assert!(
        !logged.contains("abandoned"),
        "no reconcile was under way:\n{logged}"
    );
}

#[tokio::test]
async fn sigterm_stops_the_operator_while_reconciles_wait_for_the_api_server() {
    let (env, kubeconfig) = cluster_with_jobs("sigterm-while-reconciling").await;
    // Every pod write hangs: each job's reconcile is stuck in its first worker apply.
    env.cluster.inject(hanging_pod_writes(u32::MAX));
    let logged = run_then_terminate(
        operator(&kubeconfig, "127.0.0.1:0"),
        env.wait_worker_service("job-0"),
    )
    .await;
    assert!(logged.contains("abandoned"), "{logged}");
}

#[tokio::test]
async fn a_missing_crd_of_a_served_kind_is_named_and_the_other_kind_can_be_served_alone() {
    let (env, kubeconfig) = cluster_with_jobs("missing-mpijob-crd").await;
    env.remove_crd("mpijobs.kubeflow.org").await;
    let output = tokio::time::timeout(WAIT, operator(&kubeconfig, "127.0.0.1:0").output())
        .await
        .expect("the operator exits")
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("the MPIJob API is not installed")
            && stderr.contains("mpijobs.kubeflow.org")
            && stderr.contains("--kinds"),
        "{stderr}"
    );

    let mut training_jobs_only = operator(&kubeconfig, "127.0.0.1:0");
    training_jobs_only.args(["--kinds", "TrainingJob"]);
    run_then_terminate(training_jobs_only, env.wait_worker_service("job-0")).await;
}
