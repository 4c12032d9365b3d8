//! The engine: the retry / fail-over loop around one logical call (SPEC §5–§8), generic over
//! the operation (chat, an embeddings batch, an OCR job) so every scope shares one loop and one
//! permit guard.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use polygateway_errors::{
    AttemptFailure, FailureKind, GatewayError, Invalid, Rejected, Scope, SourceFailure,
    Unavailable, UnavailableReason,
};
use polygateway_ports::{
    Admission, AdmissionBackend, AdmissionRequest, BreakerDecision, BreakerPolicy, BreakerState,
    BreakerStore, Clock, GuardedAdmission, Permit, PermitId, SourceSpec, TelemetrySink, Usage,
};
use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::Instrument;

use crate::pacer::Pacer;
use crate::retry::{Random, RetryPolicy, order};
use crate::settle::guard::{AdmitGuard, AttemptGuard};
use crate::settle::settler::Settler;
use crate::telemetry::CallRecorder;

/// The longest wait the engine schedules: hints beyond it (an upstream's absurd
/// `Retry-After`) are clamped rather than allowed to overflow the clock.
const MAX_WAIT: Duration = Duration::from_secs(365 * 24 * 3600);

/// A prefix for this engine's permit and call ids that no other engine — in this process or
/// another sharing the same Redis — will use: OS randomness (the std hasher's per-process
/// random keys, advanced for every new `RandomState`), mixed with the time and the process id.
fn permit_prefix(unix_ms: u64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(unix_ms);
    hasher.write_u32(std::process::id());
    hasher.finish()
}

/// `now + d`, with `d` clamped to [`MAX_WAIT`].
fn later(now: Instant, d: Duration) -> Instant {
    now + d.min(MAX_WAIT)
}

/// Polls a (pinned) future inside `catch_unwind`, so a panicking transport can be settled
/// (S10) before the panic goes on. Holding `Pin<&mut F>` keeps it `Unpin` without boxing.
struct CatchUnwind<'f, F>(std::pin::Pin<&'f mut F>);

impl<F: Future> Future for CatchUnwind<'_, F> {
    type Output = Result<F::Output, Box<dyn std::any::Any + Send>>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(std::task::Poll::Ready(value)) => std::task::Poll::Ready(Ok(value)),
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Err(panic) => std::task::Poll::Ready(Err(panic)),
        }
    }
}

/// How often to look again at a source that is full for a reason nobody can date (a
/// concurrency slot held elsewhere, a probe in flight).
const FULL_POLL: Duration = Duration::from_millis(20);

/// One kind of work the engine runs: given a source, make one attempt.
pub trait Operation: Send + Sync {
    /// What a successful attempt produces.
    type Output: Send;

    /// The tokens to reserve for an attempt on `source` (the effective estimate).
    fn estimate(&self, source: &SourceSpec) -> u64;

    /// One attempt against `source`.
    fn attempt<'a>(
        &'a self,
        source: &'a SourceSpec,
    ) -> impl Future<Output = Result<Self::Output, AttemptFailure>> + Send + 'a;

    /// The usage a successful output reports, which is what it settles.
    fn usage(output: &Self::Output) -> Option<Usage>;
}

/// Settings of an [`Engine`].
#[derive(Debug, Clone, Copy)]
pub struct EngineConfig {
    /// The scope the engine serves.
    pub scope: Scope,
    /// The retry loop.
    pub retry: RetryPolicy,
    /// The breakers.
    pub breaker: BreakerPolicy,
    /// A permit's lease beyond the source's attempt timeout.
    pub lease_margin: Duration,
    /// Settle 0 tokens on every path (OCR, SPEC §6 S6).
    pub zero_tokens: bool,
    /// Seed for jitter and weighted picks.
    pub seed: u64,
}

/// Per-source counters of this process (the `stats()` and `polygw demo` figures).
#[derive(Debug, Default)]
pub(crate) struct SourceCounters {
    served: AtomicU64,
    attempts: AtomicU64,
    failures: AtomicU64,
    cancelled: AtomicU64,
    tokens_settled: AtomicU64,
    pub(crate) trips: Arc<AtomicU64>,
}

