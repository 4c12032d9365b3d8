//! PolyGateway: quotas that hold across processes, reservations settled exactly once,
//! circuit breakers with a true half-open probe, retries that honour `Retry-After`, fail-over,
//! a stall window and an optional call deadline — in front of many upstream AI services.
//!
//! This is the facade: configuration from the environment ([`config`]), assembly of clients,
//! and re-exports of the types a caller needs. The layered crates behind it can also be used
//! one by one to build a custom pipeline (see `docs/ARCHITECTURE.md`).
//!
//! ```
//! use polygateway::config::{Env, GatewaySettings};
//! use polygateway::Scope;
//!
//! let env = Env::from_pairs([
//!     ("LLM__SOURCE__LOCAL__BASE_URL", "http://127.0.0.1:8080/v1"),
//!     ("LLM__SOURCE__LOCAL__MODEL", "qwen2.5"),
//!     ("LLM__CALL_DEADLINE_S", "30"),
//! ]);
//! let config = GatewaySettings::from_env(Scope::Llm, &env)?;
//! assert_eq!(config.sources[0].name, "LOCAL");
//! # Ok::<(), polygateway::ConfigError>(())
//! ```

mod backend;
mod client;
pub mod config;
pub mod telemetry;

pub use client::{
    CallOptions, ClientBuilder, EmbeddingClient, GatewayClient, OcrClient, OcrOptions,
    detect_document_type,
};
pub use polygateway_middleware::{SourceStats, TokioClock};
pub use polygateway_ports::{
    BreakerState, Clock, EventKind, ManualClock, SystemClock, TelemetryRow, TelemetrySink,
};
pub use polygateway_transports::HttpConfig;

pub use polygateway_deadline::{CallDeadline, with_call_deadline};
pub use polygateway_errors::{
    AttemptFailure, ConfigError, ConfigValue, DeadlineExceeded, ErrorKind, FailureKind,
    GatewayError, Invalid, Rejected, Scope, SourceFailure, Unavailable, UnavailableReason,
};
pub use polygateway_ports::{
    ChatRequest, ChatResult, Effort, EmbeddingResult, Message, OcrLayout, OcrReturnType, OcrText,
    Role, Secret, SourceKind, SourceSpec, Usage,
};
