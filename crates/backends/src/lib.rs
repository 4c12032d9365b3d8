//! PolyGateway's backends (SPEC §6, §7, §11, §17): implementations of the admission and
//! breaker ports — in memory for one process ([`MemoryAdmission`], [`MemoryBreakers`]); Redis
//! for many arrives with its own issue, and its Lua scripts will live here.
//!
//! **Architecture invariant:** the only workspace crates this one depends on are
//! `polygateway-errors` and `polygateway-ports`. `fred` appears here and nowhere else.

mod memory;

pub use memory::{MemoryAdmission, MemoryBreakers, WINDOW};
