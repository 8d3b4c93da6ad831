//! The request-level gate: once per request, before any candidate is
//! tried, a client key's `rpm`/`tpm`, the budgets that cover the request
//! and the per-request cost cap admit it (perhaps on a cheaper route, or
//! on the targets whose estimate fits) or refuse it. The per-candidate
//! [`Policy`](super::Policy) chain decides once per attempt and settles
//! per attempt; this gate's ticket is settled once, when the request ends
//! (streamed or not), with the usage and cost of the whole answer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::gcra::Gcra;
use super::spend::Spend;
use crate::access::ClientKey;
use crate::config::{Budget, BudgetAction, BudgetScope, BudgetWindow, Config, Route, add_usd};
use crate::event::ChatRequest;
use crate::observe::{Ended, Metrics, Settle};
use crate::state::Store;

/// Every key's limiters and every scope's spend. Its maps are keyed by
/// names from the config only (keys, routes, providers), so they stay as
/// small as the config.
#[derive(Default)]
struct State {
    keys: HashMap<String, KeyState>,
    routes: HashMap<String, Spend>,
    providers: HashMap<String, f64>,
    global: Spend,
}

/// One key's limiters, with the limits they were made for, and its spend.
#[derive(Default)]
struct KeyState {
    limits: (Option<u64>, Option<u64>),
    requests: Option<Gcra>,
    tokens: Option<Gcra>,
    spend: Spend,
}

/// The gate, shared by every request; it outlives config reloads, keeping
/// each key's and scope's state by name.
pub struct RequestGate {
    state: Arc<Mutex<State>>,
    metrics: Arc<Metrics>,
    /// Where keys' limits and budget spend are shared with other replicas, if they are.
    pub(super) store: Option<Arc<Store>>,
}

/// A request let through.
pub struct Admitted {
    /// The route to serve it: the one asked for, a budget's `downgrade_to`,
    /// or either with only the targets whose estimate fits the cost cap.
    pub route: Arc<Route>,
    /// The route asked for, when a budget moved the request off it.
    pub downgraded_from: Option<String>,
    /// What the request holds until it ends.
    pub ticket: GateTicket,
}

/// Why a request is refused before any provider is tried.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// The key is over its `rpm` or `tpm`.
    RateLimited {
        /// The key's name.
        key: String,
        /// `"requests"` or `"tokens"`.
        unit: &'static str,
        /// Its limit per minute.
        per_minute: u64,
        /// When it would fit; none when it never can (more tokens than the limit).
        retry_after: Option<Duration>,
    },
    /// A blocking budget is spent.
    BudgetExceeded {
        /// Its scope, as written in the config.
        scope: String,
        /// Its window's name.
        window: &'static str,
        /// Its limit.
        usd: f64,
        /// What was spent over the window.
        spent: f64,
        /// When enough of that spend leaves the window.
        retry_after: Option<Duration>,
    },
    /// No target's estimate fits `max_usd_per_request`.
    OverCostCap {
        /// The route asked for.
        route: String,
        /// The cheapest target's estimate.
        estimate: f64,
        /// The cap.
        cap: f64,
    },
}

impl Refusal {
    /// The request's outcome, for metrics and the request log.
    pub fn kind(&self) -> &'static str {
        match self {
            Refusal::RateLimited { .. } => "key_rate_limited",
            Refusal::BudgetExceeded { .. } => "budget_exceeded",
            Refusal::OverCostCap { .. } => "over_cost_cap",
        }
    }

    /// How long the client should wait before asking again, when waiting helps.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Refusal::RateLimited { retry_after, .. } | Refusal::BudgetExceeded { retry_after, .. } => *retry_after,
            Refusal::OverCostCap { .. } => None,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::RateLimited { key, unit, per_minute, retry_after: Some(_) } => {
                write!(f, "the API key {key:?} is over its limit of {per_minute} {unit} per minute")
            }
            Refusal::RateLimited { key, unit, per_minute, retry_after: None } => write!(
                f,
                "this request needs more {unit} than the API key {key:?} may use in a minute ({per_minute}); lower max_tokens or shorten it"
            ),
            Refusal::BudgetExceeded { scope, window, usd, spent, .. } => {
                write!(f, "budget exceeded: {scope} has spent ${spent:.4} of its ${usd:.2} over the last {window}")
            }
            Refusal::OverCostCap { route, estimate, cap } => write!(
                f,
                "this request's estimated cost of ${estimate:.4} is above max_usd_per_request ${cap:.4} on every target of route {route:?}; lower max_tokens or shorten it"
            ),
        }
    }
}

