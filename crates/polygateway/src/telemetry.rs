//! Telemetry sinks (SPEC §10): rows as `tracing` events (always available), appended to a
//! JSON-lines file by a background writer (`POLYGATEWAY_TELEMETRY_JSONL`), fanned out to
//! several sinks, or dropped. A sink never fails a call: a write error is one warning.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};

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

enum Line {
    Row(String),
    Flush(mpsc::Sender<()>),
}

/// Appends rows, one JSON object per line, to a file. `record` serialises the row and hands
/// the line to a writer thread; the call never waits for the disk.
pub struct JsonlSink {
    tx: mpsc::Sender<Line>,
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
        let (tx, rx) = mpsc::channel::<Line>();
        let shown = path.display().to_string();
        std::thread::Builder::new()
            .name("polygateway-telemetry".into())
            .spawn(move || write_lines(file, &rx, &shown))
            .map_err(|e| {
                ConfigError::invalid(
                    key,
                    path.display().to_string(),
                    format!("cannot start the writer: {e}"),
                )
            })?;
        Ok(JsonlSink {
            tx,
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
        if self.send(Line::Flush(tx)) {
            // The writer answers quickly; wait for it off the runtime's worker threads.
            let _ = tokio::task::spawn_blocking(move || rx.recv()).await;
        }
    }

    fn send(&self, line: Line) -> bool {
        self.tx.send(line).is_ok()
    }
}

fn write_lines(file: std::fs::File, rx: &mpsc::Receiver<Line>, path: &str) {
    let mut out = std::io::BufWriter::new(file);
    let warned = AtomicBool::new(false);
    let warn = |e: std::io::Error| {
        if !warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(path, error = %e, "telemetry file write failed; rows are being lost");
        }
    };
    while let Ok(line) = rx.recv() {
        let mut next = Some(line);
        // Write everything queued, then flush once.
        while let Some(line) = next {
            match line {
                Line::Row(text) => {
                    if let Err(e) = out.write_all(text.as_bytes()) {
                        warn(e);
                    }
                }
                Line::Flush(done) => {
                    if let Err(e) = out.flush() {
                        warn(e);
                    }
                    let _ = done.send(());
                }
            }
            next = rx.try_recv().ok();
        }
        if let Err(e) = out.flush() {
            warn(e);
        }
    }
}

impl TelemetrySink for JsonlSink {
    fn record(&self, row: &TelemetryRow<'_>) {
        match serde_json::to_string(row) {
            Ok(mut text) => {
                text.push('\n');
                self.send(Line::Row(text));
            }
            Err(e) => tracing::warn!(error = %e, "telemetry row not serialisable"),
        }
    }
}
