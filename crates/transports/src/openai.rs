//! The OpenAI-compatible transport: `POST {base_url}/chat/completions` and
//! `POST {base_url}/embeddings`.

use bytes::Bytes;
use polygateway_errors::AttemptFailure;
use polygateway_ports::{
    ChatRequest, ChatResult, ChatTransport, EmbeddingRequest, EmbeddingResult, EmbeddingTransport,
    Message, SourceSpec, Usage,
};
use serde::{Deserialize, Serialize};

use crate::exchange::{Success, exchange, unusable};
use crate::http::HttpClient;

const JSON: &str = "application/json";

/// Chat completions and embeddings against OpenAI-compatible APIs.
#[derive(Debug, Clone)]
pub struct OpenAiTransport {
    http: HttpClient,
}

impl OpenAiTransport {
    /// A transport over the shared client `http`.
    pub fn new(http: HttpClient) -> Self {
        OpenAiTransport { http }
    }
}

#[derive(Serialize)]
struct ChatBody<'a> {
    model: &'a str,
    messages: &'a [Message],
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<&'a serde_json::Value>,
    stream: bool,
}

#[derive(Serialize)]
struct EmbeddingBody<'a> {
    model: &'a str,
    input: &'a [String],
}

#[derive(Deserialize)]
struct ChatResponse {
    model: Option<String>,
    choices: Option<Vec<Choice>>,
    usage: Option<UsageBody>,
}

#[derive(Deserialize)]
struct Choice {
    message: Option<ChoiceMessage>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChoiceMessage {
    content: Option<String>,
    /// DeepSeek, Qwen and vLLM's name for the reasoning text.
    reasoning_content: Option<String>,
    /// OpenRouter's and some others' name for it.
    reasoning: Option<String>,
}

#[derive(Deserialize)]
struct EmbeddingResponse {
    data: Option<Vec<EmbeddingItem>>,
    usage: Option<UsageBody>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    index: Option<usize>,
    embedding: Vec<f32>,
}

#[derive(Deserialize, Clone, Copy)]
struct UsageBody {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    total_tokens: Option<u64>,
}

impl UsageBody {
    fn usage(self) -> Usage {
        let completion = self.completion_tokens.unwrap_or(0);
        let prompt = self
            .prompt_tokens
            .or_else(|| self.total_tokens.map(|t| t.saturating_sub(completion)))
            .unwrap_or(0);
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
        }
    }
}

/// The usage of a body we could not use otherwise, for settling `ResultInvalid` (SPEC §6 S9).
fn reported_usage(body: &[u8]) -> Option<Usage> {
    #[derive(Deserialize)]
    struct OnlyUsage {
        usage: Option<UsageBody>,
    }
    serde_json::from_slice::<OnlyUsage>(body)
        .ok()?
        .usage
        .map(UsageBody::usage)
}

fn invalid(success: &Success, code: &'static str, why: impl Into<String>) -> AttemptFailure {
    let failure = unusable(success, code, why);
    match reported_usage(&success.body) {
        Some(usage) => failure.with_reported_tokens(usage.total()),
        None => failure,
    }
}

impl ChatTransport for OpenAiTransport {
    /// # Cancel safety
    ///
    /// Dropping the future drops the request; the connection is closed or returned to the pool.
    async fn chat(
        &self,
        source: &SourceSpec,
        request: &ChatRequest,
    ) -> Result<ChatResult, AttemptFailure> {
        let body = ChatBody {
            model: &source.model,
            messages: &request.messages,
            max_tokens: request.max_tokens,
            temperature: request.temperature,
            tools: request.tools.as_ref(),
            response_format: request.response_format.as_ref(),
            stream: false,
        };
        let body = Bytes::from(serde_json::to_vec(&body).expect("chat bodies always serialise"));
        let url = format!("{}/chat/completions", source.base_url);
        let success = exchange(&self.http, source, &url, JSON, body).await?;
        let response: ChatResponse = serde_json::from_slice(&success.body).map_err(|e| {
            invalid(
                &success,
                "bad_json",
                format!("the body is not a chat completion: {e}"),
            )
        })?;
        let usage = response.usage.map(UsageBody::usage);
        let Some(choice) = response.choices.and_then(|c| c.into_iter().next()) else {
            return Err(invalid(
                &success,
                "missing_choices",
                "the body has no choices",
            ));
        };
        let Some(message) = choice.message else {
            return Err(invalid(
                &success,
                "missing_message",
                "the first choice has no message",
            ));
        };
        Ok(ChatResult {
            content: message.content.unwrap_or_default(),
            reasoning_content: message.reasoning_content.or(message.reasoning),
            finish_reason: choice.finish_reason,
            usage,
            model: response.model.unwrap_or_else(|| source.model.clone()),
            source: source.name.clone(),
            attempts: 1,
            logical_call_id: String::new(),
            latency_ms: 0,
        })
    }
}

impl EmbeddingTransport for OpenAiTransport {
    /// # Cancel safety
    ///
    /// As for [`ChatTransport::chat`].
    async fn embed(
        &self,
        source: &SourceSpec,
        request: &EmbeddingRequest,
    ) -> Result<EmbeddingResult, AttemptFailure> {
        let body = EmbeddingBody {
            model: &source.model,
            input: &request.input,
        };
        let body =
            Bytes::from(serde_json::to_vec(&body).expect("embedding bodies always serialise"));
        let url = format!("{}/embeddings", source.base_url);
        let success = exchange(&self.http, source, &url, JSON, body).await?;
        let response: EmbeddingResponse = serde_json::from_slice(&success.body).map_err(|e| {
            invalid(
                &success,
                "bad_json",
                format!("the body is not an embeddings list: {e}"),
            )
        })?;
        let usage = response.usage.map(UsageBody::usage);
        let Some(mut data) = response.data else {
            return Err(invalid(&success, "missing_data", "the body has no data"));
        };
        if data.len() != request.input.len() {
            return Err(invalid(
                &success,
                "wrong_count",
                format!("{} vectors for {} inputs", data.len(), request.input.len()),
            ));
        }
        // Order by `index` when every item has one; the indices must then be 0..n exactly.
        if data.iter().all(|d| d.index.is_some()) {
            data.sort_by_key(|d| d.index);
            if data.iter().enumerate().any(|(i, d)| d.index != Some(i)) {
                return Err(invalid(
                    &success,
                    "bad_indices",
                    "the vector indices are not 0..n",
                ));
            }
        }
        Ok(EmbeddingResult {
            vectors: data.into_iter().map(|d| d.embedding).collect(),
            usage,
        })
    }
}
