//! `eto-sim`: run the simulated cluster, or drive a running one.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use eto_sim::Verb;
use eto_sim::control::{FaultRequest, TerminateRequest};
use eto_sim::nodes::Taint;
use eto_sim::nodes::warnings::Warning;
use eto_sim::{KubeletConfig, NodeSpec, SimCluster, SimConfig};

/// A simulated Kubernetes cluster with GPU nodes, for eto's tests and demos.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the cluster until interrupted, writing a kubeconfig that points at it.
    Serve(ServeArgs),
    /// Add a node (what cluster-autoscaler does).
    AddNode(AddNodeArgs),
    /// Remove a node at once.
    RemoveNode {
        /// Node name.
        name: String,
        #[command(flatten)]
        target: Target,
    },
    /// Spot-reclaim a node: taint it and mark its pods, then after the grace period fail its
    /// pods (exit 137) and delete it. With --warning-seconds, the cloud announces it first,
    /// that long ahead: with Karpenter's taint karpenter.sh/disrupted, or the --taint or
    /// --condition given.
    ReclaimNode {
        /// Node name.
        name: String,
        /// Seconds between the notice and the node's end.
        #[arg(long, default_value_t = 30)]
        grace_seconds: u64,
        /// Seconds between the announcement and the reclaim (0: no announcement).
        #[arg(long, default_value_t = 0)]
        warning_seconds: u64,
        /// The key of the taint that announces it.
        #[arg(long, conflicts_with = "condition", requires = "warning_seconds")]
        taint: Option<String>,
        /// The type of the node condition that announces it (status True).
        #[arg(long, requires = "warning_seconds")]
        condition: Option<String>,
        /// The condition's message, for example when the node goes (RFC 3339).
        #[arg(long, requires = "condition")]
        message: Option<String>,
        #[command(flatten)]
        target: Target,
    },
    /// Announce that a node goes away, as clouds do before a spot reclaim: a taint
    /// (--taint karpenter.sh/disrupted) or a node condition (--condition InstanceExpired).
    WarnNode(WarnNodeArgs),
    /// Withdraw such an announcement.
    WithdrawNodeWarning(WarnNodeArgs),
    /// End a pod's containers with an exit code.
    FailPod(PodArgs),
    /// End a pod's containers successfully.
    SucceedPod {
        /// Pod name.
        name: String,
        /// Namespace.
        #[arg(short, long, default_value = "default")]
        namespace: String,
        #[command(flatten)]
        target: Target,
    },
    /// Evict a pod (Failed, reason Evicted).
    EvictPod {
        /// Pod name.
        name: String,
        /// Namespace.
        #[arg(short, long, default_value = "default")]
        namespace: String,
        #[command(flatten)]
        target: Target,
    },
    /// Make the next requests fail or slow down.
    InjectFault(FaultArgs),
    /// Remove every injected fault.
    ClearFaults {
        #[command(flatten)]
        target: Target,
    },
    /// End every open watch.
    DropWatches {
        #[command(flatten)]
        target: Target,
    },
    /// Restart the API server, keeping its state.
    Restart {
        /// Milliseconds during which connections are refused.
        #[arg(long, default_value_t = 500)]
        downtime_ms: u64,
        #[command(flatten)]
        target: Target,
    },
}

#[derive(Args)]
struct ServeArgs {
    /// Port on 127.0.0.1; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Where to write the kubeconfig.
    #[arg(long, default_value = "eto-sim.kubeconfig")]
    kubeconfig: PathBuf,
    /// Number of GPU nodes.
    #[arg(long, default_value_t = 4)]
    nodes: usize,
    /// GPUs per node.
    #[arg(long, default_value_t = 8)]
    gpus_per_node: u32,
    /// Extra namespaces to create.
    #[arg(long = "namespace")]
    namespaces: Vec<String>,
    /// Milliseconds from binding to Running.
    #[arg(long, default_value_t = 500)]
    start_delay_ms: u64,
    /// Milliseconds from a deletion request to the pod's removal (capped by its grace period).
    #[arg(long, default_value_t = 500)]
    termination_delay_ms: u64,
}

