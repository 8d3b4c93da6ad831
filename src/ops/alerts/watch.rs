//! The alerts that come from state rather than from one request: a task
//! looks every [`WATCH_EVERY`] at what the breakers decided (counts, so no
//! transition is missed however quick), at whether the shared state was
//! lost, and at each budget's spend against 80 % and 100 % of it. The
//! database store tells its own going down, through [`StoreAlerts`].

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};

use super::{Alert, Alerts};
use crate::admission::RequestGate;
use crate::config::{AlertEvent, Budget};
use crate::observe::Metrics;
use crate::resilience::Health;
use crate::resilience::breaker::Decided;
use crate::state::Store;
use crate::store::Keyring;
use crate::store::StoreSignals;

/// How often the watcher looks: an opening is told within this.
pub const WATCH_EVERY: Duration = Duration::from_millis(250);
/// How long a shared state that never answered since start is given
/// before `state_down` says so.
const STATE_START_GRACE: Duration = Duration::from_secs(10);
/// The shares of a budget that raise `budget_threshold`, in percent.
const THRESHOLDS: [u8; 2] = [80, 100];

/// What the watcher looks at; it ends once `health` (the engine) is gone.
pub struct Watched {
    /// Every provider's breaker.
    pub health: Weak<Health>,
    /// Budget spend.
    pub gate: Arc<RequestGate>,
    /// The config in force, for its budgets.
    pub config: Arc<Keyring>,
    /// The shared state, when there is one.
    pub store: Option<Arc<Store>>,
}

/// What the watcher has already told.
#[derive(Default)]
struct Seen {
    breakers: HashMap<String, Decided>,
    losses: u64,
    state_answered: bool,
    told_unreachable: bool,
    /// When each budget (scope, window) last raised each threshold.
    budgets: HashMap<(String, &'static str), [Option<Instant>; 2]>,
}

impl Watched {
    /// Starts watching on the current runtime, when `alerts` go anywhere.
    pub fn spawn(self, alerts: Alerts) {
        if !alerts.is_on() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        runtime.spawn(async move {
            let started = Instant::now();
            let mut seen = Seen::default();
            let breakers = alerts.wants(AlertEvent::BreakerOpen) || alerts.wants(AlertEvent::BreakerClosed);
            let state = alerts.wants(AlertEvent::StateDown);
            let mut tick = tokio::time::interval(WATCH_EVERY);
            tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(health) = self.health.upgrade() else { return };
                if breakers {
                    seen.breakers(&health, &alerts);
                }
                drop(health);
                if let Some(store) = self.store.as_ref().filter(|_| state) {
                    seen.state(store, started, &alerts);
                }
                if alerts.wants(AlertEvent::BudgetThreshold) {
                    seen.budgets(&self.config.config().budgets.budgets, &self.gate, &alerts);
                }
            }
        });
    }
}

impl Seen {
    /// Tells each opening and closing decided since the last look (a
    /// provider first seen starts from what it has decided by then).
    fn breakers(&mut self, health: &Health, alerts: &Alerts) {
        for (name, provider) in health.providers() {
            let now = provider.breaker.decided();
            let before = *self.breakers.entry(name.clone()).or_insert(now);
            let (opened, closed) = (now.opened > before.opened, now.closed > before.closed);
            let open = || {
                let class = provider.last_failure().map(|(class, _)| class);
                alerts.raise(Alert::breaker_open(&name, provider.breaker.cooldown(), class));
            };
            let close = || alerts.raise(Alert::breaker_closed(&name));
            match (opened, closed) {
                (true, true) if provider.breaker.state() == crate::resilience::BreakerState::Closed => {
                    open();
                    close();
                }
                (true, true) => {
                    close();
                    open();
                }
                (true, false) => open(),
                (false, true) => close(),
                (false, false) => {}
            }
            self.breakers.insert(name, now);
        }
    }

    /// Tells a shared state lost since the last look, or one that has not
    /// answered in the grace period after start.
    fn state(&mut self, store: &Store, started: Instant, alerts: &Alerts) {
        let losses = store.losses();
        if losses > self.losses {
            self.losses = losses;
            alerts.raise(Alert::state_down(store.name(), false));
        }
        self.state_answered |= store.is_up() || losses > 0;
        if !self.state_answered && !self.told_unreachable && started.elapsed() >= STATE_START_GRACE {
            self.told_unreachable = true;
            alerts.raise(Alert::state_down(store.name(), true));
        }
    }

    /// Tells each budget whose spend reached 80 % or 100 % of it, each
    /// threshold once per window: reaching 100 % tells that one only, and
    /// counts as having told 80 % too.
    fn budgets(&mut self, budgets: &[Budget], gate: &RequestGate, alerts: &Alerts) {
        let now = Instant::now();
        for budget in budgets.iter().filter(|budget| budget.usd > 0.0) {
            let (spent, _) = gate.budget_spend(budget);
            let Some(level) = THRESHOLDS.iter().rposition(|percent| spent >= budget.usd * f64::from(*percent) / 100.0)
            else {
                continue;
            };
            let window = budget.window.label();
            let told = self.budgets.entry((budget.scope.to_string(), window)).or_default();
            let due = told[level].is_none_or(|at| now.saturating_duration_since(at) >= budget.window.duration());
            if !due {
                continue;
            }
            told[..=level].iter_mut().for_each(|at| *at = Some(now));
            let scope = budget.scope.to_string();
            let percent = THRESHOLDS[level];
            alerts.raise(Alert::budget_threshold(&scope, window, percent, budget.usd, spent, budget.action.label()));
        }
    }
}

/// The store's signals, told to the metrics as before and, when the
/// database goes down, to the alerts.
pub struct StoreAlerts {
    /// Where the counts and the gauge go.
    pub metrics: Arc<Metrics>,
    /// Where `store_down` goes.
    pub alerts: Alerts,
    /// The store's backend, named in the alert.
    pub backend: &'static str,
}

impl StoreSignals for StoreAlerts {
    fn records_dropped(&self, rows: u64) {
        self.metrics.records_dropped(rows);
    }

    fn records_written(&self, rows: u64) {
        self.metrics.records_written(rows);
    }

    fn store_up(&self, up: bool) {
        self.metrics.store_up(up);
        if !up {
            self.alerts.raise(Alert::store_down(self.backend));
        }
    }
}
