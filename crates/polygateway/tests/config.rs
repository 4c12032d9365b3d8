//! Configuration from the environment and from code: every error path names the key (or field)
//! and the value, never a secret; both paths share one validation.

use std::time::Duration;

use polygateway::config::{
    BackendKind, DEFAULT_EST_TOKENS, DEFAULT_MAX_BATCH, DEFAULT_TIMEOUT, Env, GatewaySettings,
    SourceSettings,
};
use polygateway::{ConfigError, ConfigValue, Scope, Secret, SourceKind};

const SECRET: &str = "sk-very-secret-0123456789";

fn base() -> Vec<(&'static str, &'static str)> {
    vec![
        ("LLM__SOURCE__A__BASE_URL", "http://127.0.0.1:9/v1"),
        ("LLM__SOURCE__A__MODEL", "m"),
        ("LLM__SOURCE__A__API_KEY", SECRET),
    ]
}

fn load(
    extra: &[(&'static str, &'static str)],
) -> Result<polygateway::config::ScopeConfig, ConfigError> {
    let mut pairs = base();
    pairs.extend_from_slice(extra);
    GatewaySettings::from_env(Scope::Llm, &Env::from_pairs(pairs))
}

fn load_err(extra: &[(&'static str, &'static str)]) -> ConfigError {
    let error = load(extra).expect_err("configuration must be refused");
    assert!(!error.to_string().contains(SECRET), "secret in {error}");
    assert!(
        !format!("{error:?}").contains(SECRET),
        "secret in {error:?}"
    );
    error
}

fn shown(value: &str) -> ConfigValue {
    ConfigValue::Shown(value.to_owned())
}

#[test]
fn a_minimal_source_gets_every_default() {
    let config = load(&[]).expect("valid");
    assert_eq!(config.scope, Scope::Llm);
    assert_eq!(config.backend, BackendKind::Memory);
    assert_eq!(config.call_deadline, None);
    let source = &config.sources[0];
    assert_eq!(source.name, "A");
    assert_eq!(source.kind, SourceKind::OpenAiCompat);
    assert_eq!(source.base_url, "http://127.0.0.1:9/v1");
    assert_eq!(source.api_key.as_ref().map(Secret::expose), Some(SECRET));
    assert_eq!(source.timeout, DEFAULT_TIMEOUT);
    assert_eq!(source.est_tokens, DEFAULT_EST_TOKENS);
    assert_eq!(source.max_batch, DEFAULT_MAX_BATCH);
    assert_eq!((source.priority, source.weight), (0, 1));
    assert_eq!(source.limits.tpm, None);
}

#[test]
fn every_key_is_read() {
    let config = load(&[
        ("LLM__TIMEOUT_S", "12.5"),
        ("LLM__MAX_ATTEMPTS", "7"),
        ("LLM__BACKOFF_BASE_S", "0.25"),
        ("LLM__BACKOFF_MAX_S", "8"),
        ("LLM__STALL_WINDOW_S", "45"),
        ("LLM__CALL_DEADLINE_S", "2.5"),
        ("LLM__BREAKER_FAILURES", "3"),
        ("LLM__BREAKER_OPEN_S", "10"),
        ("LLM__BACKEND", "redis"),
        ("REDIS_URL", "redis://127.0.0.1:6390/0"),
        ("POLYGATEWAY_TELEMETRY_JSONL", "/tmp/t.jsonl"),
        ("LLM__SOURCE__A__KIND", "openai_compat"),
        ("LLM__SOURCE__A__TPM", "60000"),
        ("LLM__SOURCE__A__RPM", "500"),
        ("LLM__SOURCE__A__MAX_CONCURRENCY", "16"),
        ("LLM__SOURCE__A__EST_TOKENS", "800"),
        ("LLM__SOURCE__A__TIMEOUT_S", "3"),
        ("LLM__SOURCE__A__PRIORITY", "2"),
        ("LLM__SOURCE__A__WEIGHT", "5"),
    ])
    .expect("valid");
    assert_eq!(config.max_attempts, 7);
    assert_eq!(config.backoff_base, Duration::from_millis(250));
    assert_eq!(config.backoff_max, Duration::from_secs(8));
    assert_eq!(config.stall_window, Duration::from_secs(45));
    assert_eq!(
        config.call_deadline.map(|d| d.duration()),
        Some(Duration::from_millis(2500))
    );
    assert_eq!(config.breaker.failures_to_open, 3);
    assert_eq!(config.breaker.open_for, Duration::from_secs(10));
    assert_eq!(config.backend, BackendKind::Redis);
    assert_eq!(
        config.redis_url.as_ref().map(Secret::expose),
        Some("redis://127.0.0.1:6390/0")
    );
    assert_eq!(
        config.telemetry_jsonl.as_deref(),
        Some(std::path::Path::new("/tmp/t.jsonl"))
    );
    let s = &config.sources[0];
    assert_eq!(s.limits.tpm, Some(60_000));
    assert_eq!(s.limits.rpm, Some(500));
    assert_eq!(s.limits.max_concurrency, Some(16));
    assert_eq!(s.est_tokens, 800);
    assert_eq!(s.timeout, Duration::from_secs(3));
    assert_eq!((s.priority, s.weight), (2, 5));
}

