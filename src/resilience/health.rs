//! The state baton keeps per provider between requests, shared by all routes
//! and kept across config reloads: breaker, rate-limit cooldown, recent times
//! to first token, attempt counts and streams in flight.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::Breaker;
use super::outage::Outages;
use super::window::{MinuteWindow, Tally};
use crate::config::BreakerSettings;

/// How many recent times to first token are kept per provider.
const TTFT_WINDOW: usize = 100;
/// Fewer samples than this give no p95 for automatic hedging.
const TTFT_MIN_SAMPLES: usize = 10;

/// One provider's shared state.
#[derive(Debug)]
pub struct ProviderHealth {
    /// Skips the provider while it keeps failing.
    pub breaker: Arc<Breaker>,
    rate_limited_until: Mutex<Option<Instant>>,
    /// A cooldown this replica was asked for that the cluster has not heard of yet.
    cooldown_news: Mutex<Option<Instant>>,
    ttft: Mutex<VecDeque<Duration>>,
    attempts: Mutex<MinuteWindow<Tally>>,
    last_failure: Mutex<Option<(&'static str, SystemTime)>>,
    outages: Mutex<Outages>,
    inflight: AtomicI64,
}

impl ProviderHealth {
    fn new(name: &str, settings: BreakerSettings) -> Self {
        ProviderHealth {
            breaker: Breaker::new(name, settings),
            rate_limited_until: Mutex::new(None),
            cooldown_news: Mutex::new(None),
            ttft: Mutex::new(VecDeque::with_capacity(TTFT_WINDOW)),
            attempts: Mutex::new(MinuteWindow::new()),
            last_failure: Mutex::new(None),
            outages: Mutex::new(Outages::default()),
            inflight: AtomicI64::new(0),
        }
    }

    /// Skips the provider until `until`, as a 429's `Retry-After` asked.
    pub fn rate_limit_until(&self, until: Instant) {
        self.cool_down(until);
        if let Ok(mut news) = self.cooldown_news.lock() {
            *news = Some(news.map_or(until, |n| n.max(until)));
        }
    }

    /// Skips the provider until `until`, as another replica was asked.
    pub fn rate_limit_remotely(&self, until: Instant) {
        self.cool_down(until);
    }

    fn cool_down(&self, until: Instant) {
        if let Ok(mut current) = self.rate_limited_until.lock() {
            *current = Some(current.map_or(until, |c| c.max(until)));
        }
    }

    /// The cooldown asked of this replica since the cluster last heard, if
    /// it has not ended.
    pub fn take_cooldown_news(&self) -> Option<Instant> {
        let news = self.cooldown_news.lock().ok()?.take()?;
        (news > Instant::now()).then_some(news)
    }

    /// Forgets a `Retry-After` cooldown: an operator's reload says the
    /// provider is to be tried again.
    pub fn clear_rate_limit(&self) {
        if let Ok(mut current) = self.rate_limited_until.lock() {
            *current = None;
        }
    }

    /// When the provider's rate limit ends, if it has not yet.
    pub fn rate_limited_until(&self) -> Option<Instant> {
        let until = (*self.rate_limited_until.lock().ok()?)?;
        (until > Instant::now()).then_some(until)
    }

    /// Counts one attempt: a success, or a failure of class `failure`,
    /// `own_fault` when it was the provider's (one the breaker is charged
    /// for), which is what makes an outage.
    pub fn record_attempt(&self, failure: Option<&'static str>, own_fault: bool) {
        if let Ok(mut attempts) = self.attempts.lock() {
            attempts.add(Tally { total: 1, ok: u64::from(failure.is_none()), failed: u64::from(failure.is_some()) });
        }
        if let (Some(class), Ok(mut last)) = (failure, self.last_failure.lock()) {
            *last = Some((class, SystemTime::now()));
        }
        if let Ok(mut outages) = self.outages.lock() {
            match failure {
                None => outages.answered(Instant::now()),
                Some(_) if own_fault => outages.failed(Instant::now()),
                Some(_) => {}
            }
        }
    }

    /// Whether the provider is up (see [`Outages`]), and the outages that
    /// ended since the last call, for the metrics.
    pub fn take_outages(&self) -> (bool, Vec<Duration>) {
        let open = self.breaker.state() == super::BreakerState::Open;
        match self.outages.lock() {
            Ok(mut outages) => (outages.is_up(open, Instant::now()), outages.take_ended()),
            Err(_) => (!open, Vec::new()),
        }
    }

