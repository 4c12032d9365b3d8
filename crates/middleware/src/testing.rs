//! Fakes of the ports for the engine's unit tests: a scripted transport that signals when it
//! is entered, an admission backend that records every settlement, a scripted breaker store,
//! and a sink that keeps every row.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use polygateway_errors::{AttemptFailure, FailureKind, Scope};
use polygateway_ports::{
    Admission, AdmissionBackend, AdmissionRequest, BackendError, BreakerDecision, BreakerOutcome,
    BreakerPolicy, BreakerState, BreakerStore, ChatRequest, ChatResult, ChatTransport, EventKind,
    Limits, Permit, PermitId, RefusalReason, SourceKind, SourceSpec, SourceUsage, TelemetryRow,
    TelemetrySink, Usage,
};
use tokio::sync::Notify;

use crate::{Engine, EngineConfig, RetryPolicy, TokioClock};

/// What the fake transport does on one attempt.
#[derive(Debug, Clone)]
pub(crate) enum Step {
    Ok(Option<Usage>),
    Fail(AttemptFailure),
    /// Never finishes (signals `entered` first).
    Hang,
    Panic,
}

/// A transport that plays a script per source and notifies `entered` on every attempt.
#[derive(Default)]
pub(crate) struct FakeTransport {
    scripts: Mutex<Vec<(String, VecDeque<Step>)>>,
    pub(crate) entered: Notify,
    pub(crate) calls: AtomicU64,
}

impl FakeTransport {
    pub(crate) fn script(&self, source: &str, steps: impl IntoIterator<Item = Step>) {
        self.scripts
            .lock()
            .expect("lock")
            .push((source.to_owned(), steps.into_iter().collect()));
    }

    fn next(&self, source: &str) -> Step {
        let mut scripts = self.scripts.lock().expect("lock");
        scripts
            .iter_mut()
            .find(|(s, _)| s == source)
            .and_then(|(_, steps)| {
                if steps.len() > 1 {
                    steps.pop_front()
                } else {
                    steps.front().cloned()
                }
            })
            .unwrap_or(Step::Ok(Some(Usage {
                prompt_tokens: 1,
                completion_tokens: 1,
            })))
    }
}

impl ChatTransport for FakeTransport {
    async fn chat(
        &self,
        source: &SourceSpec,
        _request: &ChatRequest,
    ) -> Result<ChatResult, AttemptFailure> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let step = self.next(&source.name);
        self.entered.notify_waiters();
        match step {
            Step::Ok(usage) => Ok(ChatResult {
                content: "ok".into(),
                reasoning_content: None,
                finish_reason: Some("stop".into()),
                usage,
                model: source.model.clone(),
                source: source.name.clone(),
                attempts: 1,
                logical_call_id: String::new(),
                latency_ms: 0,
            }),
            Step::Fail(failure) => Err(failure),
            Step::Hang => std::future::pending().await,
            Step::Panic => panic!("the transport panicked"),
        }
    }
}

/// An admission backend that grants (unless told to refuse) and records every settlement.
#[derive(Default)]
pub(crate) struct RecordingAdmission {
    pub(crate) settled: Mutex<Vec<(PermitId, u64)>>,
    pub(crate) granted: Mutex<Vec<PermitId>>,
    pub(crate) refuse: Mutex<Option<(RefusalReason, Option<Duration>)>>,
    pub(crate) reserve_calls: AtomicU64,
    pub(crate) reserved: Notify,
    /// Answer every reserve with a backend error (hint: 2 s).
    pub(crate) down: Mutex<bool>,
}

impl RecordingAdmission {
    pub(crate) fn settlements(&self) -> Vec<(PermitId, u64)> {
        self.settled.lock().expect("lock").clone()
    }
}

impl AdmissionBackend for RecordingAdmission {
    async fn reserve(&self, request: AdmissionRequest<'_>) -> Result<Admission, BackendError> {
        self.reserve_calls.fetch_add(1, Ordering::SeqCst);
        if *self.down.lock().expect("lock") {
            return Err(
                BackendError::new("connection refused").with_retry_after(Duration::from_secs(2))
            );
        }
        let refuse = *self.refuse.lock().expect("lock");
        let answer = match refuse {
            Some((reason, retry_after)) => Admission::Refused {
                reason,
                retry_after,
            },
            None => {
                self.granted.lock().expect("lock").push(request.permit_id);
                Admission::Granted(Permit {
                    id: request.permit_id,
                    source: Arc::from(request.source),
                    tokens: request.tokens,
                })
            }
        };
        self.reserved.notify_waiters();
        Ok(answer)
    }
    async fn settle(&self, permit: &Permit, actual_tokens: u64) -> Result<(), BackendError> {
        self.settled
            .lock()
            .expect("lock")
            .push((permit.id, actual_tokens));
        Ok(())
    }
    async fn release(&self, _permit: &Permit) -> Result<(), BackendError> {
        Ok(())
    }
    async fn usage(&self, _source: &str, _limits: Limits) -> Result<SourceUsage, BackendError> {
        Ok(SourceUsage::default())
    }
}

