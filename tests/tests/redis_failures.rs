//! Fail closed (SPEC §6): with Redis gone mid-run, calls fail within a bounded time with
//! `GatewayUnavailable { reason: backend_unavailable }` and a retry hint — no panic, no hang —
//! and when Redis is back, the same client serves again.

mod support;

use std::time::{Duration, Instant};

use polygateway::config::{BackendKind, GatewaySettings, SourceSettings};
use polygateway::{ChatRequest, GatewayClient, GatewayError, Scope, Secret, UnavailableReason};
use polygateway_mock::{Behaviour, MockUpstream, Scenario, Script};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_fails_closed_and_back_up_serves_again_without_rebuilding() {
    let mut redis = support::OwnRedis::start();
    let mock = MockUpstream::start(Scenario::default().with_rule(
        None,
        None,
        Script::always(Behaviour::ok_with_usage(1, 1)),
    ))
    .await
    .expect("mock");
    let mut settings = GatewaySettings::new(Scope::Llm);
    settings.backend = BackendKind::Redis;
    settings.redis_url = Some(Secret::new(redis.url()));
    settings.redis_key_prefix = support::unique_prefix("down");
    settings.redis_command_timeout = Duration::from_millis(500);
    settings.sources.push(SourceSettings {
        model: Some("m".into()),
        rpm: Some(1000),
        ..SourceSettings::new("S", mock.base_url("S"))
    });
    let client = GatewayClient::from_settings(&settings).expect("client");
    client
        .chat(ChatRequest::from_prompt("before"))
        .await
        .expect("served while Redis is up");
    client.flush().await;

    redis.kill();
    let started = Instant::now();
    let error = client
        .chat(ChatRequest::from_prompt("during"))
        .await
        .unwrap_err();
    let elapsed = started.elapsed();
    let GatewayError::GatewayUnavailable(unavailable) = &error else {
        panic!("{error:?}")
    };
    assert_eq!(
        unavailable.reason(),
        UnavailableReason::BackendUnavailable,
        "{error}"
    );
    assert!(unavailable.retry_after().is_some(), "a retry hint: {error}");
    assert!(
        elapsed < Duration::from_secs(5),
        "bounded by the command timeout, took {elapsed:?}"
    );
    let requests_while_down = mock.counters().total;
    assert_eq!(
        requests_while_down, 1,
        "nothing was admitted while the backend was down"
    );

    redis.restart();
    support::eventually(
        "the same client serves again",
        Duration::from_secs(20),
        || async { client.chat(ChatRequest::from_prompt("after")).await.is_ok() },
    )
    .await;
    client.shutdown().await;
}
