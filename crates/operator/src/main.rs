//! `eto-operator`: the elastic training operator.

mod endpoints;

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use eto_controller::{Kind, Metrics, Settings};

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
    Run(RunArgs),
}

#[derive(Args)]
struct RunArgs {
    /// Only manage jobs in this namespace (default: all namespaces).
    #[arg(long)]
    namespace: Option<String>,
    /// Where to serve /metrics, /healthz and /readyz.
    #[arg(long, default_value = "0.0.0.0:8080")]
    metrics_address: SocketAddr,
    /// Jobs reconciled at the same time.
    #[arg(long, default_value_t = 16)]
    concurrency: u16,
    /// The kinds of job to serve, comma-separated. Serve only TrainingJob to run beside an
    /// mpi-operator that keeps MPIJob; every kind served needs its CRD installed.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "TrainingJob,MPIJob",
        ignore_case = true
    )]
    kinds: Vec<ServedKind>,
}

/// A kind of job `--kinds` names.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ServedKind {
    /// `TrainingJob` (kai.alibabacloud.com/v1alpha1) with its ScaleIn and ScaleOut requests.
    #[value(name = "TrainingJob")]
    TrainingJob,
    /// `MPIJob` (kubeflow.org/v2beta1).
    #[value(name = "MPIJob")]
    MpiJob,
}

impl From<ServedKind> for Kind {
    fn from(kind: ServedKind) -> Self {
        match kind {
            ServedKind::TrainingJob => Self::TrainingJob,
            ServedKind::MpiJob => Self::MpiJob,
        }
    }
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
}

fn main() -> ExitCode {
    // Colours only for a person at a terminal; log collectors get plain text.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_ansi(std::io::stdout().is_terminal())
        .init();
    let result = match Cli::parse().command {
        Command::Crd => print_crds(),
        Command::Run(args) => {
            tokio::runtime::Runtime::new()
                .map_err(CliError::Runtime)
                .and_then(|runtime| {
                    let result = runtime.block_on(run(args));
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
    let client = kube::Client::try_default().await?;
    let metrics = Arc::new(Metrics::default());
    let listener = endpoints::bind(args.metrics_address)
        .await
        .map_err(|source| CliError::Listen {
            address: args.metrics_address,
            source,
        })?;
    tokio::spawn(endpoints::serve(listener, Arc::clone(&metrics)));
    let settings = Settings {
        namespace: args.namespace,
        concurrency: args.concurrency,
        kinds: unique_kinds(&args.kinds),
        instance: std::env::var("POD_NAME")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok()),
        ..Settings::default()
    };
    eto_controller::run(
        client,
        settings,
        metrics,
        Arc::new(jiff::Timestamp::now),
        shutdown_signal(),
    )
    .await?;
    Ok(())
}

/// The kinds named, each once, in the order first named.
fn unique_kinds(named: &[ServedKind]) -> Vec<Kind> {
    let mut kinds: Vec<Kind> = Vec::new();
    for kind in named.iter().map(|&kind| Kind::from(kind)) {
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
