//! `linkem` command-line driver (see `cli.rs` for the commands).

use linkem::cli::{self, CliError, Command};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = cli::parse(&args).and_then(|cmd| match cmd {
        Command::Help => Ok(Some(cli::USAGE.to_string())),
        Command::Version => Ok(Some(format!("linkem {}", linkem::VERSION))),
        Command::Check { file } => cli::check(&file).map(Some),
        Command::Show { addr } => cli::show(&addr).map(Some),
        Command::Set { addr, file } => cli::set(&addr, &file).map(Some),
        Command::Run(opts) => linkem::driver::run(*opts)
            .map(|()| None)
            .map_err(|e| CliError::Runtime(e.to_string())),
    });
    match result {
        Ok(out) => {
            if let Some(text) = out {
                println!("{text}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("linkem: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}
