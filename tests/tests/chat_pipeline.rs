//! The chat pipeline end to end: `GatewayClient` with the memory backend against the mock
//! upstream over loopback. Deadline rules (SPEC §9) and the soak test of SPEC §6.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use polygateway::config::{GatewaySettings, SourceSettings};
use polygateway::{
    CallOptions, ChatRequest, ErrorKind, EventKind, GatewayClient, GatewayError, ManualClock,
    Scope, TelemetryRow, TelemetrySink,
};
use polygateway_mock::{Behaviour, Latency, MockUpstream, Route, Scenario, Script, Step};

/// A row, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    call: String,
    attempt: u32,
    source: Option<String>,
    kind: EventKind,
    error_type: Option<String>,
    est: Option<u64>,
    settled: Option<u64>,
    prompt: Option<u64>,
    completion: Option<u64>,
}

/// Keeps every row (a real sink implementation, as a user would write one).
#[derive(Default)]
struct Rows(Mutex<Vec<Row>>);

impl Rows {
    fn all(&self) -> Vec<Row> {
        self.0.lock().expect("lock").clone()
    }
}

impl TelemetrySink for Rows {
    fn record(&self, row: &TelemetryRow<'_>) {
        self.0.lock().expect("lock").push(Row {
            call: row.logical_call_id.to_owned(),
            attempt: row.attempt,
            source: row.source.map(str::to_owned),
            kind: row.event_kind,
            error_type: row.error_type.map(str::to_owned),
            est: row.est_tokens,
            settled: row.settled_tokens,
            prompt: row.prompt_tokens,
            completion: row.completion_tokens,
        });
    }
}

fn settings(mock: &MockUpstream, names: &[&str], timeout: Duration) -> GatewaySettings {
    let mut settings = GatewaySettings::new(Scope::Llm);
    for name in names {
        settings.sources.push(SourceSettings {
            model: Some("mock-model".into()),
            est_tokens: Some(50),
            timeout: Some(timeout),
            ..SourceSettings::new(*name, mock.base_url(name))
        });
    }
    settings
}

fn client(settings: &GatewaySettings, rows: &Arc<Rows>) -> GatewayClient {
    GatewayClient::builder(settings.validate().expect("valid settings"))
        .telemetry(rows.clone())
        .clock(Arc::new(ManualClock::new())) // windows never slide: the ledger is everything
        .seed(11)
        .build()
        .expect("client")
}

#[tokio::test]
async fn a_chat_call_is_served_settled_and_recorded() {
    let mock = MockUpstream::start(Scenario::default().with_rule(
        None,
        None,
        Script::always(Behaviour::ok_with_usage(9, 4)),
    ))
    .await
    .expect("mock");
    let rows = Arc::new(Rows::default());
    let client = client(&settings(&mock, &["A"], Duration::from_secs(5)), &rows);
    let answer = client
        .chat(ChatRequest::from_prompt("hello"))
        .await
        .expect("served");
    assert_eq!(answer.content, "mock answer to: hello");
    assert_eq!((answer.source.as_str(), answer.attempts), ("A", 1));
    assert_eq!(answer.usage.map(|u| u.total()), Some(13));
    assert_eq!(answer.logical_call_id.len(), 24);
    client.flush().await;
    let stats = client.stats().await.expect("stats");
    assert_eq!(
        (stats[0].tpm_used, stats[0].rpm_used, stats[0].inflight),
        (13, 1, 0)
    );
    let kinds: Vec<EventKind> = rows.all().iter().map(|r| r.kind).collect();
    assert_eq!(kinds, [EventKind::AttemptOk, EventKind::TerminalSuccess]);
    assert!(rows.all().iter().all(|r| r.call == answer.logical_call_id));
}

