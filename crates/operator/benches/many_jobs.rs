//! eto with many jobs: how long 1,000 TrainingJobs of 8 workers take to run, the operator's
//! memory, the API requests it makes per job, and what it does while nothing changes.
//!
//! `cargo bench -p eto-operator --bench many_jobs` starts eto-sim in-process with a GPU per
//! worker and the `eto-operator` binary as a separate process (so that its memory is its own),
//! creates the jobs at once, and prints: the time until every job is `Running`; the
//! operator's peak and settled resident memory (`VmHWM`, `VmRSS`); the requests and writes it
//! sent per job (counted by eto-sim); and the requests, writes and CPU it used in an idle
//! period. `-- --jobs <n>`, `--workers <n>`, `--idle-seconds <n>` change the defaults (1,000,
//! 8, 60).
//!
//! Then, unless `--no-floor`, the floor of the convergence on a fresh simulated cluster of the
//! same nodes: a plain client writes what eto writes for each job (its first plan, 16 jobs at
//! a time as eto reconciles 16 at a time, and the launcher once the job's workers run), and
//! the time until every launcher runs is printed next to eto's.
//!
//! `--kubeconfig <path>` runs the operator against the cluster that kubeconfig names instead
//! (eto's CRDs are installed there; the jobs go to the `default` namespace and are deleted
//! after): the convergence time and memory are measured the same way; requests are counted
//! only by eto-sim, and there is no floor.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use eto_api::TrainingJob;
use eto_api::job_status::JobPhase;
use eto_sim::{SimCluster, SimConfig};
use eto_tests::env::job_yaml;
use eto_tests::floor;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};

struct Options {
    kubeconfig: Option<String>,
    jobs: u32,
    workers: u32,
    idle: Duration,
    floor: bool,
}

fn options() -> Options {
    let mut options = Options {
        kubeconfig: None,
        jobs: 1_000,
        workers: 8,
        idle: Duration::from_secs(60),
        floor: true,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next();
        let mut number = || value().and_then(|n| n.parse::<u32>().ok());
        match arg.as_str() {
            "--jobs" => options.jobs = number().unwrap_or(1_000),
            "--workers" => options.workers = number().unwrap_or(8),
            "--idle-seconds" => options.idle = Duration::from_secs(number().map_or(60, u64::from)),
            "--no-floor" => options.floor = false,
            "--kubeconfig" => options.kubeconfig = value(),
            // `cargo bench` passes `--bench`.
            _ => {}
        }
    }
    options
}

/// A field of `/proc/<pid>/status` in KiB, such as `VmRSS`.
fn memory_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The CPU time the process has used, user and system.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
        .sum();
    // Clock ticks are 1/100 s on Linux.
    Duration::from_millis(ticks * 10)
}

/// Whether the operator's `/readyz` answers 200.
fn ready(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.write_all(b"GET /readyz HTTP/1.0\r\n\r\n");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.0 200")
}

fn start_operator(kubeconfig: &std::path::Path) -> (Child, u16) {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port");
    let operator = Command::new(env!("CARGO_BIN_EXE_eto-operator"))
        .args([
            "run",
            "--leader-elect=false",
            &format!("--metrics-address=127.0.0.1:{port}"),
        ])
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the operator starts");
    (operator, port)
}

/// Job `index` of the benchmark: `workers` one-GPU workers, all needed to run.
fn job(index: u32, workers: u32) -> TrainingJob {
    let yaml = job_yaml(&format!("job-{index}"), workers, workers, "", "Never");
    let mut job: TrainingJob = serde_saphyr::from_str(&yaml).expect("a valid job");
    job.metadata.namespace = Some("default".into());
    job
}

/// Eto's concurrency: how many jobs it reconciles at once.
const CONCURRENT_JOBS: usize = 16;

