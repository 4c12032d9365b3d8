use std::fmt;
use std::time::Duration;

use crate::{AttemptFailure, ConfigError, Scope};

/// The error a caller receives from a logical call (SPEC §4).
///
/// Ask it questions rather than matching deeply: [`kind`](GatewayError::kind) for the
/// family, [`scope`](GatewayError::scope), and [`retry_after`](GatewayError::retry_after) for a
/// real hint of when trying again may succeed (never a fake zero).
///
/// ```
/// use std::time::Duration;
/// use polygateway_errors::{ErrorKind, GatewayError, Scope, Unavailable, UnavailableReason};
///
/// let error = GatewayError::from(
///     Unavailable::new(Scope::Llm, UnavailableReason::CircuitOpen)
///         .with_retry_after(Some(Duration::from_secs(3))),
/// );
/// match error.kind() {
///     ErrorKind::GatewayUnavailable => assert_eq!(error.retry_after(), Some(Duration::from_secs(3))),
///     ErrorKind::CallDeadlineExceeded => { /* our own budget ran out: give up or raise it */ }
///     _ => { /* the request or the result is at fault: retrying will not help */ }
/// }
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// The gateway could not get an answer (circuit open everywhere, no usable source, quota
    /// wait exceeded, stalled, backend unavailable, attempts exhausted).
    #[error(transparent)]
    GatewayUnavailable(Unavailable),
    /// The request is at fault; retrying it unchanged will not help.
    #[error(transparent)]
    RequestRejected(Rejected),
    /// The result could not be used.
    #[error(transparent)]
    ResultInvalid(Invalid),
    /// The caller's own deadline (SPEC §9) expired. Not part of the `GatewayUnavailable`
    /// family and carries no retry hint.
    #[error(transparent)]
    CallDeadlineExceeded(DeadlineExceeded),
    /// Invalid settings or arguments.
    #[error("invalid configuration: {0}")]
    Config(ConfigError),
}

/// The family of a [`GatewayError`], named as in SPEC §4 and the CLI's `error: <Kind>` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// See [`GatewayError::GatewayUnavailable`].
    GatewayUnavailable,
    /// See [`GatewayError::RequestRejected`].
    RequestRejected,
    /// See [`GatewayError::ResultInvalid`].
    ResultInvalid,
    /// See [`GatewayError::CallDeadlineExceeded`].
    CallDeadlineExceeded,
    /// See [`GatewayError::Config`].
    Config,
}

impl ErrorKind {
    /// The kind's name: `GatewayUnavailable`, `RequestRejected`, `ResultInvalid`,
    /// `CallDeadlineExceeded`, `Config`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorKind::GatewayUnavailable => "GatewayUnavailable",
            ErrorKind::RequestRejected => "RequestRejected",
            ErrorKind::ResultInvalid => "ResultInvalid",
            ErrorKind::CallDeadlineExceeded => "CallDeadlineExceeded",
            ErrorKind::Config => "Config",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl GatewayError {
    /// The error's family.
    pub fn kind(&self) -> ErrorKind {
        match self {
            GatewayError::GatewayUnavailable(_) => ErrorKind::GatewayUnavailable,
            GatewayError::RequestRejected(_) => ErrorKind::RequestRejected,
            GatewayError::ResultInvalid(_) => ErrorKind::ResultInvalid,
            GatewayError::CallDeadlineExceeded(_) => ErrorKind::CallDeadlineExceeded,
            GatewayError::Config(_) => ErrorKind::Config,
        }
    }

    /// The scope of the call, or of the configuration key, when there is one.
    pub fn scope(&self) -> Option<Scope> {
        match self {
            GatewayError::GatewayUnavailable(e) => Some(e.scope),
            GatewayError::RequestRejected(e) => Some(e.scope),
            GatewayError::ResultInvalid(e) => Some(e.scope),
            GatewayError::CallDeadlineExceeded(e) => Some(e.scope),
            GatewayError::Config(e) => e.scope(),
        }
    }

    /// When trying again may succeed: only `GatewayUnavailable` carries a hint, and only a
    /// real one. A deadline, a rejected request or an unusable result never does.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            GatewayError::GatewayUnavailable(e) => e.retry_after,
            _ => None,
        }
    }
}

impl From<Unavailable> for GatewayError {
    fn from(e: Unavailable) -> Self {
        GatewayError::GatewayUnavailable(e)
    }
}

impl From<Rejected> for GatewayError {
    fn from(e: Rejected) -> Self {
        GatewayError::RequestRejected(e)
    }
}

impl From<Invalid> for GatewayError {
    fn from(e: Invalid) -> Self {
        GatewayError::ResultInvalid(e)
    }
}

impl From<DeadlineExceeded> for GatewayError {
    fn from(e: DeadlineExceeded) -> Self {
        GatewayError::CallDeadlineExceeded(e)
    }
}