/// A breaker store that answers a fixed decision and records every report.
pub(crate) struct ScriptedBreakers {
    pub(crate) decision: Mutex<BreakerDecision>,
    pub(crate) reports: Mutex<Vec<(String, BreakerOutcome, bool)>>,
}

impl Default for ScriptedBreakers {
    fn default() -> Self {
        ScriptedBreakers {
            decision: Mutex::new(BreakerDecision::Allow),
            reports: Mutex::new(Vec::new()),
        }
    }
}

impl BreakerStore for ScriptedBreakers {
    async fn try_acquire(
        &self,
        _source: &str,
        _policy: &BreakerPolicy,
    ) -> Result<BreakerDecision, BackendError> {
        Ok(*self.decision.lock().expect("lock"))
    }
    async fn record(
        &self,
        source: &str,
        _policy: &BreakerPolicy,
        outcome: BreakerOutcome,
        was_probe: bool,
    ) -> Result<bool, BackendError> {
        self.reports
            .lock()
            .expect("lock")
            .push((source.to_owned(), outcome, was_probe));
        Ok(false)
    }
    async fn state(
        &self,
        _source: &str,
        _policy: &BreakerPolicy,
    ) -> Result<BreakerState, BackendError> {
        Ok(BreakerState::Closed)
    }
}

/// A row, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Row {
    pub(crate) call: String,
    pub(crate) attempt: u32,
    pub(crate) source: Option<String>,
    pub(crate) kind: EventKind,
    pub(crate) error_type: Option<String>,
    pub(crate) settled: Option<u64>,
    pub(crate) is_probe: bool,
}

#[derive(Default)]
pub(crate) struct CollectingSink(pub(crate) Mutex<Vec<Row>>);

impl CollectingSink {
    pub(crate) fn rows(&self) -> Vec<Row> {
        self.0.lock().expect("lock").clone()
    }
}

impl TelemetrySink for CollectingSink {
    fn record(&self, row: &TelemetryRow<'_>) {
        self.0.lock().expect("lock").push(Row {
            call: row.logical_call_id.to_owned(),
            attempt: row.attempt,
            source: row.source.map(str::to_owned),
            kind: row.event_kind,
            error_type: row.error_type.map(str::to_owned),
            settled: row.settled_tokens,
            is_probe: row.is_probe,
        });
    }
}

pub(crate) fn source(name: &str, priority: u32) -> SourceSpec {
    SourceSpec {
        name: name.into(),
        kind: SourceKind::OpenAiCompat,
        base_url: "http://127.0.0.1:1".into(),
        api_key: None,
        model: "m".into(),
        limits: Limits::default(),
        est_tokens: 100,
        timeout: Duration::from_secs(30),
        priority,
        weight: 1,
        max_batch: 16,
        min_interval: Duration::ZERO,
    }
}

pub(crate) fn policy() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 4,
        backoff_base: Duration::from_millis(100),
        backoff_max: Duration::from_secs(2),
        stall_window: Duration::from_secs(60),
    }
}

pub(crate) fn breaker_policy() -> BreakerPolicy {
    BreakerPolicy {
        failures_to_open: 5,
        open_for: Duration::from_secs(30),
        max_open_for: Duration::from_secs(240),
        dead_open_for: Duration::from_secs(600),
        probe_lease: Duration::from_secs(35),
    }
}

pub(crate) struct Rig {
    pub(crate) engine: Arc<Engine<RecordingAdmission, ScriptedBreakers>>,
    pub(crate) admission: Arc<RecordingAdmission>,
    pub(crate) breakers: Arc<ScriptedBreakers>,
    pub(crate) sink: Arc<CollectingSink>,
}

pub(crate) fn rig(sources: Vec<SourceSpec>, retry: RetryPolicy, zero_tokens: bool) -> Rig {
    let admission = Arc::new(RecordingAdmission::default());
    let breakers = Arc::new(ScriptedBreakers::default());
    let sink = Arc::new(CollectingSink::default());
    let engine = Engine::new(
        EngineConfig {
            scope: if zero_tokens { Scope::Ocr } else { Scope::Llm },
            retry,
            breaker: breaker_policy(),
            lease_margin: Duration::from_secs(5),
            zero_tokens,
            seed: 7,
        },
        sources,
        admission.clone(),
        breakers.clone(),
        sink.clone(),
        Arc::new(TokioClock::new()),
    );
    Rig {
        engine: Arc::new(engine),
        admission,
        breakers,
        sink,
    }
}

pub(crate) fn transient(status: u16, retry_after: Option<Duration>) -> AttemptFailure {
    AttemptFailure::new(FailureKind::Transient, "http_status", "try again")
        .with_status(status)
        .with_retry_after(retry_after)
}
