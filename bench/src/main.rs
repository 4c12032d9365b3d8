//! `pgw-bench`: runs one benchmark scenario in this process and prints one JSON object.
//! `cargo xtask bench` starts the mock upstream and Redis, runs every scenario in interleaved
//! rounds, and writes the report; run this by hand only to look at one scenario.
//!
//! Scenarios (issue 7):
//! * `s1` — the bare transport: the same hyper client and pool straight to the mock (the limit);
//! * `s2` — the gateway on the memory backend, no limits, telemetry to a no-op sink;
//! * `s3` — the gateway on the memory backend with the full policy: limits set but not
//!   binding, breaker, retries armed, a call deadline, JSON-lines telemetry;
//! * `s4` — the gateway on the Redis backend, limits set but not binding.
//!
//! Modes: throughput (`--concurrency C --duration S`: calls/s, latency percentiles, CPU time
//! per call from `getrusage`, peak RSS) or in-flight memory (`--inflight N`: RSS growth per
//! call while the mock holds N calls open).

#![allow(clippy::print_stdout, clippy::print_stderr)] // a command-line tool reports on its streams

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::sys::resource::{UsageWho, getrusage};
use polygateway::config::{BackendKind, GatewaySettings, SourceSettings};
use polygateway::telemetry::NoopSink;
use polygateway::{ChatRequest, GatewayClient, Scope, Secret};
use polygateway_ports::{ChatTransport, Limits, SourceKind, SourceSpec};
use polygateway_transports::{HttpClient, HttpConfig, OpenAiTransport};
use serde_json::json;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    S1,
    S2,
    S3,
    S4,
}

struct Args {
    scenario: Scenario,
    mock: String,
    redis: Option<String>,
    concurrency: usize,
    duration: Duration,
    warmup: Duration,
    inflight: Option<usize>,
    jsonl: PathBuf,
}

fn parse_args() -> Result<Args, String> {
    use lexopt::prelude::*;
    let mut parser = lexopt::Parser::from_env();
    let mut args = Args {
        scenario: Scenario::S1,
        mock: String::new(),
        redis: None,
        concurrency: 1,
        duration: Duration::from_secs(2),
        warmup: Duration::from_millis(500),
        inflight: None,
        jsonl: std::env::temp_dir().join("pgw-bench-telemetry.jsonl"),
    };
    let text = |p: &mut lexopt::Parser| -> Result<String, String> {
        p.value()
            .map_err(|e| e.to_string())?
            .into_string()
            .map_err(|_| "not UTF-8".to_owned())
    };
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Long("scenario") => {
                args.scenario = match text(&mut parser)?.as_str() {
                    "s1" => Scenario::S1,
                    "s2" => Scenario::S2,
                    "s3" => Scenario::S3,
                    "s4" => Scenario::S4,
                    other => return Err(format!("unknown scenario {other}")),
                }
            }
            Long("mock") => args.mock = text(&mut parser)?,
            Long("redis") => args.redis = Some(text(&mut parser)?),
            Long("concurrency") => {
                args.concurrency = text(&mut parser)?
                    .parse()
                    .map_err(|_| "bad --concurrency")?
            }
            Long("duration") => {
                args.duration = Duration::from_secs_f64(
                    text(&mut parser)?.parse().map_err(|_| "bad --duration")?,
                )
            }
            Long("warmup") => {
                args.warmup =
                    Duration::from_secs_f64(text(&mut parser)?.parse().map_err(|_| "bad --warmup")?)
            }
            Long("inflight") => {
                args.inflight = Some(text(&mut parser)?.parse().map_err(|_| "bad --inflight")?)
            }
            Long("jsonl") => args.jsonl = PathBuf::from(text(&mut parser)?),
            other => return Err(other.unexpected().to_string()),
        }
    }
    if args.mock.is_empty() {
        return Err("--mock http://ADDR is required".to_owned());
    }
    Ok(args)
}

/// What a caller calls: the bare transport, or the gateway.
enum Target {
    Bare(Box<(OpenAiTransport, SourceSpec)>),
    Gateway(GatewayClient),
}

impl Target {
    async fn call(&self, request: &ChatRequest) -> bool {
        match self {
            Target::Bare(bare) => bare.0.chat(&bare.1, request).await.is_ok(),
            Target::Gateway(client) => client.chat(request.clone()).await.is_ok(),
        }
    }
}

fn http_config() -> HttpConfig {
    HttpConfig {
        pool_max_idle_per_host: 20_000,
        ..HttpConfig::default()
    }
}

