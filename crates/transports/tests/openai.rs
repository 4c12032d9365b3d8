//! The OpenAI-compatible transport against the mock upstream over loopback: one test per
//! classification row (SPEC §4), the size cap, HTTP/2, and no API key in any output.

mod support;

use std::time::Duration;

use polygateway_errors::{AttemptFailure, FailureKind};
use polygateway_mock::{
    Behaviour, Latency, MockUpstream, Route, Scenario, Script, Step, openai_error,
};
use polygateway_ports::{
    ChatRequest, ChatTransport, EmbeddingRequest, EmbeddingTransport, Limits, Secret, SourceKind,
    SourceSpec, Usage,
};
use polygateway_transports::{HttpClient, HttpConfig, OpenAiTransport};
use support::capture::Capture;

const KEY: &str = "sk-test-0123456789abcdef";

fn source(base_url: String, timeout: Duration) -> SourceSpec {
    SourceSpec {
        name: "A".into(),
        kind: SourceKind::OpenAiCompat,
        base_url,
        api_key: Some(Secret::new(KEY)),
        model: "mock-model".into(),
        limits: Limits::default(),
        est_tokens: 100,
        timeout,
        priority: 0,
        weight: 1,
        max_batch: 16,
        min_interval: Duration::ZERO,
    }
}

fn transport(config: &HttpConfig) -> OpenAiTransport {
    OpenAiTransport::new(HttpClient::new(config))
}

/// One chat attempt against a mock whose every chat answer is `step`.
async fn chat_with(step: impl Into<Step>) -> Result<polygateway_ports::ChatResult, AttemptFailure> {
    chat_with_config(step, &HttpConfig::default(), Duration::from_secs(5)).await
}

async fn chat_with_config(
    step: impl Into<Step>,
    config: &HttpConfig,
    timeout: Duration,
) -> Result<polygateway_ports::ChatResult, AttemptFailure> {
    let mock = MockUpstream::start(Scenario::default().with_rule(
        None,
        Some(Route::Chat),
        Script::always(step),
    ))
    .await
    .expect("mock starts");
    let spec = source(mock.base_url("A"), timeout);
    transport(config)
        .chat(&spec, &ChatRequest::from_prompt("hi there"))
        .await
}

fn assert_failure(
    result: Result<polygateway_ports::ChatResult, AttemptFailure>,
    kind: FailureKind,
    code: &str,
) -> AttemptFailure {
    let failure = result.expect_err("the attempt must fail");
    assert_eq!((failure.kind(), failure.code()), (kind, code), "{failure}");
    assert!(!failure.to_string().contains(KEY));
    failure
}

#[tokio::test]
async fn success_carries_content_usage_and_source() {
    let result = chat_with(Behaviour::ok_with_usage(12, 7))
        .await
        .expect("success");
    assert_eq!(result.content, "mock answer to: hi there");
    assert_eq!(
        result.usage,
        Some(Usage {
            prompt_tokens: 12,
            completion_tokens: 7
        })
    );
    assert_eq!(result.model, "mock-model");
    assert_eq!(result.source, "A");
    assert_eq!(result.finish_reason.as_deref(), Some("stop"));
}

#[tokio::test]
async fn success_without_usage_has_none_and_zero_usage_is_kept() {
    let result = chat_with(Behaviour::Ok { usage: None })
        .await
        .expect("success");
    assert_eq!(result.usage, None);
    let result = chat_with(Behaviour::ok_with_usage(0, 0))
        .await
        .expect("success");
    assert_eq!(result.usage, Some(Usage::default()));
}

#[tokio::test]
async fn statuses_are_classified() {
    let table = [
        (400, FailureKind::RequestRejected, "http_status"),
        (401, FailureKind::SourceDead, "unauthorized"),
        (403, FailureKind::SourceDead, "unauthorized"),
        (404, FailureKind::SourceDead, "not_found"),
        (408, FailureKind::Transient, "http_status"),
        (409, FailureKind::Transient, "http_status"),
        (413, FailureKind::RequestRejected, "http_status"),
        (422, FailureKind::RequestRejected, "http_status"),
        (429, FailureKind::Transient, "rate_limited"),
        (500, FailureKind::Transient, "server_error"),
        (502, FailureKind::Transient, "server_error"),
        (503, FailureKind::Transient, "server_error"),
    ];
    for (status, kind, code) in table {
        let failure = assert_failure(chat_with(Behaviour::status(status)).await, kind, code);
        assert_eq!(failure.status(), Some(status));
    }
}

