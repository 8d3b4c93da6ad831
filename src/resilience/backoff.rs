//! Waits between retries of one target: exponential with full jitter, so
//! retries of many requests spread out instead of arriving together.

use std::time::Duration;

/// The longest any single backoff wait may be.
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// A random wait in `[0, base × 2^retry]`, capped at [`MAX_BACKOFF`]; `retry` counts from 0.
pub fn full_jitter(base: Duration, retry: u32) -> Duration {
    let ceiling = base.saturating_mul(1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX)).min(MAX_BACKOFF);
    ceiling.mul_f64(fastrand::f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_grow_and_stay_within_their_ceiling() {
        let base = Duration::from_millis(100);
        for retry in 0..6 {
            let ceiling = Duration::from_millis(100 << retry);
            let waits: Vec<Duration> = (0..200).map(|_| full_jitter(base, retry)).collect();
            assert!(waits.iter().all(|w| *w <= ceiling), "retry {retry}: every wait within {ceiling:?}");
            let mean = waits.iter().sum::<Duration>() / 200;
            assert!(mean > ceiling / 4 && mean < ceiling * 3 / 4, "retry {retry}: jitter spreads waits, mean {mean:?}");
        }
        assert!(full_jitter(base, 40) <= MAX_BACKOFF, "capped");
    }
}
