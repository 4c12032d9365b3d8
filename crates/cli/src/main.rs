//! `polygw`: the PolyGateway command-line tool (SPEC §18).
//!
//! Configuration comes from the process environment, then `.env` in the working directory
//! (the environment wins). On failure every command exits 1 (2 for a configuration or usage
//! error) and the first line on stderr is `error: <Kind>: <sentence>`.

#![allow(clippy::print_stdout, clippy::print_stderr)] // a command-line tool reports on its streams

mod chat_cmd;
mod config_cmd;
mod demo_cmd;
mod embed_cmd;
mod load_cmd;
mod mock_cmd;
mod ocr_cmd;
mod progress;
mod stats_cmd;

use std::process::ExitCode;

use polygateway::{ConfigError, ErrorKind, GatewayError, Scope};

const USAGE: &str = "\
usage: polygw <command> [options]

commands:
  chat [--json] [--deadline S] PROMPT  one chat completion through the gateway (LLM scope)
  embed [--file F | --jsonl F] [TEXT…] vectors as JSON lines (EMBEDDING scope)
  ocr [--layout [--markdown]] FILE…    text, or layout as JSON lines (OCR scope)
  stats [--json]                       per scope and source: tpm_used, rpm_used, inflight, breaker
  load [--concurrency C] [--duration S] [--calls N]
                                       chat calls from C callers; a JSON summary at the end
  demo [--calls N]                     a burst of calls through the whole pipeline against an
                                       embedded mock (a 429 storm and a failing source)
  config [--scope LLM|EMBEDDING|OCR]   validate the configuration and print it (secrets elided)
  mock [--listen ADDR] [options]       run the mock upstream (see `polygw mock --help`)
  help                                 show this text

Configuration comes from the environment, then .env in the working directory.
See docs/configuration.md for every key.";

/// How a command reports: plain text, or JSON (`--json`) on stdout.
#[derive(Debug, Default)]
pub(crate) struct Output {
    pub(crate) json: bool,
}

fn main() -> ExitCode {
    let mut out = Output::default();
    match run(lexopt::Parser::from_env(), &mut out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => report(&error, &out),
    }
}

fn run(mut args: lexopt::Parser, out: &mut Output) -> Result<(), GatewayError> {
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
        "chat" => chat_cmd::run(args, out),
        "stats" => stats_cmd::run(args, out),
        "embed" => embed_cmd::run(args),
        "load" => load_cmd::run(args),
        "ocr" => ocr_cmd::run(args),
        "demo" => demo_cmd::run(args),
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

/// A multi-threaded runtime for the commands that make calls.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, GatewayError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            ConfigError::invalid(
                "polygw",
                "runtime",
                format!("cannot start the async runtime: {e}"),
            )
            .into()
        })
}

/// The next argument's value as UTF-8 text.
pub(crate) fn string_value(args: &mut lexopt::Parser, name: &str) -> Result<String, GatewayError> {
    args.value()
        .map_err(usage_error)?
        .into_string()
        .map_err(|_| usage(format!("{name} must be UTF-8")))
}

/// Print the error contract (SPEC §18) and pick the exit status: the first stderr line is
/// `error: <Kind>: <message>`; with `--json`, stdout carries `{"error": {…}}` too.
fn report(error: &GatewayError, out: &Output) -> ExitCode {
    if out.json {
        let body = serde_json::json!({"error": {
            "kind": error.kind().as_str(),
            "message": error.to_string(),
            "scope": error.scope().map(Scope::as_str),
            "retry_after_ms": error.retry_after().map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        }});
        println!("{body}");
    }
    eprintln!("error: {}: {error}", error.kind());
    match error.kind() {
        ErrorKind::Config => ExitCode::from(2),
        _ => ExitCode::from(1),
    }
}
