//! The attempt guard: the permit as a drop guard that carries the settlement state, so every
//! exit path — return, `?`, the caller dropping the future, panic unwind — settles exactly
//! once with the value of SPEC §6, writes the attempt's telemetry row, and gives a half-open
//! probe back if the attempt never finished.

use polygateway_errors::{AttemptFailure, FailureKind};
use polygateway_ports::{BreakerOutcome, EventKind, Permit, PermitId, TelemetryRow, Usage};
use tokio::time::Instant;

use super::settler::{Finish, Settler};
use crate::engine::SourceRuntime;
use crate::telemetry::{CallTrace, millis};

/// Where the attempt is, as far as settlement cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Permit granted, transport not invoked yet: S2, settles 0.
    Admitted,
    /// The transport was invoked; the request may have reached the provider: S3, settles the
    /// estimate if the attempt ends without an outcome.
    InFlight,
    /// The outcome was classified: settles exactly `tokens`, and a later cancellation does
    /// not change it (S4–S9).
    Known {
        tokens: u64,
        breaker: Option<BreakerOutcome>,
    },
}

/// One admitted attempt. Create it right after the permit is granted; call
/// [`transport_started`](AttemptGuard::transport_started) just before invoking the transport
/// and [`succeeded`](AttemptGuard::succeeded) / [`failed`](AttemptGuard::failed) as soon as the
/// outcome is classified, before any further await. Dropping it does the rest.
pub(crate) struct AttemptGuard<'a> {
    source: &'a SourceRuntime,
    settler: &'a Settler,
    trace: &'a CallTrace<'a>,
    permit: Option<Permit>,
    attempt: u32,
    est: u64,
    /// OCR settles 0 tokens on every path (S6).
    zero_tokens: bool,
    probe: bool,
    phase: Phase,
    started: Instant,
}

impl<'a> AttemptGuard<'a> {
    #[allow(clippy::too_many_arguments)] // one call site, every argument named there
    pub(crate) fn new(
        source: &'a SourceRuntime,
        settler: &'a Settler,
        trace: &'a CallTrace<'a>,
        permit: Permit,
        attempt: u32,
        est: u64,
        zero_tokens: bool,
        probe: bool,
    ) -> Self {
        source.pacer.enter();
        source.counters.attempt();
        AttemptGuard {
            source,
            settler,
            trace,
            permit: Some(permit),
            attempt,
            est,
            zero_tokens,
            probe,
            phase: Phase::Admitted,
            started: Instant::now(),
        }
    }

    /// The transport is about to be invoked.
    pub(crate) fn transport_started(&mut self) {
        if self.phase == Phase::Admitted {
            self.phase = Phase::InFlight;
        }
    }

    fn tokens(&self, tokens: u64) -> u64 {
        if self.zero_tokens { 0 } else { tokens }
    }

    /// The attempt succeeded with `usage`: settles `prompt + completion` (S4), or the estimate
    /// when the body had no usage (S4b). Returns the settled tokens.
    pub(crate) fn succeeded(&mut self, usage: Option<Usage>) -> u64 {
        let tokens = self.tokens(usage.map_or(self.est, Usage::total));
        self.phase = Phase::Known {
            tokens,
            breaker: Some(BreakerOutcome::Success),
        };
        self.write_row(TelemetryRow {
            prompt_tokens: usage.map(|u| u.prompt_tokens),
            completion_tokens: usage.map(|u| u.completion_tokens),
            ..self.row(EventKind::AttemptOk, tokens)
        });
        tokens
    }

    /// The attempt failed with `failure`: settles 0 for `SourceDead` (S5) and
    /// `RequestRejected` (S8), the estimate for `Transient` (S5), the reported usage or 0 for
    /// `ResultInvalid` (S9). `cooled_down` (a 429 with `Retry-After`) keeps it out of the
    /// breaker. Returns the settled tokens.
    pub(crate) fn failed(&mut self, failure: &AttemptFailure, cooled_down: bool) -> u64 {
        let tokens = self.tokens(match failure.kind() {
            FailureKind::SourceDead | FailureKind::RequestRejected => 0,
            FailureKind::Transient => self.est,
            FailureKind::ResultInvalid => failure.reported_tokens().unwrap_or(0),
        });
        // A cool-down is not a breaker failure; if this attempt was the probe, its slot goes
        // back (the source answered, but said nothing about its health).
        let breaker = if cooled_down {
            self.probe.then_some(BreakerOutcome::Cancelled)
        } else {
            Some(BreakerOutcome::Failure(failure.kind()))
        };
        self.phase = Phase::Known { tokens, breaker };
        self.write_row(TelemetryRow {
            error_type: Some(failure.kind().as_str()),
            http_status: failure.status(),
            retry_after_ms: failure.retry_after().map(millis),
            ..self.row(EventKind::AttemptFailed, tokens)
        });
        tokens
    }

