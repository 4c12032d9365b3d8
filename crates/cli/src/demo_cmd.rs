//! `polygw demo`: the README's main job. Starts the embedded mock upstream with two sources —
//! STORM, in a 429 storm with `Retry-After`, and FLAKY, failing with 5xx for a while before it
//! recovers — drives a burst of calls through the whole pipeline with a progress bar, and ends
//! with a per-source table.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use polygateway::config::{GatewaySettings, SourceSettings};
use polygateway::{
    ChatRequest, EventKind, GatewayClient, GatewayError, Scope, TelemetryRow, TelemetrySink,
};
use polygateway_mock::{Behaviour, Latency, MockUpstream, Scenario, Script, Step};

use crate::progress::Progress;
use crate::{runtime, string_value, usage, usage_error};

const DEFAULT_CALLS: usize = 400;
const CONCURRENCY: usize = 16;

pub(crate) fn run(mut args: lexopt::Parser) -> Result<(), GatewayError> {
    use lexopt::prelude::*;
    let mut calls = DEFAULT_CALLS;
    while let Some(arg) = args.next().map_err(usage_error)? {
        match arg {
            Long("calls") => {
                let text = string_value(&mut args, "--calls")?;
                calls = text
                    .parse()
                    .ok()
                    .filter(|n| (1..=1_000_000).contains(n))
                    .ok_or_else(|| {
                        usage(format!(
                            "--calls {text:?}: expected a whole number from 1 to 1000000"
                        ))
                    })?;
            }
            other => return Err(usage(format!("demo: unexpected {}", other.unexpected()))),
        }
    }
    runtime()?.block_on(demo(calls))
}

/// What the demo's sink keeps: per source, attempts and retries; per serving source, the
/// latencies of the calls it served.
#[derive(Default)]
struct Tally {
    attempts: BTreeMap<String, u64>,
    retries: BTreeMap<String, u64>,
    latencies: BTreeMap<String, Vec<u64>>,
    failures: BTreeMap<String, u64>,
}

#[derive(Default)]
struct DemoSink(Mutex<Tally>);

impl TelemetrySink for DemoSink {
    fn record(&self, row: &TelemetryRow<'_>) {
        let mut tally = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let source = row.source.unwrap_or("-").to_owned();
        match row.event_kind {
            EventKind::AttemptOk | EventKind::AttemptFailed | EventKind::Cancelled => {
                *tally.attempts.entry(source.clone()).or_default() += 1;
                if row.attempt > 1 {
                    *tally.retries.entry(source).or_default() += 1;
                }
            }
            EventKind::TerminalSuccess => {
                tally
                    .latencies
                    .entry(source)
                    .or_default()
                    .push(row.total_latency_ms.unwrap_or(0));
            }
            EventKind::TerminalFailure => {
                *tally
                    .failures
                    .entry(row.error_type.unwrap_or("?").to_owned())
                    .or_default() += 1;
            }
            EventKind::CacheHit => {}
        }
    }
}

fn scenario() -> Scenario {
    let ok = |latency: [u64; 2]| Step::from(Behaviour::ok()).after(Latency::Range(latency));
    Scenario {
        seed: Some(2026),
        ..Scenario::default()
    }
    // STORM: its first 10 answers are 429 with Retry-After: 1 — the gateway cools it down and
    // sends the traffic elsewhere — then it serves.
    .with_rule(
        Some("STORM"),
        None,
        Script::sequence(
            (0..10).map(|_| Step::from(Behaviour::rate_limited("1")).after(Latency::Fixed(2))),
        )
        .then([(1, ok([20, 60]))]),
    )
    // FLAKY: fails with 503/500 for its first 12 answers (its breaker trips), then recovers.
    .with_rule(
        Some("FLAKY"),
        None,
        Script::sequence((0..12).map(|i| {
            Step::from(Behaviour::status(if i % 2 == 0 { 503 } else { 500 }))
                .after(Latency::Fixed(3))
        }))
        .then([(1, ok([20, 60]))]),
    )
}

