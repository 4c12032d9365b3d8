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
    step("tests", || run_tests(&url))?;
    drop(redis);
    println!("ci: all checks passed in {:.0?}", started.elapsed());
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

fn run_tests(redis_url: &str) -> Result<(), String> {
    let nextest = Command::new("cargo-nextest")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    if nextest {
        command(
            Command::new(&cargo)
                .args([
                    "nextest",
                    "run",
                    "--workspace",
                    "--locked",
                    "--no-fail-fast",
                ])
                .env(REDIS_URL_VAR, redis_url),
        )?;
        // nextest does not run doctests; the examples in rustdoc are tests too.
        command(
            Command::new(&cargo)
                .args(["test", "--workspace", "--locked", "--doc"])
                .env(REDIS_URL_VAR, redis_url),
        )
    } else {
        command(
            Command::new(&cargo)
                .args(["test", "--workspace", "--locked", "--no-fail-fast"])
                .env(REDIS_URL_VAR, redis_url),
        )
    }
}

/// A `redis-server` on a free loopback port, without persistence, stopped on drop.
struct RedisServer {
    child: Child,
    port: u16,
}

impl RedisServer {
    fn start() -> Result<RedisServer, String> {
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

    fn url(&self) -> String {
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
    fn starts_a_real_redis_and_stops_it_on_drop() {
        let server = RedisServer::start().expect("redis-server must be installed for the tests");
        let port = server.port;
        assert!(ping(port));
        drop(server);
        assert!(!ping(port), "redis-server still answering after drop");
    }
}