#[tokio::test(start_paused = true)]
async fn the_deadline_returns_at_the_deadline_and_the_in_flight_permit_settles_its_estimate() {
    let mock = MockUpstream::start(Scenario::default().with_rule(
        None,
        None,
        Script::always(Behaviour::Hang),
    ))
    .await
    .expect("mock");
    let rows = Arc::new(Rows::default());
    let mut s = settings(&mock, &["A"], Duration::from_secs(30));
    s.call_deadline = Some(Duration::from_millis(1500));
    let client = client(&s, &rows);
    let started = tokio::time::Instant::now();
    let error = client
        .chat(ChatRequest::from_prompt("x"))
        .await
        .unwrap_err();
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(1500),
        "returned at the deadline, not after cleanup"
    );
    assert_eq!(error.kind(), ErrorKind::CallDeadlineExceeded);
    assert_eq!(error.retry_after(), None);
    assert!(!matches!(error, GatewayError::GatewayUnavailable(_)));
    client.flush().await;
    let stats = client.stats().await.expect("stats");
    assert_eq!(
        (stats[0].tpm_used, stats[0].inflight),
        (50, 0),
        "S3: the estimate, and the slot freed"
    );
    let rows = rows.all();
    let shape: Vec<(EventKind, Option<&str>, Option<u64>)> = rows
        .iter()
        .map(|r| (r.kind, r.error_type.as_deref(), r.settled))
        .collect();
    assert_eq!(
        shape,
        [
            (EventKind::Cancelled, Some("Cancelled"), Some(50)),
            (
                EventKind::TerminalFailure,
                Some("CallDeadlineExceeded"),
                None
            ),
        ]
    );
    assert_eq!(rows[0].call, rows[1].call);
}

#[tokio::test(start_paused = true)]
async fn a_per_call_deadline_overrides_the_client_s() {
    let mock = MockUpstream::start(Scenario::default().with_rule(
        None,
        None,
        Script::always(Behaviour::Hang),
    ))
    .await
    .expect("mock");
    let rows = Arc::new(Rows::default());
    let mut s = settings(&mock, &["A"], Duration::from_secs(30));
    s.call_deadline = Some(Duration::from_secs(20));
    let client = client(&s, &rows);
    let started = tokio::time::Instant::now();
    let options = CallOptions {
        call_deadline: Some(Duration::from_millis(250)),
        ..CallOptions::default()
    };
    let error = client
        .chat_with(ChatRequest::from_prompt("x"), options)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::CallDeadlineExceeded);
    assert_eq!(started.elapsed(), Duration::from_millis(250));
}

#[tokio::test]
async fn an_invalid_per_call_deadline_is_refused_before_any_work() {
    let mock = MockUpstream::start(Scenario::default())
        .await
        .expect("mock");
    let rows = Arc::new(Rows::default());
    let client = client(&settings(&mock, &["A"], Duration::from_secs(5)), &rows);
    let options = CallOptions {
        call_deadline: Some(Duration::ZERO),
        ..CallOptions::default()
    };
    let error = client
        .chat_with(ChatRequest::from_prompt("x"), options)
        .await
        .unwrap_err();
    let GatewayError::Config(config) = &error else {
        panic!("{error:?}")
    };
    assert_eq!(config.key(), "GatewayClient::chat_with(call_deadline)");
    assert_eq!(mock.counters().total, 0, "nothing was sent");
    assert!(rows.all().is_empty(), "no call was started");
}

#[tokio::test]
async fn an_attempt_timeout_is_transient_never_the_deadline() {
    let mock = MockUpstream::start(
        Scenario::default()
            .with_rule(Some("A"), None, Script::always(Behaviour::Hang))
            .with_rule(
                Some("B"),
                None,
                Script::always(Behaviour::ok_with_usage(1, 1)),
            ),
    )
    .await
    .expect("mock");
    let rows = Arc::new(Rows::default());
    let mut s = settings(&mock, &["A", "B"], Duration::from_millis(200));
    s.sources[1].priority = 1; // A first
    s.call_deadline = Some(Duration::from_secs(20));
    let client = client(&s, &rows);
    let answer = client
        .chat(ChatRequest::from_prompt("x"))
        .await
        .expect("B serves after A times out");
    assert_eq!((answer.source.as_str(), answer.attempts), ("B", 2));
    let failed = rows
        .all()
        .into_iter()
        .find(|r| r.kind == EventKind::AttemptFailed)
        .expect("A's row");
    assert_eq!(failed.error_type.as_deref(), Some("Transient"));
}

