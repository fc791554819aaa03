//! The `eto-operator` process against the simulated cluster: how it reports a failed start,
//! what its logs look like when no terminal reads them, and how it stops on SIGTERM.

// Test code: a panic is a test failure with its message.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};

use eto_api::job_status::JobPhase;
use eto_tests::env::{
    Env, FOREVER, WAIT, hanging_pod_writes, in_phase, job_yaml, sim_config, slow_list,
};
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

/// What the operator `command` printed on stderr as it exited non-zero at start.
async fn failed_start(mut command: Command) -> String {
    let output = tokio::time::timeout(WAIT, command.output())
        .await
        .expect("the operator exits")
        .unwrap();
    assert!(!output.status.success());
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn a_busy_metrics_address_is_named_and_the_operator_exits_non_zero() {
    let (_env, kubeconfig) = cluster_with_jobs("busy-metrics-address").await;
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = busy.local_addr().unwrap().to_string();
    let stderr = failed_start(operator(&kubeconfig, &address)).await;
    assert!(
        stderr.contains(&format!("cannot listen on {address}: ")),
        "{stderr}"
    );
}

#[tokio::test]
async fn an_invalid_node_warning_is_named_and_the_operator_exits_non_zero() {
    let (_env, kubeconfig) = cluster_with_jobs("invalid-node-warning").await;
    let mut command = operator(&kubeconfig, &free_address());
    command.arg("--node-warnings=taint:karpenter.sh/disrupted,label:spot");
    let stderr = failed_start(command).await;
    assert!(
        stderr.contains(
            "--node-warnings: invalid node warning \"label:spot\": expected taint:<key> or condition:<type>"
        ),
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

/// A free local port, for an operator's `--metrics-address`.
fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// The body of `GET path` on `address`.
async fn http_get(address: &str, path: &str) -> String {
    use tokio::io::AsyncWriteExt;
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default()
}

/// The value of the sample `series` (name and labels, as exposed) in `address`'s `/metrics`,
/// if it is there.
async fn sampled(address: &str, series: &str) -> Option<f64> {
    let metrics = http_get(address, "/metrics").await;
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{series} ")))
        .map(|value| value.trim().parse().unwrap())
}

/// The value of the sample `name` (without labels) in `address`'s `/metrics`.
async fn sample(address: &str, name: &str) -> f64 {
    sampled(address, name)
        .await
        .unwrap_or_else(|| panic!("no {name} in {address}'s /metrics"))
}

/// One operator replica with leader election, its output being read.
struct Replica {
    child: Child,
    stdout: BufReader<ChildStdout>,
    address: String,
}

impl Replica {
    fn start(kubeconfig: &PathBuf, identity: &str, lease: &[&str]) -> Self {
        let address = free_address();
        let mut command = operator(kubeconfig, &address);
        command.env("POD_NAME", identity).args(lease);
        let mut child = command.spawn().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Self {
            child,
            stdout,
            address,
        }
    }

    async fn logged(&mut self, text: &str) {
        read_until(&mut self.stdout, text).await;
    }
}

#[tokio::test]
async fn only_the_leader_reconciles_and_sigterm_hands_over_at_once() {
    let (env, kubeconfig) = cluster_with_jobs("leader-sigterm").await;
    // A long lease: a hand-over within the test's wait proves the lease was released.
    let lease = ["--lease-duration", "60", "--renew-deadline", "9"];
    let mut first = Replica::start(&kubeconfig, "replica-a", &lease);
    first.logged("this replica leads").await;
    let mut second = Replica::start(&kubeconfig, "replica-b", &lease);
    second.logged("standing by").await;
    env.wait_worker_service("job-2").await;

    assert_eq!(http_get(&first.address, "/readyz").await, "ok: leading\n");
    assert_eq!(http_get(&second.address, "/readyz").await, "ok: standby\n");
    assert!(sample(&first.address, "eto_child_writes_total").await > 0.0);
    assert_eq!(sample(&second.address, "eto_child_writes_total").await, 0.0);
    assert_eq!(sample(&second.address, "eto_leader").await, 0.0);

    let status = terminate(&mut first.child).await;
    assert!(status.success(), "{status}");
    second.logged("this replica leads").await;
    assert_eq!(http_get(&second.address, "/readyz").await, "ok: leading\n");
    assert!(terminate(&mut second.child).await.success());
}

#[tokio::test]
async fn a_killed_leader_is_replaced_within_the_lease_duration_and_nothing_is_rewritten() {
    let (env, kubeconfig) = cluster_with_jobs("leader-killed").await;
    let lease = ["--lease-duration", "6", "--renew-deadline", "2"];
    let mut first = Replica::start(&kubeconfig, "replica-a", &lease);
    first.logged("this replica leads").await;
    let mut second = Replica::start(&kubeconfig, "replica-b", &lease);
    second.logged("standing by").await;
    for job in ["job-0", "job-1", "job-2"] {
        env.wait_job(job, "runs", in_phase(JobPhase::Running)).await;
    }

    // A crash: no chance to release the lease.
    first.child.kill().await.unwrap();
    second.logged("this replica leads").await;
    // The new leader relists and finds every job as the old one left it: it writes nothing.
    // Reconciles of all three jobs have run once their count reaches three.
    let all = async {
        while sampled(&second.address, "eto_reconciliations_total{result=\"ok\"}")
            .await
            .is_none_or(|ok| ok < 3.0)
        {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(WAIT, all)
        .await
        .expect("three reconciles");
    assert_eq!(sample(&second.address, "eto_child_writes_total").await, 0.0);
    assert!(terminate(&mut second.child).await.success());
}

#[tokio::test]
async fn json_logs_parse_and_name_the_kind_namespace_and_job_of_each_decision() {
    let (env, kubeconfig) = cluster_with_jobs("json-logs").await;
    let mut command = operator(&kubeconfig, "127.0.0.1:0");
    command.args(["--log-format", "json", "--leader-elect=false"]);
    let mut child = command.spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let logged = read_until(&mut stdout, "created workers job-1-worker-0").await;
    env.wait_worker_service("job-1").await;
    assert!(terminate(&mut child).await.success());
    let lines: Vec<serde_json::Value> = logged
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {line}")))
        .collect();
    let decision = lines
        .iter()
        .find(|line| {
            line["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("created workers job-1-worker-0"))
        })
        .unwrap();
    assert_eq!(decision["level"], "INFO");
    assert_eq!(decision["reason"], "WorkersCreated");
    assert_eq!(
        (
            &decision["span"]["kind"],
            &decision["span"]["namespace"],
            &decision["span"]["job"]
        ),
        (
            &serde_json::json!("TrainingJob"),
            &serde_json::json!("default"),
            &serde_json::json!("job-1")
        )
    );
}

#[tokio::test]
async fn ssh_private_keys_appear_in_no_log_event_status_or_metric() {
    let (env, kubeconfig) = cluster_with_jobs("no-key-leaks").await;
    let address = free_address();
    let mut command = operator(&kubeconfig, &address);
    command.args(["--log-format", "json", "--leader-elect=false"]);
    command.env("RUST_LOG", "debug");
    let mut child = command.spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut logged = read_until(&mut stdout, "created workers job-2-worker-0").await;
    env.wait_worker_service("job-2").await;
    let metrics = http_get(&address, "/metrics").await;
    assert!(terminate(&mut child).await.success());
    stdout.read_to_string(&mut logged).await.unwrap();

    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::default_namespaced(env.client.clone());
    let secret = secrets.get("job-0-ssh").await.unwrap();
    let private = secret.data.as_ref().unwrap()["id_rsa"].0.clone();
    let private = String::from_utf8(private).unwrap();
    // Any line of the key body, and its base64 form as stored.
    let body_line = private
        .lines()
        .find(|line| line.len() > 40 && !line.starts_with("-----"))
        .unwrap()
        .to_string();
    let encoded = serde_json::to_value(&secret).unwrap()["data"]["id_rsa"]
        .as_str()
        .unwrap()[..40]
        .to_string();

    let events: kube::Api<k8s_openapi::api::core::v1::Event> =
        kube::Api::default_namespaced(env.client.clone());
    let events = serde_json::to_string(&events.list(&Default::default()).await.unwrap()).unwrap();
    let jobs = serde_json::to_string(&env.jobs().list(&Default::default()).await.unwrap()).unwrap();
    for (what, text) in [
        ("logs", &logged),
        ("events", &events),
        ("job statuses", &jobs),
        ("metrics", &metrics),
    ] {
        assert!(!text.is_empty(), "{what} were read");
        assert!(
            !text.contains(&body_line) && !text.contains(&encoded) && !text.contains("PRIVATE KEY"),
            "the private key shows in the {what}"
        );
    }
}

/// Checks an OpenMetrics exposition (stdin) with the official Python client's parser, then
/// the naming conventions: help text on every family, names `eto_` and snake case, a unit
/// (`# UNIT`) on every family whose name ends in one and a name ending in its unit, counters
/// exposed as `_total` (and `_created`) samples. Prints each problem; exits 1 if any.
const OPENMETRICS_CHECK: &str = r#"
import re, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
families = list(text_string_to_metric_families(sys.stdin.read()))
problems = []
for family in families:
    name = family.name
    if not family.documentation.strip():
        problems.append(f"{name}: no help text")
    if not re.fullmatch(r"eto_[a-z][a-z0-9_]*", name):
        problems.append(f"{name}: not snake case with the eto_ prefix")
    if family.unit and not name.endswith("_" + family.unit):
        problems.append(f"{name}: unit {family.unit} is not the end of its name")
    for unit in ("seconds", "bytes", "ratio"):
        if name.endswith("_" + unit) and family.unit != unit:
            problems.append(f"{name}: its name ends in {unit} but it declares no such unit")
    for sample in family.samples:
        if family.type == "counter" and not sample.name.endswith(("_total", "_created")):
            problems.append(f"{name}: counter sample {sample.name} is not _total")
print(f"{len(families)} families")
for problem in problems:
    print(problem)
sys.exit(1 if problems else 0)
"#;

#[tokio::test]
async fn metrics_parse_with_the_official_openmetrics_parser_and_follow_its_conventions() {
    let parser = eto_tests::tools::python_package(
        "prometheus_client",
        "0.21.1",
        "prometheus_client/openmetrics/parser.py",
    );
    let (env, kubeconfig) = cluster_with_jobs("openmetrics").await;
    let address = free_address();
    let mut command = operator(&kubeconfig, &address);
    command.arg("--leader-elect=false");
    let mut child = command.spawn().unwrap();
    // A running job gives every family samples: phases, workers, writes, discovery.
    env.wait_job("job-0", "runs", in_phase(JobPhase::Running))
        .await;
    let exposition = http_get(&address, "/metrics").await;
    assert!(terminate(&mut child).await.success());

    let report = openmetrics_check(&parser, &exposition).await;
    // Families without a sample yet are not exposed: check every one too, each sampled once.
    let every_family = eto_tests::metrics::every_family_sampled().encode();
    let all = openmetrics_check(&parser, &every_family).await;
    println!("from the operator: {report}of every family: {all}");
}

/// What [`OPENMETRICS_CHECK`] reports of `exposition`, run with the parser at `parser`.
///
/// # Panics
/// When it reports a problem, or the exposition does not parse.
async fn openmetrics_check(parser: &PathBuf, exposition: &str) -> String {
    let mut check = Command::new("python3")
        .args(["-c", OPENMETRICS_CHECK])
        .env("PYTHONPATH", parser)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    {
        use tokio::io::AsyncWriteExt;
        let mut stdin = check.stdin.take().unwrap();
        stdin.write_all(exposition.as_bytes()).await.unwrap();
    }
    let output = check.wait_with_output().await.unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{report}\n{exposition}");
    report
}
