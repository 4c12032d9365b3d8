//! The PolyGateway call pipeline (SPEC §5–§8, §10): the [`Engine`] runs one logical call —
//! pick a source, pass its breaker and the admission backend, pace, attempt through the
//! transport, classify, settle, write telemetry — inside the retry / fail-over loop with the
//! stall window. It is generic over the [`Operation`] (chat, embeddings batches, OCR jobs), so
//! every scope shares one loop and one permit guard.
//!
//! Settlement: every admitted attempt is an attempt guard that carries the settlement state
//! (admitted → in flight → known) and settles exactly once on every exit path, handing the
//! async work to a background settler so the caller never waits for cleanup.
//!
//! **Architecture invariant:** this crate does not know HTTP or Redis exist. It depends on
//! `polygateway-errors` and `polygateway-ports` and never on `polygateway-transports` or
//! `polygateway-backends`; the facade plugs concrete transports and backends in.

mod clock;
mod engine;
mod operation;
mod pacer;
mod retry;
mod settle;
mod telemetry;
#[cfg(test)]
mod testing;

pub use clock::TokioClock;
pub use engine::{Engine, EngineConfig, Operation, Served, SourceStats};
pub use operation::{ChatCall, EmbedBatch, OcrLayoutCall, OcrTextCall};
pub use retry::RetryPolicy;
pub use telemetry::{CallRecorder, CallSummary};
