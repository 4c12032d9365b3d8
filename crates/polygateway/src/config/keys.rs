//! Every configuration key the library reads, in one place (SPEC §3). `docs/configuration.md`
//! and `.env.example` list the same keys; a test keeps them in step.

use polygateway_errors::{ConfigError, Scope};

/// A setting's two names: the field segment of its environment key, and the field of the
/// settings struct when it is built in code. Errors name whichever the value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Field {
    pub(crate) env: &'static str,
    pub(crate) code: &'static str,
}

const fn field(env: &'static str, code: &'static str) -> Field {
    Field { env, code }
}

pub(crate) const TIMEOUT_S: Field = field("TIMEOUT_S", "timeout");
pub(crate) const MAX_ATTEMPTS: Field = field("MAX_ATTEMPTS", "max_attempts");
pub(crate) const BACKOFF_BASE_S: Field = field("BACKOFF_BASE_S", "backoff_base");
pub(crate) const BACKOFF_MAX_S: Field = field("BACKOFF_MAX_S", "backoff_max");
pub(crate) const STALL_WINDOW_S: Field = field("STALL_WINDOW_S", "stall_window");
pub(crate) const CALL_DEADLINE_S: Field = field("CALL_DEADLINE_S", "call_deadline");
pub(crate) const BREAKER_FAILURES: Field = field("BREAKER_FAILURES", "breaker_failures");
pub(crate) const BREAKER_OPEN_S: Field = field("BREAKER_OPEN_S", "breaker_open");
pub(crate) const BACKEND: Field = field("BACKEND", "backend");
pub(crate) const BATCH_CONCURRENCY: Field = field("BATCH_CONCURRENCY", "batch_concurrency");
pub(crate) const MAX_FILE_BYTES: Field = field("MAX_FILE_BYTES", "max_file_bytes");

/// The scope-level fields: `{SCOPE}__{FIELD}`. `BATCH_CONCURRENCY` is valid only in the
/// `EMBEDDING` scope and `MAX_FILE_BYTES` only in `OCR` ([`scope_only`]).
pub(crate) const SCOPE_FIELDS: [Field; 11] = [
    TIMEOUT_S,
    MAX_ATTEMPTS,
    BACKOFF_BASE_S,
    BACKOFF_MAX_S,
    STALL_WINDOW_S,
    CALL_DEADLINE_S,
    BREAKER_FAILURES,
    BREAKER_OPEN_S,
    BACKEND,
    BATCH_CONCURRENCY,
    MAX_FILE_BYTES,
];

/// The one scope a field belongs to, for fields that apply to a single scope.
pub(crate) fn scope_only(field: Field) -> Option<Scope> {
    if field == MAX_BATCH || field == BATCH_CONCURRENCY {
        Some(Scope::Embedding)
    } else if field == MAX_FILE_BYTES {
        Some(Scope::Ocr)
    } else {
        None
    }
}

pub(crate) const KIND: Field = field("KIND", "kind");
pub(crate) const BASE_URL: Field = field("BASE_URL", "base_url");
pub(crate) const API_KEY: Field = field("API_KEY", "api_key");
pub(crate) const MODEL: Field = field("MODEL", "model");
pub(crate) const TPM: Field = field("TPM", "tpm");
pub(crate) const RPM: Field = field("RPM", "rpm");
pub(crate) const MAX_CONCURRENCY: Field = field("MAX_CONCURRENCY", "max_concurrency");
pub(crate) const EST_TOKENS: Field = field("EST_TOKENS", "est_tokens");
pub(crate) const SOURCE_TIMEOUT_S: Field = field("TIMEOUT_S", "timeout");
pub(crate) const PRIORITY: Field = field("PRIORITY", "priority");
pub(crate) const WEIGHT: Field = field("WEIGHT", "weight");
pub(crate) const MAX_BATCH: Field = field("MAX_BATCH", "max_batch");
pub(crate) const MIN_INTERVAL_S: Field = field("MIN_INTERVAL_S", "min_interval");
pub(crate) const NAME: Field = field("NAME", "name");

/// The per-source fields: `{SCOPE}__SOURCE__{NAME}__{FIELD}`. `MAX_BATCH` is valid only in
/// the `EMBEDDING` scope.
pub(crate) const SOURCE_FIELDS: [Field; 13] = [
    KIND,
    BASE_URL,
    API_KEY,
    MODEL,
    TPM,
    RPM,
    MAX_CONCURRENCY,
    EST_TOKENS,
    SOURCE_TIMEOUT_S,
    PRIORITY,
    WEIGHT,
    MAX_BATCH,
    MIN_INTERVAL_S,
];

/// Keys shared by every scope.
pub(crate) const REDIS_URL: &str = "REDIS_URL";
/// The JSON-lines telemetry file.
pub(crate) const TELEMETRY_JSONL: &str = "POLYGATEWAY_TELEMETRY_JSONL";
/// The prefix of every Redis key.
pub(crate) const REDIS_KEY_PREFIX: &str = "REDIS_KEY_PREFIX";
/// Connections in the Redis pool.
pub(crate) const REDIS_POOL_SIZE: &str = "REDIS_POOL_SIZE";
/// Bound on every Redis command.
pub(crate) const REDIS_COMMAND_TIMEOUT_S: &str = "REDIS_COMMAND_TIMEOUT_S";

/// Every key shared by the scopes.
pub(crate) const SHARED_KEYS: [&str; 5] = [
    REDIS_URL,
    REDIS_KEY_PREFIX,
    REDIS_POOL_SIZE,
    REDIS_COMMAND_TIMEOUT_S,
    TELEMETRY_JSONL,
];

