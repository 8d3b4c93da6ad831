//! The generic cell rate algorithm: a limit of N per minute admits a burst
//! of up to N, then one every minute / N, with no fixed-window edge that
//! lets 2N through around a boundary. Requests and tokens use the same
//! limiter, a cost of one per request or one per token.

use std::time::Duration;

use tokio::time::Instant;

use crate::clock::later;

/// The window a limit is given over.
const WINDOW: Duration = Duration::from_secs(60);

/// One limit's state: the theoretical arrival time of the next unit.
#[derive(Debug, Clone)]
pub struct Gcra {
    /// Time one unit occupies: the window over the limit.
    interval: Duration,
    /// When the units taken so far are paid off.
    paid_until: Instant,
}

impl Gcra {
    /// A limiter of `per_minute` units per minute (at least 1).
    pub fn per_minute(per_minute: u64) -> Self {
        let per_minute = u32::try_from(per_minute.max(1)).unwrap_or(u32::MAX);
        Gcra { interval: WINDOW / per_minute, paid_until: Instant::now() }
    }

    /// Takes `cost` units at `now`, or says how long until they would fit.
    pub fn take(&mut self, cost: u64, now: Instant) -> Result<(), Duration> {
        let cost = u32::try_from(cost).unwrap_or(u32::MAX);
        let start = self.paid_until.max(now);
        let paid_until = later(start, self.interval.saturating_mul(cost));
        let horizon = later(now, WINDOW);
        if paid_until > horizon {
            return Err(paid_until.saturating_duration_since(horizon));
        }
        self.paid_until = paid_until;
        Ok(())
    }

    /// Gives back `units` taken but not used (a reservation larger than the usage).
    pub fn give_back(&mut self, units: u64, now: Instant) {
        let units = u32::try_from(units).unwrap_or(u32::MAX);
        let back = self.interval.saturating_mul(units);
        self.paid_until = self.paid_until.checked_sub(back).unwrap_or(now).max(now);
    }

    /// Replaces a reservation of `reserved` units by the `used` ones: gives
    /// back what was not used, or charges what went past it.
    pub fn settle(&mut self, reserved: u64, used: u64, now: Instant) {
        if used < reserved {
            self.give_back(reserved - used, now);
        } else {
            self.charge(used - reserved, now);
        }
    }

    /// How many units could be taken at `now`: the full limit when idle.
    pub fn available(&self, now: Instant) -> u64 {
        let horizon = later(now, WINDOW);
        let room = horizon.saturating_duration_since(self.paid_until.max(now));
        u64::try_from(room.as_nanos() / self.interval.as_nanos().max(1)).unwrap_or(u64::MAX)
    }

    /// Takes `units` more than were reserved, even past the limit: they were used.
    pub fn charge(&mut self, units: u64, now: Instant) {
        let units = u32::try_from(units).unwrap_or(u32::MAX);
        let start = self.paid_until.max(now);
        self.paid_until = later(start, self.interval.saturating_mul(units));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_limit_admits_its_burst_then_one_per_interval() {
        let mut limit = Gcra::per_minute(6);
        let now = Instant::now();
        for i in 0..6 {
            assert_eq!(limit.take(1, now), Ok(()), "request {i} of the burst");
        }
        assert_eq!(limit.take(1, now), Err(Duration::from_secs(10)), "the seventh waits one interval");
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(limit.take(1, Instant::now()), Ok(()));
        assert!(limit.take(1, Instant::now()).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn no_window_edge_lets_twice_the_limit_through() {
        let mut limit = Gcra::per_minute(60);
        let start = Instant::now();
        tokio::time::advance(Duration::from_millis(59_900)).await;
        let admitted_before_edge = (0..120).filter(|_| limit.take(1, Instant::now()).is_ok()).count();
        tokio::time::advance(Duration::from_millis(200)).await;
        let admitted_after_edge = (0..120).filter(|_| limit.take(1, Instant::now()).is_ok()).count();
        assert_eq!(admitted_before_edge, 60);
        assert!(admitted_after_edge <= 1, "a fixed window would admit 60 more at {:?}", start.elapsed());
    }

    #[tokio::test(start_paused = true)]
    async fn tokens_are_reserved_then_settled_to_the_usage() {
        let mut tokens = Gcra::per_minute(1000);
        let now = Instant::now();
        assert_eq!(tokens.take(800, now), Ok(()), "800 reserved");
        assert!(tokens.take(300, now).is_err(), "1,100 would pass the limit");
        tokens.give_back(700, now);
        assert_eq!(tokens.take(300, now), Ok(()), "only 100 were used: 400 of 1,000 now");
        assert_eq!(tokens.available(now), 600, "400 of 1,000 in use");
        tokens.charge(1000, now);
        assert!(tokens.take(1, now).is_err(), "usage past the reservation counts too");
        assert_eq!(tokens.available(now), 0);
    }
}
