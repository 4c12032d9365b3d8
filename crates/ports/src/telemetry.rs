use serde::Serialize;

use polygateway_errors::Scope;

/// What a telemetry row records (SPEC §10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// One attempt succeeded.
    AttemptOk,
    /// One attempt failed (classified).
    AttemptFailed,
    /// One attempt was cancelled (caller dropped the call, or the deadline expired).
    Cancelled,
    /// The logical call succeeded.
    TerminalSuccess,
    /// The logical call failed (including cancellation and deadline).
    TerminalFailure,
    /// The logical call was answered from the cache.
    CacheHit,
}

/// One telemetry row. The columns are fixed and versioned (`docs/telemetry.md`); a row never
/// carries a secret. It borrows its text, so building one allocates nothing; a sink that keeps
/// rows serialises or copies them in [`TelemetrySink::record`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TelemetryRow<'a> {
    /// Wall-clock milliseconds since the Unix epoch, from the injectable [`crate::Clock`].
    pub ts: u64,
    /// The call's scope.
    #[serde(serialize_with = "serialize_scope")]
    pub scope: Scope,
    /// Shared by every row of one logical call.
    pub logical_call_id: &'a str,
    /// The attempt number, from 1; 0 on terminal rows.
    pub attempt: u32,
    /// The source of the attempt (the serving source on a terminal success).
    pub source: Option<&'a str>,
    /// The source's model.
    pub model: Option<&'a str>,
    /// What happened.
    pub event_kind: EventKind,
    /// The failure kind or caller-facing error kind, when something failed.
    pub error_type: Option<&'static str>,
    /// The upstream's HTTP status, when it answered.
    pub http_status: Option<u16>,
    /// Prompt tokens as reported.
    pub prompt_tokens: Option<u64>,
    /// Completion tokens as reported.
    pub completion_tokens: Option<u64>,
    /// The reservation.
    pub est_tokens: Option<u64>,
    /// What the attempt settled (SPEC §6).
    pub settled_tokens: Option<u64>,
    /// This attempt's duration.
    pub latency_ms: Option<u64>,
    /// The logical call's duration so far.
    pub total_latency_ms: Option<u64>,
    /// The upstream's retry hint.
    pub retry_after_ms: Option<u64>,
    /// Whether the attempt was a half-open breaker probe.
    pub is_probe: bool,
}

fn serialize_scope<S: serde::Serializer>(scope: &Scope, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(scope.as_str())
}

/// Where telemetry rows go: a `tracing` sink, a JSON-lines file, or a user's own.
///
/// `record` is called on the call's path, so it must not block: a sink that does I/O hands
/// the row to a background writer. A sink that fails logs a warning and never fails a call.
pub trait TelemetrySink: Send + Sync + 'static {
    /// Take one row.
    fn record(&self, row: &TelemetryRow<'_>);

    /// Whether rows are wanted at all; a sink that drops everything says `false`, and the
    /// pipeline then does not build them.
    fn enabled(&self) -> bool {
        true
    }
}
