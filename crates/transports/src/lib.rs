//! PolyGateway's HTTP transports (SPEC §4, §8, §16): OpenAI-compatible chat and embeddings,
//! the MonkeyOCR service, classification of every HTTP outcome into the four attempt kinds,
//! and `Retry-After` parsing.
//!
//! **Architecture invariant:** the only workspace crates this one depends on are
//! `polygateway-errors` and `polygateway-ports`; it knows nothing of admission, breakers or
//! retries. `hyper` appears here and in the CLI, nowhere else in the library.
//!
//! The transports arrive with the transports issue; this crate is the place they live.
