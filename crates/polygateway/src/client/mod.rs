//! The clients — [`GatewayClient`] (chat), [`EmbeddingClient`], [`OcrClient`] — and what they
//! share: the builder that assembles an engine with its backends, transport and telemetry
//! sinks, and the core that runs one logical call inside the deadline boundary.

mod chat;
mod embedding;
mod join;
mod ocr;

use std::sync::Arc;
use std::time::Duration;

use polygateway_backends::{MemoryAdmission, MemoryBreakers, RedisBackend, RedisConfig};
use std::future::Future;

use polygateway_deadline::{CallDeadline, with_call_deadline};
use polygateway_errors::{ConfigError, GatewayError, Scope};
use polygateway_middleware::{
    CallRecorder, CallSummary, Engine, EngineConfig, RetryPolicy, SourceStats,
};
use polygateway_ports::{Clock, SystemClock, TelemetrySink};
use polygateway_transports::{HttpClient, HttpConfig};
use tokio::time::Instant;
use tracing::Instrument;

use crate::backend::{AnyAdmission, AnyBreakers};
use crate::config::{BackendKind, LEASE_MARGIN, ScopeConfig};
use crate::telemetry::{FanOut, JsonlSink, TracingSink};

pub use chat::GatewayClient;
pub use embedding::EmbeddingClient;
pub use ocr::{OcrClient, OcrOptions, detect_document_type};

/// Options of one call, overriding the client's settings for it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallOptions {
    /// A deadline for this call; `Some` overrides the client's (there is no per-call "off").
    pub call_deadline: Option<Duration>,
    /// The token estimate to reserve per attempt (per batch for embeddings), replacing the
    /// source's `EST_TOKENS` or the estimate from the texts' size.
    pub est_tokens: Option<u64>,
}

/// Builds a client from validated configuration, with optional replacements for the parts a
/// caller may want to choose: the telemetry sink, the clock, the HTTP client settings.
pub struct ClientBuilder {
    config: ScopeConfig,
    sink: Option<Arc<dyn TelemetrySink>>,
    clock: Option<Arc<dyn Clock>>,
    http: HttpConfig,
    seed: Option<u64>,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ClientBuilder {
    /// Start from `config` (from `GatewaySettings::from_env` or `GatewaySettings::validate`).
    pub fn new(config: ScopeConfig) -> Self {
        ClientBuilder {
            config,
            sink: None,
            clock: None,
            http: HttpConfig::default(),
            seed: None,
        }
    }

    /// Send telemetry rows to `sink` instead of the default (`tracing`, plus the JSON-lines
    /// file when `POLYGATEWAY_TELEMETRY_JSONL` is set).
    #[must_use]
    pub fn telemetry(mut self, sink: Arc<dyn TelemetrySink>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// Stamp rows and run in-process windows and breakers on `clock` instead of the system
    /// clock. (Call deadlines always use the runtime's monotonic clock.)
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// HTTP client settings (connect timeout, response cap, HTTP/2 prior knowledge).
    #[must_use]
    pub fn http(mut self, http: HttpConfig) -> Self {
        self.http = http;
        self
    }

    /// Seed the jitter and weighted source picks, for repeatable runs.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Assemble the chat client; the configuration must be for the `LLM` scope.
    pub fn build(self) -> Result<GatewayClient, GatewayError> {
        GatewayClient::assemble(self.core(Scope::Llm, "GatewayClient")?)
    }

    /// Assemble the embeddings client; the configuration must be for the `EMBEDDING` scope.
    pub fn build_embedding(self) -> Result<EmbeddingClient, GatewayError> {
        EmbeddingClient::assemble(self.core(Scope::Embedding, "EmbeddingClient")?)
    }

    /// Assemble the OCR client; the configuration must be for the `OCR` scope.
    pub fn build_ocr(self) -> Result<OcrClient, GatewayError> {
        OcrClient::assemble(self.core(Scope::Ocr, "OcrClient")?)
    }

    fn core(self, scope: Scope, client: &str) -> Result<Core, GatewayError> {
        let config = self.config;
        if config.scope != scope {
            return Err(ConfigError::invalid(
                format!("{client} scope"),
                config.scope.as_str(),
                format!("{client} serves the {scope} scope"),
            )
            .into());
        }
        let (sink, jsonl) = match self.sink {
            Some(sink) => (sink, None),
            None => default_sink(&config)?,
        };
        let clock = self.clock.unwrap_or_else(|| Arc::new(SystemClock::new()));
        let (admission, breakers) = match config.backend {
            BackendKind::Memory => (
                AnyAdmission::Memory(MemoryAdmission::new(clock.clone())),
                AnyBreakers::Memory(MemoryBreakers::new(clock.clone())),
            ),
            BackendKind::Redis => {
                let redis = redis_backend(&config)?;
                (
                    AnyAdmission::Redis(redis.clone()),
                    AnyBreakers::Redis(redis),
                )
            }
        };
        let engine = Engine::new(
            EngineConfig {
                scope: config.scope,
                retry: RetryPolicy {
                    max_attempts: config.max_attempts,
                    backoff_base: config.backoff_base,
                    backoff_max: config.backoff_max,
                    stall_window: config.stall_window,
                },
                breaker: config.breaker,
                lease_margin: LEASE_MARGIN,
                zero_tokens: scope == Scope::Ocr, // SPEC §6 S6
                seed: self.seed.unwrap_or_else(|| clock.unix_ms()),
            },
            config.sources.clone(),
            Arc::new(admission),
            Arc::new(breakers),
            sink,
            clock,
        );
        Ok(Core {
            engine,
            http: HttpClient::new(&self.http),
            call_deadline: config.call_deadline,
            jsonl,
            config,
        })
    }
}

/// Connect the Redis backend of `config` (which validated that `REDIS_URL` is set).
fn redis_backend(config: &ScopeConfig) -> Result<RedisBackend, GatewayError> {
    let url = config.redis_url.as_ref().ok_or_else(|| {
        ConfigError::missing(
            "REDIS_URL",
            format!("required when {}__BACKEND is redis", config.scope),
        )
    })?;
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(ConfigError::invalid(
            format!("{}__BACKEND", config.scope),
            "redis",
            "a client on the Redis backend must be built inside a tokio runtime (it connects in the background)",
        )
        .into());
    }
    let redis = RedisConfig {
        url: url.expose().to_owned(),
        key_prefix: config.redis_key_prefix.clone(),
        pool_size: config.redis_pool_size,
        command_timeout: config.redis_command_timeout,
    };
    RedisBackend::connect(&redis, config.scope).map_err(|e| {
        ConfigError::invalid_secret(
            "REDIS_URL",
            format!("cannot set up the Redis client: {}", e.message()),
        )
        .into()
    })
}

/// A sink, and the JSON-lines file behind it (to flush at shutdown) if there is one.
type Sinks = (Arc<dyn TelemetrySink>, Option<Arc<JsonlSink>>);

/// The default sink: `tracing` events, and the JSON-lines file when configured.
fn default_sink(config: &ScopeConfig) -> Result<Sinks, GatewayError> {
    match &config.telemetry_jsonl {
        Some(path) => {
            let jsonl = Arc::new(JsonlSink::open(path, "POLYGATEWAY_TELEMETRY_JSONL")?);
            let sink: Arc<dyn TelemetrySink> =
                Arc::new(FanOut(vec![Arc::new(TracingSink), jsonl.clone()]));
            Ok((sink, Some(jsonl)))
        }
        None => Ok((Arc::new(TracingSink), None)),
    }
}

/// What every client holds: its engine, the shared HTTP client, the client-level deadline,
/// the telemetry file to flush, and its configuration.
pub(crate) struct Core {
    pub(crate) engine: Engine<AnyAdmission, AnyBreakers>,
    pub(crate) http: HttpClient,
    call_deadline: Option<CallDeadline>,
    jsonl: Option<Arc<JsonlSink>>,
    pub(crate) config: ScopeConfig,
}

/// One logical call in progress: its recorder (outside the deadline boundary) and deadline.
pub(crate) struct Call {
    pub(crate) recorder: CallRecorder,
    pub(crate) deadline: Option<CallDeadline>,
    pub(crate) deadline_at: Option<Instant>,
}

impl Core {
    /// The deadline for a call: the per-call override (validated, naming `param`), else the
    /// client's.
    pub(crate) fn deadline(
        &self,
        per_call: Option<Duration>,
        param: &str,
    ) -> Result<Option<CallDeadline>, GatewayError> {
        match per_call {
            Some(d) => Ok(Some(CallDeadline::new(d, param)?)),
            None => Ok(self.call_deadline),
        }
    }

