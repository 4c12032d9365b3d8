//! Telemetry sinks (SPEC §10): rows as `tracing` events (always available), appended to a
//! JSON-lines file by a background writer (`POLYGATEWAY_TELEMETRY_JSONL`), fanned out to
//! several sinks, or dropped. A sink never fails a call: a write error is one warning.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::Duration;

use polygateway_errors::ConfigError;
use polygateway_ports::{TelemetryRow, TelemetrySink};

/// The target of the `tracing` events [`TracingSink`] writes.
pub const TRACING_TARGET: &str = "polygateway::telemetry";

/// Writes each row as a `tracing` event at `DEBUG` level under [`TRACING_TARGET`], with the
/// row's columns as fields. Builds nothing when no subscriber listens.
#[derive(Debug, Default, Clone, Copy)]
pub struct TracingSink;

impl TelemetrySink for TracingSink {
    fn record(&self, row: &TelemetryRow<'_>) {
        tracing::debug!(
            target: TRACING_TARGET,
            ts = row.ts,
            scope = row.scope.as_str(),
            logical_call_id = row.logical_call_id,
            attempt = row.attempt,
            source = row.source,
            model = row.model,
            event_kind = ?row.event_kind,
            error_type = row.error_type,
            http_status = row.http_status,
            prompt_tokens = row.prompt_tokens,
            completion_tokens = row.completion_tokens,
            est_tokens = row.est_tokens,
            settled_tokens = row.settled_tokens,
            latency_ms = row.latency_ms,
            total_latency_ms = row.total_latency_ms,
            retry_after_ms = row.retry_after_ms,
            is_probe = row.is_probe,
            "telemetry row"
        );
    }

    fn enabled(&self) -> bool {
        tracing::enabled!(target: TRACING_TARGET, tracing::Level::DEBUG)
    }
}

/// Drops every row (and asks for none to be built): for benchmarks.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopSink;

impl TelemetrySink for NoopSink {
    fn record(&self, _row: &TelemetryRow<'_>) {}

    fn enabled(&self) -> bool {
        false
    }
}

/// Several sinks at once.
#[derive(Clone, Default)]
pub struct FanOut(pub Vec<Arc<dyn TelemetrySink>>);

impl std::fmt::Debug for FanOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("FanOut").field(&self.0.len()).finish()
    }
}

impl TelemetrySink for FanOut {
    fn record(&self, row: &TelemetryRow<'_>) {
        for sink in &self.0 {
            if sink.enabled() {
                sink.record(row);
            }
        }
    }

    fn enabled(&self) -> bool {
        self.0.iter().any(|s| s.enabled())
    }
}

/// What the writer thread shares with the callers.
#[derive(Default)]
struct Pending {
    /// Serialised rows not yet written.
    bytes: Vec<u8>,
    /// Callers waiting for everything before them to reach the file.
    flushes: Vec<mpsc::Sender<()>>,
    closed: bool,
}

struct Shared {
    pending: Mutex<Pending>,
    wake: Condvar,
}

/// The writer wakes at least this often when rows are waiting.
const WRITE_INTERVAL: Duration = Duration::from_millis(100);
/// A caller wakes the writer early when this much is waiting.
const WRITE_EARLY_BYTES: usize = 256 * 1024;

/// Appends rows, one JSON object per line, to a file. `record` serialises the row into a shared
/// buffer — no allocation of its own, no system call, no thread wake-up in the common case — and
/// a writer thread appends the buffer to the file every 100 ms (sooner when it grows large).
/// The call never waits for the disk; `flush` (and the client's `shutdown`) waits for the file.
pub struct JsonlSink {
    shared: Arc<Shared>,
    path: PathBuf,
}

impl std::fmt::Debug for JsonlSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlSink")
            .field("path", &self.path)
            .finish()
    }
}

impl JsonlSink {
    /// Open (create or append to) `path`. `key` names where the path came from, for the error.
    pub fn open(path: &Path, key: &str) -> Result<JsonlSink, ConfigError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| {
                ConfigError::invalid(
                    key,
                    path.display().to_string(),
                    format!("cannot open for appending: {e}"),
                )
            })?;
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending::default()),
            wake: Condvar::new(),
        });
        let writer = shared.clone();
        let shown = path.display().to_string();
        std::thread::Builder::new()
            .name("polygateway-telemetry".into())
            .spawn(move || write_rows(file, &writer, &shown))
            .map_err(|e| {
                ConfigError::invalid(
                    key,
                    path.display().to_string(),
                    format!("cannot start the writer: {e}"),
                )
            })?;
        Ok(JsonlSink {
            shared,
            path: path.to_owned(),
        })
    }

    /// Wait until every row recorded so far is written and flushed.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops the waiting, not the writing.
    pub async fn flush(&self) {
        let (tx, rx) = mpsc::channel();
        lock(&self.shared.pending).flushes.push(tx);
        self.shared.wake.notify_one();
        // The writer answers quickly; wait for it off the runtime's worker threads.
        let _ = tokio::task::spawn_blocking(move || rx.recv()).await;
    }
}

impl Drop for JsonlSink {
    fn drop(&mut self) {
        lock(&self.shared.pending).closed = true;
        self.shared.wake.notify_one();
    }
}

fn lock(pending: &Mutex<Pending>) -> std::sync::MutexGuard<'_, Pending> {
    pending.lock().unwrap_or_else(|e| e.into_inner())
}

fn write_rows(file: std::fs::File, shared: &Shared, path: &str) {
    let mut file = file;
    let mut batch = Vec::new();
    let mut warned = false;
    loop {
        let (flushes, closed) = {
            let mut pending = lock(&shared.pending);
            while pending.bytes.is_empty() && pending.flushes.is_empty() && !pending.closed {
                pending = shared.wake.wait(pending).unwrap_or_else(|e| e.into_inner());
            }
            if pending.flushes.is_empty() && !pending.closed {
                // Rows are waiting: gather more for a moment, unless a flush is asked for.
                let (guard, _) = shared
                    .wake
                    .wait_timeout_while(pending, WRITE_INTERVAL, |p| {
                        p.flushes.is_empty() && !p.closed && p.bytes.len() < WRITE_EARLY_BYTES
                    })
                    .unwrap_or_else(|e| e.into_inner());
                pending = guard;
            }
            std::mem::swap(&mut batch, &mut pending.bytes);
            (std::mem::take(&mut pending.flushes), pending.closed)
        };
        if !batch.is_empty() {
            if let Err(e) = file.write_all(&batch).and_then(|()| file.flush()) {
                if !std::mem::replace(&mut warned, true) {
                    tracing::warn!(path, error = %e, "telemetry file write failed; rows are being lost");
                }
            }
            batch.clear();
        }
        for done in flushes {
            let _ = done.send(());
        }
        if closed {
            return;
        }
    }
}

impl TelemetrySink for JsonlSink {
    fn record(&self, row: &TelemetryRow<'_>) {
        let mut pending = lock(&self.shared.pending);
        let start = pending.bytes.len();
        match serde_json::to_writer(&mut pending.bytes, row) {
            Ok(()) => pending.bytes.push(b'\n'),
            Err(e) => {
                pending.bytes.truncate(start);
                tracing::warn!(error = %e, "telemetry row not serialisable");
            }
        }
        let wake = pending.bytes.len() >= WRITE_EARLY_BYTES || start == 0;
        drop(pending);
        if wake {
            self.shared.wake.notify_one();
        }
    }
}
