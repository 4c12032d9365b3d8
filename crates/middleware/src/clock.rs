//! A [`Clock`] on the tokio runtime's clock, so that paused-time tests drive breakers and
//! windows exactly as they drive sleeps.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use polygateway_ports::Clock;
use tokio::time::Instant;

/// Monotonic time from `tokio::time::Instant` (which `tokio::time::pause` controls); wall time
/// from the system clock plus the same offset.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    origin: Instant,
    unix_origin_ms: u64,
}

impl TokioClock {
    /// A clock whose monotonic origin is now. Must be created inside a runtime.
    pub fn new() -> Self {
        TokioClock {
            origin: Instant::now(),
            unix_origin_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        TokioClock::new()
    }
}

impl Clock for TokioClock {
    fn monotonic(&self) -> Duration {
        self.origin.elapsed()
    }

    fn unix_ms(&self) -> u64 {
        self.unix_origin_ms
            .saturating_add(u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX))
    }
}
