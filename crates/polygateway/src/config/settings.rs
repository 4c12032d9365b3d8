//! Settings for one scope, from the environment or from code, and their one validation.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use polygateway_deadline::{CallDeadline, parse_secs, validate_duration};
use polygateway_errors::{ConfigError, Scope};
use polygateway_ports::{BreakerPolicy, Limits, Secret, SourceKind, SourceSpec};

use super::env::Env;
use super::keys::{self, Field, Origin, ScopeKey};

/// Which backend holds quotas and breaker state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BackendKind {
    /// In this process only.
    #[default]
    Memory,
    /// Shared by every process through Redis (`REDIS_URL`).
    Redis,
}

impl BackendKind {
    /// `memory` or `redis`, as in `{SCOPE}__BACKEND`.
    pub const fn as_str(self) -> &'static str {
        match self {
            BackendKind::Memory => "memory",
            BackendKind::Redis => "redis",
        }
    }
}

/// One source as configured, before validation. Build with [`SourceSettings::new`] and set
/// what you need; everything else has the defaults of `docs/configuration.md`.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceSettings {
    /// `[A-Z0-9_]+`, unique in the scope.
    pub name: String,
    /// The wire protocol; defaults to `openai_compat` for `LLM` / `EMBEDDING` and
    /// `monkey_ocr` for `OCR`.
    pub kind: Option<SourceKind>,
    /// `http://` or `https://` URL of the API.
    pub base_url: String,
    /// Sent as a bearer token; never printed.
    pub api_key: Option<Secret>,
    /// Required for `openai_compat` sources.
    pub model: Option<String>,
    /// Tokens per minute; `None` = no limit.
    pub tpm: Option<u64>,
    /// Requests per minute; `None` = no limit.
    pub rpm: Option<u64>,
    /// Attempts in flight at once; `None` = no limit.
    pub max_concurrency: Option<u32>,
    /// Reservation per attempt when the request gives no estimate.
    pub est_tokens: Option<u64>,
    /// One attempt's bound; defaults to the scope's `timeout`.
    pub timeout: Option<Duration>,
    /// Lower is tried first.
    pub priority: u32,
    /// Share among equal priority; > 0.
    pub weight: u32,
    /// Texts per embeddings request (`EMBEDDING` only).
    pub max_batch: Option<usize>,
    /// Least time between two request starts from this process; `None` = no spacing.
    pub min_interval: Option<Duration>,
}

impl SourceSettings {
    /// A source named `name` at `base_url`, with every other field at its default.
    pub fn new(name: impl Into<String>, base_url: impl Into<String>) -> Self {
        SourceSettings {
            name: name.into(),
            kind: None,
            base_url: base_url.into(),
            api_key: None,
            model: None,
            tpm: None,
            rpm: None,
            max_concurrency: None,
            est_tokens: None,
            timeout: None,
            priority: 0,
            weight: 1,
            max_batch: None,
            min_interval: None,
        }
    }
}

