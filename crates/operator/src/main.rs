//! `eto-operator`: the elastic training operator.

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// eto, the elastic training operator for Kubernetes.
#[derive(Parser)]
#[command(version, about)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print every CustomResourceDefinition eto serves, as one multi-document YAML stream.
    ///
    /// Install them with `eto-operator crd | kubectl apply --server-side -f -`.
    Crd,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let result = match args.command {
        Command::Crd => print_crds(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("eto-operator: {error}");
            ExitCode::FAILURE
        }
    }
}

fn print_crds() -> Result<(), std::io::Error> {
    let yaml = eto_api::crds_yaml().map_err(std::io::Error::other)?;
    std::io::stdout().lock().write_all(yaml.as_bytes())
}
