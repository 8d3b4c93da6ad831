//! The one way baton reaches shared state: a [`Store`] wraps a backend
//! with its availability. Each call is bounded by a short timeout; the
//! first failure marks the store down (logged once, `baton_state_backend_up
//! 0`), after which no request waits for it at all; settlements and spend
//! are batched and sent with the next sync, off the request's path.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::{Adjust, Limit, RedisState, SharedState, StateFuture, StateSignals};
use crate::config::{StateBackend, StateConfig};

/// A store with its availability: the one way baton reaches shared state.
pub struct Store {
    backend: Arc<dyn SharedState>,
    name: &'static str,
    timeout: Duration,
    up: AtomicBool,
    /// Times the store was lost after answering, for alerts.
    losses: AtomicU64,
    /// Where its availability is told: the proxy's metrics.
    signals: Arc<dyn StateSignals>,
    /// Settlements not yet sent, net per limit: units given back (negative)
    /// or charged (positive). Keyed by the config's key names only.
    unsettled: Mutex<HashMap<String, (u64, i128)>>,
    /// Spend per budget scope: what is not yet sent, and what the cluster
    /// had spent at the last sync.
    spend: Mutex<ScopeSpend>,
}

/// The spend of every scope a budget watches, as the store last told it.
#[derive(Default)]
struct ScopeSpend {
    unsent: HashMap<String, f64>,
    /// Every scope a budget checked, with its spend once a sync read it.
    cluster: HashMap<String, Option<[f64; 3]>>,
}

impl Store {
    /// The store `config` asks for; none for the memory backend, whose
    /// state is the per-process state every policy keeps anyway.
    /// Its availability is told to `signals`.
    pub fn from_config(config: &StateConfig, signals: Arc<dyn StateSignals>) -> Option<Arc<Store>> {
        match &config.backend {
            StateBackend::Memory => {
                signals.state_backend_up(true);
                None
            }
            StateBackend::Redis { url } => {
                let redis = RedisState::new(url, &config.key_prefix, config.timeout);
                Some(Store::new(Arc::new(redis), "redis", config.timeout, signals))
            }
        }
    }

    /// A store over `backend`, down until its first ping answers; its
    /// availability is told to `signals`.
    pub fn new(
        backend: Arc<dyn SharedState>,
        name: &'static str,
        timeout: Duration,
        signals: Arc<dyn StateSignals>,
    ) -> Arc<Store> {
        signals.state_backend_up(false);
        Arc::new(Store {
            backend,
            name,
            timeout,
            up: AtomicBool::new(false),
            losses: AtomicU64::new(0),
            signals,
            unsettled: Mutex::default(),
            spend: Mutex::default(),
        })
    }

    /// The backend's name, for the status.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// How many times the store was lost after it had answered.
    pub fn losses(&self) -> u64 {
        self.losses.load(Ordering::Relaxed)
    }

    /// Whether the last call answered in time.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// The store's answer, or none — at once while it is down, else after
    /// at most the timeout — so the caller goes on with its local state.
    pub async fn call<'a, T>(&'a self, call: impl FnOnce(&'a dyn SharedState) -> StateFuture<'a, T>) -> Option<T> {
        if !self.is_up() {
            return None;
        }
        match tokio::time::timeout(self.timeout, call(self.backend.as_ref())).await {
            Ok(Ok(answer)) => Some(answer),
            Ok(Err(err)) => {
                self.down(&err.0);
                None
            }
            Err(_) => {
                self.down(&format!("no answer within {} ms", self.timeout.as_millis()));
                None
            }
        }
    }

    /// Settles `limit`'s units so with the next sync, not on the request's
    /// path: a request costs the store one round trip, its take. While the
    /// store is down nothing is kept (the local limiters settle alone).
    pub fn settle_later(&self, limit: &Limit, how: Adjust) {
        if !self.is_up() || limit.amount == 0 {
            return;
        }
        let units = i128::from(limit.amount);
        let signed = match how {
            Adjust::GiveBack => -units,
            Adjust::Charge => units,
        };
        let mut unsettled = self.unsettled.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = unsettled.entry(limit.name.clone()).or_insert((limit.per_minute, 0));
        *entry = (limit.per_minute, entry.1.saturating_add(signed));
    }

