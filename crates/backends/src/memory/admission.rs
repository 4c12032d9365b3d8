//! In-process admission: exact sliding windows for TPM and RPM, concurrency slots, permits
//! with leases, idempotent settle and release.
//!
//! **Why a sliding log.** A fixed window ("tokens this minute") lets twice the limit through
//! around a window edge; a token bucket cannot take a refund back exactly (it forgets when
//! tokens were spent). The log keeps one entry per admitted request — when, which permit, how
//! many tokens — so the sum over the last minute is exact at every instant, a settle replaces one
//! entry's tokens in place (a refund or a top-up), and the time until room frees up is read off
//! the oldest entries. Memory is one entry per request of the last minute.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use polygateway_ports::{
    Admission, AdmissionBackend, AdmissionRequest, BackendError, Clock, Limits, Permit, PermitId,
    RefusalReason, SourceUsage,
};

/// The quota period of TPM and RPM: one minute.
pub const WINDOW: Duration = Duration::from_secs(60);

/// How much longer than the window an admitted request keeps counting. A request reserved at
/// `t` reaches the provider a little later, at `t + δ`; if a request reserved when the first
/// one ages out arrived faster, the provider — which counts arrivals — could see one request
/// too many in its own minute. Counting each request for a minute plus this guard keeps the
/// provider's window under the limit as long as `δ` varies by less than the guard.
pub const ARRIVAL_GUARD: Duration = Duration::from_secs(1);

/// When an admitted request stops counting: [`WINDOW`] + [`ARRIVAL_GUARD`].
pub const AGE_OUT: Duration = Duration::from_secs(61);

/// One admitted request in the window: when, and its tokens (the estimate until settled).
#[derive(Debug, Clone, Copy)]
struct Entry {
    at: Duration,
    tokens: u64,
}

/// A granted permit that is not yet both settled and released.
#[derive(Debug, Clone, Copy)]
struct Outstanding {
    /// The sequence number of its window entry (entries are numbered as they are pushed).
    seq: u64,
    lease_until: Duration,
    settled: bool,
    released: bool,
}

#[derive(Debug, Default)]
struct SourceState {
    /// Admitted requests of the last [`AGE_OUT`], oldest first.
    window: VecDeque<Entry>,
    /// The sequence number of `window.front()`: entry `seq` is at `window[seq - head_seq]`,
    /// so a settle finds its entry in O(1).
    head_seq: u64,
    tokens_in_window: u64,
    inflight: u64,
    outstanding: HashMap<PermitId, Outstanding>,
    /// No unreleased lease ends before this; the outstanding permits are only scanned then.
    next_lease_end: Option<Duration>,
}

impl SourceState {
    /// Forget entries older than [`AGE_OUT`] and reclaim the slots of expired leases.
    fn prune(&mut self, now: Duration) {
        while let Some(front) = self.window.front() {
            if now.saturating_sub(front.at) < AGE_OUT {
                break;
            }
            self.tokens_in_window -= front.tokens;
            self.window.pop_front();
            self.head_seq += 1;
        }
        if self.next_lease_end.is_some_and(|end| end <= now) {
            let mut reclaimed = 0;
            let mut next = None::<Duration>;
            self.outstanding.retain(|_, o| {
                if o.released {
                    return true;
                }
                if o.lease_until <= now {
                    // The reservation stays in the window until it ages out: the request may
                    // well have reached the provider.
                    reclaimed += 1;
                    return false;
                }
                next = Some(next.map_or(o.lease_until, |n| n.min(o.lease_until)));
                true
            });
            self.inflight -= reclaimed;
            self.next_lease_end = next;
        }
    }

    fn entry_mut(&mut self, seq: u64) -> Option<&mut Entry> {
        let index = usize::try_from(seq.checked_sub(self.head_seq)?).ok()?;
        self.window.get_mut(index)
    }

    /// When `need` more tokens will fit under `tpm`, as entries age out.
    fn tpm_room_after(&self, now: Duration, tpm: u64, need: u64) -> Option<Duration> {
        let mut used = self.tokens_in_window;
        for entry in &self.window {
            used -= entry.tokens;
            if used + need <= tpm {
                return Some((entry.at + AGE_OUT).saturating_sub(now));
            }
        }
        None
    }
}

/// The in-memory [`AdmissionBackend`]: one process, exact, no I/O.
pub struct MemoryAdmission {
    clock: Arc<dyn Clock>,
    sources: Mutex<HashMap<Arc<str>, SourceState>>,
}

impl std::fmt::Debug for MemoryAdmission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryAdmission").finish_non_exhaustive()
    }
}