/// Default attempt timeout (`TIMEOUT_S`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Default `MAX_ATTEMPTS`.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 4;
/// Default `BACKOFF_BASE_S`.
pub const DEFAULT_BACKOFF_BASE: Duration = Duration::from_millis(500);
/// Default `BACKOFF_MAX_S`.
pub const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(30);
/// Default `STALL_WINDOW_S`.
pub const DEFAULT_STALL_WINDOW: Duration = Duration::from_secs(120);
/// Default `BREAKER_FAILURES`.
pub const DEFAULT_BREAKER_FAILURES: u32 = 5;
/// Default `BREAKER_OPEN_S`.
pub const DEFAULT_BREAKER_OPEN: Duration = Duration::from_secs(30);
/// A repeated trip's open time is capped at this many first-trip open times.
const BREAKER_MAX_OPEN_FACTOR: u32 = 8;
/// A `SourceDead` outcome opens the breaker for this long at once (SPEC §7 "a long time").
const BREAKER_DEAD_OPEN: Duration = Duration::from_secs(600);
/// How much longer than an attempt's timeout a permit's lease (and a breaker probe's) lasts:
/// room for the settlement to arrive after a timed-out attempt before the backend reclaims.
pub const LEASE_MARGIN: Duration = Duration::from_secs(5);
/// Default `EST_TOKENS` for chat and embeddings sources.
pub const DEFAULT_EST_TOKENS: u64 = 1000;
/// Default `REDIS_KEY_PREFIX`.
pub const DEFAULT_REDIS_KEY_PREFIX: &str = "polygateway";
/// Default `REDIS_POOL_SIZE`.
pub const DEFAULT_REDIS_POOL_SIZE: usize = 4;
/// Default `REDIS_COMMAND_TIMEOUT_S`: a local Redis answers in well under a millisecond; a
/// second means it is gone, and the pipeline should fail closed rather than wait.
pub const DEFAULT_REDIS_COMMAND_TIMEOUT: Duration = Duration::from_secs(1);
/// Default `EMBEDDING__BATCH_CONCURRENCY`.
pub const DEFAULT_BATCH_CONCURRENCY: usize = 4;
/// Default `OCR__MAX_FILE_BYTES`: 20 MiB, room for a scanned multi-page PDF.
pub const DEFAULT_MAX_FILE_BYTES: usize = 20 * 1024 * 1024;
/// Default `MAX_BATCH` for embeddings sources (OpenAI accepts up to 2048 inputs; smaller
/// batches fail over and retry more cheaply).
pub const DEFAULT_MAX_BATCH: usize = 64;

/// Everything one scope needs, as configured. Build it in code from
/// [`GatewaySettings::new`], or read it with [`GatewaySettings::from_env`]; either way
/// [`GatewaySettings::validate`] runs the same checks before a client is assembled.
///
/// ```
/// use std::time::Duration;
/// use polygateway::config::{GatewaySettings, SourceSettings};
/// use polygateway::Scope;
///
/// let mut settings = GatewaySettings::new(Scope::Llm);
/// settings.call_deadline = Some(Duration::from_secs(20));
/// settings.sources.push(SourceSettings {
///     model: Some("deepseek-chat".into()),
///     tpm: Some(60_000),
///     ..SourceSettings::new("DEEPSEEK", "https://api.deepseek.com/v1")
/// });
/// let config = settings.validate().expect("valid settings");
/// assert_eq!(config.sources[0].limits.tpm, Some(60_000));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct GatewaySettings {
    /// The scope these settings are for.
    pub scope: Scope,
    /// Default bound on one attempt.
    pub timeout: Duration,
    /// Attempts per logical call, at least 1.
    pub max_attempts: u32,
    /// The first backoff step.
    pub backoff_base: Duration,
    /// The cap on backoff (not on `Retry-After`).
    pub backoff_max: Duration,
    /// How long the retry loop may go without progress.
    pub stall_window: Duration,
    /// The optional call deadline (SPEC §9).
    pub call_deadline: Option<Duration>,
    /// Consecutive transient failures that open a breaker.
    pub breaker_failures: u32,
    /// A breaker's first open time.
    pub breaker_open: Duration,
    /// Where quotas and breakers live.
    pub backend: BackendKind,
    /// Required when `backend` is `Redis`; may hold a password, so it is a secret.
    pub redis_url: Option<Secret>,
    /// The prefix of every Redis key (several deployments can share one Redis).
    pub redis_key_prefix: String,
    /// Connections in the Redis pool.
    pub redis_pool_size: usize,
    /// Bound on every Redis command; past it the command is a backend failure (fail closed).
    pub redis_command_timeout: Duration,
    /// Telemetry rows go to this JSON-lines file when set.
    pub telemetry_jsonl: Option<PathBuf>,
    /// Embeddings batches in flight at once for one `embed` call (`EMBEDDING` only).
    pub batch_concurrency: usize,
    /// The largest document `OcrClient` accepts, in bytes (`OCR` only).
    pub max_file_bytes: usize,
    /// The scope's sources.
    pub sources: Vec<SourceSettings>,
}

