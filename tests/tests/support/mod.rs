//! Shared by the integration tests: the Redis that `cargo xtask ci` started, and key prefixes
//! that keep tests apart in it.

#![allow(dead_code, unreachable_pub)] // each test file uses the part it needs; `pub` is for them

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use polygateway_backends::{RedisBackend, RedisConfig};
use polygateway_errors::Scope;

/// The variable through which `cargo xtask ci` passes its Redis.
pub const REDIS_URL_VAR: &str = "POLYGATEWAY_TEST_REDIS_URL";

/// The URL of the test Redis. A missing Redis is a failure with instructions, never a skip.
pub fn redis_url() -> String {
    std::env::var(REDIS_URL_VAR).unwrap_or_else(|_| {
        panic!(
            "{REDIS_URL_VAR} is not set: these tests need a real redis-server. Run them with \
             `cargo xtask ci` (which starts one), or start one and export {REDIS_URL_VAR}=redis://127.0.0.1:PORT"
        )
    })
}

/// A key prefix no other test uses.
pub fn unique_prefix(name: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "t-{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A Redis backend on the test Redis with its own prefix, connected.
pub async fn redis_backend(name: &str) -> RedisBackend {
    let config = RedisConfig {
        url: redis_url(),
        key_prefix: unique_prefix(name),
        pool_size: 2,
        command_timeout: Duration::from_secs(2),
    };
    let backend = RedisBackend::connect(&config, Scope::Llm).expect("redis client");
    backend.wait_connected().await.expect("redis is up");
    backend
}

/// Wait (bounded) until `check` holds, polling; panics with `what` if it never does.
pub async fn eventually<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = std::time::Instant::now();
    while !check().await {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A `redis-server` of the test's own, for tests that stop and restart it.
pub struct OwnRedis {
    child: Option<std::process::Child>,
    pub port: u16,
}

impl OwnRedis {
    /// Start one on a free loopback port.
    pub fn start() -> OwnRedis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut redis = OwnRedis { child: None, port };
        redis.restart();
        redis
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Start (again) on the same port, and wait until it answers.
    pub fn restart(&mut self) {
        let child = std::process::Command::new("redis-server")
            .args([
                "--bind",
                "127.0.0.1",
                "--port",
                &self.port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server is installed (the test command installs it)");
        self.child = Some(child);
        let started = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "redis-server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kill it (SIGKILL): the connection drops with no goodbye.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Send one inline command to the Redis at `url` (`redis://host:port`) and return its reply
/// line — enough for `SCRIPT FLUSH` without a client library.
pub fn redis_inline(url: &str, command: &str) -> String {
    use std::io::{BufRead, Write};
    let addr = url.trim_start_matches("redis://").trim_end_matches('/');
    let mut stream = std::net::TcpStream::connect(addr).expect("connect to redis");
    write!(stream, "{command}\r\n").expect("write");
    let mut line = String::new();
    std::io::BufReader::new(stream)
        .read_line(&mut line)
        .expect("reply");
    line.trim_end().to_owned()
}