/// SPEC §6 soak: 10 000 calls at concurrency 256 against the mock with 20 % 429s, 5 % hangs
/// and random caller cancellations. Afterwards no source holds a permit and the TPM ledger
/// equals, exactly, the sum the settlement table predicts from the telemetry rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_ledger_matches_the_settlement_table() {
    const CALLS: usize = 10_000;
    const CONCURRENCY: usize = 256;
    let mix = Script::sequence([]).then([
        (
            75,
            Step::from(Behaviour::ok()).after(Latency::Range([0, 2])),
        ),
        (20, Step::from(Behaviour::status(429))),
        (5, Step::from(Behaviour::Hang)),
    ]);
    let scenario = Scenario {
        seed: Some(3),
        no_request_log: true,
        ..Scenario::default()
    }
    .with_rule(None, Some(Route::Chat), mix);
    let mock = MockUpstream::start(scenario).await.expect("mock");
    let rows = Arc::new(Rows::default());
    let mut s = settings(&mock, &["A", "B"], Duration::from_millis(100));
    s.max_attempts = 6;
    s.backoff_base = Duration::from_millis(1);
    s.backoff_max = Duration::from_millis(20);
    s.breaker_failures = 1_000_000; // keep both sources in play: this test is about the ledger
    let client = client(&s, &rows);

    let semaphore = Arc::new(tokio::sync::Semaphore::new(CONCURRENCY));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..CALLS {
        let permit = semaphore.clone().acquire_owned().await.expect("semaphore");
        let client = client.clone();
        tasks.spawn(async move {
            let _permit = permit;
            let call = client.chat(ChatRequest::from_prompt(format!(
                "call {i} {}",
                "x".repeat(i % 97)
            )));
            // One call in ten is abandoned by its caller after 0–40 ms: wherever it is.
            if i % 10 == 3 {
                let _ = tokio::time::timeout(Duration::from_millis((i % 41) as u64), call).await;
            } else {
                let _ = call.await;
            }
        });
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    client.shutdown().await;

    let rows = rows.all();
    let terminal = rows
        .iter()
        .filter(|r| {
            matches!(
                r.kind,
                EventKind::TerminalSuccess | EventKind::TerminalFailure
            )
        })
        .count();
    assert_eq!(terminal, CALLS, "exactly one terminal row per logical call");
    let stats = client.stats().await.expect("stats");
    for source in &stats {
        let attempt_rows: Vec<&Row> = rows
            .iter()
            .filter(|r| r.source.as_deref() == Some(&source.name))
            .filter(|r| {
                matches!(
                    r.kind,
                    EventKind::AttemptOk | EventKind::AttemptFailed | EventKind::Cancelled
                )
            })
            .collect();
        for row in &attempt_rows {
            let est = row.est.expect("attempt rows carry the estimate");
            let expected = match (row.kind, row.error_type.as_deref()) {
                (EventKind::AttemptOk, _) => {
                    row.prompt.zip(row.completion).map_or(est, |(p, c)| p + c)
                }
                (EventKind::AttemptFailed, Some("Transient")) => est,
                (EventKind::AttemptFailed, _) => 0,
                // Cancelled before the transport (S2) settles 0, in flight (S3) the estimate.
                (EventKind::Cancelled, _) => row
                    .settled
                    .filter(|s| *s == 0 || *s == est)
                    .expect("S2 or S3"),
                _ => unreachable!(),
            };
            assert_eq!(row.settled, Some(expected), "{row:?}");
        }
        let ledger: u64 = attempt_rows
            .iter()
            .map(|r| r.settled.expect("settled"))
            .sum();
        assert_eq!(source.inflight, 0, "{} still holds permits", source.name);
        assert_eq!(
            source.tpm_used, ledger,
            "{}: TPM ledger against the telemetry rows",
            source.name
        );
        assert_eq!(
            source.rpm_used,
            attempt_rows.len() as u64,
            "{}: one request per admitted attempt",
            source.name
        );
    }
    let cancelled = rows
        .iter()
        .filter(|r| r.kind == EventKind::Cancelled)
        .count();
    let failed_429 = rows
        .iter()
        .filter(|r| r.kind == EventKind::AttemptFailed)
        .count();
    assert!(
        cancelled > 100 && failed_429 > 1000,
        "the soak exercised the paths: {cancelled} cancelled, {failed_429} failed"
    );
    assert_eq!(mock.counters().in_flight, 0);
}
