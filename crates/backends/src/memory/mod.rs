//! The in-memory backends: exact, one process, no I/O. Every operation completes on its
//! first poll.

mod admission;
mod breaker;

pub use admission::{AGE_OUT, ARRIVAL_GUARD, MemoryAdmission, WINDOW};
pub use breaker::MemoryBreakers;