#[derive(Args)]
struct AddNodeArgs {
    /// Node name.
    #[arg(long)]
    name: String,
    /// GPUs.
    #[arg(long, default_value_t = 8)]
    gpus: u32,
    /// Allocatable CPU.
    #[arg(long, default_value = "32")]
    cpu: String,
    /// Allocatable memory.
    #[arg(long, default_value = "256Gi")]
    memory: String,
    /// Labels, `key=value`.
    #[arg(long = "label")]
    labels: Vec<String>,
    /// Taints, `key=value:Effect`.
    #[arg(long = "taint")]
    taints: Vec<String>,
    #[command(flatten)]
    target: Target,
}

#[derive(Args)]
struct WarnNodeArgs {
    /// Node name.
    name: String,
    /// The key of the taint that says so.
    #[arg(
        long,
        conflicts_with = "condition",
        required_unless_present = "condition"
    )]
    taint: Option<String>,
    /// The type of the node condition that says so (status True).
    #[arg(long)]
    condition: Option<String>,
    /// The condition's message, for example when the node goes (RFC 3339).
    #[arg(long, requires = "condition")]
    message: Option<String>,
    #[command(flatten)]
    target: Target,
}

impl WarnNodeArgs {
    /// Puts the warning on (`POST`) or takes it off (`DELETE`).
    async fn send(self, method: http::Method) -> Result<(), CliError> {
        let warning = Warning {
            taint: self.taint,
            condition: self.condition,
            message: self.message,
        };
        let body = serde_json::to_vec(&warning).unwrap_or_default();
        control(
            &self.target,
            method,
            &format!("nodes/{}/warning", self.name),
            body,
        )
        .await
    }
}

#[derive(Args)]
struct PodArgs {
    /// Pod name.
    name: String,
    /// Namespace.
    #[arg(short, long, default_value = "default")]
    namespace: String,
    /// Exit code of the containers.
    #[arg(long, default_value_t = 1)]
    exit_code: i32,
    /// Container termination reason.
    #[arg(long, default_value = "Error")]
    reason: String,
    /// The containers keep failing: those the restart policy restarts wait in
    /// CrashLoopBackOff.
    #[arg(long)]
    crash_loop: bool,
    #[command(flatten)]
    target: Target,
}

#[derive(Args)]
struct FaultArgs {
    /// Answer with this HTTP code (500, 429, 503, ...).
    #[arg(long, conflicts_with = "delay_ms")]
    fail_with: Option<u16>,
    /// Delay requests by this many milliseconds.
    #[arg(long)]
    delay_ms: Option<u64>,
    /// How many requests to affect.
    #[arg(long, default_value_t = 1)]
    count: u32,
    /// Only requests with this method.
    #[arg(long)]
    method: Option<String>,
    /// Only requests whose path contains this.
    #[arg(long)]
    path_contains: Option<String>,
    /// Only requests with this verb: get, list, watch, create, update, patch, delete or
    /// deletecollection.
    #[arg(long)]
    verb: Option<Verb>,
    /// Only requests that change state (POST, PUT, PATCH, DELETE).
    #[arg(long)]
    writes_only: bool,
    /// Let this many matching requests through before the fault acts.
    #[arg(long, default_value_t = 0)]
    skip: u32,
    #[command(flatten)]
    target: Target,
}