/// Validated settings for one scope, ready for assembly.
#[derive(Debug, Clone, PartialEq)]
pub struct ScopeConfig {
    /// The scope.
    pub scope: Scope,
    /// Attempts per logical call.
    pub max_attempts: u32,
    /// The first backoff step.
    pub backoff_base: Duration,
    /// The cap on backoff.
    pub backoff_max: Duration,
    /// The stall window.
    pub stall_window: Duration,
    /// The call deadline, validated.
    pub call_deadline: Option<CallDeadline>,
    /// The breaker policy.
    pub breaker: BreakerPolicy,
    /// The backend.
    pub backend: BackendKind,
    /// The Redis URL when the backend is Redis.
    pub redis_url: Option<Secret>,
    /// The prefix of every Redis key.
    pub redis_key_prefix: String,
    /// Connections in the Redis pool.
    pub redis_pool_size: usize,
    /// Bound on every Redis command.
    pub redis_command_timeout: Duration,
    /// The JSON-lines telemetry file.
    pub telemetry_jsonl: Option<PathBuf>,
    /// Embeddings batches in flight at once for one call.
    pub batch_concurrency: usize,
    /// The largest OCR document accepted, in bytes.
    pub max_file_bytes: usize,
    /// The sources, validated, in configuration order.
    pub sources: Vec<SourceSpec>,
}

impl GatewaySettings {
    /// Settings for `scope` with every default and no sources.
    pub fn new(scope: Scope) -> Self {
        GatewaySettings {
            scope,
            timeout: DEFAULT_TIMEOUT,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            backoff_base: DEFAULT_BACKOFF_BASE,
            backoff_max: DEFAULT_BACKOFF_MAX,
            stall_window: DEFAULT_STALL_WINDOW,
            call_deadline: None,
            breaker_failures: DEFAULT_BREAKER_FAILURES,
            breaker_open: DEFAULT_BREAKER_OPEN,
            backend: BackendKind::Memory,
            redis_url: None,
            redis_key_prefix: DEFAULT_REDIS_KEY_PREFIX.to_owned(),
            redis_pool_size: DEFAULT_REDIS_POOL_SIZE,
            redis_command_timeout: DEFAULT_REDIS_COMMAND_TIMEOUT,
            telemetry_jsonl: None,
            batch_concurrency: DEFAULT_BATCH_CONCURRENCY,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            sources: Vec::new(),
        }
    }

    /// Read and validate the settings of `scope` from `env`. Every key under `{SCOPE}__` must
    /// be one the library knows; every error names the key that was read and its value
    /// (secrets elided).
    pub fn from_env(scope: Scope, env: &Env) -> Result<ScopeConfig, ConfigError> {
        GatewaySettings::parse_env(scope, env)?.check(Origin::Env)
    }

    /// Validate settings built in code; errors name the field (`GatewaySettings.timeout`,
    /// `SourceSettings[A].tpm`) and the value.
    pub fn validate(&self) -> Result<ScopeConfig, ConfigError> {
        self.check(Origin::Code)
    }

    fn parse_env(scope: Scope, env: &Env) -> Result<GatewaySettings, ConfigError> {
        let mut settings = GatewaySettings::new(scope);
        let mut sources: BTreeMap<&str, SourceSettings> = BTreeMap::new();
        let prefix = format!("{scope}__");
        for key in env.keys_with_prefix(&prefix) {
            let Some(value) = env.get(key) else { continue };
            match keys::classify(scope, key)? {
                ScopeKey::Scope(field) => settings.set_scope_field(field, key, value)?,
                ScopeKey::Source { name, field } => {
                    let source = sources
                        .entry(name)
                        .or_insert_with(|| SourceSettings::new(name, ""));
                    set_source_field(source, field, key, value)?;
                }
            }
        }
        settings.sources = sources.into_values().collect();
        settings.redis_url = env.get(keys::REDIS_URL).map(Secret::new);
        if let Some(prefix) = env.get(keys::REDIS_KEY_PREFIX) {
            prefix.clone_into(&mut settings.redis_key_prefix);
        }
        if let Some(size) = env.get(keys::REDIS_POOL_SIZE) {
            settings.redis_pool_size = parse_number(size, keys::REDIS_POOL_SIZE)?;
        }
        if let Some(timeout) = env.get(keys::REDIS_COMMAND_TIMEOUT_S) {
            settings.redis_command_timeout = parse_secs(timeout, keys::REDIS_COMMAND_TIMEOUT_S)?;
        }
        settings.telemetry_jsonl = env.get(keys::TELEMETRY_JSONL).map(PathBuf::from);
        Ok(settings)
    }

