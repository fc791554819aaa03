//! `eto-operator`: the elastic training operator.

mod endpoints;

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::builder::TypedValueParser;
use clap::{Args, Parser, Subcommand, ValueEnum};
use eto_controller::node_warnings::{InvalidSignal, Rules as NodeWarningRules, Signal};
use eto_controller::{COSCHEDULING_DEFAULT_SCHEDULER, GangScheduler, Kind, Metrics, Settings};

/// eto, the elastic training operator for Kubernetes.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print every CustomResourceDefinition eto serves, as one multi-document YAML stream.
    ///
    /// Install them with `eto-operator crd | kubectl apply --server-side -f -`.
    Crd,
    /// Run the operator against the cluster of the current kubeconfig context (or the one it
    /// runs in).
    Run(Box<RunArgs>),
}

#[derive(Args)]
struct RunArgs {
    /// Only manage jobs in these namespaces, comma-separated or repeated (default: all
    /// namespaces). Each namespace gets its own watches.
    #[arg(long, value_delimiter = ',')]
    namespace: Vec<String>,
    /// Where to serve /metrics, /healthz and /readyz.
    #[arg(long, default_value = "0.0.0.0:8080")]
    metrics_address: SocketAddr,
    /// Jobs reconciled at the same time.
    #[arg(long, default_value_t = 16)]
    concurrency: u16,
    /// The kinds of job to serve, comma-separated [default: TrainingJob,MPIJob]. Serve only
    /// TrainingJob to run beside an mpi-operator that keeps MPIJob; add PyTorchJob to run
    /// PyTorchJobs in training-operator v1's place. Every kind served needs its CRD installed.
    #[arg(
        long,
        value_delimiter = ',',
        ignore_case = true,
        value_parser = kind_parser()
    )]
    kinds: Vec<Kind>,
    /// Compete for a Lease with the other replicas and reconcile only while holding it. Turn
    /// off only when a single replica runs.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    leader_elect: bool,
    /// Name of the Lease replicas compete for.
    #[arg(long, default_value = "eto-operator")]
    lease_name: String,
    /// Namespace of the Lease (default: the operator's own, from POD_NAMESPACE, else
    /// `default`).
    #[arg(long)]
    lease_namespace: Option<String>,
    /// Seconds a Lease not renewed stays its holder's; a standby takes over after it when the
    /// leader dies.
    #[arg(long, default_value_t = 15)]
    lease_duration: u64,
    /// Seconds the leader keeps reconciling without seeing its renewal; shorter than the
    /// lease duration by more than one second.
    #[arg(long, default_value_t = 9)]
    renew_deadline: u64,
    /// Log format: `text` for people, `json` for log collectors.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// The gang scheduler every job gets a PodGroup of, holding its minimum of workers and its
    /// launcher together: `none`, `volcano` (scheduling.volcano.sh/v1beta1) or
    /// `scheduler-plugins` (the coscheduling plugin, scheduling.x-k8s.io/v1alpha1). Its
    /// PodGroup CRD must be installed; without it jobs wait and say so.
    #[arg(long, value_enum, default_value_t = GangSchedulerArg::None)]
    gang_scheduler: GangSchedulerArg,
    /// The `schedulerName` of the scheduler-plugins scheduler that runs the coscheduling
    /// plugin (with `--gang-scheduler=scheduler-plugins`).
    #[arg(long, default_value = COSCHEDULING_DEFAULT_SCHEDULER)]
    gang_scheduler_name: String,
    /// The advance warnings of a node loss eto acts on (workers on the node are told at once,
    /// leave discovery and are replaced elsewhere; a job left below its minimum suspends at
    /// once), comma-separated: `taint:<key>` or `condition:<type>`. The default lists
    /// Karpenter's, the AWS Node Termination Handler's, GKE's and ACK's (InstanceExpired).
    /// `none` watches no Nodes.
    #[arg(long, value_delimiter = ',', default_values_t = eto_controller::node_warnings::DEFAULT_SIGNALS.iter().map(|s| s.to_string()).collect::<Vec<_>>())]
    node_warnings: Vec<String>,
    /// How long a node that announced it goes away, without saying when, is taken to last.
    #[arg(long, default_value_t = 120)]
    node_warning_lead_seconds: u64,
}

/// A gang scheduler `--gang-scheduler` names.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum GangSchedulerArg {
    /// No gang scheduling: pods go to the scheduler their template names.
    None,
    /// Volcano.
    Volcano,
    /// The scheduler-plugins coscheduling plugin.
    SchedulerPlugins,
}

