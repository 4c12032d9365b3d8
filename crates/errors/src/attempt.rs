use std::fmt;
use std::time::Duration;

/// The four kinds every attempt outcome is classified into (SPEC §4). The pipeline's
/// decisions — fail over, back off, stop — depend on the kind alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// This source cannot serve now or soon (401, 403, unknown model, `insufficient_quota`):
    /// mark it dead and fail over.
    SourceDead,
    /// May succeed if tried again (429 rate, 408, 409, 5xx, connect/read errors, attempt
    /// timeout): back off, honour `Retry-After`, retry or fail over.
    Transient,
    /// The caller's request is at fault (400, 413, 422, content policy): stop.
    RequestRejected,
    /// A 2xx whose body is unusable (bad JSON, missing fields, schema violated).
    ResultInvalid,
}

impl FailureKind {
    /// The kind's name as used in telemetry `error_type` and messages.
    pub const fn as_str(self) -> &'static str {
        match self {
            FailureKind::SourceDead => "SourceDead",
            FailureKind::Transient => "Transient",
            FailureKind::RequestRejected => "RequestRejected",
            FailureKind::ResultInvalid => "ResultInvalid",
        }
    }

    /// Whether this outcome is the source's fault and may count against its breaker
    /// (SPEC §7: `RequestRejected` and `ResultInvalid` never do).
    pub const fn counts_against_source(self) -> bool {
        matches!(self, FailureKind::SourceDead | FailureKind::Transient)
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One failed attempt, classified.
///
/// `code` is a short machine-readable cause (`"timeout"`, `"connect"`, `"http_status"`,
/// `"insufficient_quota"`, `"bad_json"`, …) chosen by the transport; `message` is for humans.
/// Transports must not put secrets in either (an upstream body that echoes a key is redacted
/// before it gets here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptFailure {
    kind: FailureKind,
    code: &'static str,
    message: String,
    status: Option<u16>,
    retry_after: Option<Duration>,
    reported_tokens: Option<u64>,
}

impl AttemptFailure {
    /// A failure of `kind` with a machine-readable `code` and a human `message`.
    pub fn new(kind: FailureKind, code: &'static str, message: impl Into<String>) -> Self {
        AttemptFailure {
            kind,
            code,
            message: message.into(),
            status: None,
            retry_after: None,
            reported_tokens: None,
        }
    }

    /// Attach the HTTP status the upstream answered with.
    #[must_use]
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    /// Attach a real retry hint (a parsed `Retry-After`); `None` means no hint.
    #[must_use]
    pub fn with_retry_after(mut self, retry_after: Option<Duration>) -> Self {
        self.retry_after = retry_after;
        self
    }

    /// Attach the token usage the body reported (used to settle `ResultInvalid`, SPEC §6 S9).
    #[must_use]
    pub fn with_reported_tokens(mut self, tokens: u64) -> Self {
        self.reported_tokens = Some(tokens);
        self
    }

    /// The classification.
    pub fn kind(&self) -> FailureKind {
        self.kind
    }

    /// The machine-readable cause.
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// The human description (never contains a secret).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The HTTP status, when the upstream answered at all.
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// The upstream's retry hint, if it gave a usable one.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// Tokens the body reported although the result was unusable.
    pub fn reported_tokens(&self) -> Option<u64> {
        self.reported_tokens
    }
}

impl fmt::Display for AttemptFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}", self.kind, self.code)?;
        if let Some(status) = self.status {
            write!(f, ", HTTP {status}")?;
        }
        if let Some(retry_after) = self.retry_after {
            write!(f, ", retry after {retry_after:?}")?;
        }
        write!(f, "): {}", self.message)
    }
}

impl std::error::Error for AttemptFailure {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_kind_code_status_and_hint() {
        let failure = AttemptFailure::new(FailureKind::Transient, "rate_limited", "slow down")
            .with_status(429)
            .with_retry_after(Some(Duration::from_millis(1500)));
        assert_eq!(
            failure.to_string(),
            "Transient (rate_limited, HTTP 429, retry after 1.5s): slow down"
        );
        assert_eq!(failure.retry_after(), Some(Duration::from_millis(1500)));
        assert_eq!(failure.kind(), FailureKind::Transient);
        assert_eq!(failure.status(), Some(429));
    }

    #[test]
    fn only_source_faults_count_against_the_source() {
        assert!(FailureKind::SourceDead.counts_against_source());
        assert!(FailureKind::Transient.counts_against_source());
        assert!(!FailureKind::RequestRejected.counts_against_source());
        assert!(!FailureKind::ResultInvalid.counts_against_source());
    }
}
