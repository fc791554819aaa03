//! Every `kubectl eto` command, run as the binary kubectl would run, against a scripted
//! simulated cluster: a TrainingJob and an MPIJob running on two 8-GPU nodes, and apart from
//! them an elastic PyTorchJob.
//!
//! Outputs are compared with the golden files under `tests/golden/`, after the volatile parts
//! (ages, times, the random suffix of an MPIJob's launcher pod, column padding) are
//! normalised. `UPDATE_GOLDEN=1` rewrites them from a run. docs/kubectl-eto.md shows the same outputs: a
//! test checks that it holds each golden file.

// Test code: a panic is a test failure with its message.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use eto_api::{MPIJob, PyTorchJob, TrainingJob};
use eto_sim::{Fault, FaultAction};
use eto_tests::env::{Env, WAIT, sim_config};
use eto_tests::workspace_root;
use kube::api::Api;
use pretty_assertions::assert_eq;
use regex::Regex;
use serde_json::Value;

/// What one run of the plugin printed.
struct Output {
    code: i32,
    stdout: String,
    stderr: String,
}

/// The cluster every test starts from, and a kubeconfig file for it.
struct Scripted {
    env: Env,
    kubeconfig: PathBuf,
}

impl Scripted {
    /// Two 8-GPU nodes; `examples/elastic-minimal.yaml` and
    /// `examples/mpijob-tensorflow-benchmarks.yaml` applied and running with every worker
    /// ready and listed by discovery.
    async fn start(test: &str) -> Self {
        let env = Env::start(sim_config(2, 8)).await;
        env.apply::<TrainingJob>(&example("elastic-minimal.yaml"))
            .await;
        env.apply::<MPIJob>(&example("mpijob-tensorflow-benchmarks.yaml"))
            .await;
        env.wait::<TrainingJob>("mnist-elastic", "runs 4 workers", |job| {
            job.status.as_ref().is_some_and(|s| {
                s.workers.as_ref().is_some_and(|w| w.ready == 4)
                    && format!("{:?}", s.phase) == "Some(Running)"
            })
        })
        .await;
        env.wait::<MPIJob>("tensorflow-benchmarks", "runs 2 workers", |job| {
            job.status.as_ref().is_some_and(|s| {
                s.eto.workers.as_ref().is_some_and(|w| w.ready == 2)
                    && format!("{:?}", s.eto.phase) == "Some(Running)"
            })
        })
        .await;
        let kubeconfig = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("kubectl-eto-{test}.kubeconfig"));
        std::fs::write(&kubeconfig, env.cluster.kubeconfig()).unwrap();
        let scripted = Self { env, kubeconfig };
        // Discovery has caught up once the plugin says the launchers show their lists.
        for job in ["mnist-elastic", "tensorflow-benchmarks"] {
            scripted
                .eventually(&["hosts", job], |out| {
                    out.stderr.contains("shows this list")
                })
                .await;
        }
        scripted
    }

    /// Runs `kubectl eto ARGS` with `--kubeconfig`.
    async fn run(&self, args: &[&str]) -> Output {
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-eto"))
            .args(args)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .env_remove("KUBECONFIG")
            .output()
            .await
            .unwrap();
        Output {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8(output.stdout).unwrap(),
            stderr: String::from_utf8(output.stderr).unwrap(),
        }
    }

    /// Runs `args` until `done` holds for the output.
    async fn eventually(&self, args: &[&str], done: impl Fn(&Output) -> bool) -> Output {
        eto_tests::poll::until(
            &format!("kubectl eto {args:?} gives the expected output"),
            WAIT,
            async || {
                let out = self.run(args).await;
                done(&out).then_some(out)
            },
        )
        .await
    }
}

fn example(file: &str) -> String {
    std::fs::read_to_string(workspace_root().join("examples").join(file)).unwrap()
}