impl SourceCounters {
    pub(crate) fn attempt(&self) {
        self.attempts.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn cancelled(&self) {
        self.cancelled.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn settled(&self, tokens: u64) {
        self.tokens_settled.fetch_add(tokens, Ordering::Relaxed);
    }
}

/// A source and what this process keeps about it.
pub(crate) struct SourceRuntime {
    pub(crate) spec: SourceSpec,
    pub(crate) name: Arc<str>,
    pub(crate) pacer: Pacer,
    cooldown_until: Mutex<Option<Instant>>,
    pub(crate) counters: SourceCounters,
    slot_freed: Arc<Notify>,
}

impl SourceRuntime {
    fn cooldown(&self) -> Option<Instant> {
        *self
            .cooldown_until
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn cool_down_until(&self, until: Instant) {
        let mut cooldown = self
            .cooldown_until
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *cooldown = Some(cooldown.map_or(until, |c| c.max(until)));
    }

    pub(crate) fn slot_freed(&self) {
        self.slot_freed.notify_waiters();
    }
}

/// Why a source could not take an attempt just now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    Breaker,
    Quota,
    Backend,
    /// Backing off after this call's own failure on it.
    Backoff,
    /// `SourceDead` in this call: not tried again.
    Dead,
}

/// A successful logical call.
#[derive(Debug)]
pub struct Served<'e, T> {
    /// What the operation produced.
    pub output: T,
    /// The source that served.
    pub source: &'e SourceSpec,
    /// Attempts the call took.
    pub attempts: u32,
    /// The usage the output reported.
    pub usage: Option<Usage>,
}

/// A source's state, as `stats()` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceStats {
    /// The source's name.
    pub name: String,
    /// Tokens reserved or settled in the current minute (from the backend: every process).
    pub tpm_used: u64,
    /// Requests in the current minute (every process).
    pub rpm_used: u64,
    /// Permits held (every process).
    pub inflight: u64,
    /// The breaker.
    pub breaker: BreakerState,
    /// Time left in a `Retry-After` cool-down seen by this process.
    pub cooldown: Option<Duration>,
    /// Logical calls this source served (this process).
    pub served: u64,
    /// Attempts made on it (this process).
    pub attempts: u64,
    /// Attempts that failed (this process).
    pub failures: u64,
    /// Attempts cancelled before their outcome (this process).
    pub cancelled: u64,
    /// Breaker openings this process caused.
    pub breaker_trips: u64,
    /// Tokens this process settled on it.
    pub tokens_settled: u64,
}

/// The pipeline for one scope: breaker, admission, pacing, transport via the operation,
/// classification, settlement, telemetry — inside the retry / fail-over loop.
pub struct Engine<B, K> {
    scope: Scope,
    sources: Vec<SourceRuntime>,
    priorities_weights: Vec<(u32, u32)>,
    retry: RetryPolicy,
    breaker: BreakerPolicy,
    lease_margin: Duration,
    zero_tokens: bool,
    admission: Arc<B>,
    breakers: Arc<K>,
    settler: Settler,
    sink: Arc<dyn TelemetrySink>,
    clock: Arc<dyn Clock>,
    random: Random,
    permit_prefix: u64,
    permit_counter: AtomicU64,
    call_counter: AtomicU64,
    slot_freed: Arc<Notify>,
    closed: AtomicBool,
}