    /// Attempts over the last `minutes` minutes.
    pub fn attempts(&self, minutes: u64) -> Tally {
        self.attempts.lock().map(|window| window.last(minutes)).unwrap_or_default()
    }

    /// The class and time of the last failed attempt.
    pub fn last_failure(&self) -> Option<(&'static str, SystemTime)> {
        *self.last_failure.lock().ok()?
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

    /// A percentile (0 to 1) of recent times to first token, if there are any.
    pub fn ttft_percentile(&self, q: f64) -> Option<Duration> {
        let mut samples: Vec<Duration> = self.ttft.lock().ok()?.iter().copied().collect();
        samples.sort_unstable();
        let rank = (samples.len() as f64 * q).ceil() as usize;
        samples.get(rank.saturating_sub(1)).copied()
    }

    /// The 95th percentile of recent times to first token, once there are
    /// enough to hedge on.
    pub fn ttft_p95(&self) -> Option<Duration> {
        let enough = self.ttft.lock().ok()?.len() >= TTFT_MIN_SAMPLES;
        self.ttft_percentile(0.95).filter(|_| enough)
    }

    /// A stream from this provider started reaching a client.
    pub fn stream_started(&self) {
        self.inflight.fetch_add(1, Ordering::Relaxed);
    }

    /// A stream from this provider ended, however it ended.
    pub fn stream_ended(&self) {
        self.inflight.fetch_sub(1, Ordering::Relaxed);
    }

    /// Streams from this provider reaching clients now.
    pub fn inflight(&self) -> i64 {
        self.inflight.load(Ordering::Relaxed)
    }
}

/// Every provider's state, by provider name.
#[derive(Debug, Default)]
pub struct Health {
    providers: RwLock<BTreeMap<String, Arc<ProviderHealth>>>,
}

impl Health {
    /// Fresh state for each `(name, breaker settings)`.
    pub fn new<'a>(providers: impl IntoIterator<Item = (&'a str, BreakerSettings)>) -> Self {
        let health = Health::default();
        health.reconcile(providers);
        health
    }

    /// Follows a reloaded config: providers that stay keep their state (with
    /// their new breaker settings, and without a `Retry-After` cooldown), new
    /// ones start fresh, removed ones go.
    pub fn reconcile<'a>(&self, providers: impl IntoIterator<Item = (&'a str, BreakerSettings)>) {
        let Ok(mut current) = self.providers.write() else { return };
        let mut next = BTreeMap::new();
        for (name, settings) in providers {
            let health = match current.remove(name) {
                Some(kept) => {
                    kept.breaker.reconfigure(settings);
                    kept.clear_rate_limit();
                    kept
                }
                None => Arc::new(ProviderHealth::new(name, settings)),
            };
            next.insert(name.to_owned(), health);
        }
        *current = next;
    }

    /// The state of provider `name`. A provider unknown here (one a reload
    /// removed while a request still used it) gets state of its own.
    pub fn provider(&self, name: &str) -> Arc<ProviderHealth> {
        let known = self.providers.read().ok().and_then(|providers| providers.get(name).cloned());
        known.unwrap_or_else(|| Arc::new(ProviderHealth::new(name, BreakerSettings::default())))
    }

    /// Every provider, by name.
    pub fn providers(&self) -> Vec<(String, Arc<ProviderHealth>)> {
        let providers = self.providers.read().map(|p| p.clone()).unwrap_or_default();
        providers.into_iter().collect()
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
        assert_eq!(p.ttft_percentile(0.5), Some(Duration::from_millis(5)));
        (10..=100).for_each(|ms| p.record_ttft(Duration::from_millis(ms)));
        assert_eq!(p.ttft_p95(), Some(Duration::from_millis(95)));
    }

    #[test]
    fn a_reload_keeps_the_state_of_providers_that_stay() {
        let health = Health::new([("kept", BreakerSettings::default()), ("gone", BreakerSettings::default())]);
        health.provider("kept").record_attempt(Some("http_5xx"), true);
        health.provider("kept").rate_limit_until(Instant::now() + Duration::from_secs(3600));
        health.reconcile([("kept", BreakerSettings::default()), ("new", BreakerSettings::default())]);
        let names: Vec<String> = health.providers().into_iter().map(|(name, _)| name).collect();
        assert_eq!(names, ["kept", "new"]);
        assert_eq!(health.provider("kept").attempts(1).failed, 1, "the kept provider remembers");
        assert_eq!(health.provider("kept").rate_limited_until(), None, "but forgets its cooldown");
        assert_eq!(health.provider("new").attempts(1).total, 0);
    }
}
