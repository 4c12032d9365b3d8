use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::Limits;

/// A permit's identity; the backend's operations are idempotent per id (SPEC §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PermitId(pub u128);

impl fmt::Display for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// What one attempt asks of a source's quotas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionRequest<'a> {
    /// The source's name.
    pub source: &'a str,
    /// The source's limits (the backend enforces what it is given).
    pub limits: Limits,
    /// The tokens to reserve in the TPM window (the effective estimate).
    pub tokens: u64,
    /// How long the backend keeps the permit if it is never settled (a crashed process): a bit
    /// longer than the attempt timeout.
    pub lease: Duration,
    /// The id the permit will have; chosen by the caller so that a re-sent reserve is
    /// recognised.
    pub permit_id: PermitId,
}

/// A granted reservation. Holding one means `tokens` are reserved in the TPM window, one
/// request is counted in the RPM window and one concurrency slot is taken, until the permit is
/// settled and released (or its lease expires).
///
/// This is plain data: the pipeline wraps it in a drop guard that settles it exactly once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permit {
    /// The permit's id.
    pub id: PermitId,
    /// The source it was granted on.
    pub source: Arc<str>,
    /// The tokens reserved.
    pub tokens: u64,
}

/// Which quota refused an admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefusalReason {
    /// The TPM window has no room for the reservation.
    Tpm,
    /// The RPM window is full.
    Rpm,
    /// Every concurrency slot is taken.
    Concurrency,
}

/// The answer to [`AdmissionBackend::reserve`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Room was made; settle the permit when the attempt ends.
    Granted(Permit),
    /// No room; nothing was reserved or counted.
    Refused {
        /// The quota that is full.
        reason: RefusalReason,
        /// When room is expected (a window slides), if the backend can tell.
        retry_after: Option<Duration>,
    },
}

/// The answer to [`AdmissionBackend::reserve_guarded`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardedAdmission {
    /// The breaker let the attempt through (as the half-open probe when `probe`) and the
    /// reservation was made.
    Granted {
        /// The permit.
        permit: Permit,
        /// Whether this attempt holds the half-open probe slot.
        probe: bool,
    },
    /// The breaker let it through, but there was no room; nothing was reserved or counted,
    /// and a probe slot taken in the same step was given back.
    Refused {
        /// The quota that is full.
        reason: RefusalReason,
        /// When room is expected, if the backend can tell.
        retry_after: Option<Duration>,
    },
    /// The breaker is open (or half-open with its probe out).
    BreakerRejected {
        /// When it may admit a probe; `None` while a probe is out.
        retry_after: Option<Duration>,
    },
}

/// What an attempt reports to its source's breaker along with its settlement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerReport<'a> {
    /// How the attempt ended.
    pub outcome: crate::BreakerOutcome,
    /// Whether it held the probe slot.
    pub was_probe: bool,
    /// The breaker's policy.
    pub policy: &'a crate::BreakerPolicy,
}

/// A source's quota use as the backend sees it (for `stats()`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SourceUsage {
    /// Tokens reserved or settled in the current TPM window.
    pub tpm_used: u64,
    /// Requests counted in the current RPM window.
    pub rpm_used: u64,
    /// Permits granted and not yet released.
    pub inflight: u64,
}

/// The backend could not be reached or answered nonsense. The pipeline fails closed on it
/// (SPEC §6: `GatewayUnavailable`, reason `backend_unavailable`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("backend unavailable: {message}")]
pub struct BackendError {
    message: String,
    retry_after: Option<Duration>,
}

impl BackendError {
    /// A backend failure; `message` must not contain a secret (a Redis URL with a password is
    /// never put here).
    pub fn new(message: impl Into<String>) -> Self {
        BackendError {
            message: message.into(),
            retry_after: None,
        }
    }

    /// When the backend may be back, if known.
    #[must_use]
    pub fn with_retry_after(mut self, retry_after: Duration) -> Self {
        self.retry_after = Some(retry_after);
        self
    }

    /// What went wrong.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// When to try again, if known.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
}

/// Per-source quota accounting shared by everyone who calls the same sources (SPEC §6, §17).
///
/// Every operation is idempotent per [`PermitId`]: a reserve, settle or release that runs
/// twice (a client library re-sending after a dropped connection) changes nothing the second
/// time. A refused reservation reserves and counts nothing.
///
/// Cancel safety: each method is one atomic step in the backend; dropping its future either
/// leaves the step undone or done, never half-done. A reserve whose answer was lost is covered
/// by the lease.
pub trait AdmissionBackend: Send + Sync + 'static {
    /// Reserve `request.tokens` in the TPM window, one request in the RPM window and one
    /// concurrency slot — all or nothing.
    fn reserve(
        &self,
        request: AdmissionRequest<'_>,
    ) -> impl Future<Output = Result<Admission, BackendError>> + Send;

    /// Replace the permit's reservation by `actual_tokens` in the TPM window. The first
    /// settle wins; later ones change nothing.
    fn settle(
        &self,
        permit: &Permit,
        actual_tokens: u64,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// Free the permit's concurrency slot. Idempotent.
    fn release(&self, permit: &Permit) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// Settle and release in one step, which a remote backend can do in one round trip.
    fn settle_and_release(
        &self,
        permit: &Permit,
        actual_tokens: u64,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        async move {
            self.settle(permit, actual_tokens).await?;
            self.release(permit).await
        }
    }

    /// Pass the source's breaker and reserve, in one atomic step: one round trip instead of
    /// two for a remote backend. Only a backend that also stores the breakers the pipeline uses
    /// may answer `Some`; `None` (the default) means "not supported", and the pipeline then asks
    /// the breaker store and reserves separately.
    fn reserve_guarded(
        &self,
        request: AdmissionRequest<'_>,
        policy: &crate::BreakerPolicy,
    ) -> impl Future<Output = Option<Result<GuardedAdmission, BackendError>>> + Send {
        let _ = (request, policy);
        async { None }
    }

    /// Settle, release and report to the breaker in one step; `Some(Ok(true))` when the
    /// report opened the breaker. Same rule as [`reserve_guarded`](Self::reserve_guarded):
    /// `None` (the default) means "not supported".
    fn settle_reporting(
        &self,
        permit: &Permit,
        actual_tokens: u64,
        report: BreakerReport<'_>,
    ) -> impl Future<Output = Option<Result<bool, BackendError>>> + Send {
        let _ = (permit, actual_tokens, report);
        async { None }
    }

    /// The source's current use.
    fn usage(
        &self,
        source: &str,
        limits: Limits,
    ) -> impl Future<Output = Result<SourceUsage, BackendError>> + Send;
}
