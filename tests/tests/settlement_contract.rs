//! Every row of the settlement table (SPEC §6) through the real pipeline — client, transport,
//! mock upstream over loopback — on both backends, unchanged. After each call the backend's
//! own ledger (read back through `stats()`, i.e. from Redis for the Redis backend) must hold
//! exactly what the row says. S10 (a panicking transport) cannot be provoked through a real
//! transport; the engine's unit tests cover it with a fake.

mod support;

use std::sync::Arc;
use std::time::Duration;

use polygateway::config::{BackendKind, GatewaySettings, SourceSettings};
use polygateway::{
    ChatRequest, EmbeddingClient, ErrorKind, GatewayClient, GatewayError, ManualClock, OcrClient,
    Scope, Secret, SourceStats,
};
use polygateway_mock::{Behaviour, MockUpstream, Scenario, Script, openai_error};

const EST: u64 = 40;

fn settings(
    backend: BackendKind,
    scope: Scope,
    mock: &MockUpstream,
    name: &str,
) -> GatewaySettings {
    let mut settings = GatewaySettings::new(scope);
    settings.max_attempts = 1;
    settings.stall_window = Duration::from_secs(2);
    if backend == BackendKind::Redis {
        settings.backend = BackendKind::Redis;
        settings.redis_url = Some(Secret::new(support::redis_url()));
        settings.redis_key_prefix = support::unique_prefix(name);
    }
    let base_url = if scope == Scope::Ocr {
        mock.ocr_base_url("S")
    } else {
        mock.base_url("S")
    };
    settings.sources.push(SourceSettings {
        model: (scope != Scope::Ocr).then(|| "m".to_owned()),
        est_tokens: Some(EST),
        timeout: Some(Duration::from_secs(10)),
        ..SourceSettings::new("S", base_url)
    });
    settings
}

fn chat_client(settings: &GatewaySettings) -> GatewayClient {
    GatewayClient::builder(settings.validate().expect("valid"))
        .clock(Arc::new(ManualClock::new()))
        .build()
        .expect("client")
}

async fn mock(behaviour: Behaviour) -> MockUpstream {
    MockUpstream::start(Scenario::default().with_rule(None, None, Script::always(behaviour)))
        .await
        .expect("mock")
}

/// (tpm_used, rpm_used, inflight) once every settlement is done.
async fn ledger(stats: Vec<SourceStats>) -> (u64, u64, u64) {
    (stats[0].tpm_used, stats[0].rpm_used, stats[0].inflight)
}

async fn chat_ledger(client: &GatewayClient) -> (u64, u64, u64) {
    client.flush().await;
    ledger(client.stats().await.expect("stats")).await
}

async fn chat(client: &GatewayClient) -> Result<polygateway::ChatResult, GatewayError> {
    client.chat(ChatRequest::from_prompt("hello")).await
}

// ---- the rows, generic over the backend ----

async fn s1_a_refused_admission_counts_nothing(backend: BackendKind) {
    let mock = mock(Behaviour::ok_with_usage(3, 4)).await;
    let mut s = settings(backend, Scope::Llm, &mock, "s1");
    s.sources[0].rpm = Some(1);
    let client = chat_client(&s);
    chat(&client).await.expect("the first call fits");
    let error = chat(&client).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::GatewayUnavailable);
    assert!(
        error
            .retry_after()
            .is_some_and(|d| d > Duration::from_secs(55)),
        "{error}"
    );
    assert_eq!(chat_ledger(&client).await, (7, 1, 0));
}

async fn s2_cancelled_before_the_transport_settles_zero(backend: BackendKind) {
    let mock = mock(Behaviour::ok_with_usage(3, 4)).await;
    let mut s = settings(backend, Scope::Llm, &mock, "s2");
    s.sources[0].min_interval = Some(Duration::from_secs(30)); // the second call waits its turn
    let client = chat_client(&s);
    chat(&client).await.expect("first call");
    client.flush().await;
    let waiting = {
        let client = client.clone();
        tokio::spawn(async move { chat(&client).await })
    };
    // Entered: the permit is held (the backend counts it in flight) while the pacer waits.
    support::eventually(
        "the second call holds its permit",
        Duration::from_secs(5),
        || async { client.stats().await.expect("stats")[0].inflight == 1 },
    )
    .await;
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    assert_eq!(chat_ledger(&client).await, (7, 2, 0));
    assert_eq!(mock.counters().total, 1, "the transport was never invoked");
}

async fn s3_cancelled_in_flight_settles_the_estimate(backend: BackendKind) {
    let mock = mock(Behaviour::Hang).await;
    let client = chat_client(&settings(backend, Scope::Llm, &mock, "s3"));
    let call = {
        let client = client.clone();
        tokio::spawn(async move { chat(&client).await })
    };
    mock.until_received(1).await; // entered: the request reached the upstream
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    assert_eq!(chat_ledger(&client).await, (EST, 1, 0));
}

async fn s4_success_settles_the_reported_usage(backend: BackendKind) {
    let mock = mock(Behaviour::ok_with_usage(12, 30)).await;
    let client = chat_client(&settings(backend, Scope::Llm, &mock, "s4"));
    chat(&client).await.expect("ok");
    assert_eq!(chat_ledger(&client).await, (42, 1, 0));
    mock.set_scenario(Scenario::default().with_rule(
        None,
        None,
        Script::always(Behaviour::ok_with_usage(0, 0)),
    ));
    chat(&client).await.expect("ok");
    assert_eq!(
        chat_ledger(&client).await,
        (42, 2, 0),
        "a real usage of 0 settles 0"
    );
}