impl From<ConfigError> for GatewayError {
    fn from(e: ConfigError) -> Self {
        GatewayError::Config(e)
    }
}

/// Why the gateway could not get an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UnavailableReason {
    /// Every source's circuit breaker is open.
    CircuitOpen,
    /// No source is configured or usable for this request.
    NoUsableSource,
    /// Every source is at its quota and the wait would not fit the stall window or deadline.
    QuotaWaitExceeded,
    /// No attempt made progress within the stall window.
    Stalled,
    /// The admission or breaker backend (e.g. Redis) cannot be reached; nothing was admitted.
    BackendUnavailable,
    /// `MAX_ATTEMPTS` attempts failed.
    AttemptsExhausted,
    /// The client was shut down; it takes no new calls.
    ShutDown,
}

impl UnavailableReason {
    /// The reason as written in telemetry and messages (`snake_case`).
    pub const fn as_str(self) -> &'static str {
        match self {
            UnavailableReason::CircuitOpen => "circuit_open",
            UnavailableReason::NoUsableSource => "no_usable_source",
            UnavailableReason::QuotaWaitExceeded => "quota_wait_exceeded",
            UnavailableReason::Stalled => "stalled",
            UnavailableReason::BackendUnavailable => "backend_unavailable",
            UnavailableReason::AttemptsExhausted => "attempts_exhausted",
            UnavailableReason::ShutDown => "shut_down",
        }
    }

    const fn advice(self) -> &'static str {
        match self {
            UnavailableReason::CircuitOpen => {
                "every source's circuit breaker is open; retry later or add a source"
            }
            UnavailableReason::NoUsableSource => {
                "no configured source can serve this call; check the scope's SOURCE keys"
            }
            UnavailableReason::QuotaWaitExceeded => {
                "every source is at its quota; retry later, lower the load or raise TPM/RPM"
            }
            UnavailableReason::Stalled => {
                "no attempt made progress within the stall window; the upstreams may be down"
            }
            UnavailableReason::BackendUnavailable => {
                "the quota backend cannot be reached, so nothing was admitted; check REDIS_URL and the server"
            }
            UnavailableReason::AttemptsExhausted => {
                "every attempt failed; see each source's last error"
            }
            UnavailableReason::ShutDown => "the client was shut down and takes no new calls",
        }
    }
}

impl fmt::Display for UnavailableReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A source and the last failure the call saw from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFailure {
    /// The source's name.
    pub source: String,
    /// Its last classified failure.
    pub failure: AttemptFailure,
}

/// Details of [`GatewayError::GatewayUnavailable`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    scope: Scope,
    reason: UnavailableReason,
    retry_after: Option<Duration>,
    sources: Vec<SourceFailure>,
}

impl Unavailable {
    /// The gateway could not answer a call in `scope` because of `reason`.
    pub fn new(scope: Scope, reason: UnavailableReason) -> Self {
        Unavailable {
            scope,
            reason,
            retry_after: None,
            sources: Vec::new(),
        }
    }

    /// The earliest moment a source may serve again; `None` when nobody knows.
    #[must_use]
    pub fn with_retry_after(mut self, retry_after: Option<Duration>) -> Self {
        self.retry_after = retry_after;
        self
    }

    /// Each source's last failure.
    #[must_use]
    pub fn with_sources(mut self, sources: Vec<SourceFailure>) -> Self {
        self.sources = sources;
        self
    }

    /// The call's scope.
    pub fn scope(&self) -> Scope {
        self.scope
    }

    /// Why.
    pub fn reason(&self) -> UnavailableReason {
        self.reason
    }

    /// A real hint, or none.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// Each source's last failure.
    pub fn sources(&self) -> &[SourceFailure] {
        &self.sources
    }
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: gateway unavailable ({}): {}",
            self.scope,
            self.reason,
            self.reason.advice()
        )?;
        if let Some(retry_after) = self.retry_after {
            write!(f, "; retry after {retry_after:?}")?;
        }
        for (i, s) in self.sources.iter().enumerate() {
            let sep = if i == 0 { "; last errors: " } else { ", " };
            write!(f, "{sep}{} → {}", s.source, s.failure)?;
        }
        Ok(())
    }
}

impl std::error::Error for Unavailable {}

/// Details of [`GatewayError::RequestRejected`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    scope: Scope,
    source: String,
    status: Option<u16>,
    message: String,
}

impl Rejected {
    /// `source` rejected the request with `status` and the upstream's `message`.
    pub fn new(
        scope: Scope,
        source: impl Into<String>,
        status: Option<u16>,
        message: impl Into<String>,
    ) -> Self {
        Rejected {
            scope,
            source: source.into(),
            status,
            message: message.into(),
        }
    }

    /// The call's scope.
    pub fn scope(&self) -> Scope {
        self.scope
    }