/// The segment that marks a source key.
pub(crate) const SOURCE_SEGMENT: &str = "SOURCE";

/// Where a setting's value came from, which decides how errors name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Read from an environment key.
    Env,
    /// Set in code on `GatewaySettings` / `SourceSettings`.
    Code,
}

impl Origin {
    /// The name of a scope-level setting.
    pub(crate) fn scope_key(self, scope: Scope, field: Field) -> String {
        match self {
            Origin::Env => format!("{scope}__{}", field.env),
            Origin::Code => format!("GatewaySettings.{}", field.code),
        }
    }

    /// The name of a source setting.
    pub(crate) fn source_key(self, scope: Scope, source: &str, field: Field) -> String {
        match self {
            Origin::Env => format!("{scope}__{SOURCE_SEGMENT}__{source}__{}", field.env),
            Origin::Code => format!("SourceSettings[{source}].{}", field.code),
        }
    }

    /// The name of a shared setting.
    pub(crate) fn shared_key(self, env_key: &'static str, code: &'static str) -> String {
        match self {
            Origin::Env => env_key.to_owned(),
            Origin::Code => format!("GatewaySettings.{code}"),
        }
    }
}

/// Every key the library reads, scope by scope, with `<NAME>` standing for a source's name.
pub(crate) fn all_keys() -> Vec<String> {
    let mut out = Vec::new();
    for scope in Scope::ALL {
        let applies = |f: &&Field| scope_only(**f).is_none_or(|only| only == scope);
        out.extend(
            SCOPE_FIELDS
                .iter()
                .filter(applies)
                .map(|f| format!("{scope}__{}", f.env)),
        );
        out.extend(
            SOURCE_FIELDS
                .iter()
                .filter(applies)
                .map(|f| format!("{scope}__{SOURCE_SEGMENT}__<NAME>__{}", f.env)),
        );
    }
    out.extend(SHARED_KEYS.iter().map(|k| (*k).to_owned()));
    out
}

/// Whether `key` is one the library reads or would reject: under a scope prefix, or shared.
pub(crate) fn is_configuration_key(key: &str) -> bool {
    Scope::of_key(key).is_some() || SHARED_KEYS.contains(&key)
}

/// A key found under `{scope}__`, split by what it addresses.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ScopeKey<'a> {
    /// `{SCOPE}__{FIELD}`.
    Scope(Field),
    /// `{SCOPE}__SOURCE__{NAME}__{FIELD}`.
    Source { name: &'a str, field: Field },
}

/// Classify `key` (which starts with `{scope}__`); an unknown key is an error naming it, so a
/// typo is never silently ignored.
pub(crate) fn classify(scope: Scope, key: &str) -> Result<ScopeKey<'_>, ConfigError> {
    let rest = &key[scope.as_str().len() + 2..];
    let segments: Vec<&str> = rest.split("__").collect();
    let unknown = |problem: String| Err(ConfigError::invalid(key, "<any>", problem));
    match segments.as_slice() {
        [name] => match SCOPE_FIELDS.iter().find(|f| f.env == *name) {
            Some(f) if scope_only(*f).is_some_and(|only| only != scope) => unknown(format!(
                "{} applies to the {} scope only, not {scope}",
                f.env,
                scope_only(*f).map_or("?", Scope::as_str)
            )),
            Some(f) => Ok(ScopeKey::Scope(*f)),
            None => unknown(format!(
                "unknown key under {scope}__; known scope keys: {}",
                SCOPE_FIELDS.map(|f| f.env).join(", ")
            )),
        },
        [SOURCE_SEGMENT, name, field] if !name.is_empty() => {
            match SOURCE_FIELDS.iter().find(|f| f.env == *field) {
                Some(f) if f.env == MAX_BATCH.env && scope != Scope::Embedding => unknown(format!(
                    "MAX_BATCH applies to EMBEDDING sources only, not {scope}"
                )),
                Some(f) => Ok(ScopeKey::Source { name, field: *f }),
                None => unknown(format!(
                    "unknown source field {field:?}; known: {}",
                    SOURCE_FIELDS.map(|f| f.env).join(", ")
                )),
            }
        }
        _ => unknown(format!(
            "not a scope key ({scope}__FIELD) nor a source key ({scope}__SOURCE__NAME__FIELD)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_segment_keys_are_never_source_keys() {
        assert!(matches!(
            classify(Scope::Llm, "LLM__CALL_DEADLINE_S"),
            Ok(ScopeKey::Scope(f)) if f.env == "CALL_DEADLINE_S"
        ));
        assert!(matches!(
            classify(Scope::Llm, "LLM__SOURCE__DEEPSEEK__TIMEOUT_S"),
            Ok(ScopeKey::Source { name: "DEEPSEEK", field }) if field.env == "TIMEOUT_S"
        ));
    }

    #[test]
    fn unknown_and_malformed_keys_are_errors_naming_the_key() {
        for key in [
            "LLM__TIMEOUT",
            "LLM__SOURCE",
            "LLM__SOURCE__A",
            "LLM__SOURCE__A__TPMM",
            "LLM__SOURCE____TPM",
            "LLM__SOURCE__A__B__TPM",
            "LLM__SOURCE__A__MAX_BATCH",
            "LLM____TIMEOUT_S",
        ] {
            let error = classify(Scope::Llm, key).expect_err(key);
            assert_eq!(error.key(), key);
        }
        assert!(classify(Scope::Embedding, "EMBEDDING__SOURCE__A__MAX_BATCH").is_ok());
    }
}
