//! Whether a provider is up, and how long its outages last (MTTR), for
//! dashboards and pagers: it is down while its breaker is open or once
//! [`DOWN_AFTER`] attempts in a row failed by its own fault, and up again
//! at its next answer. Only a real answer ends an outage: a provider that
//! gets no traffic stays as it was last seen.

use std::time::Duration;

use tokio::time::Instant;

/// Attempts failing in a row, by the provider's own fault, that make an outage.
pub const DOWN_AFTER: u32 = 3;

/// The most ended outages kept between two scrapes; older ones go first.
const KEPT_OUTAGES: usize = 256;

/// One provider's outage state.
#[derive(Debug, Default)]
pub struct Outages {
    failures_in_a_row: u32,
    down_since: Option<Instant>,
    /// Outages that ended since the metrics last took them.
    ended: Vec<Duration>,
}

impl Outages {
    /// An attempt the provider answered.
    pub fn answered(&mut self, now: Instant) {
        self.failures_in_a_row = 0;
        if let Some(since) = self.down_since.take() {
            if self.ended.len() == KEPT_OUTAGES {
                self.ended.remove(0);
            }
            self.ended.push(now.saturating_duration_since(since));
        }
    }

    /// An attempt that failed by the provider's own fault.
    pub fn failed(&mut self, now: Instant) {
        self.failures_in_a_row = self.failures_in_a_row.saturating_add(1);
        if self.failures_in_a_row >= DOWN_AFTER {
            self.down_since.get_or_insert(now);
        }
    }

    /// Whether the provider is up, its breaker open or not; an open
    /// breaker starts an outage if none has started.
    pub fn is_up(&mut self, breaker_open: bool, now: Instant) -> bool {
        if breaker_open {
            self.down_since.get_or_insert(now);
        }
        self.down_since.is_none()
    }

    /// The outages that ended since the last call.
    pub fn take_ended(&mut self) -> Vec<Duration> {
        std::mem::take(&mut self.ended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_outage_lasts_from_the_failures_to_the_next_answer() {
        let mut outages = Outages::default();
        let start = Instant::now();
        outages.failed(start);
        outages.failed(start);
        assert!(outages.is_up(false, start), "two failures are not an outage");
        tokio::time::advance(Duration::from_secs(1)).await;
        outages.failed(Instant::now());
        assert!(!outages.is_up(false, Instant::now()), "the third in a row is");
        tokio::time::advance(Duration::from_secs(41)).await;
        outages.failed(Instant::now());
        outages.answered(Instant::now());
        assert!(outages.is_up(false, Instant::now()));
        assert_eq!(outages.take_ended(), [Duration::from_secs(41)], "from the third failure to the answer");
        assert!(outages.take_ended().is_empty(), "taken once");
    }

    #[tokio::test(start_paused = true)]
    async fn an_open_breaker_is_an_outage_until_an_answer() {
        let mut outages = Outages::default();
        assert!(!outages.is_up(true, Instant::now()));
        tokio::time::advance(Duration::from_secs(30)).await;
        assert!(!outages.is_up(false, Instant::now()), "a closed breaker alone proves nothing");
        outages.answered(Instant::now());
        assert!(outages.is_up(false, Instant::now()));
        assert_eq!(outages.take_ended(), [Duration::from_secs(30)]);
    }
}
