//! `POLYGATEWAY_TELEMETRY_JSONL`: rows reach the file as JSON lines with the documented
//! columns, written off the call's path and flushed by `shutdown()`.

use polygateway::config::{Env, GatewaySettings};
use polygateway::{ChatRequest, GatewayClient, Scope};
use polygateway_mock::{Behaviour, MockUpstream, Scenario, Script};

#[tokio::test]
async fn rows_are_appended_as_json_lines_with_every_column() {
    let mock = MockUpstream::start(Scenario::default().with_rule(
        None,
        None,
        Script::always(Behaviour::ok_with_usage(4, 2)),
    ))
    .await
    .expect("mock");
    let path = std::env::temp_dir().join(format!("polygw-telemetry-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let env = Env::from_pairs([
        ("LLM__SOURCE__A__BASE_URL", mock.base_url("A")),
        ("LLM__SOURCE__A__MODEL", "m".to_owned()),
        (
            "LLM__SOURCE__A__API_KEY",
            "sk-jsonl-secret-123456".to_owned(),
        ),
        ("POLYGATEWAY_TELEMETRY_JSONL", path.display().to_string()),
    ]);
    let client =
        GatewayClient::builder(GatewaySettings::from_env(Scope::Llm, &env).expect("valid"))
            .build()
            .expect("client");
    let answer = client
        .chat(ChatRequest::from_prompt("hi"))
        .await
        .expect("served");
    client.shutdown().await;

    let text = std::fs::read_to_string(&path).expect("the file exists");
    assert!(!text.contains("sk-jsonl-secret-123456"));
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(rows.len(), 2);
    let columns = [
        "attempt",
        "completion_tokens",
        "error_type",
        "est_tokens",
        "event_kind",
        "http_status",
        "is_probe",
        "latency_ms",
        "logical_call_id",
        "model",
        "prompt_tokens",
        "retry_after_ms",
        "scope",
        "settled_tokens",
        "source",
        "total_latency_ms",
        "ts",
    ];
    for row in &rows {
        let keys: Vec<&str> = row
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, columns);
        assert_eq!(row["logical_call_id"], answer.logical_call_id);
        assert_eq!(row["scope"], "LLM");
    }
    assert_eq!(rows[0]["event_kind"], "attempt_ok");
    assert_eq!(rows[0]["settled_tokens"], 6);
    assert_eq!(rows[1]["event_kind"], "terminal_success");
    std::fs::remove_file(&path).expect("cleanup");
}

#[test]
fn an_unwritable_path_is_a_configuration_error_naming_the_key() {
    let env = Env::from_pairs([
        ("LLM__SOURCE__A__BASE_URL", "http://127.0.0.1:9"),
        ("LLM__SOURCE__A__MODEL", "m"),
        (
            "POLYGATEWAY_TELEMETRY_JSONL",
            "/nonexistent-dir/polygw/t.jsonl",
        ),
    ]);
    let error = GatewayClient::builder(GatewaySettings::from_env(Scope::Llm, &env).expect("valid"))
        .build()
        .unwrap_err();
    assert!(
        error.to_string().contains("POLYGATEWAY_TELEMETRY_JSONL"),
        "{error}"
    );
}
