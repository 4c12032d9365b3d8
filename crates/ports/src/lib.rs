//! PolyGateway's ports: the traits at every boundary of the pipeline and the plain data that
//! crosses them (SPEC §1, §2).
//!
//! | port | trait | implemented by |
//! | --- | --- | --- |
//! | transport | [`ChatTransport`], [`EmbeddingTransport`], [`OcrTransport`] | `polygateway-transports` (HTTP) |
//! | admission backend | [`AdmissionBackend`] and its [`Permit`] | `polygateway-backends` (memory, Redis) |
//! | breaker store | [`BreakerStore`] | `polygateway-backends` |
//! | cache store | [`CacheStore`] | `polygateway-backends` |
//! | telemetry sink | [`TelemetrySink`] | the facade (tracing, JSON lines) or a user |
//! | clock | [`Clock`] | [`SystemClock`]; [`ManualClock`] for tests |
//!
//! The data — [`SourceSpec`], [`ChatRequest`], [`ChatResult`], [`Usage`], … — is plain serde
//! types that follow the OpenAI wire format closely. A user who writes their own transport or
//! backend depends on this crate (and `polygateway-errors`) alone.
//!
//! **Invariant:** no I/O, no runtime, no HTTP and no Redis here. Async methods are declared
//! with `impl Future + Send` so that the pipeline calls them without boxing.

mod admission;
mod breaker;
mod cache;
mod chat;
mod clock;
mod embedding;
mod ocr;
mod secret;
mod source;
mod telemetry;
mod transport;

pub use admission::{
    Admission, AdmissionBackend, AdmissionRequest, BackendError, BreakerReport, GuardedAdmission,
    Permit, PermitId, RefusalReason, SourceUsage,
};
pub use breaker::{BreakerDecision, BreakerOutcome, BreakerPolicy, BreakerState, BreakerStore};
pub use cache::CacheStore;
pub use chat::{ChatRequest, ChatResult, Effort, Message, Role, Usage};
pub use clock::{Clock, ManualClock, SystemClock};
pub use embedding::{EmbeddingRequest, EmbeddingResult};
pub use ocr::{OcrLayout, OcrRequest, OcrReturnType, OcrText};
pub use secret::Secret;
pub use source::{Limits, SourceKind, SourceSpec};
pub use telemetry::{EventKind, TelemetryRow, TelemetrySink};
pub use transport::{ChatTransport, EmbeddingTransport, OcrTransport};