/// Which running cluster a control command talks to.
#[derive(Args)]
struct Target {
    /// The cluster's URL; defaults to the server of the kubeconfig's current context.
    #[arg(long, global = true)]
    server: Option<String>,
    /// The kubeconfig to read the server from (defaults: `$KUBECONFIG`, `~/.kube/config`).
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error("{0}")]
    Start(#[from] eto_sim::StartError),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot find the cluster: {0}")]
    Kubeconfig(String),
    #[error("invalid {what} {value:?}: expected {expected}")]
    Argument {
        what: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error("request failed: {0}")]
    Request(#[from] kube::Error),
    #[error("cannot wait for a signal: {0}")]
    Signal(std::io::Error),
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    match run(Cli::parse().command).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("eto-sim: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(command: Command) -> Result<(), CliError> {
    match command {
        Command::Serve(args) => serve(args).await,
        Command::AddNode(args) => {
            let mut node = NodeSpec::gpu(args.name, args.gpus);
            node.cpu = args.cpu;
            node.memory = args.memory;
            for label in &args.labels {
                let (key, value) = label.split_once('=').ok_or_else(|| CliError::Argument {
                    what: "label",
                    value: label.clone(),
                    expected: "key=value",
                })?;
                node.labels.insert(key.into(), value.into());
            }
            for taint in &args.taints {
                node.taints.push(parse_taint(taint)?);
            }
            let body = serde_json::to_vec(&node).unwrap_or_default();
            control(&args.target, http::Method::POST, "nodes", body).await
        }
        Command::RemoveNode { name, target } => {
            control(
                &target,
                http::Method::DELETE,
                &format!("nodes/{name}"),
                Vec::new(),
            )
            .await
        }
        Command::ReclaimNode {
            name,
            grace_seconds,
            warning_seconds,
            taint,
            condition,
            message,
            target,
        } => {
            // No body: the announcement is Karpenter's taint.
            let body = if taint.is_some() || condition.is_some() {
                serde_json::to_vec(&Warning {
                    taint,
                    condition,
                    message,
                })
                .unwrap_or_default()
            } else {
                Vec::new()
            };
            control(
                &target,
                http::Method::POST,
                &format!(
                    "nodes/{name}/reclaim?graceSeconds={grace_seconds}&warningSeconds={warning_seconds}"
                ),
                body,
            )
            .await
        }
        Command::WarnNode(args) => args.send(http::Method::POST).await,
        Command::WithdrawNodeWarning(args) => args.send(http::Method::DELETE).await,
        Command::FailPod(args) => {
            let request = TerminateRequest {
                exit_code: args.exit_code,
                reason: Some(args.reason),
                pod_reason: None,
                message: None,
                final_: false,
                crash_loop: args.crash_loop,
            };
            terminate(&args.target, &args.namespace, &args.name, &request).await
        }
        Command::SucceedPod {
            name,
            namespace,
            target,
        } => {
            let request = TerminateRequest {
                exit_code: 0,
                reason: None,
                pod_reason: None,
                message: None,
                final_: false,
                crash_loop: false,
            };
            terminate(&target, &namespace, &name, &request).await
        }
        Command::EvictPod {
            name,
            namespace,
            target,
        } => {
            let request = TerminateRequest {
                exit_code: 137,
                reason: None,
                pod_reason: Some("Evicted".into()),
                message: Some("The node was low on resource: memory.".into()),
                final_: true,
                crash_loop: false,
            };
            terminate(&target, &namespace, &name, &request).await
        }
        Command::InjectFault(args) => {
            let request = FaultRequest {
                fail_with: args.fail_with,
                delay_millis: args.delay_ms,
                count: args.count,
                method: args.method,
                path_contains: args.path_contains,
                verb: args.verb,
                writes_only: args.writes_only,
                skip: args.skip,
            };
            control(
                &args.target,
                http::Method::POST,
                "faults",
                serde_json::to_vec(&request).unwrap_or_default(),
            )
            .await
        }
        Command::ClearFaults { target } => {
            control(&target, http::Method::DELETE, "faults", Vec::new()).await
        }
        Command::DropWatches { target } => {
            control(&target, http::Method::POST, "watches/drop", Vec::new()).await
        }
        Command::Restart {
            downtime_ms,
            target,
        } => {
            control(
                &target,
                http::Method::POST,
                &format!("restart?downtimeMillis={downtime_ms}"),
                Vec::new(),
            )
            .await
        }
    }
}

fn parse_taint(text: &str) -> Result<Taint, CliError> {
    let error = || CliError::Argument {
        what: "taint",
        value: text.into(),
        expected: "key=value:Effect",
    };
    let (key_value, effect) = text.rsplit_once(':').ok_or_else(error)?;
    let (key, value) = key_value.split_once('=').unwrap_or((key_value, ""));
    Ok(Taint {
        key: key.into(),
        value: value.into(),
        effect: effect.into(),
    })
}

async fn serve(args: ServeArgs) -> Result<(), CliError> {
    let config = SimConfig {
        namespaces: args.namespaces,
        kubelet: KubeletConfig {
            start_delay: Duration::from_millis(args.start_delay_ms),
            termination_delay: Duration::from_millis(args.termination_delay_ms),
            orphan_gc_delay: Duration::ZERO,
        },
        ..SimConfig::default()
    }
    .gpu_nodes(args.nodes, args.gpus_per_node);
    let cluster = SimCluster::start_on(
        config,
        std::net::SocketAddr::from(([127, 0, 0, 1], args.port)),
    )
    .await?;
    std::fs::write(&args.kubeconfig, cluster.kubeconfig()).map_err(|source| CliError::Write {
        path: args.kubeconfig.clone(),
        source,
    })?;
    println!(
        "eto-sim: serving {} with {} GPU nodes; kubeconfig: {}",
        cluster.url(),
        args.nodes,
        args.kubeconfig.display()
    );
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(CliError::Signal)?;
    tokio::select! {
        result = tokio::signal::ctrl_c() => result.map_err(CliError::Signal)?,
        _ = terminate.recv() => {}
    }
    Ok(())
}

async fn terminate(
    target: &Target,
    namespace: &str,
    name: &str,
    request: &TerminateRequest,
) -> Result<(), CliError> {
    let path = format!("namespaces/{namespace}/pods/{name}/terminate");
    control(
        target,
        http::Method::POST,
        &path,
        serde_json::to_vec(request).unwrap_or_default(),
    )
    .await
}

async fn control(
    target: &Target,
    method: http::Method,
    path: &str,
    body: Vec<u8>,
) -> Result<(), CliError> {
    let server = server_url(target)?;
    let uri: http::Uri = server
        .parse()
        .map_err(|_| CliError::Kubeconfig(format!("invalid server URL {server:?}")))?;
    let client = kube::Client::try_from(kube::Config::new(uri))?;
    let request = http::Request::builder()
        .method(method)
        .uri(format!("/sim/v1/{path}"))
        .header("Content-Type", "application/json")
        .body(body)
        .map_err(|e| CliError::Kubeconfig(e.to_string()))?;
    let answer = client.request_text(request).await?;
    let message = serde_json::from_str::<serde_json::Value>(&answer)
        .ok()
        .and_then(|v| v["message"].as_str().map(String::from))
        .unwrap_or(answer);
    println!("{message}");
    Ok(())
}

fn server_url(target: &Target) -> Result<String, CliError> {
    if let Some(server) = &target.server {
        return Ok(server.clone());
    }
    let path = target
        .kubeconfig
        .clone()
        .or_else(|| std::env::var_os("KUBECONFIG").map(PathBuf::from))
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".kube/config")))
        .ok_or_else(|| CliError::Kubeconfig("no --server, --kubeconfig or KUBECONFIG".into()))?;
    let kubeconfig = kube::config::Kubeconfig::read_from(&path)
        .map_err(|e| CliError::Kubeconfig(format!("{}: {e}", path.display())))?;
    let context_name = kubeconfig.current_context.clone().unwrap_or_default();
    let clusters: BTreeMap<String, String> = kubeconfig
        .clusters
        .iter()
        .filter_map(|c| Some((c.name.clone(), c.cluster.as_ref()?.server.clone()?)))
        .collect();
    kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.as_ref())
        .and_then(|c| clusters.get(&c.cluster).cloned())
        .ok_or_else(|| {
            CliError::Kubeconfig(format!(
                "{}: no server for context {context_name:?}",
                path.display()
            ))
        })
}