/// `text` with ages, times, launcher suffixes, goodput figures and column padding made
/// stable.
fn normalize(text: &str) -> String {
    static VOLATILE: LazyLock<[(Regex, &str); 7]> = LazyLock::new(|| {
        [
            (Regex::new(r"\b\d+\.\d%").unwrap(), "<percent>"),
            (
                Regex::new(r"productive(, [a-zA-Z]+ \d+s)*").unwrap(),
                "productive<losses>",
            ),
            (
                Regex::new(r"\b(waiting|startUp|reformation|checkpoint|retrained|other) \d+s\b")
                    .unwrap(),
                "<bucket> <age>",
            ),
            (
                Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z").unwrap(),
                "<time>",
            ),
            (
                Regex::new(r"-launcher-[a-z0-9]{5}\b").unwrap(),
                "-launcher-<id>",
            ),
            (Regex::new(r"\b\d+(m\d+s|s|m|h|d)\b").unwrap(), "<age>"),
            (Regex::new(r"  +").unwrap(), "  "),
        ]
    });
    let mut text = text.to_string();
    for (pattern, replacement) in VOLATILE.iter() {
        text = pattern.replace_all(&text, *replacement).into_owned();
    }
    text.lines()
        .map(|line| format!("{}\n", line.trim_end()))
        .collect()
}

fn golden_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.txt"))
}

/// Compares `actual` (normalised) with the golden file `name`, or rewrites it.
fn assert_golden(name: &str, actual: &str) {
    let path = golden_path(name);
    let normalized = normalize(actual);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &normalized).unwrap();
        // The output as printed, for docs/kubectl-eto.md.
        let raw = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kubectl-eto-outputs");
        std::fs::create_dir_all(&raw).unwrap();
        std::fs::write(raw.join(format!("{name}.txt")), actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "no golden file {}; run with UPDATE_GOLDEN=1",
            path.display()
        )
    });
    assert_eq!(
        normalized,
        expected,
        "{name} differs from {}",
        path.display()
    );
}

/// The part of `kubectl eto get JOB` before its conditions: the summary and the workers.
/// Conditions and events hold counts that depend on timing (how many workers were ready when
/// the launcher started), so they are checked by content instead.
fn head(detail: &str) -> &str {
    detail.split("\nConditions:").next().unwrap()
}

#[tokio::test]
async fn get_lists_both_kinds_and_shows_one_job_in_detail() {
    let cluster = Scripted::start("get").await;

    let listed = cluster.run(&["get"]).await;
    assert_eq!((listed.code, listed.stderr.as_str()), (0, ""));
    assert_golden("get", &listed.stdout);

    let all = cluster.run(&["get", "-A"]).await;
    assert_golden("get-all-namespaces", &all.stdout);

    let training = cluster.run(&["get", "mnist-elastic"]).await;
    assert_eq!(training.code, 0, "{}", training.stderr);
    assert_golden("get-trainingjob", head(&training.stdout));
    for expected in ["WorkersCreated", "LauncherCreated", "Running"] {
        assert!(training.stdout.contains(expected), "{}", training.stdout);
    }

    let mpi = cluster.run(&["get", "mpijob/tensorflow-benchmarks"]).await;
    assert_eq!(mpi.code, 0, "{}", mpi.stderr);
    assert_golden("get-mpijob", head(&mpi.stdout));
    assert!(mpi.stdout.contains("MPIJobRunning"), "{}", mpi.stdout);
}

#[tokio::test]
async fn get_says_why_a_jobs_pods_fail() {
    let cluster = Scripted::start("get-failing").await;
    // The Workers' image (the last one of the file) cannot be pulled.
    let yaml = example("elastic-minimal.yaml").replace("name: mnist-elastic", "name: unpulled");
    let at = yaml.rfind("image: ").unwrap();
    let end = at + yaml[at..].find('\n').unwrap();
    let yaml = format!(
        "{}image: example.invalid/none:v1{}",
        &yaml[..at],
        &yaml[end..]
    );
    cluster.env.apply::<TrainingJob>(&yaml).await;
    let detail = cluster
        .eventually(&["get", "unpulled"], |out| {
            let head = head(&out.stdout);
            head.contains("ImagePullBackOff: Worker")
                && !head.contains("ErrImagePull")
                && head.matches("ImagePullBackOff").count() >= 6
        })
        .await;
    assert_golden("get-failing", head(&detail.stdout));
}

