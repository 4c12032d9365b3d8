//! The call deadline read from configuration drives the one boundary (SPEC §3, §9).

use std::time::Duration;

use polygateway::config::{Env, GatewaySettings};
use polygateway::{ErrorKind, GatewayError, Scope, with_call_deadline};

fn env(deadline: &str) -> Env {
    Env::from_pairs([
        ("LLM__SOURCE__A__BASE_URL", "http://127.0.0.1:9"),
        ("LLM__SOURCE__A__MODEL", "m"),
        ("LLM__CALL_DEADLINE_S", deadline),
    ])
}

#[tokio::test(start_paused = true)]
async fn the_configured_deadline_bounds_the_call() {
    let config = GatewaySettings::from_env(Scope::Llm, &env("1.5")).expect("valid");
    let started = tokio::time::Instant::now();
    let error = with_call_deadline(config.scope, config.call_deadline, async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok::<_, GatewayError>(())
    })
    .await
    .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::CallDeadlineExceeded);
    assert_eq!(error.scope(), Some(Scope::Llm));
    assert_eq!(error.retry_after(), None);
    assert_eq!(started.elapsed(), Duration::from_millis(1500));
}

#[tokio::test(start_paused = true)]
async fn without_the_key_a_long_call_is_not_bounded() {
    let config = GatewaySettings::from_env(Scope::Llm, &env("")).expect("valid");
    assert_eq!(config.call_deadline, None);
    let result = with_call_deadline(config.scope, config.call_deadline, async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok::<_, GatewayError>("done")
    })
    .await;
    assert_eq!(result, Ok("done"));
}
