use std::fmt;

use crate::Scope;

/// The value a configuration error is about, as it may be shown.
#[derive(Clone, PartialEq, Eq)]
pub enum ConfigValue {
    /// The key or parameter was required and not given.
    Missing,
    /// The value as read; safe to show.
    Shown(String),
    /// The value is a secret (an API key, a password) and is never shown.
    Secret,
}

impl fmt::Debug for ConfigValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigValue::Missing => f.write_str("Missing"),
            ConfigValue::Shown(value) => f.debug_tuple("Shown").field(value).finish(),
            ConfigValue::Secret => f.write_str("Secret(<redacted>)"),
        }
    }
}

/// Invalid settings or arguments (SPEC §3). Names the key that was actually read (e.g.
/// `LLM__CALL_DEADLINE_S`) or the parameter when the value came from code (e.g.
/// `GatewayClient::chat(call_deadline)`), the value — unless it is a secret — and what is
/// expected instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    key: String,
    value: ConfigValue,
    problem: String,
}

impl ConfigError {
    /// `key` holds `value`, which is wrong because of `problem` (phrased as what is expected).
    pub fn invalid(
        key: impl Into<String>,
        value: impl Into<String>,
        problem: impl Into<String>,
    ) -> Self {
        ConfigError {
            key: key.into(),
            value: ConfigValue::Shown(value.into()),
            problem: problem.into(),
        }
    }

    /// `key` holds a secret that is wrong because of `problem`; the value is never kept.
    pub fn invalid_secret(key: impl Into<String>, problem: impl Into<String>) -> Self {
        ConfigError {
            key: key.into(),
            value: ConfigValue::Secret,
            problem: problem.into(),
        }
    }

    /// `key` is required and was not given.
    pub fn missing(key: impl Into<String>, problem: impl Into<String>) -> Self {
        ConfigError {
            key: key.into(),
            value: ConfigValue::Missing,
            problem: problem.into(),
        }
    }

    /// The key or parameter the error is about.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The offending value, as it may be shown.
    pub fn value(&self) -> &ConfigValue {
        &self.value
    }

    /// What is wrong, phrased as what is expected.
    pub fn problem(&self) -> &str {
        &self.problem
    }

    /// The scope whose key this is, when the key is a scope key.
    pub fn scope(&self) -> Option<Scope> {
        Scope::of_key(&self.key)
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            ConfigValue::Missing => write!(f, "{} is not set: {}", self.key, self.problem),
            ConfigValue::Shown(value) => write!(f, "{} = {value:?}: {}", self.key, self.problem),
            ConfigValue::Secret => write!(f, "{} = <redacted>: {}", self.key, self.problem),
        }
    }
}

impl std::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_key_and_value() {
        let error = ConfigError::invalid(
            "LLM__CALL_DEADLINE_S",
            "0",
            "expected a finite number of seconds > 0",
        );
        assert_eq!(
            error.to_string(),
            "LLM__CALL_DEADLINE_S = \"0\": expected a finite number of seconds > 0"
        );
        assert_eq!(error.scope(), Some(Scope::Llm));
    }

    #[test]
    fn never_shows_a_secret() {
        let error = ConfigError::invalid_secret("LLM__SOURCE__A__API_KEY", "must not be empty");
        let debug = format!("{error:?}");
        assert_eq!(
            error.to_string(),
            "LLM__SOURCE__A__API_KEY = <redacted>: must not be empty"
        );
        assert!(debug.contains("<redacted>"), "{debug}");
    }

    #[test]
    fn missing_says_not_set() {
        let error = ConfigError::missing("REDIS_URL", "required when LLM__BACKEND=redis");
        assert_eq!(
            error.to_string(),
            "REDIS_URL is not set: required when LLM__BACKEND=redis"
        );
        assert_eq!(error.scope(), None);
    }
}
