//! `GatewayClient`: chat completions through the whole pipeline.

use std::sync::Arc;
use std::time::Duration;

use polygateway_backends::{MemoryAdmission, MemoryBreakers};
use polygateway_deadline::{CallDeadline, with_call_deadline};
use polygateway_errors::{ConfigError, GatewayError, Scope};
use polygateway_middleware::{
    CallSummary, ChatCall, Engine, EngineConfig, RetryPolicy, SourceStats,
};
use polygateway_ports::{ChatRequest, ChatResult, Clock, SystemClock, TelemetrySink};
use polygateway_transports::{HttpClient, HttpConfig, OpenAiTransport};
use tracing::Instrument;

use crate::config::{self, BackendKind, GatewaySettings, LEASE_MARGIN, ScopeConfig};
use crate::telemetry::{FanOut, JsonlSink, TracingSink};

/// Options of one call, overriding the client's settings for it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallOptions {
    /// A deadline for this call; `Some` overrides the client's (there is no per-call "off").
    pub call_deadline: Option<Duration>,
    /// The token estimate to reserve, replacing the source's `EST_TOKENS`.
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
    /// Start from `config` (from [`GatewaySettings::from_env`] or [`GatewaySettings::validate`]).
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

    /// Assemble the chat client. The configuration must be for the `LLM` scope.
    pub fn build(self) -> Result<GatewayClient, GatewayError> {
        let config = self.config;
        if config.scope != Scope::Llm {
            return Err(ConfigError::invalid(
                "GatewayClient scope",
                config.scope.as_str(),
                "the chat client serves the LLM scope; use EmbeddingClient or OcrClient for the others",
            )
            .into());
        }
        if config.backend == BackendKind::Redis {
            return Err(ConfigError::invalid(
                format!("{}__BACKEND", config.scope),
                "redis",
                "the Redis backend is not available in this build yet; use memory",
            )
            .into());
        }
        let (sink, jsonl) = match self.sink {
            Some(sink) => (sink, None),
            None => default_sink(&config)?,
        };
        let clock = self.clock.unwrap_or_else(|| Arc::new(SystemClock::new()));
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
                zero_tokens: false,
                seed: self.seed.unwrap_or_else(|| clock.unix_ms()),
            },
            config.sources.clone(),
            Arc::new(MemoryAdmission::new(clock.clone())),
            Arc::new(MemoryBreakers::new(clock.clone())),
            sink,
            clock,
        );
        Ok(GatewayClient {
            inner: Arc::new(Inner {
                engine,
                transport: OpenAiTransport::new(HttpClient::new(&self.http)),
                call_deadline: config.call_deadline,
                jsonl,
            }),
        })
    }
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

struct Inner {
    engine: Engine<MemoryAdmission, MemoryBreakers>,
    transport: OpenAiTransport,
    call_deadline: Option<CallDeadline>,
    jsonl: Option<Arc<JsonlSink>>,
}

/// Chat completions through the whole pipeline: breakers, quotas, pacing, retries with
/// `Retry-After`, fail-over, the stall window and the optional call deadline, with every
/// reservation settled exactly once. Cheap to clone; clones share everything.
///
/// ```
/// # use polygateway_mock::{MockUpstream, Scenario};
/// use polygateway::config::{GatewaySettings, SourceSettings};
/// use polygateway::{ChatRequest, GatewayClient, Scope};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), polygateway::GatewayError> {
/// # let mock = MockUpstream::start(Scenario::default()).await.expect("mock upstream");
/// # let base_url = mock.base_url("LOCAL");
/// // Usually: GatewayClient::from_env(Scope::Llm)? with LLM__SOURCE__<NAME>__… keys.
/// let mut settings = GatewaySettings::new(Scope::Llm);
/// settings.sources.push(SourceSettings {
///     model: Some("qwen2.5".into()),
///     tpm: Some(60_000),
///     ..SourceSettings::new("LOCAL", base_url) // e.g. "http://127.0.0.1:8000/v1"
/// });
/// let client = GatewayClient::from_settings(&settings)?;
/// let answer = client.chat(ChatRequest::from_prompt("Say hello")).await?;
/// assert_eq!((answer.source.as_str(), answer.attempts), ("LOCAL", 1));
/// client.shutdown().await; // drains the settler: nothing queued is lost
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct GatewayClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for GatewayClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayClient")
            .field("engine", &self.inner.engine)
            .finish_non_exhaustive()
    }
}

