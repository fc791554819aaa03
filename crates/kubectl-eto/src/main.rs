//! `kubectl-eto`: found on PATH, it runs as `kubectl eto ...`.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use kubectl_eto::cli::Cli;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(kubectl_eto::run(cli, jiff::Timestamp::now())) {
        Ok(printed) => {
            let written = std::io::stdout().lock().write_all(printed.out.as_bytes());
            if let Some(note) = printed.note {
                eprintln!("{note}");
            }
            if written.is_err() {
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
