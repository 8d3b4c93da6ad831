//! The state baton keeps per provider between requests, shared by all routes.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::{Breaker, BreakerSettings};

/// How many recent times to first token are kept per provider.
const TTFT_WINDOW: usize = 100;
/// Fewer samples than this give no percentile.
const TTFT_MIN_SAMPLES: usize = 10;

/// One provider's shared state.
#[derive(Debug)]
pub struct ProviderHealth {
    /// Skips the provider while it keeps failing.
    pub breaker: Arc<Breaker>,
    rate_limited_until: Mutex<Option<Instant>>,
    ttft: Mutex<VecDeque<Duration>>,
}

impl ProviderHealth {
    fn new(name: &str, settings: BreakerSettings) -> Self {
        ProviderHealth {
            breaker: Breaker::new(name, settings),
            rate_limited_until: Mutex::new(None),
            ttft: Mutex::new(VecDeque::with_capacity(TTFT_WINDOW)),
        }
    }

    /// Skips the provider until `until`, as a 429's `Retry-After` asked.
    pub fn rate_limit_until(&self, until: Instant) {
        if let Ok(mut current) = self.rate_limited_until.lock() {
            *current = Some(current.map_or(until, |c| c.max(until)));
        }
    }

    /// When the provider's rate limit ends, if it has not yet.
    pub fn rate_limited_until(&self) -> Option<Instant> {
        let until = (*self.rate_limited_until.lock().ok()?)?;
        (until > Instant::now()).then_some(until)
    }

    /// Remembers one attempt's time to first token.
    pub fn record_ttft(&self, ttft: Duration) {
        if let Ok(mut samples) = self.ttft.lock() {
            if samples.len() == TTFT_WINDOW {
                samples.pop_front();
            }
            samples.push_back(ttft);
        }
    }

    /// The 95th percentile of recent times to first token, once there are enough.
    pub fn ttft_p95(&self) -> Option<Duration> {
        let mut samples: Vec<Duration> = self.ttft.lock().ok()?.iter().copied().collect();
        if samples.len() < TTFT_MIN_SAMPLES {
            return None;
        }
        samples.sort_unstable();
        let index = (samples.len() * 95).div_ceil(100).saturating_sub(1);
        samples.get(index).copied()
    }
}

/// Every provider's state, by provider name.
#[derive(Debug, Default)]
pub struct Health {
    providers: HashMap<String, Arc<ProviderHealth>>,
}

impl Health {
    /// Fresh state for each `(name, breaker settings)`.
    pub fn new<'a>(providers: impl IntoIterator<Item = (&'a str, BreakerSettings)>) -> Self {
        let providers = providers
            .into_iter()
            .map(|(name, settings)| (name.to_owned(), Arc::new(ProviderHealth::new(name, settings))))
            .collect();
        Health { providers }
    }

    /// The state of provider `name`; a name not known at start gets fresh state.
    pub fn provider(&self, name: &str) -> Arc<ProviderHealth> {
        self.providers
            .get(name)
            .cloned()
            .unwrap_or_else(|| Arc::new(ProviderHealth::new(name, BreakerSettings::default())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_rate_limit_lasts_until_its_end() {
        let health = Health::new([("p", BreakerSettings::default())]);
        let p = health.provider("p");
        assert_eq!(p.rate_limited_until(), None);
        p.rate_limit_until(Instant::now() + Duration::from_secs(2));
        assert!(p.rate_limited_until().is_some());
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(p.rate_limited_until(), None);
    }

    #[test]
    fn p95_needs_enough_samples() {
        let health = Health::new([("p", BreakerSettings::default())]);
        let p = health.provider("p");
        (1..10).for_each(|ms| p.record_ttft(Duration::from_millis(ms)));
        assert_eq!(p.ttft_p95(), None);
        (10..=100).for_each(|ms| p.record_ttft(Duration::from_millis(ms)));
        assert_eq!(p.ttft_p95(), Some(Duration::from_millis(95)));
    }
}