    /// Start a logical call: a fresh recorder, and the deadline's instant.
    pub(crate) fn begin(&self, deadline: Option<CallDeadline>) -> Call {
        let recorder = self.engine.recorder();
        let deadline_at = deadline.map(|d| recorder.started() + d.duration());
        Call {
            recorder,
            deadline,
            deadline_at,
        }
    }

    /// Run `work` — the whole logical call — inside the call's one deadline boundary and its
    /// `logical_call` span.
    pub(crate) async fn bounded<T>(
        &self,
        call: &Call,
        work: impl Future<Output = Result<T, GatewayError>>,
    ) -> Result<T, GatewayError> {
        let scope = self.config.scope;
        let span = tracing::info_span!("logical_call", scope = scope.as_str(), logical_call_id = %call.recorder.call_id());
        with_call_deadline(scope, call.deadline, work)
            .instrument(span)
            .await
    }

    pub(crate) async fn stats(&self) -> Result<Vec<SourceStats>, GatewayError> {
        self.engine.stats().await
    }

    pub(crate) async fn flush(&self) {
        self.engine.flush().await;
    }

    pub(crate) async fn shutdown(&self) {
        self.engine.shutdown().await;
        if let Some(jsonl) = &self.jsonl {
            jsonl.flush().await;
        }
    }
}

impl Call {
    /// Write the terminal row for `result` and pass it on.
    pub(crate) fn finish<T>(
        self,
        result: Result<(T, CallSummary<'_>), GatewayError>,
    ) -> Result<T, GatewayError> {
        match result {
            Ok((value, summary)) => {
                self.recorder.finish(Ok(summary));
                Ok(value)
            }
            Err(error) => {
                self.recorder.finish(Err(&error));
                Err(error)
            }
        }
    }

    pub(crate) fn latency_ms(&self) -> u64 {
        u64::try_from(self.recorder.started().elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}
