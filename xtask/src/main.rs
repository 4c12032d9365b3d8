//! Developer commands for the PolyGateway workspace.
//!
//! * `cargo xtask lint-layers` — check the crate layering (SPEC §1) against `cargo metadata`.
//! * `cargo xtask ci` — every check, as `.ci/run` and the README run it: fmt, clippy,
//!   lint-layers, cargo-deny, then the whole test suite against a real `redis-server` started
//!   on a free loopback port.
//! * `cargo xtask bench` — the gateway's cost against a bare HTTP call (not part of `ci`).

#![allow(clippy::print_stdout, clippy::print_stderr)] // a command-line tool reports on its streams

mod bench;
mod ci;
mod layers;

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("lint-layers") => lint_layers(),
        Some("ci") => ci::run(),
        Some("bench") => bench::run(),
        _ => {
            eprintln!(
                "usage: cargo xtask <command>\n\n\
                 commands:\n  \
                 lint-layers   check the crate layering against cargo metadata\n  \
                 ci            fmt, clippy, lint-layers, cargo-deny and every test (starts redis-server)\n  \
                 bench         release benchmarks against the mock upstream; writes docs/benchmarks.md"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn lint_layers() -> Result<(), String> {
    let violations = layers::check_workspace()?;
    for violation in &violations {
        println!("{violation}");
    }
    if violations.is_empty() {
        println!("lint-layers: every workspace edge is allowed");
        Ok(())
    } else {
        Err(format!("{} layering violation(s)", violations.len()))
    }
}

/// The workspace root (the parent of this crate's directory).
fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map_or(manifest_dir.clone(), PathBuf::from)
}