    /// The source that rejected it.
    pub fn source_name(&self) -> &str {
        &self.source
    }

    /// The HTTP status, if any.
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// The upstream's message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: request rejected by source {}",
            self.scope, self.source
        )?;
        if let Some(status) = self.status {
            write!(f, " (HTTP {status})")?;
        }
        write!(
            f,
            ": {}; fix the request, retrying it unchanged will not help",
            self.message
        )
    }
}

impl std::error::Error for Rejected {}

/// Details of [`GatewayError::ResultInvalid`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    scope: Scope,
    source: String,
    why: String,
}

impl Invalid {
    /// `source` answered, but the result is unusable because of `why`.
    pub fn new(scope: Scope, source: impl Into<String>, why: impl Into<String>) -> Self {
        Invalid {
            scope,
            source: source.into(),
            why: why.into(),
        }
    }

    /// The call's scope.
    pub fn scope(&self) -> Scope {
        self.scope
    }

    /// The source whose result was unusable.
    pub fn source_name(&self) -> &str {
        &self.source
    }

    /// Why it was unusable.
    pub fn why(&self) -> &str {
        &self.why
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: result from source {} is unusable: {}",
            self.scope, self.source, self.why
        )
    }
}

impl std::error::Error for Invalid {}

/// Details of [`GatewayError::CallDeadlineExceeded`]. Deliberately no retry hint: the
/// caller's budget ran out, which says nothing about when a source frees up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadlineExceeded {
    scope: Scope,
    deadline: Duration,
}

impl DeadlineExceeded {
    /// A call in `scope` ran out of its `deadline`.
    pub fn new(scope: Scope, deadline: Duration) -> Self {
        DeadlineExceeded { scope, deadline }
    }

    /// The call's scope.
    pub fn scope(&self) -> Scope {
        self.scope
    }

    /// The deadline that expired.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }
}

impl fmt::Display for DeadlineExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: call deadline of {:?} exceeded; the in-flight attempt was cancelled (raise the deadline if the work needs longer)",
            self.scope, self.deadline
        )
    }
}

impl std::error::Error for DeadlineExceeded {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FailureKind;

    #[test]
    fn unavailable_lists_reason_hint_and_last_errors() {
        let error = GatewayError::from(
            Unavailable::new(Scope::Llm, UnavailableReason::AttemptsExhausted)
                .with_retry_after(Some(Duration::from_secs(2)))
                .with_sources(vec![SourceFailure {
                    source: "a".into(),
                    failure: AttemptFailure::new(FailureKind::Transient, "timeout", "no answer"),
                }]),
        );
        assert_eq!(error.kind(), ErrorKind::GatewayUnavailable);
        assert_eq!(error.scope(), Some(Scope::Llm));
        assert_eq!(error.retry_after(), Some(Duration::from_secs(2)));
        assert_eq!(
            error.to_string(),
            "LLM: gateway unavailable (attempts_exhausted): every attempt failed; see each \
             source's last error; retry after 2s; last errors: a → Transient (timeout): no answer"
        );
    }

    #[test]
    fn deadline_is_its_own_kind_without_a_hint() {
        let error = GatewayError::from(DeadlineExceeded::new(
            Scope::Embedding,
            Duration::from_millis(2500),
        ));
        assert_eq!(error.kind(), ErrorKind::CallDeadlineExceeded);
        assert_eq!(error.kind().as_str(), "CallDeadlineExceeded");
        assert_eq!(error.retry_after(), None);
        assert_eq!(error.scope(), Some(Scope::Embedding));
        assert!(
            error
                .to_string()
                .starts_with("EMBEDDING: call deadline of 2.5s exceeded"),
            "{error}"
        );
    }

    #[test]
    fn rejected_and_invalid_carry_no_hint() {
        let rejected = GatewayError::from(Rejected::new(Scope::Llm, "a", Some(400), "bad role"));
        assert_eq!(rejected.retry_after(), None);
        assert_eq!(
            rejected.to_string(),
            "LLM: request rejected by source a (HTTP 400): bad role; fix the request, retrying \
             it unchanged will not help"
        );
        let invalid = GatewayError::from(Invalid::new(Scope::Ocr, "ocr1", "success: false"));
        assert_eq!(invalid.kind(), ErrorKind::ResultInvalid);
        assert_eq!(invalid.retry_after(), None);
    }

    #[test]
    fn config_error_scope_comes_from_the_key() {
        let error = GatewayError::from(ConfigError::invalid("OCR__TIMEOUT_S", "x", "a number"));
        assert_eq!(error.kind(), ErrorKind::Config);
        assert_eq!(error.scope(), Some(Scope::Ocr));
        assert_eq!(
            error.to_string(),
            "invalid configuration: OCR__TIMEOUT_S = \"x\": a number"
        );
    }
}