impl RunArgs {
    /// The node warnings the flags select; `None` for `none`.
    ///
    /// # Errors
    /// A warning that is neither `taint:<key>` nor `condition:<type>`.
    fn node_warnings(&self) -> Result<Option<NodeWarningRules>, InvalidSignal> {
        if self.node_warnings.iter().any(|signal| signal == "none") {
            return Ok(None);
        }
        let signals = self
            .node_warnings
            .iter()
            .map(|signal| signal.parse::<Signal>())
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(NodeWarningRules {
            signals,
            lead: Duration::from_secs(self.node_warning_lead_seconds),
        }))
    }

    /// The gang scheduler the flags select.
    fn gang_scheduler(&self) -> Option<GangScheduler> {
        match self.gang_scheduler {
            GangSchedulerArg::None => None,
            GangSchedulerArg::Volcano => Some(GangScheduler::Volcano),
            GangSchedulerArg::SchedulerPlugins => Some(GangScheduler::Coscheduling {
                scheduler_name: self.gang_scheduler_name.clone(),
            }),
        }
    }
}

/// How the operator writes its logs.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    /// One line of text per event; colours only on a terminal.
    Text,
    /// One JSON object per line, with the reconcile's kind, namespace and job as fields.
    Json,
}

/// `--kinds`' values: the name of a kind of [`Kind::ALL`], as in `kind:`, in any case.
fn kind_parser() -> impl TypedValueParser<Value = Kind> {
    clap::builder::PossibleValuesParser::new(Kind::ALL.map(|kind| kind.vocabulary().name)).try_map(
        |named: String| {
            Kind::ALL
                .into_iter()
                .find(|kind| kind.vocabulary().name.eq_ignore_ascii_case(&named))
                .ok_or_else(|| format!("eto serves no kind named {named}"))
        },
    )
}

