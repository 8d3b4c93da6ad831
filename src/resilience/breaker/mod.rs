//! A circuit breaker per provider: after repeated failures the provider is
//! skipped for a cooldown, so a dead provider stops costing every request a
//! deadline; then exactly one probe request decides whether it is back.

mod permit;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use crate::clock::later;
use crate::config::BreakerSettings;
pub use permit::Permit;

/// The breaker's state, as operators and metrics see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Traffic flows.
    Closed,
    /// The provider is skipped until the cooldown ends.
    Open,
    /// One probe request is deciding.
    HalfOpen,
}

#[derive(Debug)]
enum Phase {
    Closed,
    Open { until: Instant },
    HalfOpen { probing: bool },
}

#[derive(Debug)]
struct State {
    settings: BreakerSettings,
    phase: Phase,
    consecutive_failures: u32,
    recent: VecDeque<bool>,
    cluster: Cluster,
    /// How often this replica's own breaker opened and closed, for alerts.
    decided: Decided,
}

/// Counts of the openings and closings a breaker decided itself (not those
/// learnt from another replica, which that replica counts): a watcher that
/// compares them misses no transition, however quick.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Decided {
    /// Times it opened (a re-opening after a failed probe included).
    pub opened: u64,
    /// Times it closed after being open.
    pub closed: u64,
}

/// What a breaker shared with other replicas keeps of the cluster.
#[derive(Debug, Default)]
struct Cluster {
    /// The breaker's openings and probes are shared now: a probe needs the
    /// cluster's leave. False with the memory backend, and while the shared
    /// store is unreachable (then every replica decides alone).
    shared: bool,
    /// This replica holds the cluster's one probe.
    probe_granted: bool,
    /// What this breaker decided that the cluster has not heard yet.
    news: Option<Transition>,
}

/// A decision of this replica's breaker, to be told to the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// It opened, until then.
    Opened {
        /// When its cooldown ends.
        until: Instant,
    },
    /// Its probe (or a forced attempt) succeeded: it closed.
    Closed,
}

/// One provider's breaker, shared by every route that uses the provider.
#[derive(Debug)]
pub struct Breaker {
    provider: String,
    state: Mutex<State>,
}