fn settings(mock: &MockUpstream) -> GatewaySettings {
    let mut settings = GatewaySettings::new(Scope::Llm);
    settings.max_attempts = 8;
    settings.backoff_base = Duration::from_millis(50);
    settings.backoff_max = Duration::from_secs(1);
    settings.breaker_failures = 5;
    settings.breaker_open = Duration::from_secs(1);
    settings.stall_window = Duration::from_secs(30);
    for name in ["STORM", "FLAKY"] {
        settings.sources.push(SourceSettings {
            model: Some(format!("{}-model", name.to_lowercase())),
            tpm: Some(400_000),
            rpm: Some(6_000),
            max_concurrency: Some(12),
            est_tokens: Some(64),
            timeout: Some(Duration::from_secs(5)),
            ..SourceSettings::new(name, mock.base_url(name))
        });
    }
    settings
}

async fn demo(calls: usize) -> Result<(), GatewayError> {
    let mock = MockUpstream::start(scenario()).await.map_err(|e| {
        usage(format!(
            "demo: cannot start the embedded mock upstream: {e}"
        ))
    })?;
    eprintln!(
        "polygw demo: {calls} calls, {CONCURRENCY} at a time, against the embedded mock upstream at http://{}",
        mock.addr()
    );
    eprintln!("  STORM: a 429 storm with Retry-After: 1, then healthy");
    eprintln!("  FLAKY: failing with 5xx for a while, then healthy");
    let sink = Arc::new(DemoSink::default());
    let config = settings(&mock).validate()?;
    let client = GatewayClient::builder(config)
        .telemetry(sink.clone())
        .build()?;

    let started = Instant::now();
    let progress = Progress::new(calls, true);
    let semaphore = Arc::new(tokio::sync::Semaphore::new(CONCURRENCY));
    let mut tasks = tokio::task::JoinSet::new();
    let (mut ok, mut failed) = (0usize, 0usize);
    for i in 0..calls {
        let permit = semaphore
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        let client = client.clone();
        tasks.spawn(async move {
            let _permit = permit;
            client
                .chat(ChatRequest::from_prompt(format!("demo question {i}")))
                .await
                .is_ok()
        });
        while let Some(done) = tasks.try_join_next() {
            if done.unwrap_or(false) {
                ok += 1
            } else {
                failed += 1
            }
            progress.show(ok, failed);
        }
    }
    while let Some(done) = tasks.join_next().await {
        if done.unwrap_or(false) {
            ok += 1
        } else {
            failed += 1
        }
        progress.show(ok, failed);
    }
    progress.finish(ok, failed);
    client.shutdown().await;
    let elapsed = started.elapsed();

    let stats = client.stats().await?;
    let tally = sink.0.lock().unwrap_or_else(|e| e.into_inner());
    println!();
    println!(
        "{:<8} {:>6} {:>9} {:>8} {:>14} {:>15} {:>8} {:>8}",
        "source",
        "calls",
        "attempts",
        "retries",
        "breaker trips",
        "tokens settled",
        "p50 ms",
        "p99 ms"
    );
    for s in &stats {
        let mut latencies = tally.latencies.get(&s.name).cloned().unwrap_or_default();
        latencies.sort_unstable();
        println!(
            "{:<8} {:>6} {:>9} {:>8} {:>14} {:>15} {:>8} {:>8}",
            s.name,
            s.served,
            tally.attempts.get(&s.name).copied().unwrap_or(0),
            tally.retries.get(&s.name).copied().unwrap_or(0),
            s.breaker_trips,
            s.tokens_settled,
            percentile(&latencies, 50),
            percentile(&latencies, 99),
        );
    }
    println!();
    println!(
        "{ok} of {calls} calls served in {:.1} s; mock upstream received {} requests",
        elapsed.as_secs_f64(),
        mock.counters().total
    );
    for (kind, n) in &tally.failures {
        println!("  {n} call(s) failed: {kind}");
    }
    Ok(())
}

fn percentile(sorted: &[u64], p: usize) -> String {
    if sorted.is_empty() {
        return "-".to_owned();
    }
    let rank = (sorted.len() * p).div_ceil(100).clamp(1, sorted.len());
    sorted[rank - 1].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let sorted: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&sorted, 50), "50");
        assert_eq!(percentile(&sorted, 99), "99");
        assert_eq!(percentile(&[7], 99), "7");
        assert_eq!(percentile(&[], 50), "-");
    }
}