#[test]
fn scope_timeout_is_the_source_default() {
    let config = load(&[("LLM__TIMEOUT_S", "9")]).expect("valid");
    assert_eq!(config.sources[0].timeout, Duration::from_secs(9));
}

#[test]
fn call_deadline_rejects_zero_negative_nan_inf_and_text_naming_key_and_value() {
    for value in ["0", "-1", "nan", "inf", "-inf", "abc", "1e999", "0.0"] {
        let error = load_err(&[("LLM__CALL_DEADLINE_S", value)]);
        assert_eq!(error.key(), "LLM__CALL_DEADLINE_S", "{value}");
        assert_eq!(error.value(), &shown(value), "{value}");
        let message = error.to_string();
        assert!(
            message.contains("LLM__CALL_DEADLINE_S") && message.contains(value),
            "{message}"
        );
    }
}

#[test]
fn every_duration_key_uses_the_same_rule() {
    for key in [
        "LLM__TIMEOUT_S",
        "LLM__BACKOFF_BASE_S",
        "LLM__BACKOFF_MAX_S",
        "LLM__STALL_WINDOW_S",
        "LLM__BREAKER_OPEN_S",
        "LLM__SOURCE__A__TIMEOUT_S",
    ] {
        for value in ["0", "-3", "nan", "inf", "soon"] {
            let error = load_err(&[(key, value)]);
            assert_eq!((error.key(), error.value()), (key, &shown(value)));
        }
    }
}

#[test]
fn unparsable_numbers_name_key_and_value() {
    for key in [
        "LLM__MAX_ATTEMPTS",
        "LLM__BREAKER_FAILURES",
        "LLM__SOURCE__A__TPM",
        "LLM__SOURCE__A__RPM",
        "LLM__SOURCE__A__MAX_CONCURRENCY",
        "LLM__SOURCE__A__EST_TOKENS",
        "LLM__SOURCE__A__PRIORITY",
        "LLM__SOURCE__A__WEIGHT",
    ] {
        for value in ["abc", "-1", "1.5", "99999999999999999999999"] {
            let error = load_err(&[(key, value)]);
            assert_eq!((error.key(), error.value()), (key, &shown(value)));
            assert_eq!(error.problem(), "expected a whole number");
        }
    }
}

#[test]
fn a_limit_of_zero_is_an_error() {
    for key in [
        "LLM__SOURCE__A__TPM",
        "LLM__SOURCE__A__RPM",
        "LLM__SOURCE__A__MAX_CONCURRENCY",
    ] {
        let error = load_err(&[(key, "0")]);
        assert_eq!((error.key(), error.value()), (key, &shown("0")));
        assert!(
            error.problem().contains("a limit of 0 would admit nothing"),
            "{error}"
        );
    }
    for key in [
        "LLM__MAX_ATTEMPTS",
        "LLM__BREAKER_FAILURES",
        "LLM__SOURCE__A__WEIGHT",
    ] {
        let error = load_err(&[(key, "0")]);
        assert_eq!((error.key(), error.problem()), (key, "expected at least 1"));
    }
}

