//! The retry policy (SPEC §8): which source to try next, and how long to back off.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How the retry / fail-over loop behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per logical call (≥ 1).
    pub max_attempts: u32,
    /// The first backoff step.
    pub backoff_base: Duration,
    /// The cap on backoff (not on `Retry-After`).
    pub backoff_max: Duration,
    /// How long the loop may go without progress.
    pub stall_window: Duration,
}

impl RetryPolicy {
    /// Exponential backoff with full jitter: uniform in `[0, min(max, base · 2^(n-1))]` for
    /// the `n`-th consecutive failure on a source (AWS's "full jitter", which spreads retries of
    /// many callers best).
    pub(crate) fn backoff(&self, failures: u32, random: u64) -> Duration {
        let exp = failures.saturating_sub(1).min(30);
        let ceiling = self
            .backoff_base
            .saturating_mul(1u32 << exp)
            .min(self.backoff_max);
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(if nanos == 0 { 0 } else { random % (nanos + 1) })
    }
}

/// A lock-free random source (splitmix64 over a shared counter): good enough for jitter and
/// weighted picks, and repeatable from a seed in tests.
#[derive(Debug)]
pub(crate) struct Random(AtomicU64);

impl Random {
    pub(crate) fn new(seed: u64) -> Self {
        Random(AtomicU64::new(seed))
    }

    pub(crate) fn next(&self) -> u64 {
        let mut z = self
            .0
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
            .wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// The order in which to try sources: by priority (lower first), weighted random among equal
/// priority, the `avoid`ed source (the one that just failed) last. Only indices for which
/// `usable` is true are returned.
pub(crate) fn order(
    priorities_weights: &[(u32, u32)],
    usable: impl Fn(usize) -> bool,
    avoid: Option<usize>,
    random: &Random,
) -> Vec<usize> {
    let mut candidates: Vec<usize> = (0..priorities_weights.len())
        .filter(|&i| usable(i))
        .collect();
    candidates.sort_by_key(|&i| priorities_weights[i].0);
    let mut ordered = Vec::with_capacity(candidates.len());
    let mut start = 0;
    while start < candidates.len() {
        let priority = priorities_weights[candidates[start]].0;
        let end = start
            + candidates[start..]
                .iter()
                .take_while(|&&i| priorities_weights[i].0 == priority)
                .count();
        let mut group: Vec<usize> = candidates[start..end].to_vec();
        // Weighted shuffle: draw one at a time, proportionally to weight.
        while !group.is_empty() {
            let total: u64 = group
                .iter()
                .map(|&i| u64::from(priorities_weights[i].1.max(1)))
                .sum();
            let mut draw = random.next() % total;
            let pos = group
                .iter()
                .position(|&i| {
                    let w = u64::from(priorities_weights[i].1.max(1));
                    if draw < w {
                        true
                    } else {
                        draw -= w;
                        false
                    }
                })
                .unwrap_or(0);
            ordered.push(group.remove(pos));
        }
        start = end;
    }
    if let Some(avoid) = avoid {
        if let Some(pos) = ordered.iter().position(|&i| i == avoid) {
            let failed = ordered.remove(pos);
            ordered.push(failed);
        }
    }
    ordered
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 5,
            backoff_base: Duration::from_millis(100),
            backoff_max: Duration::from_millis(1000),
            stall_window: Duration::from_secs(60),
        }
    }

    #[test]
    fn backoff_is_full_jitter_under_a_doubling_capped_ceiling() {
        let p = policy();
        assert_eq!(
            p.backoff(1, u64::MAX),
            Duration::from_nanos(u64::MAX % 100_000_001)
        );
        for (n, ceiling_ms) in [
            (1, 100),
            (2, 200),
            (3, 400),
            (4, 800),
            (5, 1000),
            (40, 1000),
        ] {
            let ceiling = Duration::from_millis(ceiling_ms);
            let nanos = ceiling.as_nanos() as u64;
            assert_eq!(
                p.backoff(n, nanos),
                ceiling,
                "draw at the top is the ceiling ({n})"
            );
            assert_eq!(
                p.backoff(n, nanos + 1),
                Duration::ZERO,
                "wraps to zero ({n})"
            );
        }
    }

    #[test]
    fn order_is_by_priority_weighted_and_avoids_the_failed_source() {
        let random = Random::new(1);
        let sources = [(1, 1), (0, 1), (0, 3), (2, 1)];
        for _ in 0..50 {
            let o = order(&sources, |_| true, None, &random);
            assert_eq!(o.len(), 4);
            assert!(o[..2].contains(&1) && o[..2].contains(&2), "{o:?}");
            assert_eq!(&o[2..], &[0, 3]);
        }
        let o = order(&sources, |i| i != 3, Some(1), &random);
        assert_eq!(o, [2, 0, 1]);
        // Weight 3 against 1: the heavier source comes first about three times in four.
        let first_heavy = (0..4000)
            .filter(|_| order(&sources, |_| true, None, &random)[0] == 2)
            .count();
        assert!((2700..3300).contains(&first_heavy), "{first_heavy}");
    }
}