/// A key's limits and spend now, for the status page.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KeyUse {
    /// Requests it could send at once now, when it has an `rpm`.
    pub requests_available: Option<u64>,
    /// Tokens it could reserve at once now, when it has a `tpm`.
    pub tokens_available: Option<u64>,
    /// What it has spent.
    pub spend: SpendView,
}

/// A scope's spend now.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SpendView {
    /// Since baton started.
    pub total_usd: f64,
    /// Over the last minute, hour and day ([`BudgetWindow::ALL`]'s order).
    pub windows: [f64; 3],
}

impl RequestGate {
    /// A gate with no history, counting budget events in `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        RequestGate { state: Arc::default(), metrics, store: None }
    }

    /// The same gate, sharing keys' limits and budget spend with other replicas through `store`.
    pub fn with_store(mut self, store: Option<Arc<Store>>) -> Self {
        self.store = store;
        self
    }

    /// Admits `request` from `key` on `route` under `config`'s budgets, or
    /// refuses it. Nothing is taken from any limit unless it is admitted.
    pub fn admit(
        &self,
        config: &Config,
        key: Option<&ClientKey>,
        route: &Arc<Route>,
        request: &ChatRequest,
    ) -> Result<Admitted, Refusal> {
        let key_name = key.map(|key| key.name.as_str());
        let capped = !config.budgets.caps.is_empty();
        let wants_tokens = key.is_some_and(|key| key.tpm.is_some());
        // The estimate walks the whole request: made outside the lock, and only when needed.
        let input = if capped || wants_tokens { request.estimated_input_tokens() } else { 0 };
        let reserved = if wants_tokens { input.saturating_add(request.output_reserve()) } else { 0 };
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.ensure(key, &route.model);
        let mut served = Arc::clone(route);
        let mut downgraded_from = None;
        for budget in config.budgets.applying(key_name, &route.model) {
            if let Some(to) = self.check(&mut state, budget, now)?
                && downgraded_from.is_none()
                && let Some(to) = config.route(to)
            {
                tracing::info!(key = key_name, from = %route.model, to = %to.model, scope = %budget.scope, window = budget.window.label(), "budget spent: request downgraded");
                downgraded_from = Some(route.model.clone());
                served = Arc::clone(to);
            }
        }
        if downgraded_from.is_some() {
            // The new route's own budgets still hold; one downgrade per request.
            state.ensure(None, &served.model);
            let scope = BudgetScope::Route(served.model.clone());
            for budget in config.budgets.budgets.iter().filter(|budget| budget.scope == scope) {
                self.check(&mut state, budget, now)?;
            }
        }
        if capped && let Some(cap) = config.budgets.max_usd_per_request(key_name, &served.model) {
            served = fitting(&served, cap, input, request.output_reserve())?;
        }
        if let Some(key) = key {
            state.take(key, reserved, now)?;
        }
        Ok(Admitted {
            route: served,
            downgraded_from,
            ticket: GateTicket { state: Arc::clone(&self.state), reserved, shared: None, store: self.store.clone() },
        })
    }

    /// Checks one budget: a spent one blocks (an error), downgrades (the
    /// route to move to) or warns, once per window.
    fn check<'b>(&self, state: &mut State, budget: &'b Budget, now: Instant) -> Result<Option<&'b str>, Refusal> {
        let Some(spend) = state.spend(&budget.scope) else { return Ok(None) };
        let mut spent = spend.over(budget.window, now);
        if let Some(cluster) = self.store.as_ref().and_then(|store| store.cluster_spend(&budget.scope.to_string())) {
            // What every replica spent; this one's own windows are part of it,
            // and stay the floor (the cluster's is up to one sync old).
            spent = spent.max(cluster[budget.window.index()]);
        }
        if spent < budget.usd {
            return Ok(None);
        }
        let window = budget.window.label();
        self.metrics.budget_exceeded(budget.scope.to_string(), window, budget.action.label());
        match &budget.action {
            BudgetAction::Block => Err(Refusal::BudgetExceeded {
                scope: budget.scope.to_string(),
                window,
                usd: budget.usd,
                spent,
                retry_after: spend.wait_below(budget.window, budget.usd, now),
            }),
            BudgetAction::Downgrade(to) => Ok(Some(to)),
            BudgetAction::Warn => {
                if spend.warn_due(budget.window, now) {
                    tracing::warn!(scope = %budget.scope, window, usd = budget.usd, spent, "budget spent: requests go on (action warn)");
                }
                Ok(None)
            }
        }
    }

    /// Loads what the ledger says was spent before this start into the
    /// windows budgets check (global, each key's, each route's), so a
    /// restart resets no budget. The totals since start stay this run's.
    pub fn seed(&self, spent: &[crate::store::Spent]) {
        use crate::store::ledger::Resolution;
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        for entry in spent {
            let windows: &[BudgetWindow] = match entry.resolution {
                Resolution::Second => &[BudgetWindow::Minute],
                Resolution::Minute => &[BudgetWindow::Hour, BudgetWindow::Day],
            };
            let usd = entry.usd;
            if !(usd.is_finite() && usd > 0.0) {
                continue;
            }
            state.global.add_past(usd, entry.age, windows, now);
            if let Some(key) = &entry.key {
                state.keys.entry(key.clone()).or_default().spend.add_past(usd, entry.age, windows, now);
            }
            if let Some(route) = &entry.route {
                state.routes.entry(route.clone()).or_default().add_past(usd, entry.age, windows, now);
            }
        }
    }

    /// Gives back the request and the `reserved` tokens `key`'s local
    /// limiters took for a request the shared limits then refused.
    pub(super) fn release(&self, key: &ClientKey, reserved: u64) {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(known) = state.keys.get_mut(&key.name) else { return };
        if let Some(requests) = &mut known.requests {
            requests.give_back(1, now);
        }
        if let Some(tokens) = &mut known.tokens {
            tokens.give_back(reserved, now);
        }
    }

    /// `key`'s limits and spend now.
    pub fn key_use(&self, key: &ClientKey) -> KeyUse {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let current = state.keys.get_mut(&key.name).filter(|known| known.limits == (key.rpm, key.tpm));
        match current {
            Some(known) => KeyUse {
                requests_available: known.requests.as_ref().map(|gcra| gcra.available(now)),
                tokens_available: known.tokens.as_ref().map(|gcra| gcra.available(now)),
                spend: view(&mut known.spend, now),
            },
            None => KeyUse {
                requests_available: key.rpm,
                tokens_available: key.tpm,
                spend: state.keys.get_mut(&key.name).map(|known| view(&mut known.spend, now)).unwrap_or_default(),
            },
        }
    }

    /// What `scope` has spent.
    pub fn spend(&self, scope: &BudgetScope) -> SpendView {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.spend(scope).map(|spend| view(spend, now)).unwrap_or_default()
    }

    /// What `budget`'s scope has spent over its window, as the budget sees
    /// it, and whether that is every replica's spend: the larger of this
    /// replica's and the cluster's when a shared store has told it, this
    /// replica's alone otherwise.
    pub fn budget_spend(&self, budget: &Budget) -> (f64, bool) {
        let own = self.spend(&budget.scope).windows[budget.window.index()];
        let cluster = self.store.as_ref().and_then(|store| store.cluster_spend(&budget.scope.to_string()));
        match cluster {
            Some(cluster) => (own.max(cluster[budget.window.index()]), true),
            None => (own, false),
        }
    }

    /// What answers from `provider` have cost since baton started.
    pub fn provider_spend(&self, provider: &str) -> f64 {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.providers.get(provider).copied().unwrap_or(0.0)
    }
}