    /// Sends every settlement kept since the last sync, in one round trip.
    pub(super) async fn settle(&self) {
        let unsettled = std::mem::take(&mut *self.unsettled.lock().unwrap_or_else(PoisonError::into_inner));
        let changes: Vec<(Limit, Adjust)> = unsettled
            .into_iter()
            .filter(|(_, (_, net))| *net != 0)
            .map(|(name, (per_minute, net))| {
                let amount = u64::try_from(net.unsigned_abs()).unwrap_or(u64::MAX);
                let how = if net < 0 { Adjust::GiveBack } else { Adjust::Charge };
                (Limit { name, per_minute, amount }, how)
            })
            .collect();
        if !changes.is_empty() {
            self.call(|state| state.adjust(&changes)).await;
        }
    }

    /// Adds `usd` spent on `scope`, to be sent with the next sync.
    pub fn spend_later(&self, scope: &str, usd: f64) {
        if !self.is_up() {
            return;
        }
        let mut spend = self.spend.lock().unwrap_or_else(PoisonError::into_inner);
        *spend.unsent.entry(scope.to_owned()).or_default() += usd;
    }

    /// What the cluster has spent on `scope` over each window, as of the
    /// last sync plus this replica's spend since; none while the store is
    /// down, or before a budget on the scope was first checked (it is read
    /// from the next sync on).
    pub fn cluster_spend(&self, scope: &str) -> Option<[f64; 3]> {
        if !self.is_up() {
            return None;
        }
        let mut spend = self.spend.lock().unwrap_or_else(PoisonError::into_inner);
        let unsent = spend.unsent.get(scope).copied().unwrap_or(0.0);
        match spend.cluster.get(scope) {
            Some(windows) => windows.map(|windows| windows.map(|usd| usd + unsent)),
            None => {
                spend.cluster.insert(scope.to_owned(), None);
                None
            }
        }
    }

    /// Sends the spend kept since the last sync and reads every watched
    /// scope's, in one round trip; spend that could not be sent is dropped
    /// (each replica's own windows still count it).
    pub(super) async fn sync_spend(&self) {
        let scopes: Vec<(String, f64)> = {
            let mut spend = self.spend.lock().unwrap_or_else(PoisonError::into_inner);
            let mut unsent = std::mem::take(&mut spend.unsent);
            let watched: Vec<String> = spend.cluster.keys().cloned().collect();
            watched.iter().for_each(|scope| {
                unsent.entry(scope.clone()).or_insert(0.0);
            });
            unsent.into_iter().collect()
        };
        if scopes.is_empty() {
            return;
        }
        if let Some(totals) = self.call(|state| state.spend(&scopes)).await {
            let mut spend = self.spend.lock().unwrap_or_else(PoisonError::into_inner);
            for ((scope, _), windows) in scopes.into_iter().zip(totals) {
                spend.cluster.insert(scope, Some(windows));
            }
        }
    }

    /// Marks the store down, logging only the change.
    fn down(&self, why: &str) {
        if self.up.swap(false, Ordering::Relaxed) {
            self.losses.fetch_add(1, Ordering::Relaxed);
            self.signals.state_backend_up(false);
            tracing::warn!(
                backend = self.name,
                error = why,
                "shared state unavailable: each replica uses its local state until it is back"
            );
        }
    }