async fn s4b_success_without_usage_settles_the_estimate(backend: BackendKind) {
    let mock = mock(Behaviour::Ok { usage: None }).await;
    let client = chat_client(&settings(backend, Scope::Llm, &mock, "s4b"));
    chat(&client).await.expect("ok");
    assert_eq!(chat_ledger(&client).await, (EST, 1, 0));
}

async fn s5_source_dead_settles_zero(backend: BackendKind) {
    let body = openai_error(
        "You exceeded your current quota",
        "insufficient_quota",
        "insufficient_quota",
    );
    let mock = mock(Behaviour::Status {
        status: 429,
        retry_after: None,
        retry_after_ms: None,
        body: Some(body),
    })
    .await;
    let client = chat_client(&settings(backend, Scope::Llm, &mock, "s5d"));
    assert_eq!(
        chat(&client).await.unwrap_err().kind(),
        ErrorKind::GatewayUnavailable
    );
    assert_eq!(chat_ledger(&client).await, (0, 1, 0));
}

async fn s5_transient_settles_the_estimate(backend: BackendKind) {
    let mock = mock(Behaviour::status(503)).await;
    let client = chat_client(&settings(backend, Scope::Llm, &mock, "s5t"));
    assert_eq!(
        chat(&client).await.unwrap_err().kind(),
        ErrorKind::GatewayUnavailable
    );
    assert_eq!(chat_ledger(&client).await, (EST, 1, 0));
}

async fn s6_ocr_settles_zero_while_requests_count(backend: BackendKind) {
    let mock = mock(Behaviour::ok()).await;
    let client = OcrClient::builder(
        settings(backend, Scope::Ocr, &mock, "s6")
            .validate()
            .expect("valid"),
    )
    .build_ocr()
    .expect("client");
    client
        .recognize_text(b"%PDF-1.7 test".to_vec())
        .await
        .expect("ok");
    mock.set_scenario(Scenario::default().with_rule(
        None,
        None,
        Script::always(Behaviour::status(503)),
    ));
    client
        .recognize_text(b"%PDF-1.7 test".to_vec())
        .await
        .unwrap_err();
    client.flush().await;
    assert_eq!(
        ledger(client.stats().await.expect("stats")).await,
        (0, 2, 0)
    );
}

async fn s7_embeddings_settle_per_batch(backend: BackendKind) {
    let mock = mock(Behaviour::ok()).await;
    let mut s = settings(backend, Scope::Embedding, &mock, "s7");
    s.sources[0].max_batch = Some(2);
    let client = EmbeddingClient::builder(s.validate().expect("valid"))
        .build_embedding()
        .expect("client");
    let texts: Vec<String> = ["aaaa", "bbbbbbbb", "c"]
        .iter()
        .map(|t| t.to_string())
        .collect();
    client.embed(texts).await.expect("ok");
    client.flush().await;
    // Batch 1 reports 1 + 2 tokens, batch 2 reports 1 (the mock's ⌈len/4⌉).
    assert_eq!(
        ledger(client.stats().await.expect("stats")).await,
        (4, 2, 0)
    );
}

async fn s8_request_rejected_settles_zero(backend: BackendKind) {
    let mock = mock(Behaviour::status(400)).await;
    let client = chat_client(&settings(backend, Scope::Llm, &mock, "s8"));
    assert_eq!(
        chat(&client).await.unwrap_err().kind(),
        ErrorKind::RequestRejected
    );
    assert_eq!(chat_ledger(&client).await, (0, 1, 0));
}

async fn s9_result_invalid_settles_the_reported_usage_or_zero(backend: BackendKind) {
    let mock = mock(Behaviour::MissingFields {
        usage: Some([10, 5]),
    })
    .await;
    let client = chat_client(&settings(backend, Scope::Llm, &mock, "s9"));
    assert_eq!(
        chat(&client).await.unwrap_err().kind(),
        ErrorKind::ResultInvalid
    );
    assert_eq!(chat_ledger(&client).await, (15, 1, 0));
    mock.set_scenario(Scenario::default().with_rule(
        None,
        None,
        Script::always(Behaviour::Malformed),
    ));
    assert_eq!(
        chat(&client).await.unwrap_err().kind(),
        ErrorKind::ResultInvalid
    );
    assert_eq!(chat_ledger(&client).await, (15, 2, 0));
}

macro_rules! on_both_backends {
    ($($row:ident),* $(,)?) => {
        mod memory {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $row() { super::$row(polygateway::config::BackendKind::Memory).await; })*
        }
        mod redis {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $row() { super::$row(polygateway::config::BackendKind::Redis).await; })*
        }
    };
}

on_both_backends!(
    s1_a_refused_admission_counts_nothing,
    s2_cancelled_before_the_transport_settles_zero,
    s3_cancelled_in_flight_settles_the_estimate,
    s4_success_settles_the_reported_usage,
    s4b_success_without_usage_settles_the_estimate,
    s5_source_dead_settles_zero,
    s5_transient_settles_the_estimate,
    s6_ocr_settles_zero_while_requests_count,
    s7_embeddings_settle_per_batch,
    s8_request_rejected_settles_zero,
    s9_result_invalid_settles_the_reported_usage_or_zero,
);