#[test]
fn unknown_keys_under_the_scope_prefix_are_errors() {
    for key in [
        "LLM__TIMEOUTS",
        "LLM__SOURCE__A__MODLE",
        "LLM__SOURCE__A",
        "LLM__SOURCE__A__B__TPM",
        "LLM__SOURCE__A__MAX_BATCH",
    ] {
        let error = load_err(&[(key, "1")]);
        assert_eq!(error.key(), key);
    }
    // Keys outside every scope prefix are not ours and are ignored.
    load(&[
        ("LLM_TIMEOUT_S", "x"),
        ("PATH", "/bin"),
        ("EMBEDDING__WHATEVER", "x"),
    ])
    .expect("other prefixes are not read when loading LLM");
}

#[test]
fn empty_values_count_as_unset() {
    let config = load(&[("LLM__CALL_DEADLINE_S", ""), ("LLM__SOURCE__A__TPM", "")]).expect("valid");
    assert_eq!(config.call_deadline, None);
    assert_eq!(config.sources[0].limits.tpm, None);
}

#[test]
fn backend_values_and_redis_url() {
    let error = load_err(&[("LLM__BACKEND", "postgres")]);
    assert_eq!(
        (error.key(), error.value()),
        ("LLM__BACKEND", &shown("postgres"))
    );

    let error = load_err(&[("LLM__BACKEND", "redis")]);
    assert_eq!(
        (error.key(), error.value()),
        ("REDIS_URL", &ConfigValue::Missing)
    );
    assert!(error.problem().contains("LLM__BACKEND"), "{error}");

    let error = load_err(&[("REDIS_URL", "http://:hunter2@localhost:6379")]);
    assert_eq!(error.key(), "REDIS_URL");
    assert_eq!(error.value(), &shown("http://<redacted>@localhost:6379"));
    assert!(!error.to_string().contains("hunter2"));

    let error = load_err(&[("REDIS_URL", "redis://:hunter2@localhost:notaport")]);
    assert!(!error.to_string().contains("hunter2"), "{error}");
}

#[test]
fn source_fields_are_checked() {
    let error = GatewaySettings::from_env(
        Scope::Llm,
        &Env::from_pairs([("LLM__SOURCE__A__MODEL", "m")]),
    )
    .unwrap_err();
    assert_eq!(
        (error.key(), error.value()),
        ("LLM__SOURCE__A__BASE_URL", &ConfigValue::Missing)
    );

    let error = load_err(&[("LLM__SOURCE__A__BASE_URL", "localhost:8080")]);
    assert_eq!(
        (error.key(), error.value()),
        ("LLM__SOURCE__A__BASE_URL", &shown("localhost:8080"))
    );

    let error = GatewaySettings::from_env(
        Scope::Llm,
        &Env::from_pairs([("LLM__SOURCE__A__BASE_URL", "http://h")]),
    )
    .unwrap_err();
    assert_eq!(
        (error.key(), error.value()),
        ("LLM__SOURCE__A__MODEL", &ConfigValue::Missing)
    );

    let error = load_err(&[("LLM__SOURCE__A__KIND", "monkey_ocr")]);
    assert_eq!(
        (error.key(), error.value()),
        ("LLM__SOURCE__A__KIND", &shown("monkey_ocr"))
    );
    let error = load_err(&[("LLM__SOURCE__A__KIND", "grpc")]);
    assert_eq!(
        (error.key(), error.value()),
        ("LLM__SOURCE__A__KIND", &shown("grpc"))
    );
}

#[test]
fn backoff_base_may_not_exceed_backoff_max() {
    let error = load_err(&[("LLM__BACKOFF_BASE_S", "10"), ("LLM__BACKOFF_MAX_S", "2")]);
    assert_eq!(error.key(), "LLM__BACKOFF_BASE_S");
    assert!(error.problem().contains("LLM__BACKOFF_MAX_S"), "{error}");
}

#[test]
fn a_scope_without_sources_is_an_error() {
    let error = GatewaySettings::from_env(Scope::Ocr, &Env::default()).unwrap_err();
    assert_eq!(error.key(), "OCR__SOURCE__<NAME>__BASE_URL");
    assert_eq!(error.value(), &ConfigValue::Missing);
}