/// `route` with only the targets whose estimate fits `cap` (an unpriced
/// target is not estimated, so it fits), or the refusal when none does.
fn fitting(route: &Arc<Route>, cap: f64, input: u64, output: u64) -> Result<Arc<Route>, Refusal> {
    let estimate = |target: &crate::config::Target| target.price.map_or(0.0, |price| price.estimate(input, output));
    if route.targets.iter().all(|target| estimate(target) <= cap) {
        return Ok(Arc::clone(route));
    }
    let targets: Vec<_> = route.targets.iter().filter(|target| estimate(target) <= cap).cloned().collect();
    if targets.is_empty() {
        let cheapest = route.targets.iter().map(estimate).fold(f64::MAX, f64::min);
        return Err(Refusal::OverCostCap { route: route.model.clone(), estimate: cheapest, cap });
    }
    Ok(Arc::new(Route { targets, ..Route::clone(route) }))
}

fn view(spend: &mut Spend, now: Instant) -> SpendView {
    SpendView { total_usd: spend.total(), windows: BudgetWindow::ALL.map(|window| spend.over(window, now)) }
}

impl State {
    /// Makes room for `key` and `route`: a name is copied only the first time.
    fn ensure(&mut self, key: Option<&ClientKey>, route: &str) {
        if let Some(key) = key
            && !self.keys.contains_key(&key.name)
        {
            self.keys.insert(key.name.clone(), KeyState::default());
        }
        if !self.routes.contains_key(route) {
            self.routes.insert(route.to_owned(), Spend::default());
        }
    }

