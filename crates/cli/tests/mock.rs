//! `polygw mock` as a real process: a scenario from flags, and one from a file.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

/// The process, and its stdout kept open so that later lines it prints never hit a closed
/// pipe.
struct Running(
    Child,
    #[allow(dead_code)] BufReader<std::process::ChildStdout>,
);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `polygw mock` with `args` on a free port; returns the process and its address.
fn start(args: &[&str]) -> (Running, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_polygw"))
        .args(["mock", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("polygw starts");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    stdout.read_line(&mut first).expect("a line");
    let addr = first
        .trim()
        .strip_prefix("mock upstream listening on http://")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();
    (Running(child, stdout), addr)
}

/// One HTTP/1.1 exchange; returns the status line, the headers and the body as text.
fn http(addr: &str, method: &str, path: &str, body: &str) -> (String, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let (head, body) = response.split_once("\r\n\r\n").expect("head and body");
    (head.to_owned(), body.to_owned())
}

const CHAT: &str = r#"{"model": "m", "messages": [{"role": "user", "content": "hello"}]}"#;

#[test]
fn flags_script_statuses_and_retry_after() {
    let (_mock, addr) = start(&["--sequence", "429,503,200", "--retry-after", "3"]);
    let (head, body) = http(&addr, "POST", "/A/v1/chat/completions", CHAT);
    assert!(head.starts_with("HTTP/1.1 429"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("retry-after: 3"),
        "{head}"
    );
    assert!(body.contains("rate_limit_exceeded"), "{body}");
    let (head, _) = http(&addr, "POST", "/A/v1/chat/completions", CHAT);
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    let (head, body) = http(&addr, "POST", "/A/v1/chat/completions", CHAT);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(body.contains("mock answer to: hello"), "{body}");
    let (_, stats) = http(&addr, "GET", "/__mock/stats", "");
    let stats: serde_json::Value = serde_json::from_str(&stats).expect("stats JSON");
    assert_eq!(stats["requests"]["A/chat"], 3);
}

#[test]
fn a_scenario_file_is_read() {
    let path = std::env::temp_dir().join(format!("polygw-scenario-{}.json", std::process::id()));
    std::fs::write(
        &path,
        r#"{"rules": [{"source": "B", "route": "chat", "then": [{"weight": 1, "kind": "status", "status": 418}]}]}"#,
    )
    .expect("write scenario");
    let (_mock, addr) = start(&["--scenario", path.to_str().expect("utf-8 path")]);
    let (head, _) = http(&addr, "POST", "/B/v1/chat/completions", CHAT);
    assert!(head.starts_with("HTTP/1.1 418"), "{head}");
    let (head, _) = http(&addr, "POST", "/A/v1/chat/completions", CHAT);
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "other sources are unscripted: {head}"
    );
    std::fs::remove_file(&path).expect("cleanup");
}

#[test]
fn bad_flags_exit_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_polygw"))
        .args(["mock", "--error-rate", "2"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: Config: invalid configuration: --error-rate = \"2\""),
        "{stderr}"
    );
}