impl<B, K> std::fmt::Debug for Engine<B, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("scope", &self.scope)
            .field(
                "sources",
                &self
                    .sources
                    .iter()
                    .map(|s| &s.spec.name)
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl<B: AdmissionBackend, K: BreakerStore> Engine<B, K> {
    /// An engine over `sources`. Needs no runtime to be built; the background settler starts
    /// with the first call.
    pub fn new(
        config: EngineConfig,
        sources: Vec<SourceSpec>,
        admission: Arc<B>,
        breakers: Arc<K>,
        sink: Arc<dyn TelemetrySink>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let slot_freed = Arc::new(Notify::new());
        let runtimes = sources
            .into_iter()
            .map(|spec| SourceRuntime {
                name: Arc::from(spec.name.as_str()),
                pacer: Pacer::new(spec.min_interval, spec.limits.max_concurrency),
                cooldown_until: Mutex::new(None),
                counters: SourceCounters::default(),
                slot_freed: slot_freed.clone(),
                spec,
            })
            .collect::<Vec<_>>();
        let priorities_weights = runtimes
            .iter()
            .map(|s| (s.spec.priority, s.spec.weight))
            .collect();
        let permit_prefix = permit_prefix(clock.unix_ms());
        Engine {
            scope: config.scope,
            priorities_weights,
            sources: runtimes,
            retry: config.retry,
            breaker: config.breaker,
            lease_margin: config.lease_margin,
            zero_tokens: config.zero_tokens,
            settler: Settler::new(
                admission.clone(),
                breakers.clone(),
                config.breaker,
                slot_freed.clone(),
            ),
            admission,
            breakers,
            sink,
            clock,
            random: Random::new(config.seed),
            permit_prefix,
            permit_counter: AtomicU64::new(0),
            call_counter: AtomicU64::new(0),
            slot_freed,
            closed: AtomicBool::new(false),
        }
    }

    /// The engine's scope.
    pub fn scope(&self) -> Scope {
        self.scope
    }

    /// The sources, in configuration order.
    pub fn sources(&self) -> impl Iterator<Item = &SourceSpec> {
        self.sources.iter().map(|s| &s.spec)
    }

    /// A recorder for a new logical call, with a fresh id. Create it outside the deadline
    /// boundary so that the terminal row is written whatever happens inside.
    pub fn recorder(&self) -> CallRecorder {
        let n = self.call_counter.fetch_add(1, Ordering::Relaxed);
        let id = format!("{:016x}{n:08x}", self.permit_prefix);
        CallRecorder::start(
            self.scope,
            Arc::from(id),
            self.sink.clone(),
            self.clock.clone(),
        )
    }

    fn next_permit_id(&self) -> PermitId {
        let n = self.permit_counter.fetch_add(1, Ordering::Relaxed);
        PermitId((u128::from(self.permit_prefix) << 64) | u128::from(n))
    }

    /// Run `op` as one logical call: pick sources, pass breakers and admission, make
    /// attempts, retry and fail over, until an answer or a reason to stop.
    ///
    /// `deadline` is the call deadline's instant, if any: the loop does not start a wait that
    /// cannot end before it (it fails with `GatewayUnavailable` and the hint instead). The
    /// deadline itself is enforced outside, by `with_call_deadline`.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future at any await point settles the attempt in flight per SPEC §6 (S2,
    /// S3, or its known outcome), gives a half-open probe back, writes the attempt's
    /// `cancelled` row, and returns at once: the settlement is handed to the background
    /// settler, never awaited.
    pub async fn run<'e, O: Operation>(
        &'e self,
        op: &O,
        recorder: &CallRecorder,
        deadline: Option<Instant>,
    ) -> Result<Served<'e, O::Output>, GatewayError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Unavailable::new(self.scope, UnavailableReason::ShutDown).into());
        }
        self.settler.ensure_started();
        let trace = recorder.trace();
        let n = self.sources.len();
        let mut not_before: Vec<Option<Instant>> = vec![None; n];
        // When each source is known to free up — from a breaker, a quota window or a
        // `Retry-After` — as opposed to this call's own polling and backoff: only these become
        // the error's `retry_after` (a real hint or none, SPEC §4).
        let mut hints: Vec<Option<Instant>> = vec![None; n];
        let mut blocked: Vec<Option<Block>> = vec![None; n];
        let mut failures_on = vec![0u32; n];
        let mut last_errors: Vec<Option<AttemptFailure>> = vec![None; n];
        let mut attempts = 0u32;
        let mut last_failed = None;
        let mut last_progress = Instant::now();
        loop {
            let now = Instant::now();
            if attempts >= self.retry.max_attempts {
                return Err(self.unavailable(
                    UnavailableReason::AttemptsExhausted,
                    &hints,
                    &last_errors,
                    now,
                ));
            }
            if now > last_progress + self.retry.stall_window {
                return Err(self.unavailable(
                    UnavailableReason::Stalled,
                    &hints,
                    &last_errors,
                    now,
                ));
            }
            let usable = |i: usize| {
                let source = &self.sources[i];
                not_before[i].is_none_or(|t| t <= now)
                    && source.cooldown().is_none_or(|t| t <= now)
                    && !source.pacer.is_full()
            };
            let candidates = order(&self.priorities_weights, usable, last_failed, &self.random);
            let mut admitted = None;
            for i in candidates {
                let source = &self.sources[i];
                let est = if self.zero_tokens {
                    0
                } else {
                    op.estimate(&source.spec)
                };
                match self.admit(source, est).await {
                    Ok((permit, probe)) => {
                        admitted = Some((i, permit, probe, est));
                        break;
                    }
                    Err((block, retry_after)) => {
                        blocked[i] = Some(block);
                        let now = Instant::now();
                        not_before[i] = Some(later(
                            now,
                            retry_after.unwrap_or(FULL_POLL.min(self.retry.backoff_base)),
                        ));
                        hints[i] = retry_after.map(|d| later(now, d));
                    }
                }
            }
            let Some((i, permit, probe, est)) = admitted else {
                self.wait_for_a_source(
                    &not_before,
                    &hints,
                    &blocked,
                    &last_errors,
                    last_progress,
                    deadline,
                )
                .await?;
                continue;
            };

            attempts += 1;
            let source = &self.sources[i];
            let mut guard = AttemptGuard::new(
                source,
                &self.settler,
                &trace,
                permit,
                attempts,
                est,
                self.zero_tokens,
                probe,
            );
            source.pacer.wait_turn().await;
            guard.transport_started();
            let span = tracing::debug_span!("attempt", scope = %self.scope, source = %source.spec.name, attempt = attempts, probe);
            let attempt = std::pin::pin!(op.attempt(&source.spec).instrument(span));
            let result = match CatchUnwind(attempt).await {
                Ok(result) => result,
                Err(panic) => {
                    guard.panicked(); // S10, before the unwind resumes
                    drop(guard);
                    std::panic::resume_unwind(panic);
                }
            };
            match result {
                Ok(output) => {
                    let usage = O::usage(&output);
                    guard.succeeded(usage);
                    drop(guard);
                    source.counters.served.fetch_add(1, Ordering::Relaxed);
                    return Ok(Served {
                        output,
                        source: &source.spec,
                        attempts,
                        usage,
                    });
                }
                Err(failure) => {
                    let now = Instant::now();
                    if failure.status().is_some() {
                        last_progress = now; // the source answered
                    }
                    let cooled_down = failure.kind() == FailureKind::Transient
                        && failure.status() == Some(429)
                        && failure.retry_after().is_some();
                    if let (true, Some(hint)) = (cooled_down, failure.retry_after()) {
                        source.cool_down_until(later(now, hint));
                    }
                    guard.failed(&failure, cooled_down);
                    drop(guard);
                    source.counters.failures.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(scope = %self.scope, source = %source.spec.name, attempt = attempts, %failure, "attempt failed");
                    match failure.kind() {
                        FailureKind::RequestRejected => {
                            return Err(Rejected::new(
                                self.scope,
                                &source.spec.name,
                                failure.status(),
                                failure.message(),
                            )
                            .into());
                        }
                        FailureKind::ResultInvalid => {
                            return Err(Invalid::new(
                                self.scope,
                                &source.spec.name,
                                failure.message(),
                            )
                            .into());
                        }
                        FailureKind::SourceDead => {
                            blocked[i] = Some(Block::Dead);
                            not_before[i] = Some(later(now, self.breaker.dead_open_for));
                            hints[i] = not_before[i];
                        }
                        FailureKind::Transient => {
                            failures_on[i] += 1;
                            let backoff = self.retry.backoff(failures_on[i], self.random.next());
                            let wait = backoff.max(failure.retry_after().unwrap_or_default());
                            blocked[i] = Some(Block::Backoff);
                            not_before[i] = Some(later(now, wait));
                            hints[i] = failure.retry_after().map(|d| later(now, d));
                        }
                    }
                    last_errors[i] = Some(failure);
                    last_failed = Some(i);
                }
            }
        }
    }

    /// Pass the breaker and the admission backend for one attempt on `source`. On `Err`, why
    /// not and when to look again.
    async fn admit(
        &self,
        source: &SourceRuntime,
        est: u64,
    ) -> Result<(Permit, bool), (Block, Option<Duration>)> {
        let mut undo = AdmitGuard::new(source, &self.settler);
        let permit_id = self.next_permit_id();
        undo.reserving(permit_id);
        let request = AdmissionRequest {
            source: &source.spec.name,
            limits: source.spec.limits,
            tokens: est,
            // The lease must outlast the pacer's queue too, or the backend would reclaim the
            // slot of an attempt still waiting for its turn.
            lease: source
                .spec
                .timeout
                .saturating_add(self.lease_margin)
                .saturating_add(source.pacer.backlog()),
            permit_id,
        };
        // A backend that holds the breakers too passes both in one step (one round trip).
        let guarded = self.admission.reserve_guarded(request, &self.breaker).await;
        if let Some(answer) = guarded {
            return match answer {
                Ok(GuardedAdmission::Granted { permit, probe }) => {
                    undo.done(true);
                    Ok((permit, probe))
                }
                Ok(GuardedAdmission::Refused { retry_after, .. }) => {
                    undo.done(false);
                    Err((Block::Quota, retry_after))
                }
                Ok(GuardedAdmission::BreakerRejected { retry_after }) => {
                    undo.done(false);
                    Err((Block::Breaker, retry_after))
                }
                Err(error) => {
                    tracing::warn!(source = %source.spec.name, %error, "admission backend unavailable; failing closed");
                    // Keep `reserving`: the script may have run; the release is idempotent.
                    Err((
                        Block::Backend,
                        Some(error.retry_after().unwrap_or(Duration::from_secs(1))),
                    ))
                }
            };
        }
        let probe = match self
            .breakers
            .try_acquire(&source.spec.name, &self.breaker)
            .await
        {
            Ok(BreakerDecision::Allow) => false,
            Ok(BreakerDecision::Probe) => {
                undo.holds_probe();
                true
            }
            Ok(BreakerDecision::Reject { retry_after }) => {
                undo.done(false);
                return Err((Block::Breaker, retry_after));
            }
            Err(error) => {
                tracing::warn!(source = %source.spec.name, %error, "breaker backend unavailable; failing closed");
                undo.done(false);
                return Err((
                    Block::Backend,
                    Some(error.retry_after().unwrap_or(Duration::from_secs(1))),
                ));
            }
        };
        match self.admission.reserve(request).await {
            Ok(Admission::Granted(permit)) => {
                undo.done(true);
                Ok((permit, probe))
            }
            Ok(Admission::Refused { retry_after, .. }) => {
                undo.done(false); // a refused reserve holds nothing; the probe goes back
                Err((Block::Quota, retry_after))
            }
            Err(error) => {
                tracing::warn!(source = %source.spec.name, %error, "admission backend unavailable; failing closed");
                // Keep `reserving`: the command may have run; the release is idempotent.
                Err((
                    Block::Backend,
                    Some(error.retry_after().unwrap_or(Duration::from_secs(1))),
                ))
            }
        }
    }

    /// Nothing could be admitted: wait until the earliest source may be usable, if that fits
    /// the stall window and the deadline; otherwise fail with the earliest moment as the hint.
    async fn wait_for_a_source(
        &self,
        not_before: &[Option<Instant>],
        hints: &[Option<Instant>],
        blocked: &[Option<Block>],
        last_errors: &[Option<AttemptFailure>],
        last_progress: Instant,
        deadline: Option<Instant>,
    ) -> Result<(), GatewayError> {
        let now = Instant::now();
        let wake = self
            .sources
            .iter()
            .enumerate()
            .map(|(i, source)| {
                let mut at = not_before[i]
                    .unwrap_or(now)
                    .max(source.cooldown().unwrap_or(now));
                if source.pacer.is_full() {
                    at = at.max(now + FULL_POLL);
                }
                at
            })
            .min()
            .unwrap_or(now + FULL_POLL);
        let stall_end = last_progress + self.retry.stall_window;
        // Fail closed, at once: with the quota backend unreachable nothing may be admitted,
        // and waiting would only hold the caller (SPEC §6).
        let backend_down = blocked.iter().all(|b| *b == Some(Block::Backend));
        if backend_down || wake > stall_end || deadline.is_some_and(|d| wake > d) {
            let reason = if blocked.iter().all(|b| *b == Some(Block::Backend)) {
                UnavailableReason::BackendUnavailable
            } else if blocked
                .iter()
                .all(|b| matches!(b, Some(Block::Breaker | Block::Dead)))
            {
                UnavailableReason::CircuitOpen
            } else if blocked.contains(&Some(Block::Quota))
                || self
                    .sources
                    .iter()
                    .any(|s| s.cooldown().is_some_and(|c| c > now))
            {
                UnavailableReason::QuotaWaitExceeded
            } else {
                UnavailableReason::Stalled
            };
            return Err(self.unavailable(reason, hints, last_errors, now));
        }
        let freed = self.slot_freed.notified();
        tokio::select! {
            () = tokio::time::sleep_until(wake) => {}
            () = freed => {}
        }
        Ok(())
    }

    fn unavailable(
        &self,
        reason: UnavailableReason,
        hints: &[Option<Instant>],
        last_errors: &[Option<AttemptFailure>],
        now: Instant,
    ) -> GatewayError {
        let earliest = self
            .sources
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let at = match (hints[i], s.cooldown()) {
                    (Some(a), Some(b)) => a.max(b),
                    (a, b) => a.or(b)?,
                };
                (at > now).then(|| at - now)
            })
            .min();
        let sources = self
            .sources
            .iter()
            .zip(last_errors)
            .filter_map(|(s, e)| {
                e.clone().map(|failure| SourceFailure {
                    source: s.spec.name.clone(),
                    failure,
                })
            })
            .collect();
        Unavailable::new(self.scope, reason)
            .with_retry_after(earliest)
            .with_sources(sources)
            .into()
    }

    /// Each source's state: quota use and breaker from the backends (every process that
    /// shares them), cool-down and counters from this process.
    ///
    /// # Cancel safety
    ///
    /// Reads only; dropping the future changes nothing.
    pub async fn stats(&self) -> Result<Vec<SourceStats>, GatewayError> {
        let mut out = Vec::with_capacity(self.sources.len());
        let now = Instant::now();
        for source in &self.sources {
            let backend_down = |e: polygateway_ports::BackendError| -> GatewayError {
                Unavailable::new(self.scope, UnavailableReason::BackendUnavailable)
                    .with_retry_after(e.retry_after())
                    .into()
            };
            let usage = self
                .admission
                .usage(&source.spec.name, source.spec.limits)
                .await
                .map_err(backend_down)?;
            let breaker = self
                .breakers
                .state(&source.spec.name, &self.breaker)
                .await
                .map_err(backend_down)?;
            let c = &source.counters;
            out.push(SourceStats {
                name: source.spec.name.clone(),
                tpm_used: usage.tpm_used,
                rpm_used: usage.rpm_used,
                inflight: usage.inflight,
                breaker,
                cooldown: source.cooldown().filter(|c| *c > now).map(|c| c - now),
                served: c.served.load(Ordering::Relaxed),
                attempts: c.attempts.load(Ordering::Relaxed),
                failures: c.failures.load(Ordering::Relaxed),
                cancelled: c.cancelled.load(Ordering::Relaxed),
                breaker_trips: c.trips.load(Ordering::Relaxed),
                tokens_settled: c.tokens_settled.load(Ordering::Relaxed),
            });
        }
        Ok(out)
    }

    /// Wait until every settlement and breaker report queued so far is done.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops the waiting, not the settling.
    pub async fn flush(&self) {
        self.settler.flush().await;
    }

    /// Refuse new calls and drain the settler: nothing queued is lost.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops the waiting; new calls stay refused and the settler keeps
    /// draining in the background.
    pub async fn shutdown(&self) {
        self.closed.store(true, Ordering::Release);
        self.settler.flush().await;
    }
}

#[cfg(test)]
mod tests;
