//! `kubectl eto`: the command line for eto's jobs.
//!
//! A thin client: it reads jobs through eto's API types and asks eto's engine the questions
//! the operator answers (a job's bounds, its discovery list), so its answers are the
//! operator's. [`run`] carries out one parsed command and returns what to print.

pub mod change;
pub mod children;
pub mod cli;
pub mod connect;
pub mod error;
pub mod get;
pub mod hosts;
pub mod jobs;
pub mod output;
pub mod table;
pub mod top;

use cli::{Cli, Command, Top};
use error::Error;
use output::Format;

/// What a command prints: its result on stdout, a remark on stderr.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Printed {
    /// For stdout.
    pub out: String,
    /// For stderr, if anything.
    pub note: Option<String>,
}

impl From<String> for Printed {
    fn from(out: String) -> Self {
        Self { out, note: None }
    }
}

/// Carries out `cli` against the cluster it names, at time `now`.
///
/// # Errors
/// The cluster cannot be reached, refuses a request, or has no such job.
pub async fn run(cli: Cli, now: jiff::Timestamp) -> Result<Printed, Error> {
    let target = connect::Target {
        kubeconfig: cli.connection.kubeconfig.clone(),
        context: cli.connection.context.clone(),
    };
    let (client, context_namespace) = connect::connect(&target).await?;
    let namespace = cli.connection.namespace.unwrap_or(context_namespace);
    match cli.command {
        Command::Get {
            job: None,
            all_namespaces,
            output,
        } => {
            let scope = (!all_namespaces).then_some(namespace.as_str());
            get::list(&client, scope, output, now)
                .await
                .map(Printed::from)
        }
        Command::Get {
            job: Some(job),
            output,
            ..
        } => {
            let job = jobs::find(&client, &namespace, &job).await?;
            let detail = get::Detail::fetch(&client, &job).await?;
            match output {
                Format::Table => Ok(detail.render(now).into()),
                format => format.render(&detail).map(Printed::from),
            }
        }
        Command::Hosts { job, output } => {
            let job = jobs::find(&client, &namespace, &job).await?;
            let hosts = hosts::Hosts::fetch(&client, &job, now).await?;
            match output {
                Format::Table => Ok(Printed {
                    out: hosts.render(),
                    note: Some(hosts.note()),
                }),
                format => format.render(&hosts).map(Printed::from),
            }
        }
        Command::Top {
            what: Top::Node { output },
        } => {
            let nodes = top::fetch(&client).await?;
            match output {
                Format::Table => Ok(top::render(&nodes).into()),
                format => format.render(&nodes).map(Printed::from),
            }
        }
        Command::Scale { job, workers } => {
            let job = jobs::find(&client, &namespace, &job).await?;
            change::scale(&client, &job, workers)
                .await
                .map(Printed::from)
        }
        Command::Suspend { job } => {
            let job = jobs::find(&client, &namespace, &job).await?;
            change::set_suspended(&client, &job, true)
                .await
                .map(Printed::from)
        }
        Command::Resume { job } => {
            let job = jobs::find(&client, &namespace, &job).await?;
            change::set_suspended(&client, &job, false)
                .await
                .map(Printed::from)
        }
    }
}
