//! `polygw`: the PolyGateway command-line tool (SPEC §18).
//!
//! Configuration comes from the process environment, then `.env` in the working directory
//! (the environment wins). On failure every command exits 1 (2 for a configuration or usage
//! error) and the first line on stderr is `error: <Kind>: <sentence>`.

#![allow(clippy::print_stdout, clippy::print_stderr)] // a command-line tool reports on its streams

use std::process::ExitCode;

use polygateway::{ConfigError, ErrorKind, GatewayError, Scope};

const USAGE: &str = "\
usage: polygw <command> [options]

commands:
  config [--scope LLM|EMBEDDING|OCR]   validate the configuration and print it (secrets elided)
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
            print_config(&scopes)
        }
        "help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(usage(format!(
            "unknown command {other:?}; see `polygw help`"
        ))),
    }
}

/// Validate and print each scope's configuration. Asked for every scope, a scope with no
/// source at all is reported as unconfigured rather than an error.
fn print_config(scopes: &[Scope]) -> Result<(), GatewayError> {
    let env = polygateway::config::Env::from_process_and_dotenv(std::path::Path::new(
        polygateway::config::DOTENV_FILE,
    ))?;
    let only_one = scopes.len() == 1;
    for &scope in scopes {
        if !only_one && !env.mentions(scope) {
            println!("{scope}: not configured");
            continue;
        }
        match polygateway::config::GatewaySettings::from_env(scope, &env) {
            Ok(config) => {
                println!(
                    "{scope}: backend={} max_attempts={} call_deadline={}",
                    config.backend.as_str(),
                    config.max_attempts,
                    config
                        .call_deadline
                        .map_or_else(|| "none".to_owned(), |d| format!("{:?}", d.duration()))
                );
                for s in &config.sources {
                    println!(
                        "  {} kind={} base_url={} model={} api_key={} tpm={} rpm={} max_concurrency={} timeout={:?}",
                        s.name,
                        s.kind,
                        s.base_url,
                        if s.model.is_empty() { "-" } else { &s.model },
                        if s.api_key.is_some() {
                            "<set>"
                        } else {
                            "<unset>"
                        },
                        opt(s.limits.tpm),
                        opt(s.limits.rpm),
                        opt(s.limits.max_concurrency),
                        s.timeout,
                    );
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

fn opt<T: std::fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn usage(message: String) -> GatewayError {
    ConfigError::invalid("polygw arguments", message, "see `polygw help`").into()
}

fn usage_error(error: lexopt::Error) -> GatewayError {
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