#[tokio::test]
async fn openai_error_bodies_are_classified_by_code() {
    let cases = [
        (
            429,
            openai_error(
                "You exceeded your current quota",
                "insufficient_quota",
                "insufficient_quota",
            ),
            FailureKind::SourceDead,
            "insufficient_quota",
        ),
        (
            400,
            openai_error(
                "maximum context length is 8192 tokens",
                "invalid_request_error",
                "context_length_exceeded",
            ),
            FailureKind::RequestRejected,
            "context_length_exceeded",
        ),
        (
            429,
            openai_error("Rate limit reached", "requests", "rate_limit_exceeded"),
            FailureKind::Transient,
            "rate_limited",
        ),
    ];
    for (status, body, kind, code) in cases {
        let step = Behaviour::Status {
            status,
            retry_after: None,
            retry_after_ms: None,
            body: Some(body),
        };
        assert_failure(chat_with(step).await, kind, code);
    }
}

#[tokio::test]
async fn retry_after_forms_reach_the_failure() {
    let failure = assert_failure(
        chat_with(Behaviour::rate_limited("2")).await,
        FailureKind::Transient,
        "rate_limited",
    );
    assert_eq!(failure.retry_after(), Some(Duration::from_secs(2)));
    let step = Behaviour::Status {
        status: 503,
        retry_after: Some("0.5".into()),
        retry_after_ms: Some("1200".into()),
        body: None,
    };
    let failure = assert_failure(
        chat_with(step).await,
        FailureKind::Transient,
        "server_error",
    );
    assert_eq!(failure.retry_after(), Some(Duration::from_millis(1200)));
    let failure = assert_failure(
        chat_with(Behaviour::rate_limited("inf")).await,
        FailureKind::Transient,
        "rate_limited",
    );
    assert_eq!(failure.retry_after(), None);
}

#[tokio::test]
async fn connect_errors_are_transient_and_safe_to_retry() {
    // A port nobody listens on: bind, read the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let spec = source(
        format!("http://127.0.0.1:{port}/v1"),
        Duration::from_secs(5),
    );
    let failure = transport(&HttpConfig::default())
        .chat(&spec, &ChatRequest::from_prompt("x"))
        .await
        .expect_err("nothing listens");
    assert_eq!(
        (failure.kind(), failure.code()),
        (FailureKind::Transient, "connect")
    );
}

#[tokio::test]
async fn hangs_are_attempt_timeouts_and_the_mock_sees_the_client_leave() {
    let mock = MockUpstream::start(Scenario::default().with_rule(
        None,
        None,
        Script::always(Behaviour::Hang),
    ))
    .await
    .expect("mock");
    let spec = source(mock.base_url("A"), Duration::from_millis(300));
    let failure = transport(&HttpConfig::default())
        .chat(&spec, &ChatRequest::from_prompt("x"))
        .await
        .unwrap_err();
    assert_eq!(
        (failure.kind(), failure.code()),
        (FailureKind::Transient, "timeout")
    );
    // The timed-out attempt dropped its connection; the mock's hanging handler ends with it.
    let mut waited = Duration::ZERO;
    while mock.counters().hangs_released < 1 && waited < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += Duration::from_millis(20);
    }
    assert_eq!(mock.counters().hangs_released, 1);
    assert_eq!(mock.counters().in_flight, 0);
}

#[tokio::test]
async fn hang_after_headers_is_an_attempt_timeout() {
    let result = chat_with_config(
        Behaviour::HangAfterHeaders,
        &HttpConfig::default(),
        Duration::from_millis(300),
    )
    .await;
    assert_failure(result, FailureKind::Transient, "timeout");
}

#[tokio::test]
async fn truncated_bodies_are_transient() {
    assert_failure(
        chat_with(Behaviour::Truncated).await,
        FailureKind::Transient,
        "truncated_body",
    );
}

#[tokio::test]
async fn unusable_2xx_bodies_are_result_invalid() {
    assert_failure(
        chat_with(Behaviour::Malformed).await,
        FailureKind::ResultInvalid,
        "bad_json",
    );
    assert_failure(
        chat_with(Behaviour::WrongContentType).await,
        FailureKind::ResultInvalid,
        "bad_content_type",
    );
    let failure = assert_failure(
        chat_with(Behaviour::MissingFields {
            usage: Some([10, 5]),
        })
        .await,
        FailureKind::ResultInvalid,
        "missing_choices",
    );
    assert_eq!(
        failure.reported_tokens(),
        Some(15),
        "S9 settles the usage the body reported"
    );
    let failure = assert_failure(
        chat_with(Behaviour::MissingFields { usage: None }).await,
        FailureKind::ResultInvalid,
        "missing_choices",
    );
    assert_eq!(failure.reported_tokens(), None);
}

