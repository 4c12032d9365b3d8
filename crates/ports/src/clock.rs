use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The clock that stamps telemetry rows and drives breaker and quota windows in-process.
///
/// It is injectable so that breaker and window tests are exact. It never bounds a call: the
/// call deadline uses the runtime's monotonic clock (SPEC §9).
pub trait Clock: Send + Sync + 'static {
    /// Time elapsed since a fixed origin; never goes backwards.
    fn monotonic(&self) -> Duration;

    /// Wall-clock milliseconds since the Unix epoch, for timestamps.
    fn unix_ms(&self) -> u64;
}

/// The real clocks: `Instant` and `SystemTime`.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    /// A clock whose monotonic origin is now.
    pub fn new() -> Self {
        SystemClock {
            origin: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn monotonic(&self) -> Duration {
        self.origin.elapsed()
    }

    fn unix_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// A clock that moves only when told, for tests. Clones share the same time.
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock at monotonic zero and Unix time zero.
    pub fn new() -> Self {
        ManualClock::default()
    }

    /// Move the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_add(nanos, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn monotonic(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::SeqCst))
    }

    fn unix_ms(&self) -> u64 {
        self.nanos.load(Ordering::SeqCst) / 1_000_000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_advanced_and_clones_share_time() {
        let clock = ManualClock::new();
        let clone = clock.clone();
        assert_eq!(clock.monotonic(), Duration::ZERO);
        clone.advance(Duration::from_millis(1500));
        assert_eq!(clock.monotonic(), Duration::from_millis(1500));
        assert_eq!(clock.unix_ms(), 1500);
    }

    #[test]
    fn system_clock_is_monotonic() {
        let clock = SystemClock::new();
        let a = clock.monotonic();
        let b = clock.monotonic();
        assert!(b >= a);
        assert!(clock.unix_ms() > 1_600_000_000_000);
    }
}