/// How long blocking tasks may delay the exit once the operator has stopped.
const RUNTIME_SHUTDOWN: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error("cannot render the CRDs: {0}")]
    Render(#[from] serde_saphyr::SerializeError),
    #[error("cannot write: {0}")]
    Io(#[from] std::io::Error),
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("cannot listen on {address}: {source}")]
    Listen {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot reach the cluster: {0}")]
    Client(#[from] kube::Error),
    #[error("{0}")]
    Run(#[from] eto_controller::RunError),
    #[error("--node-warnings: {0}")]
    NodeWarnings(#[from] InvalidSignal),
}

fn init_logs(format: LogFormat) {
    use tracing_subscriber::prelude::*;
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let logs = match format {
        // Colours only for a person at a terminal; log collectors get plain text.
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_ansi(std::io::stdout().is_terminal())
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .boxed(),
    };
    tracing_subscriber::registry()
        .with(
            logs.with_filter(filter)
                .with_filter(eto_controller::pod_proxy::quiet_answers()),
        )
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logs(match &cli.command {
        Command::Run(args) => args.log_format,
        Command::Crd => LogFormat::Text,
    });
    let result = match cli.command {
        Command::Crd => print_crds(),
        Command::Run(args) => {
            tokio::runtime::Runtime::new()
                .map_err(CliError::Runtime)
                .and_then(|runtime| {
                    let result = runtime.block_on(run(*args));
                    // A blocking task still running (a DNS lookup, say) must not delay the exit.
                    runtime.shutdown_timeout(RUNTIME_SHUTDOWN);
                    result
                })
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("eto-operator: {error}");
            ExitCode::FAILURE
        }
    }
}

fn print_crds() -> Result<(), CliError> {
    let yaml = eto_api::crds_yaml()?;
    std::io::stdout().lock().write_all(yaml.as_bytes())?;
    Ok(())
}

async fn run(args: RunArgs) -> Result<(), CliError> {
    let config = kube::Config::infer()
        .await
        .map_err(kube::Error::InferConfig)?;
    let client = kube::Client::try_from(config.clone())?;
    let metrics = Arc::new(Metrics::default());
    let listener = endpoints::bind(args.metrics_address)
        .await
        .map_err(|source| CliError::Listen {
            address: args.metrics_address,
            source,
        })?;
    tokio::spawn(endpoints::serve(listener, Arc::clone(&metrics)));
    let gang = args.gang_scheduler();
    let node_warnings = args.node_warnings()?;
    let settings = Settings {
        scope: eto_controller::Scope::of(args.namespace),
        concurrency: args.concurrency,
        kinds: unique_kinds(&args.kinds),
        gang,
        instance: std::env::var("POD_NAME")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok()),
        pod_proxy: Some(config),
        node_warnings,
        ..Settings::default()
    };
    let clock: eto_controller::Clock = Arc::new(jiff::Timestamp::now);
    if !args.leader_elect {
        eto_controller::run(client, settings, metrics, clock, shutdown_signal()).await?;
        return Ok(());
    }
    let election = eto_controller::Election {
        lease_duration: Duration::from_secs(args.lease_duration),
        renew_deadline: Duration::from_secs(args.renew_deadline),
        ..eto_controller::Election::new(
            args.lease_name,
            args.lease_namespace
                .or_else(|| std::env::var("POD_NAMESPACE").ok())
                .unwrap_or_else(|| "default".into()),
            identity(),
        )
    };
    eto_controller::run_elected(
        client,
        settings,
        election,
        metrics,
        clock,
        shutdown_signal(),
    )
    .await?;
    Ok(())
}

/// This process's identity among the replicas: the pod name (POD_NAME, from the downward
/// API), else the host name with a random suffix, so that two processes on one host differ.
fn identity() -> String {
    if let Ok(pod) = std::env::var("POD_NAME") {
        return pod;
    }
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|host| host.trim().to_string())
        .filter(|host| !host.is_empty())
        .unwrap_or_else(|| "eto-operator".into());
    // A randomly keyed hasher is the standard library's source of randomness.
    let suffix = std::hash::BuildHasher::hash_one(
        &std::collections::hash_map::RandomState::new(),
        std::process::id(),
    );
    format!("{host}-{:08x}", suffix & 0xffff_ffff)
}

/// The kinds named, each once, in the order first named; the kinds served by default (see
/// `Vocabulary::served_by_default`) when none is named.
fn unique_kinds(named: &[Kind]) -> Vec<Kind> {
    if named.is_empty() {
        return Kind::ALL
            .into_iter()
            .filter(|kind| kind.vocabulary().served_by_default)
            .collect();
    }
    let mut kinds: Vec<Kind> = Vec::new();
    for &kind in named {
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    kinds
}

/// Resolves on SIGTERM (how Kubernetes stops a pod) or Ctrl-C. The controller then stops
/// within [`eto_controller::SHUTDOWN_GRACE`].
async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kinds `eto-operator run` serves for `args` (after `run`).
    fn kinds_of(args: &[&str]) -> Result<Vec<Kind>, clap::Error> {
        let cli = Cli::try_parse_from(["eto-operator", "run"].iter().chain(args))?;
        match cli.command {
            Command::Run(args) => Ok(unique_kinds(&args.kinds)),
            Command::Crd => unreachable!("parsed `run`"),
        }
    }

    #[test]
    fn kinds_are_named_as_in_kind_in_any_case_each_served_once() {
        assert_eq!(kinds_of(&[]).unwrap(), [Kind::TRAINING_JOB, Kind::MPI_JOB]);
        let defaults: Vec<&str> = unique_kinds(&[])
            .iter()
            .map(|kind| kind.vocabulary().name)
            .collect();
        let command = <Cli as clap::CommandFactory>::command();
        let help = command
            .find_subcommand("run")
            .into_iter()
            .flat_map(|run| run.get_arguments())
            .find(|argument| argument.get_id() == "kinds")
            .and_then(|argument| argument.get_help())
            .map(ToString::to_string)
            .unwrap_or_default();
        assert!(
            help.contains(&format!("[default: {}]", defaults.join(","))),
            "--kinds' help names the kinds served by default: {help}"
        );
        assert_eq!(
            kinds_of(&["--kinds", "pytorchjob,MPIJob,PyTorchJob"]).unwrap(),
            [Kind::PYTORCH_JOB, Kind::MPI_JOB]
        );
        for kind in Kind::ALL {
            assert_eq!(
                kinds_of(&["--kinds", kind.vocabulary().name]).unwrap(),
                [kind]
            );
        }
        let error = kinds_of(&["--kinds", "TFJob"]).unwrap_err().to_string();
        assert!(
            Kind::ALL
                .iter()
                .all(|kind| error.contains(kind.vocabulary().name)),
            "the kinds served are listed: {error}"
        );
    }
}
