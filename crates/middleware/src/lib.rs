//! The PolyGateway call pipeline (SPEC §5–§8, §10–§12): admission with the settling permit
//! guard, pacing, the circuit breaker, the retry / fail-over loop, the cache and telemetry
//! emission — written against the ports only.
//!
//! **Architecture invariant:** this crate does not know HTTP or Redis exist. It depends on
//! `polygateway-errors` and `polygateway-ports` and never on `polygateway-transports` or
//! `polygateway-backends`; the facade plugs concrete transports and backends in.
//!
//! The stages arrive with the pipeline issue; this crate is the place they live.
