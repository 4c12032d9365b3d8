//! `GatewayClient`: chat completions through the whole pipeline.

use std::sync::Arc;

use polygateway_errors::{GatewayError, Scope};
use polygateway_middleware::{CallSummary, ChatCall, SourceStats};
use polygateway_ports::{ChatRequest, ChatResult};
use polygateway_transports::OpenAiTransport;

use super::{CallOptions, ClientBuilder, Core};
use crate::config::{self, GatewaySettings, ScopeConfig};

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

struct Inner {
    core: Core,
    transport: OpenAiTransport,
}

impl std::fmt::Debug for GatewayClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayClient")
            .field("engine", &self.inner.core.engine)
            .finish_non_exhaustive()
    }
}

/// The parameter named in errors about a per-call deadline.
const DEADLINE_PARAM: &str = "GatewayClient::chat_with(call_deadline)";

impl GatewayClient {
    pub(super) fn assemble(core: Core) -> Result<GatewayClient, GatewayError> {
        let transport = OpenAiTransport::new(core.http.clone());
        Ok(GatewayClient {
            inner: Arc::new(Inner { core, transport }),
        })
    }

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
        let core = &self.inner.core;
        let deadline = core.deadline(options.call_deadline, DEADLINE_PARAM)?;
        if options.est_tokens.is_some() {
            request.est_tokens = options.est_tokens;
        }
        let call = core.begin(deadline);
        let op = ChatCall {
            transport: &self.inner.transport,
            request: &request,
        };
        let result = core
            .bounded(
                &call,
                core.engine.run(&op, &call.recorder, call.deadline_at),
            )
            .await;
        let latency_ms = call.latency_ms();
        let logical_call_id = call.recorder.call_id().to_string();
        let result = result.map(|served| {
            let mut answer = served.output;
            answer.source.clone_from(&served.source.name);
            answer.attempts = served.attempts;
            answer.logical_call_id = logical_call_id;
            answer.latency_ms = latency_ms;
            let summary = CallSummary {
                source: &served.source.name,
                model: &served.source.model,
                attempts: served.attempts,
                usage: served.usage,
            };
            (answer, summary)
        });
        call.finish(result)
    }

    /// Each source's state: TPM and RPM used, in flight, breaker, cool-down, and this
    /// process's counters.
    ///
    /// # Cancel safety
    ///
    /// Reads only; dropping the future changes nothing.
    pub async fn stats(&self) -> Result<Vec<SourceStats>, GatewayError> {
        self.inner.core.stats().await
    }

    /// Wait until every settlement queued so far is done (so that `stats()` shows it).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops the waiting, not the settling.
    pub async fn flush(&self) {
        self.inner.core.flush().await;
    }

    /// Refuse new calls, drain the settler and flush the telemetry file: nothing queued is
    /// lost.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops the waiting; new calls stay refused and the draining goes on
    /// in the background.
    pub async fn shutdown(&self) {
        self.inner.core.shutdown().await;
    }
}
