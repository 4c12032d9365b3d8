//! In-process circuit breakers (SPEC §7) on an injectable clock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use polygateway_errors::FailureKind;
use polygateway_ports::{
    BackendError, BreakerDecision, BreakerOutcome, BreakerPolicy, BreakerState, BreakerStore, Clock,
};

#[derive(Debug, Default, Clone, Copy)]
struct Breaker {
    consecutive_failures: u32,
    /// Trips since the breaker last closed; each one doubles the open time (capped).
    trips: u32,
    open_until: Option<Duration>,
    /// When the half-open probe was handed out, while it is out.
    probe_since: Option<Duration>,
}

impl Breaker {
    fn open(&mut self, now: Duration, policy: &BreakerPolicy, dead: bool) {
        let open_for = if dead {
            policy.dead_open_for
        } else {
            let factor = 1u32.checked_shl(self.trips.min(16)).unwrap_or(u32::MAX);
            policy
                .open_for
                .saturating_mul(factor)
                .min(policy.max_open_for.max(policy.open_for))
        };
        self.trips = self.trips.saturating_add(1);
        self.open_until = Some(now + open_for);
        self.probe_since = None;
        self.consecutive_failures = 0;
    }

    fn close(&mut self) {
        *self = Breaker::default();
    }

    fn probe_out(&self, now: Duration, policy: &BreakerPolicy) -> bool {
        self.probe_since
            .is_some_and(|since| now.saturating_sub(since) < policy.probe_lease)
    }
}

fn transition(
    b: &mut Breaker,
    now: Duration,
    policy: &BreakerPolicy,
    outcome: BreakerOutcome,
    was_probe: bool,
) {
    match outcome {
        BreakerOutcome::Cancelled => {
            if was_probe {
                b.probe_since = None; // the slot goes back; the breaker stays half-open
            }
        }
        BreakerOutcome::Success => {
            if was_probe || b.open_until.is_none() {
                b.close();
            }
        }
        // The request's or the result's fault: never a failure of the source, and no evidence
        // of health either — except for a probe, where an answer is all that needed showing.
        BreakerOutcome::Failure(FailureKind::RequestRejected | FailureKind::ResultInvalid) => {
            if was_probe {
                b.close();
            }
        }
        BreakerOutcome::Failure(FailureKind::SourceDead) => b.open(now, policy, true),
        BreakerOutcome::Failure(FailureKind::Transient) => {
            if was_probe {
                b.open(now, policy, false);
            } else if b.open_until.is_none() {
                b.consecutive_failures += 1;
                if b.consecutive_failures >= policy.failures_to_open {
                    b.open(now, policy, false);
                }
            }
        }
    }
}

/// The in-memory [`BreakerStore`]: one process, exact, no I/O.
pub struct MemoryBreakers {
    clock: Arc<dyn Clock>,
    breakers: Mutex<HashMap<Arc<str>, Breaker>>,
}

impl std::fmt::Debug for MemoryBreakers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBreakers").finish_non_exhaustive()
    }
}

impl MemoryBreakers {
    /// Breakers reading time from `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        MemoryBreakers {
            clock,
            breakers: Mutex::new(HashMap::new()),
        }
    }

    fn with_breaker<T>(&self, source: &str, f: impl FnOnce(&mut Breaker, Duration) -> T) -> T {
        let mut breakers = self.breakers.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.clock.monotonic();
        let breaker = match breakers.get_mut(source) {
            Some(breaker) => breaker,
            None => breakers.entry(Arc::from(source)).or_default(),
        };
        f(breaker, now)
    }

    fn decide(&self, source: &str, policy: &BreakerPolicy) -> BreakerDecision {
        self.with_breaker(source, |b, now| match b.open_until {
            None => BreakerDecision::Allow,
            Some(until) if now < until => BreakerDecision::Reject {
                retry_after: Some(until - now),
            },
            Some(_) if b.probe_out(now, policy) => BreakerDecision::Reject { retry_after: None },
            Some(_) => {
                b.probe_since = Some(now);
                BreakerDecision::Probe
            }
        })
    }

    /// Apply an outcome; `true` when it opened the breaker.
    fn apply(
        &self,
        source: &str,
        policy: &BreakerPolicy,
        outcome: BreakerOutcome,
        was_probe: bool,
    ) -> bool {
        self.with_breaker(source, |b, now| {
            let before = b.open_until;
            transition(b, now, policy, outcome, was_probe);
            b.open_until.is_some() && b.open_until != before
        })
    }

    fn state_now(&self, source: &str) -> BreakerState {
        self.with_breaker(source, |b, now| match b.open_until {
            None => BreakerState::Closed,
            Some(until) if now < until => BreakerState::Open {
                remaining: until - now,
            },
            Some(_) => BreakerState::HalfOpen,
        })
    }
}

impl BreakerStore for MemoryBreakers {
    /// # Cancel safety
    ///
    /// Completes on its first poll.
    async fn try_acquire(
        &self,
        source: &str,
        policy: &BreakerPolicy,
    ) -> Result<BreakerDecision, BackendError> {
        Ok(self.decide(source, policy))
    }

    /// # Cancel safety
    ///
    /// Completes on its first poll.
    async fn record(
        &self,
        source: &str,
        policy: &BreakerPolicy,
        outcome: BreakerOutcome,
        was_probe: bool,
    ) -> Result<bool, BackendError> {
        Ok(self.apply(source, policy, outcome, was_probe))
    }

    /// # Cancel safety
    ///
    /// Completes on its first poll.
    async fn state(
        &self,
        source: &str,
        _policy: &BreakerPolicy,
    ) -> Result<BreakerState, BackendError> {
        Ok(self.state_now(source))
    }
}