    fn set_scope_field(&mut self, field: Field, key: &str, value: &str) -> Result<(), ConfigError> {
        match field.env {
            "TIMEOUT_S" => self.timeout = parse_secs(value, key)?,
            "MAX_ATTEMPTS" => self.max_attempts = parse_number(value, key)?,
            "BACKOFF_BASE_S" => self.backoff_base = parse_secs(value, key)?,
            "BACKOFF_MAX_S" => self.backoff_max = parse_secs(value, key)?,
            "STALL_WINDOW_S" => self.stall_window = parse_secs(value, key)?,
            "CALL_DEADLINE_S" => {
                self.call_deadline = Some(CallDeadline::parse_secs(value, key)?.duration());
            }
            "BREAKER_FAILURES" => self.breaker_failures = parse_number(value, key)?,
            "BREAKER_OPEN_S" => self.breaker_open = parse_secs(value, key)?,
            "BATCH_CONCURRENCY" => self.batch_concurrency = parse_number(value, key)?,
            "MAX_FILE_BYTES" => self.max_file_bytes = parse_number(value, key)?,
            "BACKEND" => {
                self.backend = match value {
                    "memory" => BackendKind::Memory,
                    "redis" => BackendKind::Redis,
                    _ => {
                        return Err(ConfigError::invalid(key, value, "expected memory or redis"));
                    }
                }
            }
            other => unreachable!("scope field {other} has no parser"),
        }
        Ok(())
    }