#[test]
fn ocr_and_embedding_scopes_have_their_own_defaults() {
    let ocr = GatewaySettings::from_env(
        Scope::Ocr,
        &Env::from_pairs([("OCR__SOURCE__MONKEY__BASE_URL", "http://127.0.0.1:7861")]),
    )
    .expect("an OCR source needs no model");
    assert_eq!(ocr.sources[0].kind, SourceKind::MonkeyOcr);
    assert_eq!(ocr.sources[0].est_tokens, 0);

    let emb = GatewaySettings::from_env(
        Scope::Embedding,
        &Env::from_pairs([
            ("EMBEDDING__SOURCE__E__BASE_URL", "http://127.0.0.1:1"),
            ("EMBEDDING__SOURCE__E__MODEL", "bge"),
            ("EMBEDDING__SOURCE__E__MAX_BATCH", "32"),
        ]),
    )
    .expect("valid");
    assert_eq!(emb.sources[0].max_batch, 32);
    let error = GatewaySettings::from_env(
        Scope::Embedding,
        &Env::from_pairs([
            ("EMBEDDING__SOURCE__E__BASE_URL", "http://127.0.0.1:1"),
            ("EMBEDDING__SOURCE__E__MODEL", "bge"),
            ("EMBEDDING__SOURCE__E__MAX_BATCH", "0"),
        ]),
    )
    .unwrap_err();
    assert_eq!(
        (error.key(), error.value()),
        ("EMBEDDING__SOURCE__E__MAX_BATCH", &shown("0"))
    );
}

fn code_settings() -> GatewaySettings {
    let mut settings = GatewaySettings::new(Scope::Llm);
    settings.sources.push(SourceSettings {
        model: Some("m".into()),
        api_key: Some(Secret::new(SECRET)),
        ..SourceSettings::new("A", "http://127.0.0.1:9")
    });
    settings
}

fn code_err(change: impl FnOnce(&mut GatewaySettings)) -> ConfigError {
    let mut settings = code_settings();
    change(&mut settings);
    let error = settings.validate().expect_err("must be refused");
    assert!(!error.to_string().contains(SECRET), "{error}");
    error
}

#[test]
fn settings_built_in_code_go_through_the_same_validation_naming_fields() {
    assert!(code_settings().validate().is_ok());

    let error = code_err(|s| s.call_deadline = Some(Duration::ZERO));
    assert_eq!(
        (error.key(), error.value()),
        ("GatewaySettings.call_deadline", &shown("0ns"))
    );

    let error = code_err(|s| s.timeout = Duration::ZERO);
    assert_eq!(error.key(), "GatewaySettings.timeout");

    let error = code_err(|s| s.max_attempts = 0);
    assert_eq!(
        (error.key(), error.value()),
        ("GatewaySettings.max_attempts", &shown("0"))
    );

    let error = code_err(|s| s.sources[0].tpm = Some(0));
    assert_eq!(
        (error.key(), error.value()),
        ("SourceSettings[A].tpm", &shown("0"))
    );

    let error = code_err(|s| s.sources[0].name = "my-source".into());
    assert_eq!(
        (error.key(), error.value()),
        ("SourceSettings[my-source].name", &shown("my-source"))
    );

    let error = code_err(|s| {
        let copy = s.sources[0].clone();
        s.sources.push(copy);
    });
    assert_eq!(
        (error.key(), error.value()),
        ("SourceSettings[A].name", &shown("A"))
    );

    let error = code_err(|s| s.sources[0].api_key = Some(Secret::new("   ")));
    assert_eq!(
        (error.key(), error.value()),
        ("SourceSettings[A].api_key", &ConfigValue::Secret)
    );

    let error = code_err(|s| s.sources[0].max_batch = Some(8));
    assert_eq!(error.key(), "SourceSettings[A].max_batch");

    let error = code_err(|s| s.backend = BackendKind::Redis);
    assert_eq!(
        (error.key(), error.value()),
        ("GatewaySettings.redis_url", &ConfigValue::Missing)
    );
}

#[test]
fn debug_of_settings_and_config_hides_secrets() {
    let settings = code_settings();
    assert!(!format!("{settings:?}").contains(SECRET));
    let config = settings.validate().expect("valid");
    assert!(!format!("{config:?}").contains(SECRET));
    let env = Env::from_pairs(base());
    assert!(!format!("{env:?}").contains(SECRET));
}
