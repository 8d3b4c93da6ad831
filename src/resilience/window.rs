//! Counts per minute over the last quarter hour, for "how is it going right
//! now" questions that lifetime totals cannot answer.

use std::collections::VecDeque;
use std::ops::AddAssign;

use tokio::time::Instant;

/// Minutes kept: enough for the 15-minute view.
const MINUTES: u64 = 15;

/// Values of `T` added up per minute, oldest first.
#[derive(Debug)]
pub struct MinuteWindow<T> {
    origin: Instant,
    buckets: VecDeque<(u64, T)>,
}

impl<T: Default + Copy + AddAssign> MinuteWindow<T> {
    /// An empty window starting now.
    pub fn new() -> Self {
        MinuteWindow { origin: Instant::now(), buckets: VecDeque::new() }
    }

    fn minute(&self) -> u64 {
        Instant::now().duration_since(self.origin).as_secs() / 60
    }

    /// Adds `value` to the current minute.
    pub fn add(&mut self, value: T) {
        let now = self.minute();
        while self.buckets.front().is_some_and(|(minute, _)| minute + MINUTES <= now) {
            self.buckets.pop_front();
        }
        match self.buckets.back_mut() {
            Some((minute, total)) if *minute == now => *total += value,
            _ => self.buckets.push_back((now, value)),
        }
    }

    /// The sum over the last `minutes` minutes, the current one included.
    pub fn last(&self, minutes: u64) -> T {
        let now = self.minute();
        let mut sum = T::default();
        for (_, value) in self.buckets.iter().filter(|(minute, _)| minute + minutes > now) {
            sum += *value;
        }
        sum
    }
}

impl<T: Default + Copy + AddAssign> Default for MinuteWindow<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// What one window counts for a provider or a route.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Tally {
    /// Attempts made, or requests served.
    pub total: u64,
    /// Of those, the ones that succeeded.
    pub ok: u64,
    /// Of those, the ones that failed (or, for routes, that needed a failover).
    pub failed: u64,
}

impl AddAssign for Tally {
    fn add_assign(&mut self, other: Tally) {
        self.total += other.total;
        self.ok += other.ok;
        self.failed += other.failed;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn one(ok: bool) -> Tally {
        Tally { total: 1, ok: u64::from(ok), failed: u64::from(!ok) }
    }

    #[tokio::test(start_paused = true)]
    async fn the_last_minute_and_quarter_hour_are_told_apart() {
        let mut window = MinuteWindow::new();
        window.add(one(true));
        window.add(one(false));
        tokio::time::advance(Duration::from_secs(120)).await;
        window.add(one(true));
        assert_eq!(window.last(1), Tally { total: 1, ok: 1, failed: 0 });
        assert_eq!(window.last(15), Tally { total: 3, ok: 2, failed: 1 });
        tokio::time::advance(Duration::from_secs(14 * 60)).await;
        assert_eq!(window.last(15), Tally { total: 1, ok: 1, failed: 0 }, "the first minute has aged out");
        tokio::time::advance(Duration::from_secs(60)).await;
        window.add(one(false));
        assert_eq!(window.last(15), Tally { total: 1, ok: 0, failed: 1 });
    }
}