    fn check(&self, origin: Origin) -> Result<ScopeConfig, ConfigError> {
        let scope = self.scope;
        let key = |field: Field| origin.scope_key(scope, field);
        let timeout = positive(self.timeout, &key(keys::TIMEOUT_S))?;
        let backoff_base = positive(self.backoff_base, &key(keys::BACKOFF_BASE_S))?;
        let backoff_max = positive(self.backoff_max, &key(keys::BACKOFF_MAX_S))?;
        if backoff_base > backoff_max {
            return Err(ConfigError::invalid(
                key(keys::BACKOFF_BASE_S),
                format!("{backoff_base:?}"),
                format!(
                    "must not exceed {} ({backoff_max:?})",
                    key(keys::BACKOFF_MAX_S)
                ),
            ));
        }
        let stall_window = positive(self.stall_window, &key(keys::STALL_WINDOW_S))?;
        let breaker_open = positive(self.breaker_open, &key(keys::BREAKER_OPEN_S))?;
        let call_deadline = self
            .call_deadline
            .map(|d| CallDeadline::new(d, &key(keys::CALL_DEADLINE_S)))
            .transpose()?;
        let max_attempts = at_least_one(self.max_attempts, &key(keys::MAX_ATTEMPTS))?;
        let breaker_failures = at_least_one(self.breaker_failures, &key(keys::BREAKER_FAILURES))?;
        let batch_concurrency =
            at_least_one(self.batch_concurrency, &key(keys::BATCH_CONCURRENCY))?;
        let max_file_bytes = at_least_one(self.max_file_bytes, &key(keys::MAX_FILE_BYTES))?;
        let redis_key = origin.shared_key(keys::REDIS_URL, "redis_url");
        match (&self.redis_url, self.backend) {
            (None, BackendKind::Redis) => {
                return Err(ConfigError::missing(
                    redis_key,
                    format!("required when {} is redis", key(keys::BACKEND)),
                ));
            }
            (Some(url), _) => check_redis_url(url, &redis_key)?,
            (None, BackendKind::Memory) => {}
        }
        let redis_pool_size = at_least_one(
            self.redis_pool_size,
            &origin.shared_key(keys::REDIS_POOL_SIZE, "redis_pool_size"),
        )?;
        let redis_command_timeout = positive(
            self.redis_command_timeout,
            &origin.shared_key(keys::REDIS_COMMAND_TIMEOUT_S, "redis_command_timeout"),
        )?;
        let prefix_key = origin.shared_key(keys::REDIS_KEY_PREFIX, "redis_key_prefix");
        if self.redis_key_prefix.is_empty()
            || self.redis_key_prefix.contains(['{', '}'])
            || self.redis_key_prefix.chars().any(char::is_whitespace)
        {
            return Err(ConfigError::invalid(
                prefix_key,
                &self.redis_key_prefix,
                "expected a non-empty prefix without braces or spaces",
            ));
        }
        if self.sources.is_empty() {
            return Err(ConfigError::missing(
                origin.source_key(scope, "<NAME>", keys::BASE_URL),
                format!("the {scope} scope has no source; configure at least one"),
            ));
        }
        let mut sources = Vec::with_capacity(self.sources.len());
        for source in &self.sources {
            let spec = check_source(scope, source, timeout, origin)?;
            if sources.iter().any(|s: &SourceSpec| s.name == spec.name) {
                return Err(ConfigError::invalid(
                    origin.source_key(scope, &spec.name, keys::NAME),
                    spec.name.clone(),
                    "source names must be unique in a scope",
                ));
            }
            sources.push(spec);
        }
        Ok(ScopeConfig {
            scope,
            max_attempts,
            backoff_base,
            backoff_max,
            stall_window,
            call_deadline,
            breaker: BreakerPolicy {
                failures_to_open: breaker_failures,
                open_for: breaker_open,
                max_open_for: breaker_open.saturating_mul(BREAKER_MAX_OPEN_FACTOR),
                dead_open_for: BREAKER_DEAD_OPEN.max(breaker_open),
                probe_lease: sources
                    .iter()
                    .map(|s| s.timeout)
                    .max()
                    .unwrap_or(timeout)
                    .saturating_add(LEASE_MARGIN),
            },
            backend: self.backend,
            redis_url: self.redis_url.clone(),
            redis_key_prefix: self.redis_key_prefix.clone(),
            redis_pool_size,
            redis_command_timeout,
            telemetry_jsonl: self.telemetry_jsonl.clone(),
            batch_concurrency,
            max_file_bytes,
            sources,
        })
    }
}

fn set_source_field(
    source: &mut SourceSettings,
    field: Field,
    key: &str,
    value: &str,
) -> Result<(), ConfigError> {
    match field.env {
        "KIND" => {
            source.kind = Some(SourceKind::from_config(value).ok_or_else(|| {
                ConfigError::invalid(key, value, "expected openai_compat or monkey_ocr")
            })?);
        }
        "BASE_URL" => source.base_url = value.to_owned(),
        "API_KEY" => source.api_key = Some(Secret::new(value)),
        "MODEL" => source.model = Some(value.to_owned()),
        "TPM" => source.tpm = Some(parse_number(value, key)?),
        "RPM" => source.rpm = Some(parse_number(value, key)?),
        "MAX_CONCURRENCY" => source.max_concurrency = Some(parse_number(value, key)?),
        "EST_TOKENS" => source.est_tokens = Some(parse_number(value, key)?),
        "TIMEOUT_S" => source.timeout = Some(parse_secs(value, key)?),
        "PRIORITY" => source.priority = parse_number(value, key)?,
        "WEIGHT" => source.weight = parse_number(value, key)?,
        "MAX_BATCH" => source.max_batch = Some(parse_number(value, key)?),
        "MIN_INTERVAL_S" => source.min_interval = Some(parse_secs(value, key)?),
        other => unreachable!("source field {other} has no parser"),
    }
    Ok(())
}

