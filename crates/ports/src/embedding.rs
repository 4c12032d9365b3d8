use serde::{Deserialize, Serialize};

use crate::Usage;

/// One embeddings request: one batch of texts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingRequest {
    /// The texts, in order.
    pub input: Vec<String>,
    /// The caller's token estimate for this batch.
    #[serde(skip)]
    pub est_tokens: Option<u64>,
}

/// The vectors for one batch, in the order of its input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingResult {
    /// One vector per input text, in input order.
    pub vectors: Vec<Vec<f32>>,
    /// Usage, when the body reported it (embeddings report only prompt tokens).
    pub usage: Option<Usage>,
}
