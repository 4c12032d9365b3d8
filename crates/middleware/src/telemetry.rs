//! Telemetry emission (SPEC §10): one row per attempt, written by the attempt's guard, and
//! exactly one terminal row per logical call, written by [`CallRecorder`] — on success, on
//! failure, on the deadline, and when the caller drops the call.

use std::sync::Arc;

use polygateway_errors::{GatewayError, Scope};
use polygateway_ports::{Clock, EventKind, TelemetryRow, TelemetrySink, Usage};
use tokio::time::Instant;

/// What every row of one logical call shares.
pub(crate) struct CallTrace<'a> {
    pub(crate) scope: Scope,
    pub(crate) call_id: &'a str,
    pub(crate) started: Instant,
    pub(crate) sink: &'a dyn TelemetrySink,
    pub(crate) clock: &'a dyn Clock,
}

impl CallTrace<'_> {
    /// A row of `kind` with the call's fields filled in and everything else empty.
    pub(crate) fn row(&self, kind: EventKind) -> TelemetryRow<'_> {
        TelemetryRow {
            ts: self.clock.unix_ms(),
            scope: self.scope,
            logical_call_id: self.call_id,
            attempt: 0,
            source: None,
            model: None,
            event_kind: kind,
            error_type: None,
            http_status: None,
            prompt_tokens: None,
            completion_tokens: None,
            est_tokens: None,
            settled_tokens: None,
            latency_ms: None,
            total_latency_ms: Some(millis(self.started.elapsed())),
            retry_after_ms: None,
            is_probe: false,
        }
    }
}

pub(crate) fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// How a logical call ended, for its terminal row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallSummary<'a> {
    /// The source that served.
    pub source: &'a str,
    /// Its model.
    pub model: &'a str,
    /// Attempts the call took.
    pub attempts: u32,
    /// The usage reported, if any.
    pub usage: Option<Usage>,
}

/// Writes the one terminal row of a logical call. Create it before the call (outside the
/// deadline boundary), then [`finish`](CallRecorder::finish) with the result; if the caller
/// drops the call first, the recorder's drop writes the row (`error_type = "Cancelled"`).
pub struct CallRecorder {
    scope: Scope,
    call_id: Arc<str>,
    started: Instant,
    sink: Arc<dyn TelemetrySink>,
    clock: Arc<dyn Clock>,
    done: bool,
}

impl CallRecorder {
    /// Start recording a call of `scope` with id `call_id`.
    pub fn start(
        scope: Scope,
        call_id: Arc<str>,
        sink: Arc<dyn TelemetrySink>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        CallRecorder {
            scope,
            call_id,
            started: Instant::now(),
            sink,
            clock,
            done: false,
        }
    }

    /// The call's id.
    pub fn call_id(&self) -> &Arc<str> {
        &self.call_id
    }

    /// When the call started (the runtime's monotonic clock).
    pub fn started(&self) -> Instant {
        self.started
    }

    pub(crate) fn trace(&self) -> CallTrace<'_> {
        CallTrace {
            scope: self.scope,
            call_id: &self.call_id,
            started: self.started,
            sink: &*self.sink,
            clock: &*self.clock,
        }
    }

    /// Write the terminal row for `result`.
    pub fn finish(mut self, result: Result<CallSummary<'_>, &GatewayError>) {
        self.done = true;
        if !self.sink.enabled() {
            return;
        }
        let trace = self.trace();
        let row = match result {
            Ok(summary) => TelemetryRow {
                attempt: summary.attempts,
                source: Some(summary.source),
                model: Some(summary.model),
                prompt_tokens: summary.usage.map(|u| u.prompt_tokens),
                completion_tokens: summary.usage.map(|u| u.completion_tokens),
                ..trace.row(EventKind::TerminalSuccess)
            },
            Err(error) => TelemetryRow {
                error_type: Some(error.kind().as_str()),
                ..trace.row(EventKind::TerminalFailure)
            },
        };
        trace.sink.record(&row);
    }
}

impl Drop for CallRecorder {
    fn drop(&mut self) {
        if self.done || !self.sink.enabled() {
            return;
        }
        let trace = self.trace();
        let row = TelemetryRow {
            error_type: Some("Cancelled"),
            ..trace.row(EventKind::TerminalFailure)
        };
        trace.sink.record(&row);
    }
}