fn check_source(
    scope: Scope,
    source: &SourceSettings,
    scope_timeout: Duration,
    origin: Origin,
) -> Result<SourceSpec, ConfigError> {
    let name = source.name.as_str();
    let key = |field: Field| origin.source_key(scope, name, field);
    let valid_name = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        && !name.contains("__");
    if !valid_name {
        return Err(ConfigError::invalid(
            key(keys::NAME),
            name,
            "expected [A-Z0-9_]+ without a double underscore",
        ));
    }
    let expected_kind = match scope {
        Scope::Llm | Scope::Embedding => SourceKind::OpenAiCompat,
        Scope::Ocr => SourceKind::MonkeyOcr,
    };
    let kind = source.kind.unwrap_or(expected_kind);
    if kind != expected_kind {
        return Err(ConfigError::invalid(
            key(keys::KIND),
            kind.as_str(),
            format!("the {scope} scope takes {expected_kind} sources"),
        ));
    }
    check_base_url(&source.base_url, &key(keys::BASE_URL))?;
    if source
        .api_key
        .as_ref()
        .is_some_and(|k| k.expose().trim().is_empty())
    {
        return Err(ConfigError::invalid_secret(
            key(keys::API_KEY),
            "must not be blank; leave it unset for a source without a key",
        ));
    }
    let model = match (&source.model, kind) {
        (Some(model), _) if !model.trim().is_empty() => model.clone(),
        (Some(model), _) => {
            return Err(ConfigError::invalid(
                key(keys::MODEL),
                model,
                "must not be blank",
            ));
        }
        (None, SourceKind::OpenAiCompat) => {
            return Err(ConfigError::missing(
                key(keys::MODEL),
                "an openai_compat source needs the model name to send",
            ));
        }
        (None, SourceKind::MonkeyOcr) => String::new(),
    };
    let limits = Limits {
        tpm: source
            .tpm
            .map(|v| non_zero_limit(v, &key(keys::TPM)))
            .transpose()?,
        rpm: source
            .rpm
            .map(|v| non_zero_limit(v, &key(keys::RPM)))
            .transpose()?,
        max_concurrency: source
            .max_concurrency
            .map(|v| non_zero_limit(v, &key(keys::MAX_CONCURRENCY)))
            .transpose()?,
    };
    let weight = at_least_one(source.weight, &key(keys::WEIGHT))?;
    let timeout = match source.timeout {
        Some(t) => positive(t, &key(keys::SOURCE_TIMEOUT_S))?,
        None => scope_timeout,
    };
    let max_batch = match (source.max_batch, scope) {
        (Some(_), Scope::Llm | Scope::Ocr) => {
            return Err(ConfigError::invalid(
                key(keys::MAX_BATCH),
                format!("{:?}", source.max_batch),
                "applies to EMBEDDING sources only",
            ));
        }
        (Some(n), Scope::Embedding) => at_least_one(n, &key(keys::MAX_BATCH))?,
        (None, _) => DEFAULT_MAX_BATCH,
    };
    let est_tokens = match (source.est_tokens, scope) {
        (Some(n), _) => n,
        (None, Scope::Ocr) => 0, // OCR settles 0 tokens on every path (SPEC §6 S6).
        (None, Scope::Llm | Scope::Embedding) => DEFAULT_EST_TOKENS,
    };
    Ok(SourceSpec {
        name: name.to_owned(),
        kind,
        base_url: source.base_url.trim_end_matches('/').to_owned(),
        api_key: source.api_key.clone(),
        model,
        limits,
        est_tokens,
        timeout,
        priority: source.priority,
        weight,
        max_batch,
        min_interval: source.min_interval.map_or(Ok(Duration::ZERO), |d| {
            positive(d, &key(keys::MIN_INTERVAL_S))
        })?,
    })
}

fn parse_number<T: std::str::FromStr>(value: &str, key: &str) -> Result<T, ConfigError> {
    value
        .trim()
        .parse()
        .map_err(|_| ConfigError::invalid(key, value, "expected a whole number"))
}