/// The floor of the convergence (see the module documentation): the time until every launcher
/// runs when a plain client writes what eto writes, on a fresh cluster of `nodes` nodes.
async fn floor(options: &Options, nodes: usize) -> Duration {
    let cluster = SimCluster::start(SimConfig::default().gpu_nodes(nodes, 8))
        .await
        .expect("the floor's simulated cluster starts");
    let client = cluster.client();
    let jobs: Vec<TrainingJob> = (0..options.jobs)
        .map(|index| job(index, options.workers))
        .collect();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let mut seen = watcher::watcher(pods, watcher::Config::default())
        .applied_objects()
        .boxed();
    let started = Instant::now();
    let writer = {
        let client = client.clone();
        let jobs = jobs.clone();
        tokio::spawn(async move {
            futures::stream::iter(&jobs)
                .for_each_concurrent(CONCURRENT_JOBS, |job| {
                    let client = client.clone();
                    async move { floor::write(&client, &floor::first_plan(job)).await }
                })
                .await;
        })
    };
    let launchers: BTreeMap<String, Pod> = jobs
        .iter()
        .map(|job| {
            (
                job.metadata.name.clone().unwrap_or_default(),
                floor::launcher(job),
            )
        })
        .collect();
    let mut running_workers: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut running_launchers = BTreeSet::new();
    while let Some(pod) = seen.try_next().await.expect("the floor's watch runs") {
        let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        let (Some(name), Some(job)) = (
            pod.metadata.name.clone(),
            pod.labels().get("training-job-name").cloned(),
        ) else {
            continue;
        };
        if !running {
            continue;
        }
        if name == eto_engine::names::launcher(&job) {
            running_launchers.insert(name);
            if running_launchers.len() == launchers.len() {
                break;
            }
            continue;
        }
        let workers = running_workers.entry(job.clone()).or_default();
        if workers.insert(name) && workers.len() == options.workers as usize {
            let client = client.clone();
            let launcher = launchers[&job].clone();
            tokio::spawn(async move { floor::apply(&client, &launcher).await });
        }
    }
    let elapsed = started.elapsed();
    writer.await.expect("the floor's writes");
    elapsed
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Requests and writes eto-sim received so far; `None` on a real cluster, which does not say.
fn counts(cluster: Option<&SimCluster>) -> Option<(u64, u64)> {
    cluster.map(|cluster| (cluster.requests_received(), cluster.writes_received()))
}

#[tokio::main]
async fn main() {
    let options = options();
    let nodes = (options.jobs * options.workers).div_ceil(8) as usize;
    let (cluster, kubeconfig, target) = match &options.kubeconfig {
        Some(path) => (
            None,
            std::path::PathBuf::from(path),
            format!("the cluster of {path}"),
        ),
        None => {
            let cluster = SimCluster::start(SimConfig::default().gpu_nodes(nodes, 8))
                .await
                .expect("the simulated cluster starts");
            let kubeconfig = std::env::temp_dir()
                .join(format!("eto-many-jobs-{}.kubeconfig", std::process::id()));
            std::fs::write(&kubeconfig, cluster.kubeconfig()).expect("the kubeconfig is written");
            let target = format!("eto-sim ({nodes} nodes of 8 GPUs)");
            (Some(cluster), kubeconfig, target)
        }
    };
    let client = match &cluster {
        Some(cluster) => cluster.client(),
        None => {
            let config = kube::Config::from_custom_kubeconfig(
                kube::config::Kubeconfig::read_from(&kubeconfig).expect("a readable kubeconfig"),
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .expect("a usable kubeconfig");
            kube::Client::try_from(config).expect("a client")
        }
    };
    eto_controller::install_crds(&client)
        .await
        .expect("eto's CRDs install");
    let (mut operator, port) = start_operator(&kubeconfig);
    let pid = operator.id();
    while !ready(port) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let jobs: Api<TrainingJob> = Api::default_namespaced(client.clone());
    let before = counts(cluster.as_ref());
    let mut own_requests = 0_u64;
    let started = Instant::now();
    for index in 0..options.jobs {
        jobs.create(&PostParams::default(), &job(index, options.workers))
            .await
            .expect("the job is created");
        own_requests += 1;
    }
    let own_writes = own_requests;
    let mut peak_seen = 0;
    let converged = loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        peak_seen = peak_seen.max(memory_kib(pid, "VmRSS"));
        let listed = jobs
            .list(&ListParams::default())
            .await
            .expect("the jobs list");
        own_requests += 1;
        let running = listed
            .items
            .iter()
            .filter(|job| job.status.as_ref().and_then(|s| s.phase) == Some(JobPhase::Running))
            .count();
        if running == options.jobs as usize {
            break started.elapsed();
        }
        if started.elapsed() > Duration::from_secs(1_800) {
            panic!(
                "only {running} of {} jobs ran after 30 minutes",
                options.jobs
            );
        }
    };
    let until_running = counts(cluster.as_ref()).zip(before).map(
        |((requests, writes), (requests_before, writes_before))| {
            (
                requests - requests_before - own_requests,
                writes - writes_before - own_writes,
            )
        },
    );

    // Settled: nothing changes any more; the launchers and workers run.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let settled = memory_kib(pid, "VmRSS");
    let (idle_before, idle_cpu) = (counts(cluster.as_ref()), cpu_time(pid));
    tokio::time::sleep(options.idle).await;
    let idle = counts(cluster.as_ref()).zip(idle_before).map(
        |((requests, writes), (requests_before, writes_before))| {
            (requests - requests_before, writes - writes_before)
        },
    );
    let idle_cpu = cpu_time(pid).saturating_sub(idle_cpu);
    let peak = memory_kib(pid, "VmHWM").max(peak_seen);
    let _ = operator.kill();
    let _ = operator.wait();
    let floor = match cluster {
        Some(cluster) => {
            let _ = std::fs::remove_file(&kubeconfig);
            drop(cluster);
            options.floor.then_some(floor(&options, nodes).await)
        }
        None => {
            // A real cluster keeps what the run created otherwise.
            for index in 0..options.jobs {
                let _ = jobs
                    .delete(&format!("job-{index}"), &DeleteParams::background())
                    .await;
            }
            None
        }
    };

    let jobs_f = f64::from(options.jobs);
    let per_job = |n: u64| n as f64 / jobs_f;
    println!(
        "{} TrainingJobs of {} workers against {target}:",
        options.jobs, options.workers
    );
    println!(
        "  all Running after:               {:>9.1} s",
        converged.as_secs_f64()
    );
    if let Some(floor) = floor {
        println!(
            "  floor (a plain client):          {:>9.1} s (eto / floor: {:.2})",
            floor.as_secs_f64(),
            converged.as_secs_f64() / floor.as_secs_f64()
        );
    }
    println!("  operator memory, peak:           {:>9.1} MiB", mib(peak));
    println!(
        "  operator memory, settled:        {:>9.1} MiB",
        mib(settled)
    );
    match until_running {
        Some((requests, writes)) => println!(
            "  requests per job until Running:  {:>9.1} ({:.1} writes)",
            per_job(requests),
            per_job(writes)
        ),
        None => println!("  requests per job until Running:  counted by eto-sim only"),
    }
    let cpu = idle_cpu.as_secs_f64() / options.idle.as_secs_f64() * 100.0;
    match idle {
        Some((requests, writes)) => println!(
            "  idle {} s: {requests} requests, {writes} writes, {cpu:.2}% of a core",
            options.idle.as_secs()
        ),
        None => println!("  idle {} s: {cpu:.2}% of a core", options.idle.as_secs()),
    }
}