#[tokio::test]
async fn get_as_json_and_yaml_parses_back() {
    let cluster = Scripted::start("get-json").await;
    let listed = cluster.run(&["get", "-o", "json"]).await;
    let jobs: Value = serde_json::from_str(&listed.stdout).unwrap();
    let names: Vec<(&str, &str, u64)> = jobs
        .as_array()
        .unwrap()
        .iter()
        .map(|job| {
            (
                job["kind"].as_str().unwrap(),
                job["name"].as_str().unwrap(),
                job["ready"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("TrainingJob", "mnist-elastic", 4),
            ("MPIJob", "tensorflow-benchmarks", 2)
        ]
    );

    let detail = cluster.run(&["get", "mnist-elastic", "-o", "json"]).await;
    let detail: Value = serde_json::from_str(&detail.stdout).unwrap();
    assert_eq!(detail["summary"]["max"], 4);
    assert_eq!(detail["workers"].as_array().unwrap().len(), 4);
    assert_eq!(detail["launcher"]["pod"], "mnist-elastic-launcher");
    assert!(
        detail["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    );

    let yaml = cluster
        .run(&["get", "tensorflow-benchmarks", "-o", "yaml"])
        .await;
    let parsed: Value = serde_saphyr::from_str(&yaml.stdout).unwrap();
    assert_eq!(parsed["summary"]["kind"], "MPIJob");
}

#[tokio::test]
async fn hosts_reports_a_change_the_operator_has_not_written_yet() {
    let mut cluster = Scripted::start("hosts-pending").await;
    cluster.env.stop_operator().await;
    cluster
        .env
        .cluster
        .fail_pod("default", "mnist-elastic-worker-1", 1, "Error")
        .unwrap();
    // The operator is stopped: the launcher still shows the old list, and kubectl eto hosts
    // says what eto will write, and that the launcher does not show it yet.
    let pending = cluster
        .eventually(&["hosts", "mnist-elastic"], |out| {
            !out.stdout.contains("mnist-elastic-worker-1.")
        })
        .await;
    assert_eq!(pending.stdout.lines().count(), 3, "{}", pending.stdout);
    assert!(
        pending
            .stderr
            .contains("launcher mnist-elastic-launcher does not show this list yet"),
        "{}",
        pending.stderr
    );
    let shown = cluster
        .env
        .launcher_hostfile("mnist-elastic")
        .await
        .unwrap();
    assert!(shown.contains("mnist-elastic-worker-1."), "{shown}");
}

#[tokio::test]
async fn hosts_prints_the_discovery_list_and_whether_the_launcher_has_it() {
    let cluster = Scripted::start("hosts").await;
    let training = cluster.run(&["hosts", "mnist-elastic"]).await;
    assert_golden("hosts", &training.stdout);
    assert_eq!(
        training.stderr.trim(),
        "launcher mnist-elastic-launcher shows this list"
    );
    // The same lines the launcher's pod holds for its discovery script.
    assert_eq!(
        cluster
            .env
            .launcher_hostfile("mnist-elastic")
            .await
            .unwrap(),
        training.stdout
    );

    // A worker fails: the computed list drops it at once.
    cluster
        .env
        .cluster
        .fail_pod("default", "mnist-elastic-worker-0", 1, "Error")
        .unwrap();
    let after = cluster
        .eventually(&["hosts", "mnist-elastic"], |out| {
            !out.stdout.contains("mnist-elastic-worker-0.")
        })
        .await;
    assert!(after.stdout.lines().count() <= 4, "{}", after.stdout);
    // Its node is in the job's blacklist cooldown, and top says so.
    let top = cluster
        .eventually(&["top", "node"], |out| out.stdout.contains("cooldown"))
        .await;
    let marked: Vec<&str> = top
        .stdout
        .lines()
        .filter(|line| line.ends_with("cooldown: default/mnist-elastic"))
        .collect();
    assert_eq!(marked.len(), 1, "{}", top.stdout);
    assert!(marked[0].starts_with("gpu-node-0 "), "{}", top.stdout);
    // And the job's detail says which worker was lost, and why.
    let detail = cluster.run(&["get", "mnist-elastic"]).await;
    let lost = detail
        .stdout
        .lines()
        .find(|line| line.trim_start().starts_with("mnist-elastic-worker-0 "))
        .unwrap_or_else(|| panic!("worker-0 is not listed:\n{}", detail.stdout));
    assert!(lost.contains("blacklisted: "), "{lost}");

    let json = cluster
        .run(&["hosts", "tensorflow-benchmarks", "-o", "json"])
        .await;
    let hosts: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        hosts["lines"],
        serde_json::json!([
            "tensorflow-benchmarks-worker-0.tensorflow-benchmarks.default.svc:1",
            "tensorflow-benchmarks-worker-1.tensorflow-benchmarks.default.svc:1"
        ])
    );
    assert_eq!(hosts["launcherHasIt"], true);
}

#[tokio::test]
async fn top_node_counts_gpus_per_node_and_names_the_jobs() {
    let cluster = Scripted::start("top").await;
    let top = cluster.run(&["top", "node"]).await;
    assert_eq!(top.code, 0, "{}", top.stderr);
    assert_golden("top-node", &top.stdout);

    let json = cluster.run(&["top", "node", "-o", "json"]).await;
    let nodes: Value = serde_json::from_str(&json.stdout).unwrap();
    let allocated: u64 = nodes
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["allocated"].as_u64().unwrap())
        .sum();
    assert_eq!(allocated, 6, "4 + 2 one-GPU workers");
}

#[tokio::test]
async fn scale_suspend_and_resume_write_the_job_and_refuse_what_its_bounds_forbid() {
    let cluster = Scripted::start("change").await;
    let refused = cluster
        .run(&["scale", "mnist-elastic", "--workers", "9"])
        .await;
    assert_eq!(refused.code, 1);
    assert!(
        refused
            .stderr
            .contains("maximum (spec.etReplicaSpecs.worker.maxReplicas) is 4"),
        "{}",
        refused.stderr
    );
    let below = cluster
        .run(&["scale", "tensorflow-benchmarks", "--workers", "1"])
        .await;
    assert!(
        below
            .stderr
            .contains("minimum (spec.elasticPolicy.minReplicas) is 2"),
        "{}",
        below.stderr
    );

    let scaled = cluster
        .run(&["scale", "mnist-elastic", "--workers", "3"])
        .await;
    assert_golden("scale", &scaled.stdout);
    let jobs: Api<TrainingJob> = Api::default_namespaced(cluster.env.client.clone());
    let job = jobs.get("mnist-elastic").await.unwrap();
    assert_eq!(job.spec.et_replica_specs.worker.replicas, Some(3));

    let suspended = cluster
        .run(&["suspend", "mpij/tensorflow-benchmarks"])
        .await;
    assert_eq!(suspended.code, 0, "{}", suspended.stderr);
    assert_golden("suspend", &suspended.stdout);
    let mpi_jobs: Api<MPIJob> = Api::default_namespaced(cluster.env.client.clone());
    let suspend_of = |job: &MPIJob| job.spec.run_policy.as_ref().and_then(|p| p.suspend);
    assert_eq!(
        suspend_of(&mpi_jobs.get("tensorflow-benchmarks").await.unwrap()),
        Some(true)
    );
    let resumed = cluster.run(&["resume", "mpij/tensorflow-benchmarks"]).await;
    assert_golden("resume", &resumed.stdout);
    assert_eq!(
        suspend_of(&mpi_jobs.get("tensorflow-benchmarks").await.unwrap()),
        Some(false)
    );
}

#[tokio::test]
async fn errors_name_what_is_wrong_and_exit_non_zero() {
    let cluster = Scripted::start("errors").await;
    let missing = cluster.run(&["get", "nope"]).await;
    assert_eq!(
        (missing.code, missing.stderr.as_str()),
        (
            1,
            "error: no TrainingJob, MPIJob, PyTorchJob or TrainJob named \"nope\" in namespace \"default\"\n"
        )
    );

    cluster.env.cluster.inject(Fault {
        action: FaultAction::Fail(403),
        remaining: 1,
        method: Some("GET".into()),
        path_contains: Some("/trainingjobs".into()),
        verb: None,
        writes_only: false,
        skip: 0,
    });
    let forbidden = cluster.run(&["get"]).await;
    assert_eq!(forbidden.code, 1);
    assert!(
        forbidden.stderr.starts_with(
            "error: forbidden: you may not list trainingjobs.kai.alibabacloud.com in namespace \"default\""
        ),
        "{}",
        forbidden.stderr
    );

    let other_context = cluster.run(&["get", "--context", "nowhere"]).await;
    assert_eq!(other_context.code, 1);
    assert!(
        other_context.stderr.contains("nowhere"),
        "{}",
        other_context.stderr
    );

    cluster.env.remove_crd("mpijobs.kubeflow.org").await;
    let no_api = cluster.run(&["get", "mpijob/tensorflow-benchmarks"]).await;
    assert_eq!(
        no_api.stderr,
        "error: the MPIJob API is not installed in this cluster (no CustomResourceDefinition mpijobs.kubeflow.org); install eto's CRDs first\n"
    );
    // The other kind still lists.
    let listed = cluster.run(&["get"]).await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(listed.stdout.contains("mnist-elastic"));
}

/// An elastic PyTorchJob (`examples/pytorchjob-elastic.yaml`: three Workers, eto's rendezvous
/// store) on its own cluster: listed, shown, its hosts refused with the reason, scaled,
/// suspended and resumed.
#[tokio::test]
async fn a_pytorch_job_is_listed_shown_scaled_suspended_and_resumed() {
    let env = Env::start(sim_config(2, 8)).await;
    env.apply::<PyTorchJob>(&example("pytorchjob-elastic.yaml"))
        .await;
    env.wait::<PyTorchJob>("elastic-ddp", "runs 3 workers", |job| {
        job.status.as_ref().is_some_and(|s| {
            s.eto.workers.as_ref().is_some_and(|w| w.ready == 3)
                && format!("{:?}", s.eto.phase) == "Some(Running)"
        })
    })
    .await;
    let kubeconfig =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kubectl-eto-pytorchjob.kubeconfig");
    std::fs::write(&kubeconfig, env.cluster.kubeconfig()).unwrap();
    let cluster = Scripted { env, kubeconfig };

    let listed = cluster.run(&["get"]).await;
    assert_eq!((listed.code, listed.stderr.as_str()), (0, ""));
    assert_golden("get-pytorchjob-list", &listed.stdout);
    let detail = cluster.run(&["get", "pytorchjob/elastic-ddp"]).await;
    assert_eq!(detail.code, 0, "{}", detail.stderr);
    assert_golden("get-pytorchjob", head(&detail.stdout));
    assert!(detail.stdout.contains("Running"), "{}", detail.stdout);

    let hosts = cluster.run(&["hosts", "elastic-ddp"]).await;
    assert_eq!(hosts.code, 1, "{}", hosts.stdout);
    assert_eq!(
        hosts.stderr,
        "error: PyTorchJob default/elastic-ddp has no host discovery: only a job whose launcher reads a hostfile has one (TrainingJob, MPIJob)\n"
    );

    let refused = cluster
        .run(&["scale", "elastic-ddp", "--workers", "5"])
        .await;
    assert!(
        refused
            .stderr
            .contains("maximum (spec.elasticPolicy.maxReplicas) is 4"),
        "{}",
        refused.stderr
    );
    let scaled = cluster
        .run(&["scale", "elastic-ddp", "--workers", "4"])
        .await;
    assert_eq!(scaled.code, 0, "{}", scaled.stderr);
    assert_golden("scale-pytorchjob", &scaled.stdout);
    let jobs: Api<PyTorchJob> = Api::default_namespaced(cluster.env.client.clone());
    let workers = |job: &PyTorchJob| job.spec.pytorch_replica_specs["Worker"].replicas;
    assert_eq!(workers(&jobs.get("elastic-ddp").await.unwrap()), Some(4));

    let suspend_of = |job: &PyTorchJob| job.spec.run_policy.as_ref().and_then(|p| p.suspend);
    let suspended = cluster.run(&["suspend", "pytorchjob/elastic-ddp"]).await;
    assert_eq!(suspended.code, 0, "{}", suspended.stderr);
    assert_golden("suspend-pytorchjob", &suspended.stdout);
    assert_eq!(
        suspend_of(&jobs.get("elastic-ddp").await.unwrap()),
        Some(true)
    );
    let resumed = cluster.run(&["resume", "pytorchjob/elastic-ddp"]).await;
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(
        suspend_of(&jobs.get("elastic-ddp").await.unwrap()),
        Some(false)
    );
}

#[test]
fn the_documentation_shows_the_golden_outputs() {
    let page =
        normalize(&std::fs::read_to_string(workspace_root().join("docs/kubectl-eto.md")).unwrap());
    for name in [
        "get",
        "get-trainingjob",
        "get-pytorchjob",
        "get-failing",
        "hosts",
        "top-node",
        "scale",
        "suspend",
        "resume",
    ] {
        let golden = std::fs::read_to_string(golden_path(name)).unwrap();
        assert!(
            page.contains(&golden),
            "docs/kubectl-eto.md does not show the output of {name}:\n{golden}"
        );
    }
}
