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

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use eto_api::TrainingJob;
use eto_api::training_job::JobPhase;
use eto_sim::{SimCluster, SimConfig};
use eto_tests::env::job_yaml;
use kube::api::{Api, ListParams, PostParams};

struct Options {
    jobs: u32,
    workers: u32,
    idle: Duration,
}

fn options() -> Options {
    let mut options = Options {
        jobs: 1_000,
        workers: 8,
        idle: Duration::from_secs(60),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = || args.next().and_then(|n| n.parse::<u32>().ok());
        match arg.as_str() {
            "--jobs" => options.jobs = number().unwrap_or(1_000),
            "--workers" => options.workers = number().unwrap_or(8),
            "--idle-seconds" => options.idle = Duration::from_secs(number().map_or(60, u64::from)),
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

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

#[tokio::main]
async fn main() {
    let options = options();
    let nodes = (options.jobs * options.workers).div_ceil(8) as usize;
    let cluster = SimCluster::start(SimConfig::default().gpu_nodes(nodes, 8))
        .await
        .expect("the simulated cluster starts");
    let client = cluster.client();
    eto_controller::install_crds(&client)
        .await
        .expect("eto's CRDs install");
    let kubeconfig =
        std::env::temp_dir().join(format!("eto-many-jobs-{}.kubeconfig", std::process::id()));
    std::fs::write(&kubeconfig, cluster.kubeconfig()).expect("the kubeconfig is written");
    let (mut operator, port) = start_operator(&kubeconfig);
    let pid = operator.id();
    while !ready(port) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let jobs: Api<TrainingJob> = Api::default_namespaced(client.clone());
    let (requests_before, writes_before) = (cluster.requests_received(), cluster.writes_received());
    let mut own_requests = 0_u64;
    let started = Instant::now();
    for index in 0..options.jobs {
        let yaml = job_yaml(
            &format!("job-{index}"),
            options.workers,
            options.workers,
            "",
            "Never",
        );
        let job: TrainingJob = serde_saphyr::from_str(&yaml).expect("a valid job");
        jobs.create(&PostParams::default(), &job)
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
    let requests = cluster.requests_received() - requests_before - own_requests;
    let writes = cluster.writes_received() - writes_before - own_writes;

    // Settled: nothing changes any more; the launchers and workers run.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let settled = memory_kib(pid, "VmRSS");
    let (idle_requests, idle_writes, idle_cpu) = (
        cluster.requests_received(),
        cluster.writes_received(),
        cpu_time(pid),
    );
    tokio::time::sleep(options.idle).await;
    let idle_requests = cluster.requests_received() - idle_requests;
    let idle_writes = cluster.writes_received() - idle_writes;
    let idle_cpu = cpu_time(pid).saturating_sub(idle_cpu);
    let peak = memory_kib(pid, "VmHWM").max(peak_seen);
    let _ = operator.kill();
    let _ = operator.wait();
    let _ = std::fs::remove_file(&kubeconfig);

    let jobs_f = f64::from(options.jobs);
    println!(
        "{} TrainingJobs of {} workers against eto-sim ({} nodes of 8 GPUs):",
        options.jobs, options.workers, nodes
    );
    println!(
        "  all Running after:               {:>9.1} s",
        converged.as_secs_f64()
    );
    println!("  operator memory, peak:           {:>9.1} MiB", mib(peak));
    println!(
        "  operator memory, settled:        {:>9.1} MiB",
        mib(settled)
    );
    println!(
        "  requests per job until Running:  {:>9.1} ({:.1} writes)",
        requests as f64 / jobs_f,
        writes as f64 / jobs_f
    );
    println!(
        "  idle {} s: {idle_requests} requests, {idle_writes} writes, {:.2}% of a core",
        options.idle.as_secs(),
        idle_cpu.as_secs_f64() / options.idle.as_secs_f64() * 100.0
    );
}
