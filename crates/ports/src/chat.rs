use serde::{Deserialize, Serialize};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The user's words.
    User,
    /// The model's earlier answers.
    Assistant,
    /// A tool's result.
    Tool,
}

/// One chat message, as in the OpenAI wire format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// What was written.
    pub content: String,
}

impl Message {
    /// A message from `role`.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Message::new(Role::User, content)
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Message::new(Role::System, content)
    }
}

/// Reasoning effort, in a fixed order (SPEC §14): none < minimal < low < medium < high.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effort {
    /// No reasoning.
    None,
    /// As little as the provider allows.
    Minimal,
    /// Low.
    Low,
    /// Medium.
    Medium,
    /// High.
    High,
}

/// A chat completion request. The model is the source's; the rest follows the OpenAI wire
/// format, and `tools` / `response_format` pass through untouched.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The conversation.
    pub messages: Vec<Message>,
    /// Upper bound on completion tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Tool definitions, passed through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<serde_json::Value>,
    /// Response format, passed through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<serde_json::Value>,
    /// Requested reasoning effort; each source maps it to what it supports.
    #[serde(skip)]
    pub effort: Option<Effort>,
    /// The caller's token estimate; replaces the source's `est_tokens` for the reservation.
    #[serde(skip)]
    pub est_tokens: Option<u64>,
}

impl ChatRequest {
    /// A request with one user message.
    pub fn from_prompt(prompt: impl Into<String>) -> Self {
        ChatRequest {
            messages: vec![Message::user(prompt)],
            ..ChatRequest::default()
        }
    }
}

/// Token usage as the upstream reported it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the prompt.
    pub prompt_tokens: u64,
    /// Tokens in the completion.
    pub completion_tokens: u64,
}

impl Usage {
    /// What the attempt settles (SPEC §6 S4).
    pub fn total(self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }
}

/// A successful chat completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResult {
    /// The answer.
    pub content: String,
    /// Reasoning text, kept apart from the answer (SPEC §14).
    pub reasoning_content: Option<String>,
    /// Why generation stopped (`stop`, `length`, `tool_calls`, …).
    pub finish_reason: Option<String>,
    /// Usage, when the body reported it.
    pub usage: Option<Usage>,
    /// The model that answered, as the upstream named it.
    pub model: String,
    /// The source that served (filled in by the pipeline).
    pub source: String,
    /// How many attempts the logical call took (filled in by the pipeline).
    pub attempts: u32,
    /// The logical call's id, as in its telemetry rows (filled in by the client).
    #[serde(default)]
    pub logical_call_id: String,
    /// The logical call's duration in milliseconds (filled in by the client).
    #[serde(default)]
    pub latency_ms: u64,
}