    /// Pings a store that is down; marks it up, logging the change, when it answers.
    pub(super) async fn rejoin(&self) -> bool {
        if self.is_up() {
            return false;
        }
        let answered = tokio::time::timeout(self.timeout, self.backend.ping()).await;
        let up = matches!(answered, Ok(Ok(())));
        if up && !self.up.swap(true, Ordering::Relaxed) {
            self.signals.state_backend_up(true);
            tracing::info!(backend = self.name, "shared state reachable: limits and breakers are shared again");
        }
        up
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{MemoryState, ProviderReport, ProviderView, SaidUp, Taken};

    /// A store that can be made slow: it answers after `delay`.
    struct Slow {
        inner: MemoryState,
        delay: std::sync::Mutex<Duration>,
    }

    impl Slow {
        fn answer_after<'a, T: Send + 'a>(&'a self, call: StateFuture<'a, T>) -> StateFuture<'a, T> {
            let delay = *self.delay.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                call.await
            })
        }
    }

    impl SharedState for Slow {
        fn take<'a>(&'a self, limits: &'a [Limit]) -> StateFuture<'a, Taken> {
            self.answer_after(self.inner.take(limits))
        }
        fn adjust<'a>(&'a self, changes: &'a [(Limit, Adjust)]) -> StateFuture<'a, ()> {
            self.answer_after(self.inner.adjust(changes))
        }
        fn sync_providers<'a>(&'a self, reports: &'a [ProviderReport]) -> StateFuture<'a, Vec<ProviderView>> {
            self.answer_after(self.inner.sync_providers(reports))
        }
        fn spend<'a>(&'a self, scopes: &'a [(String, f64)]) -> StateFuture<'a, Vec<[f64; 3]>> {
            self.answer_after(self.inner.spend(scopes))
        }
        fn ping(&self) -> StateFuture<'_, ()> {
            self.answer_after(self.inner.ping())
        }
        fn lease<'a>(&'a self, name: &'a str, ttl: Duration) -> StateFuture<'a, bool> {
            self.answer_after(self.inner.lease(name, ttl))
        }
        fn used<'a>(&'a self, limits: &'a [Limit]) -> StateFuture<'a, Vec<f64>> {
            self.answer_after(self.inner.used(limits))
        }
    }

    fn limit(amount: u64) -> Vec<Limit> {
        vec![Limit { name: "key:web:rpm".into(), per_minute: 2, amount }]
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_store_costs_one_timeout_then_nothing_until_it_answers_again() {
        let slow = Arc::new(Slow { inner: MemoryState::new(), delay: std::sync::Mutex::new(Duration::ZERO) });
        let said = Arc::new(SaidUp::default());
        let store = Store::new(
            Arc::clone(&slow) as Arc<dyn SharedState>,
            "test",
            Duration::from_millis(50),
            Arc::clone(&said) as Arc<dyn StateSignals>,
        );
        assert!(!store.is_up(), "down until a ping answers");
        assert!(store.rejoin().await);
        assert_eq!(said.last(), Some(true), "the store is said to be up once a ping answers");
        let limits = limit(1);
        assert_eq!(store.call(|state| state.take(&limits)).await, Some(Taken::Admitted));

        *slow.delay.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Duration::from_secs(5);
        let started = tokio::time::Instant::now();
        assert_eq!(store.call(|state| state.take(&limits)).await, None, "past the timeout the caller goes on alone");
        assert_eq!(started.elapsed(), Duration::from_millis(50));
        assert_eq!(said.last(), Some(false), "the store is said to be down once a call times out");
        let started = tokio::time::Instant::now();
        assert_eq!(store.call(|state| state.take(&limits)).await, None);
        assert_eq!(started.elapsed(), Duration::ZERO, "while down, no call waits for the store");
        assert!(!store.rejoin().await, "a ping past the timeout does not re-join");

        *slow.delay.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Duration::ZERO;
        assert!(store.rejoin().await);
        assert_eq!(said.last(), Some(true), "the store is said to be up again once it re-joins");
        assert_eq!(store.call(|state| state.take(&limits)).await, Some(Taken::Admitted), "the second of 2 per minute");
        let refused = store.call(|state| state.take(&limits)).await;
        assert!(matches!(refused, Some(Taken::Refused { index: 0, .. })), "the shared count held: {refused:?}");
    }
}