/// The parameter named in errors about a per-call deadline.
const CHAT_DEADLINE_PARAM: &str = "GatewayClient::chat_with(call_deadline)";

impl GatewayClient {
    /// A client for `scope` (which must be `LLM`) from the process environment and `.env` in
    /// the working directory.
    pub fn from_env(scope: Scope) -> Result<GatewayClient, GatewayError> {
        ClientBuilder::new(config::from_process_env(scope)?).build()
    }

    /// A client from settings built in code; they go through the same validation.
    pub fn from_settings(settings: &GatewaySettings) -> Result<GatewayClient, GatewayError> {
        ClientBuilder::new(settings.validate()?).build()
    }

    /// A builder, to choose the telemetry sink, the clock or the HTTP settings.
    pub fn builder(config: ScopeConfig) -> ClientBuilder {
        ClientBuilder::new(config)
    }

    /// One chat completion.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future cancels the call at once: the attempt in flight is settled per
    /// SPEC §6 (its estimate if the request may have reached the provider, 0 before that, its
    /// known outcome after), a half-open probe is given back, and the telemetry rows are
    /// written — all without the caller waiting.
    pub async fn chat(&self, request: ChatRequest) -> Result<ChatResult, GatewayError> {
        self.chat_with(request, CallOptions::default()).await
    }

    /// One chat completion with per-call options. A per-call deadline is validated before
    /// anything else happens (zero is a `Config` error naming this parameter).
    ///
    /// # Cancel safety
    ///
    /// As for [`chat`](GatewayClient::chat). When the deadline expires the call returns
    /// `CallDeadlineExceeded` at the deadline, and the in-flight attempt settles its estimate.
    pub async fn chat_with(
        &self,
        mut request: ChatRequest,
        options: CallOptions,
    ) -> Result<ChatResult, GatewayError> {
        let deadline = match options.call_deadline {
            Some(d) => Some(CallDeadline::new(d, CHAT_DEADLINE_PARAM)?),
            None => self.inner.call_deadline,
        };
        if options.est_tokens.is_some() {
            request.est_tokens = options.est_tokens;
        }
        let engine = &self.inner.engine;
        let recorder = engine.recorder();
        let deadline_at = deadline.map(|d| recorder.started() + d.duration());
        let op = ChatCall {
            transport: &self.inner.transport,
            request: &request,
        };
        let span = tracing::info_span!("logical_call", scope = "LLM", logical_call_id = %recorder.call_id());
        let result = with_call_deadline(
            engine.scope(),
            deadline,
            engine.run(&op, &recorder, deadline_at),
        )
        .instrument(span)
        .await;
        match result {
            Ok(served) => {
                let mut answer = served.output;
                answer.source.clone_from(&served.source.name);
                answer.attempts = served.attempts;
                answer.logical_call_id = recorder.call_id().to_string();
                answer.latency_ms =
                    u64::try_from(recorder.started().elapsed().as_millis()).unwrap_or(u64::MAX);
                recorder.finish(Ok(CallSummary {
                    source: &served.source.name,
                    model: &answer.model,
                    attempts: served.attempts,
                    usage: served.usage,
                }));
                Ok(answer)
            }
            Err(error) => {
                recorder.finish(Err(&error));
                Err(error)
            }
        }
    }

    /// Each source's state: TPM and RPM used, in flight, breaker, cool-down, and this
    /// process's counters.
    ///
    /// # Cancel safety
    ///
    /// Reads only; dropping the future changes nothing.
    pub async fn stats(&self) -> Result<Vec<SourceStats>, GatewayError> {
        self.inner.engine.stats().await
    }

    /// Wait until every settlement queued so far is done (so that `stats()` shows it).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops the waiting, not the settling.
    pub async fn flush(&self) {
        self.inner.engine.flush().await;
    }

    /// Refuse new calls, drain the settler and flush the telemetry file: nothing queued is
    /// lost.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops the waiting; new calls stay refused and the draining goes on
    /// in the background.
    pub async fn shutdown(&self) {
        self.inner.engine.shutdown().await;
        if let Some(jsonl) = &self.inner.jsonl {
            jsonl.flush().await;
        }
    }
}
