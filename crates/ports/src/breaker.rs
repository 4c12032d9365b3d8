use std::future::Future;
use std::time::Duration;

use polygateway_errors::FailureKind;

use crate::BackendError;

/// How a source's circuit breaker behaves (SPEC §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerPolicy {
    /// Consecutive `Transient` failures that open the breaker (`BREAKER_FAILURES`).
    pub failures_to_open: u32,
    /// How long the first trip keeps it open (`BREAKER_OPEN_S`); repeated trips double it.
    pub open_for: Duration,
    /// The cap on a repeated trip's open time.
    pub max_open_for: Duration,
    /// How long a `SourceDead` outcome keeps it open at once.
    pub dead_open_for: Duration,
    /// How long a probe may stay out before its slot is taken back (a probe whose process died
    /// never reports): a bit longer than the attempt timeout.
    pub probe_lease: Duration,
}

/// A breaker's state, as `stats()` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Attempts flow.
    Closed,
    /// No attempt is admitted until the open time has passed.
    Open {
        /// How long until a probe may be admitted.
        remaining: Duration,
    },
    /// The open time has passed; one probe is (or may be) in flight.
    HalfOpen,
}

impl BreakerState {
    /// `closed`, `open` or `half_open`, as in `polygw stats`.
    pub const fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open { .. } => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

/// The answer to [`BreakerStore::try_acquire`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerDecision {
    /// Closed: go ahead.
    Allow,
    /// Half-open and this attempt won the one probe slot: go ahead, and report the outcome
    /// with `was_probe = true` (or give the slot back if cancelled).
    Probe,
    /// Open, or half-open with the probe already taken.
    Reject {
        /// When the breaker may admit a probe: the rest of the open time; `None` while a probe
        /// is out (its outcome decides).
        retry_after: Option<Duration>,
    },
}

/// How an attempt that passed the breaker ended, as far as the breaker cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerOutcome {
    /// The source answered usefully (or the fault was the request's or the result's, which
    /// never counts against the source).
    Success,
    /// The source failed with this kind (`Transient` or `SourceDead`).
    Failure(FailureKind),
    /// The attempt was cancelled before its outcome was known; a probe gives its slot back.
    Cancelled,
}

/// Per-source breaker state shared by everyone who calls the same sources.
///
/// Cancel safety: as for [`crate::AdmissionBackend`], each method is one atomic step.
pub trait BreakerStore: Send + Sync + 'static {
    /// Ask whether an attempt on `source` may go ahead. At most one caller — across all
    /// processes that share the store — gets [`BreakerDecision::Probe`] per half-open period.
    fn try_acquire(
        &self,
        source: &str,
        policy: &BreakerPolicy,
    ) -> impl Future<Output = Result<BreakerDecision, BackendError>> + Send;

    /// Report how an admitted attempt ended. Returns `true` when this report opened the
    /// breaker (a trip), for the per-source counters.
    fn record(
        &self,
        source: &str,
        policy: &BreakerPolicy,
        outcome: BreakerOutcome,
        was_probe: bool,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send;

    /// The breaker's state now.
    fn state(
        &self,
        source: &str,
        policy: &BreakerPolicy,
    ) -> impl Future<Output = Result<BreakerState, BackendError>> + Send;
}
