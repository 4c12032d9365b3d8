//! `polygw chat`, `polygw stats` and `polygw demo` as real processes against the mock upstream:
//! the output contract of SPEC §18.

use std::process::{Command, Output};

use polygateway_mock::{Behaviour, MockUpstream, Scenario, Script, openai_error};

fn polygw(env: &[(&str, String)], args: &[&str]) -> Output {
    let dir = std::env::temp_dir().join(format!("polygw-chat-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("workdir");
    Command::new(env!("CARGO_BIN_EXE_polygw"))
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .current_dir(&dir)
        .output()
        .expect("polygw runs")
}

fn env_for(mock: &MockUpstream) -> Vec<(&'static str, String)> {
    vec![
        ("LLM__SOURCE__A__BASE_URL", mock.base_url("A")),
        ("LLM__SOURCE__A__MODEL", "mock-model".to_owned()),
        (
            "LLM__SOURCE__A__API_KEY",
            "sk-cli-0123456789abcdef".to_owned(),
        ),
        ("LLM__MAX_ATTEMPTS", "2".to_owned()),
        ("LLM__BACKOFF_BASE_S", "0.01".to_owned()),
    ]
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_json_prints_the_contract_fields() {
    let mock = MockUpstream::start(Scenario::default().with_rule(
        None,
        None,
        Script::always(Behaviour::ok_with_usage(7, 3)),
    ))
    .await
    .expect("mock");
    let out = polygw(&env_for(&mock), &["chat", "--json", "hello there"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(json["content"], "mock answer to: hello there");
    assert_eq!(json["source"], "A");
    assert_eq!(json["model"], "mock-model");
    assert_eq!(json["attempts"], 1);
    assert_eq!(
        json["usage"],
        serde_json::json!({"prompt_tokens": 7, "completion_tokens": 3})
    );
    assert!(json["latency_ms"].is_u64());
    assert_eq!(json["logical_call_id"].as_str().map(str::len), Some(24));
    let keys: Vec<&String> = json.as_object().expect("object").keys().collect();
    assert_eq!(
        keys,
        [
            "attempts",
            "content",
            "latency_ms",
            "logical_call_id",
            "model",
            "source",
            "usage"
        ]
    );

    let plain = polygw(&env_for(&mock), &["chat", "hello there"]);
    assert_eq!(text(&plain.stdout), "mock answer to: hello there\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_call_prints_its_kind_first_on_stderr_and_exits_1() {
    let rejected = Behaviour::Status {
        status: 400,
        retry_after: None,
        retry_after_ms: None,
        body: Some(openai_error(
            "maximum context length exceeded",
            "invalid_request_error",
            "context_length_exceeded",
        )),
    };
    let mock =
        MockUpstream::start(Scenario::default().with_rule(None, None, Script::always(rejected)))
            .await
            .expect("mock");
    let out = polygw(&env_for(&mock), &["chat", "--json", "x"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with("error: RequestRejected: LLM: request rejected by source A (HTTP 400)"),
        "{stderr}"
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("error JSON");
    assert_eq!(json["error"]["kind"], "RequestRejected");
    assert_eq!(json["error"]["scope"], "LLM");

    mock.set_scenario(Scenario::default().with_rule(
        None,
        None,
        Script::always(Behaviour::status(503)),
    ));
    let out = polygw(&env_for(&mock), &["chat", "x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with("error: GatewayUnavailable: "),
        "{}",
        text(&out.stderr)
    );
    assert!(!text(&out.stderr).contains("sk-cli-0123456789abcdef"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_deadline_flag_and_configuration_errors_exit_2() {
    let mock = MockUpstream::start(Scenario::default().with_rule(
        None,
        None,
        Script::always(Behaviour::Hang),
    ))
    .await
    .expect("mock");
    let out = polygw(&env_for(&mock), &["chat", "--deadline", "0.3", "x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr)
            .starts_with("error: CallDeadlineExceeded: LLM: call deadline of 300ms exceeded"),
        "{}",
        text(&out.stderr)
    );

    for bad in ["0", "-1", "nan", "inf", "abc"] {
        let out = polygw(&env_for(&mock), &["chat", "--deadline", bad, "x"]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(
            text(&out.stderr).starts_with(&format!(
                "error: Config: invalid configuration: --deadline = {bad:?}"
            )),
            "{}",
            text(&out.stderr)
        );
    }
    let mut env = env_for(&mock);
    env.push(("LLM__CALL_DEADLINE_S", "nan".to_owned()));
    let out = polygw(&env, &["chat", "--json", "x"]);
    assert_eq!(out.status.code(), Some(2));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("error JSON");
    assert_eq!(json["error"]["kind"], "Config");
    assert!(
        json["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("LLM__CALL_DEADLINE_S"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn stats_json_lists_every_source_with_the_contract_fields() {
    let mock = MockUpstream::start(Scenario::default())
        .await
        .expect("mock");
    let out = polygw(&env_for(&mock), &["stats", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        json["scopes"]["LLM"],
        serde_json::json!([{"source": "A", "tpm_used": 0, "rpm_used": 0, "inflight": 0, "breaker": "closed"}])
    );
}

#[test]
fn demo_runs_to_its_table() {
    let out = polygw(&[], &["demo", "--calls", "60"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(
            "source    calls  attempts  retries  breaker trips  tokens settled   p50 ms   p99 ms"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("\nSTORM ") && stdout.contains("\nFLAKY "),
        "{stdout}"
    );
    assert!(stdout.contains("of 60 calls served"), "{stdout}");
}
