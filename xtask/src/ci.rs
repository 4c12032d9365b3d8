//! `cargo xtask ci`: the README's test command. Each step prints its name and duration; the
//! first failing step stops the run with a non-zero exit.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The variable through which tests find the Redis that `ci` started.
pub(crate) const REDIS_URL_VAR: &str = "POLYGATEWAY_TEST_REDIS_URL";

pub(crate) fn run() -> Result<(), String> {
    let started = Instant::now();
    step("cargo fmt --check", || cargo(&["fmt", "--all", "--check"]))?;
    step("cargo clippy", || {
        cargo(&[
            "clippy",
            "--workspace",
            "--all-targets",
            "--locked",
            "--",
            "-D",
            "warnings",
        ])
    })?;
    step("lint-layers", super::lint_layers)?;
    step("cargo fetch", || cargo(&["fetch", "--locked"]))?;
    step("cargo deny", || {
        cargo(&["deny", "--offline", "check", "licenses", "bans", "sources"])
    })?;
    let redis = step("start redis-server", RedisServer::start)?;
    let url = redis.url();
    let (passed, failed) = step("tests", || run_tests(&url))?;
    drop(redis);
    println!("ci: all checks passed in {:.0?}", started.elapsed());
    // The plain closing line that CI reads, whatever the runners printed before it.
    println!("tests: {passed} passed, {failed} failed");
    Ok(())
}

fn step<T>(name: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    println!("ci: ── {name}");
    let started = Instant::now();
    let result = f().map_err(|e| format!("{name}: {e}"));
    println!(
        "ci: ── {name}: {} in {:.1?}",
        if result.is_ok() { "ok" } else { "FAILED" },
        started.elapsed()
    );
    result
}

fn cargo(args: &[&str]) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    command(Command::new(cargo).args(args))
}

fn command(cmd: &mut Command) -> Result<(), String> {
    let status = cmd
        .current_dir(super::workspace_root())
        .status()
        .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("exited with {status}"))
    }
}

/// Run every test, doctests first so that the last runner output is the main suite's, and
/// return the totals (passed, failed) read from the runners' summary lines.
fn run_tests(redis_url: &str) -> Result<(u64, u64), String> {
    let nextest = Command::new("cargo-nextest")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let mut totals = (0, 0);
    let mut run = |args: &[&str]| -> Result<(), String> {
        let (passed, failed) = counted(args, redis_url)?;
        totals = (totals.0 + passed, totals.1 + failed);
        Ok(())
    };
    if nextest {
        // nextest does not run doctests; the examples in rustdoc are tests too.
        run(&["test", "--workspace", "--locked", "--doc"])?;
        run(&[
            "nextest",
            "run",
            "--workspace",
            "--locked",
            "--no-fail-fast",
        ])?;
    } else {
        run(&["test", "--workspace", "--locked", "--no-fail-fast"])?;
    }
    Ok(totals)
}

/// Run `cargo args`, echoing its output, and add up the runners' summary lines: cargo test's
/// `test result: ok. N passed; M failed; …` and nextest's `N tests run: P passed, F failed, …`.
fn counted(args: &[&str], redis_url: &str) -> Result<(u64, u64), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut child = Command::new(cargo)
        .args(args)
        .env(REDIS_URL_VAR, redis_url)
        .current_dir(super::workspace_root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start cargo: {e}"))?;
    let stdout = child.stdout.take().ok_or("no stdout pipe")?;
    let stderr = child.stderr.take().ok_or("no stderr pipe")?;
    let echo_err = std::thread::spawn(move || echo_and_count(stderr, &mut std::io::stderr()));
    let from_stdout = echo_and_count(stdout, &mut std::io::stdout());
    let from_stderr = echo_err.join().map_err(|_| "output reader panicked")?;
    let status = child.wait().map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("cargo {} exited with {status}", args.join(" ")));
    }
    Ok((from_stdout.0 + from_stderr.0, from_stdout.1 + from_stderr.1))
}

fn echo_and_count(from: impl Read, to: &mut impl Write) -> (u64, u64) {
    use std::io::BufRead;
    let mut totals = (0, 0);
    for line in std::io::BufReader::new(from).lines().map_while(Result::ok) {
        let _ = writeln!(to, "{line}");
        let (passed, failed) = summary_counts(&line);
        totals = (totals.0 + passed, totals.1 + failed);
    }
    totals
}

/// The (passed, failed) counts of one runner summary line, or (0, 0).
fn summary_counts(line: &str) -> (u64, u64) {
    let line = line.trim();
    let is_summary = line.starts_with("test result:") || line.contains(" tests run: ");
    if !is_summary {
        return (0, 0);
    }
    let count = |word: &str| {
        let words: Vec<&str> = line
            .split([' ', ';', ','])
            .filter(|w| !w.is_empty())
            .collect();
        words
            .windows(2)
            .find(|w| w[1] == word)
            .and_then(|w| w[0].parse().ok())
            .unwrap_or(0)
    };
    (count("passed"), count("failed"))
}

/// A `redis-server` on a free loopback port, without persistence, stopped on drop.
pub(crate) struct RedisServer {
    child: Child,
    port: u16,
}

impl RedisServer {
    pub(crate) fn start() -> Result<RedisServer, String> {
        let port = free_port()?;
        let child = Command::new("redis-server")
            .args([
                "--bind",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "yes",
                "--loglevel",
                "warning",
            ])
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    "redis-server is not installed; the test suite needs a real Redis: \
                     apt-get install -y redis-server (or run `bash .ci/run`, which installs it)"
                        .to_owned()
                } else {
                    format!("cannot start redis-server: {e}")
                }
            })?;
        let mut server = RedisServer { child, port };
        server.wait_ready()?;
        println!("ci: redis-server listening on {}", server.url());
        Ok(server)
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().map_err(|e| e.to_string())? {
                return Err(format!("redis-server exited at start with {status}"));
            }
            if ping(self.port) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err("redis-server did not answer PING within 10 s".to_owned())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether a Redis answers `PING` on the loopback port.
fn ping(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut reply = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut reply).is_ok()
        && &reply == b"+PONG\r\n"
}

/// A port the OS just handed out on loopback, free at the time of asking.
fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| format!("cannot find a free loopback port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_lines_of_both_runners_are_counted() {
        assert_eq!(
            summary_counts("test result: ok. 12 passed; 0 failed; 0 ignored; 0 measured"),
            (12, 0)
        );
        assert_eq!(
            summary_counts("     Summary [   0.512s] 70 tests run: 68 passed, 2 failed, 0 skipped"),
            (68, 2)
        );
        assert_eq!(summary_counts("test foo ... ok"), (0, 0));
        assert_eq!(summary_counts("PASS [ 0.005s] (6/70) a::passed"), (0, 0));
    }

    #[test]
    fn starts_a_real_redis_and_stops_it_on_drop() {
        let server = RedisServer::start().expect("redis-server must be installed for the tests");
        let port = server.port;
        assert!(ping(port));
        drop(server);
        assert!(!ping(port), "redis-server still answering after drop");
    }
}