fn positive(value: Duration, key: &str) -> Result<Duration, ConfigError> {
    validate_duration(value, key)
}

fn at_least_one<T: Copy + PartialOrd + From<u8> + std::fmt::Display>(
    value: T,
    key: &str,
) -> Result<T, ConfigError> {
    if value < T::from(1) {
        return Err(ConfigError::invalid(
            key,
            value.to_string(),
            "expected at least 1",
        ));
    }
    Ok(value)
}

fn non_zero_limit<T: Copy + PartialOrd + From<u8> + std::fmt::Display>(
    value: T,
    key: &str,
) -> Result<T, ConfigError> {
    at_least_one(value, key).map_err(|_| {
        ConfigError::invalid(
            key,
            value.to_string(),
            "a limit of 0 would admit nothing; expected at least 1, or leave it unset for no limit",
        )
    })
}

/// `http(s)://host[:port][/path]`; the error shows the URL with any user-info elided.
fn check_base_url(url: &str, key: &str) -> Result<(), ConfigError> {
    let shown = || redact_userinfo(url);
    if url.is_empty() {
        return Err(ConfigError::missing(
            key,
            "expected an http:// or https:// URL",
        ));
    }
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| ConfigError::invalid(key, shown(), "expected an http:// or https:// URL"))?;
    check_authority(rest, key, shown)
}

/// `redis://`, `rediss://`, `redis-cluster://`, `redis-sentinel://` URLs (what fred accepts);
/// the URL may carry a password, so an error never shows it.
fn check_redis_url(url: &Secret, key: &str) -> Result<(), ConfigError> {
    let url = url.expose();
    let rest = [
        "redis://",
        "rediss://",
        "redis-cluster://",
        "redis-sentinel://",
    ]
    .iter()
    .find_map(|scheme| url.strip_prefix(scheme))
    .ok_or_else(|| {
        ConfigError::invalid(
            key,
            redact_userinfo(url),
            "expected a redis://, rediss://, redis-cluster:// or redis-sentinel:// URL",
        )
    })?;
    check_authority(rest, key, || redact_userinfo(url))
}

fn check_authority(rest: &str, key: &str, shown: impl Fn() -> String) -> Result<(), ConfigError> {
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit('@').next().unwrap_or("");
    let (host, port) = if let Some(v6) = host_port.strip_prefix('[') {
        let (host, after) = v6.split_once(']').unwrap_or((v6, "!"));
        (host, after.strip_prefix(':'))
    } else {
        match host_port.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        }
    };
    let bad_host = host.is_empty()
        || host
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '[' || c == ']');
    let bad_port = port.is_some_and(|p| p.parse::<u16>().is_err());
    if bad_host || bad_port || rest.chars().any(char::is_whitespace) {
        return Err(ConfigError::invalid(
            key,
            shown(),
            "expected a URL with a host and an optional port",
        ));
    }
    Ok(())
}

/// `scheme://user:pass@host/…` → `scheme://<redacted>@host/…`: a URL as it may be shown.
pub fn redacted_url(url: &str) -> String {
    redact_userinfo(url)
}

fn redact_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://<redacted>@{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_redacted() {
        assert_eq!(
            redact_userinfo("redis://:hunter2@127.0.0.1:6379/0"),
            "redis://<redacted>@127.0.0.1:6379/0"
        );
        assert_eq!(redact_userinfo("http://h/a@b"), "http://h/a@b");
    }

    #[test]
    fn urls_need_a_host_and_a_valid_port() {
        let key = "K";
        for good in [
            "http://127.0.0.1:8080/v1",
            "https://api.example.com",
            "http://[::1]:9/x",
        ] {
            check_base_url(good, key).expect(good);
        }
        for bad in [
            "ftp://x",
            "http://",
            "http://:80",
            "http://h:99999",
            "http://h:x",
            "api.example.com",
            "http://a b",
        ] {
            assert!(check_base_url(bad, key).is_err(), "{bad}");
        }
    }
}
