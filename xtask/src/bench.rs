//! `cargo xtask bench`: what the gateway costs on top of a bare HTTP call (issue 7).
//!
//! Builds the release binaries, starts the mock upstream (`polygw mock`, its own process, so
//! the driver's CPU time is the driver's) and a redis-server, then runs `pgw-bench` — one
//! process per measurement, so `getrusage` and peak RSS belong to that scenario alone — in
//! interleaved rounds (S1 S2 S3 S4, S1 S2 S3 S4, …) at concurrency 1 and 64, and reports
//! medians with ratios to S1. Writes the report into `docs/benchmarks.md`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::ci::RedisServer;

const ROUNDS: usize = 5;
const SCENARIOS: [&str; 4] = ["s1", "s2", "s3", "s4"];
const CONCURRENCY: [usize; 2] = [1, 64];
const DURATION_S: &str = "2";
const INFLIGHT: usize = 10_000;
const INFLIGHT_ROUNDS: usize = 3;
const START: &str = "<!-- xtask-bench:start -->";
const END: &str = "<!-- xtask-bench:end -->";

/// The mock upstream, stopped on drop; its stdout stays open so its later lines never meet a
/// closed pipe.
struct Mock(
    Child,
    String,
    #[allow(dead_code)] BufReader<std::process::ChildStdout>,
);

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn run() -> Result<(), String> {
    let root = super::workspace_root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = Command::new(&cargo)
        .args([
            "build",
            "--release",
            "--locked",
            "-p",
            "polygateway-cli",
            "-p",
            "polygateway-bench",
        ])
        .current_dir(&root)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err("release build failed".to_owned());
    }
    let polygw = root.join("target/release/polygw");
    let driver = root.join("target/release/pgw-bench");

    let scenario_file =
        std::env::temp_dir().join(format!("pgw-bench-mock-{}.json", std::process::id()));
    std::fs::write(
        &scenario_file,
        r#"{"no_request_log": true, "rules": [{"source": "HOLD", "then": [{"weight": 1, "kind": "hang"}]}]}"#,
    )
    .map_err(|e| format!("cannot write the mock scenario: {e}"))?;
    let mut child = Command::new(&polygw)
        .args(["mock", "--listen", "127.0.0.1:0", "--scenario"])
        .arg(&scenario_file)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the mock: {e}"))?;
    let mut stdout = BufReader::new(child.stdout.take().ok_or("mock stdout")?);
    let mut first = String::new();
    stdout.read_line(&mut first).map_err(|e| e.to_string())?;
    let addr = first
        .trim()
        .strip_prefix("mock upstream listening on http://")
        .ok_or_else(|| format!("unexpected mock output {first:?}"))?
        .to_owned();
    let mock = Mock(child, format!("http://{addr}"), stdout);
    let redis = RedisServer::start()?;
    let redis_url = redis.url();

    let mock_capacity = wrk_capacity(&addr);

    let mut samples: BTreeMap<(usize, &str), Vec<Value>> = BTreeMap::new();
    for round in 1..=ROUNDS {
        for concurrency in CONCURRENCY {
            for scenario in SCENARIOS {
                let result = measure(
                    &driver,
                    &[
                        "--scenario",
                        scenario,
                        "--concurrency",
                        &concurrency.to_string(),
                        "--duration",
                        DURATION_S,
                        "--mock",
                        &mock.1,
                        "--redis",
                        &redis_url,
                    ],
                )?;
                eprintln!("bench: round {round} {scenario} c={concurrency}: {result}");
                samples
                    .entry((concurrency, scenario))
                    .or_default()
                    .push(result);
            }
        }
    }
    let mut inflight: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for _ in 0..INFLIGHT_ROUNDS {
        for scenario in ["s1", "s3"] {
            let result = measure(
                &driver,
                &[
                    "--scenario",
                    scenario,
                    "--inflight",
                    &INFLIGHT.to_string(),
                    "--mock",
                    &mock.1,
                ],
            )?;
            eprintln!("bench: in-flight {scenario}: {result}");
            inflight.entry(scenario).or_default().push(
                result["bytes_per_inflight_call"]
                    .as_f64()
                    .unwrap_or(f64::NAN),
            );
        }
    }
    drop(mock);
    drop(redis);
    let _ = std::fs::remove_file(&scenario_file);

    let micro = micro_benchmarks(&cargo, &root);
    let mut report = report(&samples, &inflight, mock_capacity);
    report.push_str(&format!(
        "\nMicro-benchmarks (`cargo bench -p polygateway-backends -p polygateway-transports`, divan; `retry_after` includes building the header map):\n\n```text\n{micro}```\n"
    ));
    println!("{report}");
    let path = root.join("docs/benchmarks.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_default();
    let updated = match (doc.find(START), doc.find(END)) {
        (Some(start), Some(end)) if start < end => {
            format!("{}{START}\n{report}\n{}", &doc[..start], &doc[end..])
        }
        _ => format!("{doc}\n{START}\n{report}\n{END}\n"),
    };
    std::fs::write(&path, updated).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    eprintln!("bench: report written to docs/benchmarks.md");
    Ok(())
}