impl MemoryAdmission {
    /// A backend reading time from `clock` (windows and leases).
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        MemoryAdmission {
            clock,
            sources: Mutex::new(HashMap::new()),
        }
    }

    fn with_source<T>(&self, source: &str, f: impl FnOnce(&mut SourceState, Duration) -> T) -> T {
        let mut sources = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        // Read the clock under the lock: entries must enter the window in time order, which
        // pruning from the front and the retry hints rely on.
        let now = self.clock.monotonic();
        let state = match sources.get_mut(source) {
            Some(state) => state,
            None => sources.entry(Arc::from(source)).or_default(),
        };
        let now = state.window.back().map_or(now, |last| now.max(last.at));
        state.prune(now);
        f(state, now)
    }

    fn reserve_now(&self, request: &AdmissionRequest<'_>) -> Admission {
        self.with_source(request.source, |state, now| {
            if let Some(existing) = state.outstanding.get(&request.permit_id).copied() {
                // A re-sent reserve: the permit exists; answer as before, change nothing.
                let tokens = state
                    .entry_mut(existing.seq)
                    .map_or(request.tokens, |e| e.tokens);
                return Admission::Granted(Permit {
                    id: request.permit_id,
                    source: Arc::from(request.source),
                    tokens,
                });
            }
            let limits = request.limits;
            if limits
                .max_concurrency
                .is_some_and(|max| state.inflight >= u64::from(max))
            {
                return Admission::Refused {
                    reason: RefusalReason::Concurrency,
                    retry_after: None,
                };
            }
            if let Some(rpm) = limits.rpm {
                if state.window.len() as u64 >= rpm {
                    let oldest = state.window.len() as u64 - rpm;
                    let at = state
                        .window
                        .get(usize::try_from(oldest).unwrap_or(usize::MAX))
                        .map(|e| e.at);
                    return Admission::Refused {
                        reason: RefusalReason::Rpm,
                        retry_after: at.map(|at| (at + AGE_OUT).saturating_sub(now)),
                    };
                }
            }
            if let Some(tpm) = limits.tpm {
                if state.tokens_in_window + request.tokens > tpm {
                    return Admission::Refused {
                        reason: RefusalReason::Tpm,
                        retry_after: state.tpm_room_after(now, tpm, request.tokens),
                    };
                }
            }
            let seq = state.head_seq + state.window.len() as u64;
            state.window.push_back(Entry {
                at: now,
                tokens: request.tokens,
            });
            state.tokens_in_window += request.tokens;
            state.inflight += 1;
            let lease_until = now + request.lease;
            state.outstanding.insert(
                request.permit_id,
                Outstanding {
                    seq,
                    lease_until,
                    settled: false,
                    released: false,
                },
            );
            state.next_lease_end = Some(
                state
                    .next_lease_end
                    .map_or(lease_until, |n| n.min(lease_until)),
            );
            Admission::Granted(Permit {
                id: request.permit_id,
                source: Arc::from(request.source),
                tokens: request.tokens,
            })
        })
    }

    fn settle_now(&self, permit: &Permit, actual: Option<u64>, release: bool) {
        self.with_source(&permit.source, |state, _| {
            let Some(mut outstanding) = state.outstanding.get(&permit.id).copied() else {
                return; // never granted, already finished, or its lease expired: nothing to do
            };
            if let Some(actual) = actual.filter(|_| !outstanding.settled) {
                outstanding.settled = true;
                if let Some(entry) = state.entry_mut(outstanding.seq) {
                    let old = entry.tokens;
                    entry.tokens = actual;
                    state.tokens_in_window = state.tokens_in_window - old + actual;
                }
            }
            if release && !outstanding.released {
                outstanding.released = true;
                state.inflight -= 1;
            }
            if outstanding.settled && outstanding.released {
                state.outstanding.remove(&permit.id);
            } else {
                state.outstanding.insert(permit.id, outstanding);
            }
        });
    }
}

impl AdmissionBackend for MemoryAdmission {
    /// # Cancel safety
    ///
    /// Completes on its first poll; there is no await point to be cancelled at.
    async fn reserve(&self, request: AdmissionRequest<'_>) -> Result<Admission, BackendError> {
        Ok(self.reserve_now(&request))
    }

    /// # Cancel safety
    ///
    /// Completes on its first poll.
    async fn settle(&self, permit: &Permit, actual_tokens: u64) -> Result<(), BackendError> {
        self.settle_now(permit, Some(actual_tokens), false);
        Ok(())
    }

    /// # Cancel safety
    ///
    /// Completes on its first poll.
    async fn release(&self, permit: &Permit) -> Result<(), BackendError> {
        self.settle_now(permit, None, true);
        Ok(())
    }

    /// # Cancel safety
    ///
    /// Completes on its first poll.
    async fn settle_and_release(
        &self,
        permit: &Permit,
        actual_tokens: u64,
    ) -> Result<(), BackendError> {
        self.settle_now(permit, Some(actual_tokens), true);
        Ok(())
    }

    /// # Cancel safety
    ///
    /// Completes on its first poll.
    async fn usage(&self, source: &str, _limits: Limits) -> Result<SourceUsage, BackendError> {
        Ok(self.with_source(source, |state, _| SourceUsage {
            tpm_used: state.tokens_in_window,
            rpm_used: state.window.len() as u64,
            inflight: state.inflight,
        }))
    }
}
