//! The PolyGateway mock upstream: a real hyper server on loopback that speaks the
//! OpenAI-compatible chat and embeddings API and the MonkeyOCR API, scriptable per route and
//! source (SPEC §18). Tests, benchmarks, `polygw mock` and `polygw demo` use it.
//!
//! Paths: `/{SOURCE}/v1/chat/completions`, `/{SOURCE}/v1/embeddings`, `/{SOURCE}/ocr/text`,
//! `/{SOURCE}/parse?return_type=…` — the first segment names the source, so one mock serves
//! many sources (without it the source is `default`). [`MockUpstream::base_url`] gives the
//! base URL to configure. `GET /__mock/stats` returns the counters as JSON.
//!
//! What it answers is a [`Scenario`]: rules that match a source and a route, each a script of
//! steps (fixed or random latency, statuses with `Retry-After`, hangs, truncated or malformed
//! bodies, wrong content types, chosen usage) followed by a weighted mix.
//!
//! **Invariant:** this crate depends on no other workspace crate: it is the far side of the
//! wire, and shares nothing with the gateway but the protocol.

mod body;
pub mod multipart;
mod scenario;
mod server;

pub use scenario::{
    Behaviour, Latency, Route, Rule, Scenario, Script, Step, UsageChoice, Weighted, openai_error,
};
pub use server::{Counters, MockUpstream, WindowPeak};
