//! PolyGateway's HTTP transports (SPEC §4, §8, §16): OpenAI-compatible chat and embeddings
//! ([`OpenAiTransport`]), the MonkeyOCR service ([`MonkeyOcrTransport`]), classification of
//! every HTTP outcome into the four attempt kinds ([`classify_status`]), and `Retry-After`
//! parsing ([`parse_retry_after`]).
//!
//! All transports share one pooled [`HttpClient`] (hyper-util over rustls with the ring
//! provider, HTTP/1.1 and HTTP/2). Each attempt is bounded by the source's `timeout` until the
//! whole body is read, and by the response size cap; every failure — connect, timeout,
//! truncated or oversized body, bad JSON, missing fields, error statuses and OpenAI error
//! codes, OCR `success: false` — is an [`AttemptFailure`](polygateway_errors::AttemptFailure)
//! of one of the four kinds, never a panic. Upstream messages are redacted of API keys.
//!
//! **Architecture invariant:** the only workspace crates this one depends on are
//! `polygateway-errors` and `polygateway-ports`; it knows nothing of admission, breakers or
//! retries. `hyper` appears here, in the mock upstream and in the CLI — nowhere else.

mod classify;
mod exchange;
mod http;
mod monkey_ocr;
mod multipart;
mod openai;
mod retry_after;

/// The integration tests' log capture, shared with the unit tests.
#[cfg(test)]
#[path = "../tests/support/capture.rs"]
mod test_capture;

pub use classify::{classify_status, redact};
pub use http::{BodyError, DEFAULT_MAX_RESPONSE_BYTES, HttpClient, HttpConfig, read_capped};
pub use monkey_ocr::MonkeyOcrTransport;
pub use multipart::single_file_form;
pub use openai::OpenAiTransport;
pub use retry_after::{NOT_FINITE_RULE, parse_retry_after};