    fn spend(&mut self, scope: &BudgetScope) -> Option<&mut Spend> {
        match scope {
            BudgetScope::Global => Some(&mut self.global),
            BudgetScope::Key(name) => self.keys.get_mut(name).map(|key| &mut key.spend),
            BudgetScope::Route(name) => self.routes.get_mut(name),
        }
    }

    /// Takes one request and `reserved` tokens from `key`'s limits, or
    /// neither when either has no room.
    fn take(&mut self, key: &ClientKey, reserved: u64, now: Instant) -> Result<(), Refusal> {
        let Some(state) = self.keys.get_mut(&key.name) else { return Ok(()) };
        let limits = (key.rpm, key.tpm);
        if state.limits != limits {
            state.limits = limits;
            state.requests = key.rpm.map(Gcra::per_minute);
            state.tokens = key.tpm.map(Gcra::per_minute);
        }
        let refuse = |unit, per_minute, retry_after| Refusal::RateLimited {
            key: key.name.clone(),
            unit,
            per_minute,
            retry_after,
        };
        let mut requests = state.requests.clone();
        if let (Some(gcra), Some(rpm)) = (&mut requests, key.rpm) {
            gcra.take(1, now).map_err(|wait| refuse("requests", rpm, Some(wait)))?;
        }
        if let (Some(gcra), Some(tpm)) = (&mut state.tokens, key.tpm) {
            if reserved > tpm {
                return Err(refuse("tokens", tpm, None));
            }
            gcra.take(reserved, now).map_err(|wait| refuse("tokens", tpm, Some(wait)))?;
        }
        state.requests = requests;
        Ok(())
    }
}

/// What one admitted request holds: its key's token reservation, and the
/// spend its answer will be charged.
pub struct GateTicket {
    state: Arc<Mutex<State>>,
    pub(super) reserved: u64,
    /// The key's token reservation in the shared store, when it was made there.
    pub(super) shared: Option<super::shared::SharedTokens>,
    /// Where the spend is shared with other replicas, if it is.
    store: Option<Arc<Store>>,
}

impl Settle for GateTicket {
    /// The reserved tokens are replaced by the usage reported; with none
    /// reported, an answer that committed keeps its reservation (it was
    /// generating) and one that never did gives it back. The cost is
    /// charged to the global, key, route and provider spend.
    fn settle(self: Box<Self>, ended: &Ended<'_>) {
        if let Some(shared) = &self.shared {
            shared.settle(self.reserved, ended);
        }
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let key = ended.key.and_then(|key| state.keys.get_mut(key));
        if let Some(tokens) = key.and_then(|key| key.tokens.as_mut()) {
            if let Some(used) = ended.usage.reported_tokens() {
                tokens.settle(self.reserved, used, now);
            } else if !ended.committed {
                tokens.give_back(self.reserved, now);
            }
        }
        let Some(cost) = ended.cost_usd else { return };
        if let Some(store) = &self.store {
            store.spend_later(&BudgetScope::Global.to_string(), cost);
            if let Some(key) = ended.key {
                store.spend_later(&BudgetScope::Key(key.to_owned()).to_string(), cost);
            }
            store.spend_later(&BudgetScope::Route(ended.route.to_owned()).to_string(), cost);
        }
        state.global.add(cost, now);
        if let Some(key) = ended.key.and_then(|key| state.keys.get_mut(key)) {
            key.spend.add(cost, now);
        }
        if let Some(route) = state.routes.get_mut(ended.route) {
            route.add(cost, now);
        }
        if let Some(provider) = ended.provider {
            match state.providers.get_mut(provider) {
                Some(total) => *total = add_usd(*total, cost),
                None => {
                    state.providers.insert(provider.to_owned(), cost);
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "gate_tests.rs"]
mod tests;
