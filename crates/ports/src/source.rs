use std::fmt;
use std::time::Duration;

use crate::Secret;

/// Which wire protocol a source speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SourceKind {
    /// OpenAI-compatible `/chat/completions` and `/embeddings`.
    OpenAiCompat,
    /// The MonkeyOCR HTTP API (`/ocr/text`, `/parse`).
    MonkeyOcr,
}

impl SourceKind {
    /// The kind as written in configuration: `openai_compat`, `monkey_ocr`.
    pub const fn as_str(self) -> &'static str {
        match self {
            SourceKind::OpenAiCompat => "openai_compat",
            SourceKind::MonkeyOcr => "monkey_ocr",
        }
    }

    /// Parse the configuration spelling.
    pub fn from_config(text: &str) -> Option<Self> {
        match text {
            "openai_compat" => Some(SourceKind::OpenAiCompat),
            "monkey_ocr" => Some(SourceKind::MonkeyOcr),
            _ => None,
        }
    }
}

impl fmt::Display for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A source's quotas. `None` means no limit of that kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// Tokens per minute.
    pub tpm: Option<u64>,
    /// Requests per minute.
    pub rpm: Option<u64>,
    /// Attempts in flight at once.
    pub max_concurrency: Option<u32>,
}

/// One upstream deployment (SPEC §2), validated. Built by the facade's configuration, or by a
/// user assembling a custom pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceSpec {
    /// Unique in its scope; `[A-Z0-9_]+` as written in configuration keys.
    pub name: String,
    /// The wire protocol.
    pub kind: SourceKind,
    /// Where the API lives, e.g. `https://api.example.com/v1`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer …`; never printed.
    pub api_key: Option<Secret>,
    /// The model name sent upstream (empty for OCR sources, which have none).
    pub model: String,
    /// Quotas.
    pub limits: Limits,
    /// The reservation for one attempt when the request gives no better estimate.
    pub est_tokens: u64,
    /// The bound on one attempt, until the whole body is read.
    pub timeout: Duration,
    /// Lower is tried first.
    pub priority: u32,
    /// Share among sources of equal priority.
    pub weight: u32,
    /// Most texts per embeddings request.
    pub max_batch: usize,
    /// Least time between two request starts from this process (0 = no spacing).
    pub min_interval: Duration,
}

impl SourceSpec {
    /// The reservation actually used for one attempt given the request's own `estimate`
    /// (SPEC §2): the estimate or `est_tokens`, never above `tpm` (so one call always fits
    /// an empty window) and never 0 when `tpm` is set.
    pub fn effective_est_tokens(&self, estimate: Option<u64>) -> u64 {
        let est = estimate.unwrap_or(self.est_tokens);
        match self.limits.tpm {
            Some(tpm) => est.clamp(1, tpm.max(1)),
            None => est,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(tpm: Option<u64>, est_tokens: u64) -> SourceSpec {
        SourceSpec {
            name: "A".into(),
            kind: SourceKind::OpenAiCompat,
            base_url: "http://127.0.0.1:1".into(),
            api_key: None,
            model: "m".into(),
            limits: Limits {
                tpm,
                ..Limits::default()
            },
            est_tokens,
            timeout: Duration::from_secs(1),
            priority: 0,
            weight: 1,
            max_batch: 16,
            min_interval: Duration::ZERO,
        }
    }

    #[test]
    fn estimate_is_capped_by_tpm_and_never_zero_under_a_limit() {
        assert_eq!(source(Some(1000), 4000).effective_est_tokens(None), 1000);
        assert_eq!(source(Some(1000), 0).effective_est_tokens(None), 1);
        assert_eq!(source(Some(1000), 200).effective_est_tokens(Some(50)), 50);
        assert_eq!(
            source(Some(1000), 200).effective_est_tokens(Some(5000)),
            1000
        );
        assert_eq!(source(None, 0).effective_est_tokens(None), 0);
        assert_eq!(source(None, 300).effective_est_tokens(Some(7)), 7);
    }

    #[test]
    fn debug_hides_the_api_key() {
        let mut spec = source(None, 1);
        spec.api_key = Some(Secret::new("sk-top-secret"));
        let debug = format!("{spec:?}");
        assert!(!debug.contains("sk-top-secret"), "{debug}");
        assert!(debug.contains("<redacted>"), "{debug}");
    }
}