fn target(args: &Args, source: &str) -> Result<Target, String> {
    let base_url = format!("{}/{source}/v1", args.mock.trim_end_matches('/'));
    if args.scenario == Scenario::S1 {
        let spec = SourceSpec {
            name: source.to_owned(),
            kind: SourceKind::OpenAiCompat,
            base_url,
            api_key: Some(Secret::new("sk-bench")),
            model: "bench".to_owned(),
            limits: Limits::default(),
            est_tokens: 100,
            timeout: Duration::from_secs(60),
            priority: 0,
            weight: 1,
            max_batch: 64,
            min_interval: Duration::ZERO,
        };
        let transport = OpenAiTransport::new(HttpClient::new(&http_config()));
        return Ok(Target::Bare(Box::new((transport, spec))));
    }
    let mut settings = GatewaySettings::new(Scope::Llm);
    let mut source_settings = SourceSettings {
        model: Some("bench".to_owned()),
        api_key: Some(Secret::new("sk-bench")),
        timeout: Some(Duration::from_secs(60)),
        ..SourceSettings::new(source, base_url)
    };
    if matches!(args.scenario, Scenario::S3 | Scenario::S4) {
        // Limits set, never binding: the admission does all its work without refusing.
        source_settings.tpm = Some(1_000_000_000_000);
        source_settings.rpm = Some(1_000_000_000);
        source_settings.max_concurrency = Some(1_000_000);
    }
    settings.sources.push(source_settings);
    settings.stall_window = Duration::from_secs(300);
    let with_sink = |config| GatewayClient::builder(config).http(http_config());
    let client = match args.scenario {
        Scenario::S1 => unreachable!("handled above"),
        Scenario::S2 => with_sink(settings.validate().map_err(|e| e.to_string())?)
            .telemetry(Arc::new(NoopSink))
            .build(),
        Scenario::S3 => {
            settings.call_deadline = Some(Duration::from_secs(60));
            settings.telemetry_jsonl = Some(args.jsonl.clone());
            with_sink(settings.validate().map_err(|e| e.to_string())?).build()
        }
        Scenario::S4 => {
            settings.backend = BackendKind::Redis;
            settings.redis_url = Some(Secret::new(
                args.redis.clone().ok_or("s4 needs --redis URL")?,
            ));
            settings.redis_key_prefix = format!("bench-{}", std::process::id());
            with_sink(settings.validate().map_err(|e| e.to_string())?)
                .telemetry(Arc::new(NoopSink))
                .build()
        }
    };
    client.map(Target::Gateway).map_err(|e| e.to_string())
}

fn cpu_micros() -> u64 {
    let usage = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage");
    let micros = |t: nix::sys::time::TimeVal| t.tv_sec() as u64 * 1_000_000 + t.tv_usec() as u64;
    micros(usage.user_time()) + micros(usage.system_time())
}

fn max_rss_kib() -> u64 {
    getrusage(UsageWho::RUSAGE_SELF).map_or(0, |u| u.max_rss() as u64)
}

/// Current resident set size, from `/proc/self/status`.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn percentile(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((sorted.len() as f64) * p).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

const WARMUP: u8 = 0;
const MEASURE: u8 = 1;
const STOP: u8 = 2;