#[tokio::test]
async fn a_10_mib_body_against_a_1_mib_cap_is_classified_not_read() {
    let config = HttpConfig {
        max_response_bytes: 1024 * 1024,
        ..HttpConfig::default()
    };
    for chunked in [false, true] {
        let step = Behaviour::Huge {
            bytes: 10 * 1024 * 1024,
            chunked,
        };
        let failure = assert_failure(
            chat_with_config(step, &config, Duration::from_secs(10)).await,
            FailureKind::ResultInvalid,
            "body_too_large",
        );
        assert_eq!(failure.status(), Some(200), "chunked={chunked}");
    }
}

#[tokio::test]
async fn http2_prior_knowledge_works_end_to_end() {
    let mock = MockUpstream::start(Scenario::default())
        .await
        .expect("mock");
    let spec = source(mock.base_url("A"), Duration::from_secs(5));
    let config = HttpConfig {
        http2_prior_knowledge: true,
        ..HttpConfig::default()
    };
    let result = transport(&config)
        .chat(&spec, &ChatRequest::from_prompt("over h2"))
        .await
        .expect("success");
    assert_eq!(result.content, "mock answer to: over h2");
    assert_eq!(mock.counters().http2, 1);
    transport(&HttpConfig::default())
        .chat(&spec, &ChatRequest::from_prompt("over h1"))
        .await
        .expect("success");
    assert_eq!(
        mock.counters().http2,
        1,
        "the default client speaks HTTP/1.1 on plain TCP"
    );
}

#[tokio::test]
async fn embeddings_come_back_in_input_order() {
    let mock = MockUpstream::start(Scenario::default())
        .await
        .expect("mock");
    let spec = source(mock.base_url("A"), Duration::from_secs(5));
    let input: Vec<String> = ["a", "bbb", "cc", "dddddd"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let result = transport(&HttpConfig::default())
        .embed(
            &spec,
            &EmbeddingRequest {
                input: input.clone(),
                est_tokens: None,
            },
        )
        .await
        .expect("success");
    // The mock puts each text's length in component 0.
    let lengths: Vec<f32> = result.vectors.iter().map(|v| v[0]).collect();
    assert_eq!(lengths, [1.0, 3.0, 2.0, 6.0]);
    assert_eq!(
        result.usage,
        Some(Usage {
            prompt_tokens: 5,
            completion_tokens: 0
        })
    );
    assert_eq!(mock.counters().requests("A", Route::Embeddings), 1);
}

#[tokio::test]
async fn embeddings_without_data_are_result_invalid() {
    let mock = MockUpstream::start(Scenario::default().with_rule(
        None,
        None,
        Script::always(Behaviour::MissingFields {
            usage: Some([4, 0]),
        }),
    ))
    .await
    .expect("mock");
    let spec = source(mock.base_url("A"), Duration::from_secs(5));
    let failure = transport(&HttpConfig::default())
        .embed(
            &spec,
            &EmbeddingRequest {
                input: vec!["x".into()],
                est_tokens: None,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(
        (failure.kind(), failure.code(), failure.reported_tokens()),
        (FailureKind::ResultInvalid, "missing_data", Some(4))
    );
}

#[tokio::test]
async fn the_api_key_is_sent_and_never_appears_in_errors_debug_or_logs() {
    let scenario = Scenario {
        api_key: Some(KEY.to_owned()),
        ..Scenario::default()
    };
    let mock = MockUpstream::start(scenario).await.expect("mock");
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());

    let good = source(mock.base_url("A"), Duration::from_secs(5));
    transport(&HttpConfig::default())
        .chat(&good, &ChatRequest::from_prompt("x"))
        .await
        .expect("the right key is accepted");

    // A wrong key: the mock echoes the presented key in its message, as providers do.
    let wrong_key = "sk-wrong-key-fedcba9876543210";
    let mut bad = good.clone();
    bad.api_key = Some(Secret::new(wrong_key));
    let failure = transport(&HttpConfig::default())
        .chat(&bad, &ChatRequest::from_prompt("x"))
        .await
        .unwrap_err();
    assert_eq!(
        (failure.kind(), failure.code()),
        (FailureKind::SourceDead, "invalid_api_key")
    );
    let everything = format!(
        "{failure} {failure:?} {bad:?} {good:?} {:?} {}",
        transport(&HttpConfig::default()),
        capture.lines().join("\n")
    );
    for secret in [KEY, wrong_key] {
        assert!(
            !everything.contains(secret),
            "{secret} leaked: {everything}"
        );
    }
    assert!(
        failure
            .message()
            .contains("Incorrect API key provided: <redacted>"),
        "{failure}"
    );
    assert_eq!(mock.counters().unauthorized, 1);
}

#[tokio::test]
async fn latency_ranges_are_honoured_without_failing() {
    let step = Step::from(Behaviour::ok()).after(Latency::Range([1, 5]));
    chat_with(step).await.expect("success after a short wait");
}
