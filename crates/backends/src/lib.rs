//! PolyGateway's backends (SPEC §6, §7, §11, §17): in-memory and Redis implementations of the
//! admission, breaker and cache ports. The Redis Lua scripts live here.
//!
//! **Architecture invariant:** the only workspace crates this one depends on are
//! `polygateway-errors` and `polygateway-ports`. `fred` appears here and nowhere else.
//!
//! The backends arrive with the pipeline and Redis issues; this crate is the place they live.
