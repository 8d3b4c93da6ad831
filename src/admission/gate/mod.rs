//! The request-level gate: once per request, before any candidate is
//! tried, a client key's `rpm`/`tpm`, the budgets that cover the request
//! and the per-request cost cap admit it (perhaps on a cheaper route, or
//! on the targets whose estimate fits) or refuse it. The per-candidate
//! [`Policy`](super::Policy) chain decides once per attempt and settles
//! per attempt; this gate's ticket is settled once, when the request ends
//! (streamed or not), with the usage and cost of the whole answer.

mod tally;
mod ticket;

use std::sync::{Arc, Mutex, PoisonError};

use tokio::time::Instant;

pub use tally::{KeyUse, SpendView};
pub use ticket::GateTicket;

use super::Refusal;
use super::shared::take_key_limits;
use crate::access::ClientKey;
use crate::config::{Budget, BudgetAction, BudgetScope, Config, Route};
use crate::event::ChatRequest;
use crate::limits::BudgetWindow;
use crate::observe::Metrics;
use crate::state::Store;
use tally::Tally;

/// The gate, shared by every request; it outlives config reloads, keeping
/// each key's and scope's state by name.
pub struct RequestGate {
    tally: Arc<Mutex<Tally>>,
    metrics: Arc<Metrics>,
    /// Where keys' limits and budget spend are shared with other replicas, if they are.
    store: Option<Arc<Store>>,
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

impl RequestGate {
    /// A gate with no history, counting budget events in `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        RequestGate { tally: Arc::default(), metrics, store: None }
    }

    /// The same gate, sharing keys' limits and budget spend with other replicas through `store`.
    pub fn with_store(mut self, store: Option<Arc<Store>>) -> Self {
        self.store = store;
        self
    }

    /// Admits `request` from `key` on `route` under `config`'s budgets, or
    /// refuses it, by this replica's own limits. Nothing is taken from any
    /// limit unless it is admitted.
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
        let mut tally = self.tally.lock().unwrap_or_else(PoisonError::into_inner);
        tally.ensure(key, &route.model);
        let mut served = Arc::clone(route);
        let mut downgraded_from = None;
        for budget in config.budgets.applying(key_name, &route.model) {
            if let Some(to) = self.check(&mut tally, budget, now)?
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
            tally.ensure(None, &served.model);
            let scope = BudgetScope::Route(served.model.clone());
            for budget in config.budgets.budgets.iter().filter(|budget| budget.scope == scope) {
                self.check(&mut tally, budget, now)?;
            }
        }
        if capped && let Some(cap) = config.budgets.max_usd_per_request(key_name, &served.model) {
            served = fitting(&served, cap, input, request.output_reserve())?;
        }
        if let Some(key) = key {
            tally.take(key, reserved, now)?;
        }
        let ticket = GateTicket { tally: Arc::clone(&self.tally), reserved, shared: None, store: self.store.clone() };
        Ok(Admitted { route: served, downgraded_from, ticket })
    }

    /// [`RequestGate::admit`], then, with a shared store that answers in
    /// time, the key's limits across every replica. A request never waits
    /// longer than the store's timeout for it, and never fails because of it.
    pub async fn admit_shared(
        &self,
        config: &Config,
        key: Option<&ClientKey>,
        route: &Arc<Route>,
        request: &ChatRequest,
    ) -> Result<Admitted, Refusal> {
        let mut admitted = self.admit(config, key, route, request)?;
        let (Some(store), Some(key)) = (&self.store, key) else { return Ok(admitted) };
        let reserved = admitted.ticket.reserved;
        match take_key_limits(store, key, reserved).await {
            Ok(shared) => {
                admitted.ticket.shared = shared;
                Ok(admitted)
            }
            Err(refusal) => {
                let mut tally = self.tally.lock().unwrap_or_else(PoisonError::into_inner);
                tally.release(key, reserved, Instant::now());
                Err(refusal)
            }
        }
    }

    /// Checks one budget: a spent one blocks (an error), downgrades (the
    /// route to move to) or warns, once per window.
    fn check<'b>(&self, tally: &mut Tally, budget: &'b Budget, now: Instant) -> Result<Option<&'b str>, Refusal> {
        let Some(spend) = tally.spend(&budget.scope) else { return Ok(None) };
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
        let mut tally = self.tally.lock().unwrap_or_else(PoisonError::into_inner);
        for entry in spent {
            let windows: &[BudgetWindow] = match entry.resolution {
                Resolution::Second => &[BudgetWindow::Minute],
                Resolution::Minute => &[BudgetWindow::Hour, BudgetWindow::Day],
            };
            let usd = entry.usd;
            if !(usd.is_finite() && usd > 0.0) {
                continue;
            }
            tally.global.add_past(usd, entry.age, windows, now);
            if let Some(key) = &entry.key {
                tally.keys.entry(key.clone()).or_default().spend.add_past(usd, entry.age, windows, now);
            }
            if let Some(route) = &entry.route {
                tally.routes.entry(route.clone()).or_default().add_past(usd, entry.age, windows, now);
            }
        }
    }

    /// `key`'s limits and spend now.
    pub fn key_use(&self, key: &ClientKey) -> KeyUse {
        let mut tally = self.tally.lock().unwrap_or_else(PoisonError::into_inner);
        tally.key_use(key, Instant::now())
    }

    /// What `scope` has spent.
    pub fn spend(&self, scope: &BudgetScope) -> SpendView {
        let mut tally = self.tally.lock().unwrap_or_else(PoisonError::into_inner);
        tally.spend_view(scope, Instant::now())
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
        let tally = self.tally.lock().unwrap_or_else(PoisonError::into_inner);
        tally.providers.get(provider).copied().unwrap_or(0.0)
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

#[cfg(test)]
mod tests;
