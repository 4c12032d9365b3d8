//! Configuration (SPEC §3): environment keys, settings built in code, and the one validation
//! both go through. `docs/configuration.md` is the reference for every key.
//!
//! * Scope keys: `{SCOPE}__{FIELD}`, e.g. `LLM__CALL_DEADLINE_S`.
//! * Source keys: `{SCOPE}__SOURCE__{NAME}__{FIELD}`, e.g. `LLM__SOURCE__DEEPSEEK__TPM`.
//! * Shared keys: `REDIS_URL`, `REDIS_KEY_PREFIX`, `REDIS_POOL_SIZE`, `REDIS_COMMAND_TIMEOUT_S`,
//!   `POLYGATEWAY_TELEMETRY_JSONL`.
//!
//! A key under a scope prefix that the library does not know is an error naming it; every
//! error names the key that was read (or the field set in code) and its value, except
//! secrets, which are never shown.

mod env;
mod keys;
mod settings;

use std::path::Path;

use polygateway_errors::{ConfigError, Scope};

pub use env::Env;
pub use settings::{
    BackendKind, DEFAULT_BACKOFF_BASE, DEFAULT_BACKOFF_MAX, DEFAULT_BATCH_CONCURRENCY,
    DEFAULT_BREAKER_FAILURES, DEFAULT_BREAKER_OPEN, DEFAULT_EST_TOKENS, DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_BATCH, DEFAULT_MAX_FILE_BYTES, DEFAULT_REDIS_COMMAND_TIMEOUT,
    DEFAULT_REDIS_KEY_PREFIX, DEFAULT_REDIS_POOL_SIZE, DEFAULT_STALL_WINDOW, DEFAULT_TIMEOUT,
    GatewaySettings, LEASE_MARGIN, ScopeConfig, SourceSettings, redacted_url,
};

/// The name of the optional file read after the process environment.
pub const DOTENV_FILE: &str = ".env";

/// Every key the library reads, with `<NAME>` standing for a source's name — the list that
/// `docs/configuration.md` and `.env.example` document.
pub fn all_keys() -> Vec<String> {
    keys::all_keys()
}

/// Read the settings of `scope` from the process environment, completed by `.env` in the
/// working directory (the environment wins), and validate them.
pub fn from_process_env(scope: Scope) -> Result<ScopeConfig, ConfigError> {
    let env = Env::from_process_and_dotenv(Path::new(DOTENV_FILE))?;
    GatewaySettings::from_env(scope, &env)
}