/// The divan tables of the micro-benchmarks.
fn micro_benchmarks(cargo: &str, root: &std::path::Path) -> String {
    let out = Command::new(cargo)
        .args([
            "bench",
            "--locked",
            "-q",
            "-p",
            "polygateway-backends",
            "-p",
            "polygateway-transports",
            "--bench",
            "micro",
        ])
        .current_dir(root)
        .output();
    match out {
        Ok(out) => String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| {
                l.starts_with(['├', '╰', '│']) || l.starts_with("micro") || l.starts_with("   ")
            })
            .map(|l| format!("{l}\n"))
            .collect(),
        Err(e) => format!("(not run: {e})\n"),
    }
}

fn measure(driver: &std::path::Path, args: &[&str]) -> Result<Value, String> {
    let out = Command::new(driver)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run pgw-bench: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "pgw-bench {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("pgw-bench printed no JSON: {e}"))
}

/// The mock's own capacity with wrk (one thread, 64 connections, 3 s), when wrk is installed.
fn wrk_capacity(addr: &str) -> Option<f64> {
    let script = std::env::temp_dir().join(format!("pgw-bench-post-{}.lua", std::process::id()));
    std::fs::write(
        &script,
        "wrk.method = \"POST\"\nwrk.body = '{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"hello\"}]}'\nwrk.headers[\"Content-Type\"] = \"application/json\"\n",
    )
    .ok()?;
    let out = Command::new("wrk")
        .args(["-t1", "-c64", "-d3s", "-s"])
        .arg(&script)
        .arg(format!("http://{addr}/BENCH/v1/chat/completions"))
        .output()
        .ok()?;
    let _ = std::fs::remove_file(&script);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn field(samples: &[Value], name: &str) -> f64 {
    median(samples.iter().filter_map(|s| s[name].as_f64()).collect())
}

fn command_output(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
            })
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:").map(|v| v.trim().to_owned()))
        })
        .unwrap_or_default();
    format!(
        "{} cores ({cpu}), {mem} memory, {}",
        command_output("nproc", &[]),
        command_output("rustc", &["--version"])
    )
}

fn mark(ok: bool) -> &'static str {
    if ok { "met" } else { "**missed**" }
}

