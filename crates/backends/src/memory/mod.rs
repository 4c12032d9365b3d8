//! The in-memory backends: exact, one process, no I/O. Every operation completes on its
//! first poll.

mod admission;
mod breaker;

pub use admission::{MemoryAdmission, WINDOW};
pub use breaker::MemoryBreakers;