impl Breaker {
    /// A closed breaker for `provider`.
    pub fn new(provider: &str, settings: BreakerSettings) -> Arc<Self> {
        let state = State {
            settings,
            phase: Phase::Closed,
            consecutive_failures: 0,
            recent: VecDeque::new(),
            cluster: Cluster::default(),
            decided: Decided::default(),
        };
        Arc::new(Breaker { provider: provider.to_owned(), state: Mutex::new(state) })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes new settings (a reloaded config) and keeps the state.
    pub fn reconfigure(&self, settings: BreakerSettings) {
        self.lock().settings = settings;
    }

    /// The current state; an open breaker whose cooldown has passed reads as half-open.
    pub fn state(&self) -> BreakerState {
        match self.lock().phase {
            Phase::Closed => BreakerState::Closed,
            Phase::Open { until } if Instant::now() < until => BreakerState::Open,
            Phase::Open { .. } | Phase::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }

    /// The openings and closings this breaker decided so far.
    pub fn decided(&self) -> Decided {
        self.lock().decided
    }

    /// Leave to try the provider, or `None` while it is open or its one probe
    /// is already out.
    pub fn try_acquire(self: &Arc<Self>) -> Option<Permit> {
        let mut state = self.lock();
        let probe = match state.phase {
            Phase::Closed => false,
            Phase::Open { until } if Instant::now() < until => return None,
            Phase::HalfOpen { probing: true } => return None,
            // Another replica may be probing: only the cluster's leave lets one through.
            Phase::Open { .. } | Phase::HalfOpen { probing: false }
                if state.cluster.shared && !state.cluster.probe_granted =>
            {
                return None;
            }
            Phase::Open { .. } | Phase::HalfOpen { probing: false } => {
                if matches!(state.phase, Phase::Open { .. }) {
                    tracing::info!(provider = %self.provider, "breaker_half_open");
                }
                state.phase = Phase::HalfOpen { probing: true };
                true
            }
        };
        Some(Permit { breaker: Arc::clone(self), probe, forced: false, settled: false })
    }

    /// Leave to try the provider whatever its state, for a request that has
    /// no other candidate left: a route keeps answering when every breaker
    /// of it is open, as Envoy's panic threshold keeps a cluster answering.
    /// Its outcome decides like a probe's.
    pub fn force_acquire(self: &Arc<Self>) -> Permit {
        Permit { breaker: Arc::clone(self), probe: false, forced: true, settled: false }
    }

    /// When an open breaker lets its next probe through; now when it is not open.
    pub fn recovers_at(&self) -> Instant {
        match self.lock().phase {
            Phase::Open { until } => until,
            Phase::Closed | Phase::HalfOpen { .. } => Instant::now(),
        }
    }

    /// Records a provider failure outside a permit's life (a committed stream
    /// that broke later).
    pub fn record_failure(&self) {
        let mut state = self.lock();
        self.fail(&mut state, false);
    }

    fn succeed(&self, state: &mut State, probe: bool) {
        state.consecutive_failures = 0;
        self.remember(state, false);
        if probe || matches!(state.phase, Phase::HalfOpen { .. }) {
            let was_closed = matches!(state.phase, Phase::Closed);
            state.recent.clear();
            state.phase = Phase::Closed;
            state.cluster.probe_granted = false;
            state.cluster.news = Some(Transition::Closed);
            if !was_closed {
                state.decided.closed = state.decided.closed.saturating_add(1);
            }
            tracing::info!(provider = %self.provider, "breaker_closed");
        }
    }

    fn fail(&self, state: &mut State, probe: bool) {
        state.consecutive_failures = state.consecutive_failures.saturating_add(1);
        self.remember(state, true);
        let failures = state.recent.iter().filter(|failed| **failed).count();
        let settings = state.settings;
        let rate_exceeded = state.recent.len() >= settings.window
            && failures as f64 >= settings.failure_rate * state.recent.len() as f64;
        let should_open = match state.phase {
            Phase::Closed => state.consecutive_failures >= settings.failure_threshold || rate_exceeded,
            Phase::HalfOpen { .. } => probe,
            Phase::Open { .. } => false,
        };
        if should_open {
            let until = later(Instant::now(), settings.cooldown);
            state.phase = Phase::Open { until };
            state.cluster.probe_granted = false;
            state.cluster.news = Some(Transition::Opened { until });
            state.decided.opened = state.decided.opened.saturating_add(1);
            tracing::warn!(
                provider = %self.provider,
                cooldown_ms = u64::try_from(settings.cooldown.as_millis()).unwrap_or(u64::MAX),
                consecutive_failures = state.consecutive_failures,
                "breaker_open"
            );
        }
    }

    fn remember(&self, state: &mut State, failed: bool) {
        state.recent.push_back(failed);
        while state.recent.len() > state.settings.window {
            state.recent.pop_front();
        }
    }

    // What the shared-state sync sees and does: this replica's news goes to
    // the cluster, and the cluster's openings, probe and closings come back.

    /// Shares the breaker with the cluster, or (with the store unreachable)
    /// lets it decide alone again, probes included.
    pub fn share(&self, shared: bool) {
        let mut state = self.lock();
        state.cluster.shared = shared;
        if !shared {
            state.cluster.probe_granted = false;
        }
    }

    /// What this breaker decided since the cluster last heard.
    pub fn take_news(&self) -> Option<Transition> {
        self.lock().cluster.news.take()
    }

    /// Keeps `news` that could not be told, unless there is newer.
    pub fn keep_news(&self, news: Transition) {
        let mut state = self.lock();
        state.cluster.news.get_or_insert(news);
    }

    /// Its cooldown: how long a probe may hold the cluster's leave.
    pub fn cooldown(&self) -> Duration {
        self.lock().settings.cooldown
    }

    /// Whether its cooldown is over and it waits for the cluster's leave to probe.
    pub fn wants_probe(&self) -> bool {
        let state = self.lock();
        let due = match state.phase {
            Phase::Open { until } => Instant::now() >= until,
            Phase::HalfOpen { probing } => !probing,
            Phase::Closed => false,
        };
        due && state.cluster.shared && !state.cluster.probe_granted
    }

    /// The cluster's probe is this replica's: the next request may take it.
    pub fn grant_probe(&self) {
        let mut state = self.lock();
        if !matches!(state.phase, Phase::Closed) {
            state.cluster.probe_granted = true;
        }
    }

    /// Another replica opened the provider's breaker, for `left` more: it
    /// is open here too (unless this replica's own probe is out).
    pub fn open_remotely(&self, left: Duration) {
        let mut state = self.lock();
        let until = later(Instant::now(), left);
        match state.phase {
            Phase::HalfOpen { probing: true } => return,
            Phase::Open { until: current } if current >= until => return,
            Phase::Open { .. } => {}
            Phase::Closed | Phase::HalfOpen { probing: false } => {
                tracing::warn!(provider = %self.provider, cooldown_ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX), "breaker_open (by another replica)");
            }
        }
        state.phase = Phase::Open { until };
        state.cluster.probe_granted = false;
    }

    /// Another replica's probe succeeded: a breaker waiting for it closes.
    pub fn close_remotely(&self) {
        let mut state = self.lock();
        if matches!(state.phase, Phase::Open { .. } | Phase::HalfOpen { probing: false }) {
            state.phase = Phase::Closed;
            state.recent.clear();
            state.consecutive_failures = 0;
            state.cluster.probe_granted = false;
            tracing::info!(provider = %self.provider, "breaker_closed (by another replica's probe)");
        }
    }
}

#[cfg(test)]
mod tests;