async fn throughput(args: &Args) -> Result<serde_json::Value, String> {
    let target = Arc::new(target(args, "BENCH")?);
    let phase = Arc::new(AtomicU8::new(WARMUP));
    let errors = Arc::new(AtomicU64::new(0));
    let request = Arc::new(ChatRequest::from_prompt(
        "Summarise the benefits of exact quota accounting.",
    ));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..args.concurrency {
        let (target, phase, errors, request) = (
            target.clone(),
            phase.clone(),
            errors.clone(),
            request.clone(),
        );
        workers.spawn(async move {
            let mut latencies: Vec<u32> = Vec::with_capacity(1 << 16);
            loop {
                let at_start = phase.load(Ordering::Acquire);
                if at_start == STOP {
                    break;
                }
                let started = Instant::now();
                let ok = target.call(&request).await;
                if at_start == MEASURE && phase.load(Ordering::Acquire) == MEASURE {
                    latencies
                        .push(u32::try_from(started.elapsed().as_micros()).unwrap_or(u32::MAX));
                    if !ok {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            latencies
        });
    }
    tokio::time::sleep(args.warmup).await;
    let cpu_before = cpu_micros();
    let started = Instant::now();
    phase.store(MEASURE, Ordering::Release);
    tokio::time::sleep(args.duration).await;
    phase.store(STOP, Ordering::Release);
    let elapsed = started.elapsed();
    let cpu = cpu_micros() - cpu_before;
    let mut latencies = Vec::new();
    while let Some(done) = workers.join_next().await {
        latencies.extend(done.map_err(|e| e.to_string())?);
    }
    if let Target::Gateway(client) = &*target {
        client.shutdown().await;
    }
    latencies.sort_unstable();
    let calls = latencies.len() as u64;
    Ok(json!({
        "scenario": format!("{:?}", args.scenario),
        "concurrency": args.concurrency,
        "calls": calls,
        "errors": errors.load(Ordering::Relaxed),
        "throughput": calls as f64 / elapsed.as_secs_f64(),
        "p50_us": percentile(&latencies, 0.50),
        "p99_us": percentile(&latencies, 0.99),
        "cpu_us_per_call": if calls == 0 { 0.0 } else { cpu as f64 / calls as f64 },
        "max_rss_kib": max_rss_kib(),
    }))
}

/// The mock's count of requests it is answering (`GET /__mock/stats`), over a raw socket.
fn mock_in_flight(mock: &str) -> u64 {
    let addr = mock.trim_start_matches("http://").trim_end_matches('/');
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else {
        return 0;
    };
    let _ = write!(
        stream,
        "GET /__mock/stats HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    );
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
        line.clear();
    }
    let mut body = String::new();
    let _ = reader.read_to_string(&mut body);
    serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["in_flight"].as_u64())
        .unwrap_or(0)
}

async fn in_flight_memory(args: &Args, n: usize) -> Result<serde_json::Value, String> {
    let target = Arc::new(target(args, "HOLD")?);
    let request = Arc::new(ChatRequest::from_prompt("hold"));
    // The previous measurement's calls must be gone from the mock first (its process exited;
    // the mock notices the closed connections), so that every call counted now is ours.
    let started = Instant::now();
    while mock_in_flight(&args.mock) > 0 {
        if started.elapsed() > Duration::from_secs(60) {
            return Err("the mock still holds calls from an earlier run".to_owned());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let baseline_in_mock = 0;
    let before = rss_kib();
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..n {
        let (target, request) = (target.clone(), request.clone());
        calls.spawn(async move { target.call(&request).await });
    }
    let started = Instant::now();
    while mock_in_flight(&args.mock) < baseline_in_mock + n as u64 {
        if started.elapsed() > Duration::from_secs(60) {
            return Err(format!(
                "only {} of {n} calls reached the mock",
                mock_in_flight(&args.mock)
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let during = rss_kib();
    let per_call = (during.saturating_sub(before) * 1024) as f64 / n as f64;
    // Leave without cleaning up: the process exits and the mock's connections close.
    Ok(json!({
        "scenario": format!("{:?}", args.scenario),
        "inflight": n,
        "rss_before_kib": before,
        "rss_during_kib": during,
        "bytes_per_inflight_call": per_call,
    }))
}

fn main() {
    if std::env::var("PGW_BENCH_SIZES").is_ok() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("rt");
        rt.block_on(async {
            let args = Args {
                scenario: Scenario::S2,
                mock: "http://127.0.0.1:1".into(),
                redis: None,
                concurrency: 1,
                duration: Duration::ZERO,
                warmup: Duration::ZERO,
                inflight: None,
                jsonl: PathBuf::new(),
            };
            if let Ok(Target::Gateway(c)) = target(&args, "X") {
                let req = ChatRequest::from_prompt("x");
                eprintln!("chat future: {} bytes", std::mem::size_of_val(&c.chat(req)));
            }
            let t = OpenAiTransport::new(HttpClient::new(&http_config()));
            let spec = SourceSpec {
                name: "X".into(),
                kind: SourceKind::OpenAiCompat,
                base_url: "http://x".into(),
                api_key: None,
                model: "m".into(),
                limits: Limits::default(),
                est_tokens: 1,
                timeout: Duration::from_secs(1),
                priority: 0,
                weight: 1,
                max_batch: 1,
                min_interval: Duration::ZERO,
            };
            let req = ChatRequest::from_prompt("x");
            eprintln!(
                "transport future: {} bytes",
                std::mem::size_of_val(&t.chat(&spec, &req))
            );
        });
        return;
    }
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("pgw-bench: {e}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let result = runtime.block_on(async {
        match args.inflight {
            Some(n) => in_flight_memory(&args, n).await,
            None => throughput(&args).await,
        }
    });
    match result {
        Ok(value) => {
            println!("{value}");
            std::process::exit(0); // in-flight mode leaves calls hanging on purpose
        }
        Err(e) => {
            eprintln!("pgw-bench: {e}");
            std::process::exit(1);
        }
    }
}
