//! `polygw`: the PolyGateway command-line tool (SPEC §18).
//!
//! Configuration comes from the process environment, then `.env` in the working directory
//! (the environment wins). On failure every command exits 1 (2 for a configuration or usage
//! error) and the first line on stderr is `error: <Kind>: <sentence>`.

#![allow(clippy::print_stdout, clippy::print_stderr)] // a command-line tool reports on its streams

mod config_cmd;
mod mock_cmd;

use std::process::ExitCode;

use polygateway::{ConfigError, ErrorKind, GatewayError, Scope};

const USAGE: &str = "\
usage: polygw <command> [options]

commands:
  config [--scope LLM|EMBEDDING|OCR]   validate the configuration and print it (secrets elided)
  mock [--listen ADDR] [options]       run the mock upstream (see `polygw mock --help`)
  help                                 show this text

Configuration comes from the environment, then .env in the working directory.
See docs/configuration.md for every key.";

fn main() -> ExitCode {
    match run(lexopt::Parser::from_env()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => report(&error),
    }
}

fn run(mut args: lexopt::Parser) -> Result<(), GatewayError> {
    use lexopt::prelude::*;
    let command = match args.next().map_err(usage_error)? {
        Some(Value(command)) => command.string().map_err(usage_error)?,
        Some(Long("help") | Short('h')) | None => {
            println!("{USAGE}");
            return Ok(());
        }
        Some(other) => return Err(usage(format!("unexpected {}", other.unexpected()))),
    };
    match command.as_str() {
        "config" => {
            let mut scopes = Scope::ALL.to_vec();
            while let Some(arg) = args.next().map_err(usage_error)? {
                match arg {
                    Long("scope") => {
                        let text = args
                            .value()
                            .map_err(usage_error)?
                            .string()
                            .map_err(usage_error)?;
                        let scope = text.parse::<Scope>().map_err(|e| {
                            GatewayError::from(ConfigError::invalid("--scope", text, e.to_string()))
                        })?;
                        scopes = vec![scope];
                    }
                    other => {
                        return Err(usage(format!("config: unexpected {}", other.unexpected())));
                    }
                }
            }
            config_cmd::run(&scopes)
        }
        "mock" => mock_cmd::run(args),
        "help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(usage(format!(
            "unknown command {other:?}; see `polygw help`"
        ))),
    }
}

pub(crate) fn usage(message: String) -> GatewayError {
    ConfigError::invalid("polygw arguments", message, "see `polygw help`").into()
}

pub(crate) fn usage_error(error: lexopt::Error) -> GatewayError {
    usage(error.to_string())
}

/// Print the error contract (SPEC §18) and pick the exit status.
fn report(error: &GatewayError) -> ExitCode {
    eprintln!("error: {}: {error}", error.kind());
    match error.kind() {
        ErrorKind::Config => ExitCode::from(2),
        _ => ExitCode::from(1),
    }
}
