//! PolyGateway's backends (SPEC §6, §7, §11, §17): implementations of the admission, breaker
//! and cache ports — in memory for one process ([`MemoryAdmission`], [`MemoryBreakers`]), and
//! in Redis for many ([`RedisBackend`], with its Lua scripts in `lua/`).
//!
//! **Architecture invariant:** the only workspace crates this one depends on are
//! `polygateway-errors` and `polygateway-ports`. `fred` appears here and nowhere else.

mod memory;
mod redis;

pub use memory::{AGE_OUT, ARRIVAL_GUARD, MemoryAdmission, MemoryBreakers, WINDOW};
pub use redis::{RedisBackend, RedisConfig};
