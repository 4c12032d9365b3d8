//! `EmbeddingClient`: embeddings in batches on the same pipeline (SPEC §15).

use std::sync::Arc;

use polygateway_errors::{GatewayError, Scope};
use polygateway_middleware::{CallSummary, EmbedBatch, SourceStats};
use polygateway_ports::{EmbeddingRequest, Usage};
use polygateway_transports::OpenAiTransport;

use super::join::try_join_bounded;
use super::{CallOptions, ClientBuilder, Core};
use crate::config::{self, GatewaySettings, ScopeConfig};

/// Embeddings through the whole pipeline. One `embed` call is one logical call: the texts are
/// split into batches of at most `max_batch` (the smallest of the sources', so any source can
/// take any batch), up to `EMBEDDING__BATCH_CONCURRENCY` batches run at once, each an attempt
/// chain with its own permit and estimate, and the vectors come back in input order. One
/// deadline covers all batches. Cheap to clone.
///
/// ```
/// # use polygateway_mock::{MockUpstream, Scenario};
/// use polygateway::config::{GatewaySettings, SourceSettings};
/// use polygateway::{EmbeddingClient, Scope};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), polygateway::GatewayError> {
/// # let mock = MockUpstream::start(Scenario::default()).await.expect("mock upstream");
/// # let base_url = mock.base_url("LOCAL");
/// let mut settings = GatewaySettings::new(Scope::Embedding);
/// settings.sources.push(SourceSettings {
///     model: Some("bge-m3".into()),
///     max_batch: Some(2),
///     ..SourceSettings::new("LOCAL", base_url)
/// });
/// let client = EmbeddingClient::from_settings(&settings)?;
/// let vectors = client.embed(vec!["a".into(), "bb".into(), "ccc".into()]).await?;
/// assert_eq!(vectors.len(), 3); // two batches, in input order
/// assert!(client.embed(Vec::new()).await?.is_empty()); // at once, no call made
/// client.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct EmbeddingClient {
    inner: Arc<Inner>,
}

struct Inner {
    core: Core,
    transport: OpenAiTransport,
    max_batch: usize,
}

impl std::fmt::Debug for EmbeddingClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddingClient")
            .field("engine", &self.inner.core.engine)
            .field("max_batch", &self.inner.max_batch)
            .finish_non_exhaustive()
    }
}

const DEADLINE_PARAM: &str = "EmbeddingClient::embed_with(call_deadline)";

/// A batch's token estimate: about four characters per token, at least one per text — the
/// usual rule of thumb for English with OpenAI's tokenizers.
fn estimate(texts: &[String]) -> u64 {
    texts
        .iter()
        .map(|t| (t.chars().count() as u64).div_ceil(4).max(1))
        .sum()
}

impl EmbeddingClient {
    pub(super) fn assemble(core: Core) -> Result<EmbeddingClient, GatewayError> {
        let max_batch = core
            .config
            .sources
            .iter()
            .map(|s| s.max_batch)
            .min()
            .unwrap_or(1)
            .max(1);
        let transport = OpenAiTransport::new(core.http.clone());
        Ok(EmbeddingClient {
            inner: Arc::new(Inner {
                core,
                transport,
                max_batch,
            }),
        })
    }

    /// A client from the process environment and `.env` (`EMBEDDING__…` keys).
    pub fn from_env() -> Result<EmbeddingClient, GatewayError> {
        ClientBuilder::new(config::from_process_env(Scope::Embedding)?).build_embedding()
    }

    /// A client from settings built in code (scope `EMBEDDING`).
    pub fn from_settings(settings: &GatewaySettings) -> Result<EmbeddingClient, GatewayError> {
        ClientBuilder::new(settings.validate()?).build_embedding()
    }

    /// A builder, to choose the telemetry sink, the clock or the HTTP settings.
    pub fn builder(config: ScopeConfig) -> ClientBuilder {
        ClientBuilder::new(config)
    }

    /// The vectors of `texts`, in input order. Empty input returns `[]` at once.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future cancels every batch in flight; each settles per SPEC §6 (S7: as a
    /// chat attempt would), and no permit stays held.
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, GatewayError> {
        self.embed_with(texts, CallOptions::default()).await
    }

    /// [`embed`](EmbeddingClient::embed) with per-call options: a deadline over all batches,
    /// and a per-batch token estimate replacing the one from the texts' size.
    ///
    /// # Cancel safety
    ///
    /// As for [`embed`](EmbeddingClient::embed). When the deadline expires, the call returns
    /// `CallDeadlineExceeded` at the deadline and every batch in flight settles its estimate.
    pub async fn embed_with(
        &self,
        texts: Vec<String>,
        options: CallOptions,
    ) -> Result<Vec<Vec<f32>>, GatewayError> {
        let core = &self.inner.core;
        let deadline = core.deadline(options.call_deadline, DEADLINE_PARAM)?;
        if texts.is_empty() {
            return Ok(Vec::new()); // before any deadline starts (SPEC §9)
        }
        let batches: Vec<EmbeddingRequest> = texts
            .chunks(self.inner.max_batch)
            .map(|chunk| EmbeddingRequest {
                est_tokens: Some(options.est_tokens.unwrap_or_else(|| estimate(chunk))),
                input: chunk.to_vec(),
            })
            .collect();
        let call = core.begin(deadline);
        let (recorder, deadline_at) = (&call.recorder, call.deadline_at);
        let all = async {
            let runs: Vec<_> = batches
                .iter()
                .map(|request| {
                    let op = EmbedBatch {
                        transport: &self.inner.transport,
                        request,
                    };
                    async move { core.engine.run(&op, recorder, deadline_at).await }
                })
                .collect();
            try_join_bounded(runs, core.config.batch_concurrency).await
        };
        let result = core.bounded(&call, all).await;
        let result = result.map(|served| {
            let attempts = served.iter().map(|s| s.attempts).sum();
            let usage =
                served
                    .iter()
                    .filter_map(|s| s.usage)
                    .fold(None, |acc: Option<Usage>, u| {
                        let acc = acc.unwrap_or_default();
                        Some(Usage {
                            prompt_tokens: acc.prompt_tokens + u.prompt_tokens,
                            completion_tokens: acc.completion_tokens + u.completion_tokens,
                        })
                    });
            let last = served.last().map(|s| s.source);
            let vectors = served
                .into_iter()
                .flat_map(|s| s.output.vectors)
                .collect::<Vec<_>>();
            let summary = CallSummary {
                source: last.map_or("", |s| s.name.as_str()),
                model: last.map_or("", |s| s.model.as_str()),
                attempts,
                usage,
            };
            (vectors, summary)
        });
        call.finish(result)
    }

    /// Each source's state (see `GatewayClient::stats`).
    ///
    /// # Cancel safety
    ///
    /// Reads only; dropping the future changes nothing.
    pub async fn stats(&self) -> Result<Vec<SourceStats>, GatewayError> {
        self.inner.core.stats().await
    }

    /// Wait until every settlement queued so far is done.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops the waiting, not the settling.
    pub async fn flush(&self) {
        self.inner.core.flush().await;
    }

    /// Refuse new calls, drain the settler and flush the telemetry file.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops the waiting; the draining goes on in the background.
    pub async fn shutdown(&self) {
        self.inner.core.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_four_characters_per_token_at_least_one_per_text() {
        let texts: Vec<String> = ["", "abcd", "abcde", "ünï"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(estimate(&texts), 1 + 1 + 2 + 1);
    }
}