    /// The transport panicked (S10): settles 0, frees the slot, gives a probe back. The
    /// engine calls this from its catch-unwind around the transport, then resumes the panic.
    pub(crate) fn panicked(&mut self) {
        self.phase = Phase::Known {
            tokens: 0,
            breaker: Some(BreakerOutcome::Cancelled),
        };
        self.source.counters.cancelled();
        self.write_row(TelemetryRow {
            error_type: Some("Panicked"),
            ..self.row(EventKind::Cancelled, 0)
        });
    }

    fn row(&self, kind: EventKind, settled: u64) -> TelemetryRow<'a> {
        TelemetryRow {
            attempt: self.attempt,
            source: Some(&self.source.spec.name),
            model: Some(&self.source.spec.model),
            est_tokens: Some(self.est),
            settled_tokens: Some(settled),
            latency_ms: Some(millis(self.started.elapsed())),
            is_probe: self.probe,
            ..self.trace.row(kind)
        }
    }

    fn write_row(&self, row: TelemetryRow<'_>) {
        if self.trace.sink.enabled() {
            self.trace.sink.record(&row);
        }
    }
}

impl Drop for AttemptGuard<'_> {
    fn drop(&mut self) {
        // Dropped before the outcome was known: the caller cancelled (or the deadline did).
        // A panic in the transport was turned into a known outcome by `panicked`; a panic
        // elsewhere in the caller's task is a cancellation like any other.
        let (tokens, breaker) = match self.phase {
            Phase::Admitted => (0, Some(BreakerOutcome::Cancelled)),
            Phase::InFlight => (self.tokens(self.est), Some(BreakerOutcome::Cancelled)),
            Phase::Known { tokens, breaker } => (tokens, breaker),
        };
        if !matches!(self.phase, Phase::Known { .. }) {
            self.source.counters.cancelled();
            self.write_row(TelemetryRow {
                error_type: Some("Cancelled"),
                ..self.row(EventKind::Cancelled, tokens)
            });
        }
        let permit = self.permit.take();
        if permit.is_some() {
            self.source.counters.settled(tokens);
        }
        // A cancellation only matters to the breaker if this attempt held the probe slot.
        let breaker = breaker
            .filter(|o| *o != BreakerOutcome::Cancelled || self.probe)
            .map(|o| (o, self.probe));
        self.settler.finish(Finish {
            permit,
            tokens,
            breaker,
            source: self.source.name.clone(),
            trips: self.source.counters.trips.clone(),
        });
        self.source.pacer.leave();
        self.source.slot_freed();
    }
}

/// Covers the moments between asking for a probe or a permit and holding an [`AttemptGuard`]:
/// if the caller cancels there, the probe slot is given back and a permit the backend may have
/// granted (a remote reserve whose answer was lost) is released — both idempotent, so sending
/// them when nothing was granted changes nothing (S1: nothing reserved, nothing settled).
pub(crate) struct AdmitGuard<'a> {
    source: &'a SourceRuntime,
    settler: &'a Settler,
    probe: bool,
    reserving: Option<PermitId>,
}

impl<'a> AdmitGuard<'a> {
    pub(crate) fn new(source: &'a SourceRuntime, settler: &'a Settler) -> Self {
        AdmitGuard {
            source,
            settler,
            probe: false,
            reserving: None,
        }
    }

    pub(crate) fn holds_probe(&mut self) {
        self.probe = true;
    }

    pub(crate) fn reserving(&mut self, id: PermitId) {
        self.reserving = Some(id);
    }

    /// The admission finished either way; the guard has nothing left to undo except the probe
    /// when `keep_probe` is false.
    pub(crate) fn done(mut self, keep_probe: bool) {
        self.reserving = None;
        if keep_probe {
            self.probe = false;
        }
    }
}

impl Drop for AdmitGuard<'_> {
    fn drop(&mut self) {
        if !self.probe && self.reserving.is_none() {
            return;
        }
        self.settler.finish(Finish {
            permit: self.reserving.map(|id| Permit {
                id,
                source: self.source.name.clone(),
                tokens: 0,
            }),
            tokens: 0,
            breaker: self.probe.then_some((BreakerOutcome::Cancelled, true)),
            source: self.source.name.clone(),
            trips: self.source.counters.trips.clone(),
        });
    }
}
