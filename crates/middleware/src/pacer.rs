//! The pacer: per-source, per-process concurrency and minimum spacing between request starts.
//!
//! The admission backend enforces the quotas shared by every process; the pacer smooths this
//! process's own traffic — no burst of starts closer together than `min_interval`, and no
//! more local attempts in flight than `max_concurrency` (so the loop fails over instead of
//! asking the backend for a slot it cannot have).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::time::Instant;

pub(crate) struct Pacer {
    min_interval: Duration,
    max_concurrency: Option<u32>,
    next_start: Mutex<Option<Instant>>,
    inflight: AtomicU32,
}

impl Pacer {
    pub(crate) fn new(min_interval: Duration, max_concurrency: Option<u32>) -> Self {
        Pacer {
            min_interval,
            max_concurrency,
            next_start: Mutex::new(None),
            inflight: AtomicU32::new(0),
        }
    }

    /// Whether this process already has `max_concurrency` attempts in flight on the source.
    pub(crate) fn is_full(&self) -> bool {
        self.max_concurrency
            .is_some_and(|max| self.inflight.load(Ordering::Relaxed) >= max)
    }

    pub(crate) fn enter(&self) {
        self.inflight.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn leave(&self) {
        self.inflight.fetch_sub(1, Ordering::Relaxed);
    }

    /// How long a start requested now would wait for its turn.
    pub(crate) fn backlog(&self) -> Duration {
        if self.min_interval.is_zero() {
            return Duration::ZERO;
        }
        let next = *self.next_start.lock().unwrap_or_else(|e| e.into_inner());
        next.map_or(Duration::ZERO, |n| {
            n.saturating_duration_since(Instant::now())
        })
    }

    /// Take the next start slot and wait for it. Slots are handed out in order, each
    /// `min_interval` after the previous one.
    ///
    /// Cancel safety: a cancelled wait leaves its slot unused; the spacing only gets wider.
    pub(crate) async fn wait_turn(&self) {
        if self.min_interval.is_zero() {
            return;
        }
        let start = {
            let mut next = self.next_start.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let start = next.map_or(now, |n| n.max(now));
            *next = Some(start + self.min_interval);
            start
        };
        tokio::time::sleep_until(start).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn starts_are_spaced_by_the_interval() {
        let pacer = Pacer::new(Duration::from_millis(100), None);
        let t0 = Instant::now();
        pacer.wait_turn().await;
        pacer.wait_turn().await;
        pacer.wait_turn().await;
        assert_eq!(t0.elapsed(), Duration::from_millis(200));
        tokio::time::sleep(Duration::from_secs(1)).await;
        let t1 = Instant::now();
        pacer.wait_turn().await;
        assert_eq!(
            t1.elapsed(),
            Duration::ZERO,
            "an idle source starts at once"
        );
    }

    #[test]
    fn full_at_the_local_concurrency_limit() {
        let pacer = Pacer::new(Duration::ZERO, Some(2));
        pacer.enter();
        assert!(!pacer.is_full());
        pacer.enter();
        assert!(pacer.is_full());
        pacer.leave();
        assert!(!pacer.is_full());
        assert!(!Pacer::new(Duration::ZERO, None).is_full());
    }
}