fn report(
    samples: &BTreeMap<(usize, &str), Vec<Value>>,
    inflight: &BTreeMap<&str, Vec<f64>>,
    mock_capacity: Option<f64>,
) -> String {
    let mut out = String::new();
    let date = command_output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]);
    out.push_str(&format!(
        "## Gateway overhead ({date})\n\nMachine: {}.\n\nCommand: `cargo xtask bench` — release build; mock upstream (`polygw mock`) and `redis-server` as their own processes on loopback; `pgw-bench` runs one scenario per process ({ROUNDS} interleaved rounds S1 S2 S3 S4 at each concurrency, {DURATION_S} s measured after 0.5 s warm-up; medians). S1 = the bare transport (the same hyper client and pool, straight to the mock); S2 = gateway, memory backend, no limits, no-op telemetry; S3 = gateway, memory backend, limits set (not binding), breaker, retries, a call deadline, JSON-lines telemetry; S4 = gateway, Redis backend, limits set (not binding). CPU time is `getrusage` of the driver process per call; RSS is its peak.\n\n",
        machine()
    ));
    out.push_str("| scenario | callers | calls/s | × S1 | p50 µs | added p50 | p99 µs | added p99 | CPU µs/call | × S1 | peak RSS MiB |\n");
    out.push_str("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    let get = |c: usize, s: &str, f: &str| samples.get(&(c, s)).map_or(f64::NAN, |v| field(v, f));
    for concurrency in CONCURRENCY {
        let (t1, p50_1, p99_1, cpu1) = (
            get(concurrency, "s1", "throughput"),
            get(concurrency, "s1", "p50_us"),
            get(concurrency, "s1", "p99_us"),
            get(concurrency, "s1", "cpu_us_per_call"),
        );
        for scenario in SCENARIOS {
            let (t, p50, p99, cpu, rss) = (
                get(concurrency, scenario, "throughput"),
                get(concurrency, scenario, "p50_us"),
                get(concurrency, scenario, "p99_us"),
                get(concurrency, scenario, "cpu_us_per_call"),
                get(concurrency, scenario, "max_rss_kib") / 1024.0,
            );
            out.push_str(&format!(
                "| {} | {concurrency} | {t:.0} | {:.2} | {p50:.0} | {:+.0} | {p99:.0} | {:+.0} | {cpu:.1} | {:.2} | {rss:.1} |\n",
                scenario.to_uppercase(),
                t / t1,
                p50 - p50_1,
                p99 - p99_1,
                cpu / cpu1
            ));
        }
    }
    let s1_mem = median(inflight.get("s1").cloned().unwrap_or_default());
    let s3_mem = median(inflight.get("s3").cloned().unwrap_or_default());
    let added = s3_mem - s1_mem;
    out.push_str(&format!(
        "\nMemory with {INFLIGHT} calls in flight at once (the mock holds them; RSS growth per call, median of {INFLIGHT_ROUNDS}): S1 {s1_mem:.0} B, S3 {s3_mem:.0} B — the gateway adds **{added:.0} B** per in-flight call.\n\n"
    ));
    match mock_capacity {
        Some(rate) => out.push_str(&format!(
            "Mock upstream capacity in the same run (wrk, 1 thread, 64 connections, 3 s): {rate:.0} requests/s — {:.1}× the fastest gateway rate above.\n\n",
            rate / SCENARIOS[1..].iter().map(|s| get(64, s, "throughput")).fold(0.0, f64::max)
        )),
        None => out.push_str("Mock upstream capacity: wrk is not installed, not measured in this run.\n\n"),
    }
    let t1 = get(64, "s1", "throughput");
    let rows = [
        (
            format!(
                "S2 throughput ≥ 0.90 × S1 at 64 callers: {:.2}",
                get(64, "s2", "throughput") / t1
            ),
            get(64, "s2", "throughput") >= 0.9 * t1,
        ),
        (
            format!(
                "S3 throughput ≥ 0.90 × S1 at 64 callers: {:.2}",
                get(64, "s3", "throughput") / t1
            ),
            get(64, "s3", "throughput") >= 0.9 * t1,
        ),
        (
            format!(
                "S3 added p50 at 1 caller ≤ 20 µs: {:+.0} µs",
                get(1, "s3", "p50_us") - get(1, "s1", "p50_us")
            ),
            get(1, "s3", "p50_us") - get(1, "s1", "p50_us") <= 20.0,
        ),
        (
            format!(
                "S3 added p99 at 1 caller ≤ 100 µs: {:+.0} µs",
                get(1, "s3", "p99_us") - get(1, "s1", "p99_us")
            ),
            get(1, "s3", "p99_us") - get(1, "s1", "p99_us") <= 100.0,
        ),
        (
            format!(
                "CPU per call S3 ≤ 1.25 × S1 (64 callers): {:.2}",
                get(64, "s3", "cpu_us_per_call") / get(64, "s1", "cpu_us_per_call")
            ),
            get(64, "s3", "cpu_us_per_call") <= 1.25 * get(64, "s1", "cpu_us_per_call"),
        ),
        (
            format!(
                "S4 ≥ 15 000 calls/s through one local Redis: {:.0}",
                get(64, "s4", "throughput")
            ),
            get(64, "s4", "throughput") >= 15_000.0,
        ),
        (
            format!("≤ 4 KiB added per in-flight call: {added:.0} B"),
            added <= 4096.0,
        ),
    ];
    out.push_str("Targets:\n\n");
    for (text, ok) in rows {
        out.push_str(&format!("- {text} — {}\n", mark(ok)));
    }
    out
}
