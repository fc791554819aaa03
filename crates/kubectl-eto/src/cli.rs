//! The command line: what `kubectl eto` accepts, with its help text.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::output::Format;

/// eto's jobs from the command line: TrainingJobs, MPIJobs and PyTorchJobs, their workers and
/// hosts, GPUs per node, and scale, suspend and resume.
#[derive(Parser, Debug)]
#[command(
    name = "kubectl eto",
    bin_name = "kubectl eto",
    version,
    after_help = "Examples:
  kubectl eto get                         # the jobs of the current namespace
  kubectl eto get -A                      # in every namespace
  kubectl eto get elastic-mnist           # one job: workers, launcher, conditions, events
  kubectl eto get mpijob/pi -o yaml       # an MPIJob named pi, as YAML
  kubectl eto hosts elastic-mnist         # what its discovery script prints now
  kubectl eto top node                    # GPUs per node and the jobs on them
  kubectl eto scale elastic-mnist --workers 8
  kubectl eto suspend elastic-mnist       # checkpoint, then free the GPUs
  kubectl eto resume elastic-mnist"
)]
pub struct Cli {
    /// Where to connect.
    #[command(flatten)]
    pub connection: Connection,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// kubectl's connection flags.
#[derive(Args, Debug, Clone, Default)]
pub struct Connection {
    /// The namespace (default: the context's, else `default`).
    #[arg(short, long, global = true)]
    pub namespace: Option<String>,
    /// Path to the kubeconfig file (default: `KUBECONFIG`, else `~/.kube/config`).
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: the current one).
    #[arg(long, global = true)]
    pub context: Option<String>,
}

/// A `kubectl eto` command.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// List the jobs, or show one with its workers, launcher, conditions and recent events.
    ///
    /// JOB is a name, or `trainingjob/NAME` (`tj/`), `mpijob/NAME` (`mpij/`) or
    /// `pytorchjob/NAME` when jobs of several kinds have that name.
    Get {
        /// The job to show; all jobs when omitted.
        job: Option<String>,
        /// Jobs of every namespace (lists only).
        #[arg(short = 'A', long)]
        all_namespaces: bool,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t)]
        output: Format,
    },
    /// Print what the launcher's discovery script prints for a job now (one `host:slots`
    /// line per ready worker), computed from the cluster as eto computes it, and say on
    /// stderr whether the launcher shows it yet.
    Hosts {
        /// The job.
        job: String,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t)]
        output: Format,
    },
    /// Resource usage.
    Top {
        /// What to show.
        #[command(subcommand)]
        what: Top,
    },
    /// Set the desired workers of a job, within its minimum and maximum.
    Scale {
        /// The job.
        job: String,
        /// Workers wanted.
        #[arg(long)]
        workers: u32,
    },
    /// Suspend a job: its training gets a checkpoint notice, then its pods are deleted.
    Suspend {
        /// The job.
        job: String,
    },
    /// Resume a suspended job from its checkpoint.
    Resume {
        /// The job.
        job: String,
    },
}

/// What `kubectl eto top` shows.
#[derive(Subcommand, Debug)]
pub enum Top {
    /// GPUs per node (allocatable, allocated, free), the GPU model, and eto's jobs on each.
    Node {
        /// Output format.
        #[arg(short, long, value_enum, default_value_t)]
        output: Format,
    },
}
