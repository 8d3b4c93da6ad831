//! Retry budgets: each route's requests earn it a share of retries, so that
//! during an outage retries cannot multiply the load on a failing provider.
//! As tower's `TpsBudget` and linkerd's retry budgets do, every request
//! deposits `percent` of a retry, every retry (or hedge) withdraws a whole
//! one, and a reserve of `min_per_second` retries a second keeps a quiet
//! route able to retry at all; both expire after [`WINDOW`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::config::{RetryBudgetSettings, Route};

/// How long a deposit or a withdrawal counts.
pub const WINDOW: Duration = Duration::from_secs(10);

/// The window's length in slots of one second each.
const SLOTS: usize = 10;

/// A whole retry, in the budget's units: a deposit is `percent` of them.
const RETRY: i64 = 100;

/// One route's budget, shared by every request on it.
#[derive(Debug)]
pub struct RetryBudget {
    settings: RetryBudgetSettings,
    /// What the reserve allows over one window, in units.
    reserve: i64,
    /// The moment second 0 began.
    epoch: Instant,
    ring: Mutex<Ring>,
}

/// Each second's net deposit, with the second it belongs to: a slot whose
/// second has left the window counts for nothing.
#[derive(Debug, Default)]
struct Ring {
    slots: [(u64, i64); SLOTS],
}

impl RetryBudget {
    /// A full budget with `settings`, starting now.
    pub fn new(settings: RetryBudgetSettings) -> Self {
        let window = i64::try_from(WINDOW.as_secs()).unwrap_or(i64::MAX);
        let reserve = i64::from(settings.min_per_second).saturating_mul(window).saturating_mul(RETRY);
        RetryBudget { settings, reserve, epoch: Instant::now(), ring: Mutex::new(Ring::default()) }
    }

    /// A request arrived: it earns its share of a retry.
    pub fn deposit(&self) {
        self.add(i64::from(self.settings.percent));
    }

    /// Takes one retry from the budget, if it holds one: whether the
    /// retry (or hedge) may go.
    pub fn withdraw(&self) -> bool {
        let second = self.second();
        let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        let balance = ring.sum(second).saturating_add(self.reserve);
        let allowed = balance >= RETRY;
        if allowed {
            ring.add(second, -RETRY);
        }
        allowed
    }

    fn add(&self, amount: i64) {
        let second = self.second();
        self.ring.lock().unwrap_or_else(PoisonError::into_inner).add(second, amount);
    }

    /// The second since the budget began that now falls in.
    fn second(&self) -> u64 {
        Instant::now().saturating_duration_since(self.epoch).as_secs()
    }
}

impl Ring {
    /// The net of every slot still inside the window ending in `second`.
    fn sum(&self, second: u64) -> i64 {
        let oldest = second.saturating_sub(SLOTS as u64 - 1);
        self.slots.iter().filter(|(at, _)| (oldest..=second).contains(at)).map(|(_, net)| net).sum()
    }

    fn add(&mut self, second: u64, amount: i64) {
        let index = usize::try_from(second % SLOTS as u64).unwrap_or(0);
        if let Some(slot) = self.slots.get_mut(index) {
            if slot.0 != second {
                *slot = (second, 0);
            }
            slot.1 = slot.1.saturating_add(amount);
        }
    }
}

/// Every route's budget, by route name, kept across config reloads (a
/// route whose budget settings changed starts a fresh one).
#[derive(Debug, Default)]
pub struct RetryBudgets {
    routes: Mutex<HashMap<String, Arc<RetryBudget>>>,
}

impl RetryBudgets {
    /// The budget of `route`.
    pub fn of(&self, route: &Route) -> Arc<RetryBudget> {
        let mut routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        match routes.get(&route.model) {
            Some(budget) if budget.settings == route.retry_budget => Arc::clone(budget),
            _ => {
                let budget = Arc::new(RetryBudget::new(route.retry_budget));
                routes.insert(route.model.clone(), Arc::clone(&budget));
                budget
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(percent: u32, min_per_second: u32) -> RetryBudget {
        RetryBudget::new(RetryBudgetSettings { percent, min_per_second })
    }

    fn withdrawals(budget: &RetryBudget) -> usize {
        std::iter::from_fn(|| budget.withdraw().then_some(())).take(10_000).count()
    }

    #[tokio::test(start_paused = true)]
    async fn the_reserve_allows_min_per_second_over_the_window() {
        let budget = budget(20, 3);
        assert_eq!(withdrawals(&budget), 30, "3 a second over 10 seconds, with no request at all");
    }

    #[tokio::test(start_paused = true)]
    async fn every_request_earns_its_percent_of_a_retry() {
        let budget = budget(20, 0);
        (0..47).for_each(|_| budget.deposit());
        assert_eq!(withdrawals(&budget), 9, "47 requests at 20 % earn 9 whole retries");
        (0..3).for_each(|_| budget.deposit());
        assert_eq!(withdrawals(&budget), 1, "the leftover 40 % and three more deposits make one more");
    }

    #[tokio::test(start_paused = true)]
    async fn deposits_and_withdrawals_expire_after_the_window() {
        let budget = budget(50, 1);
        (0..10).for_each(|_| budget.deposit());
        assert_eq!(withdrawals(&budget), 15, "the reserve's 10 and the deposits' 5");
        tokio::time::advance(Duration::from_secs(9)).await;
        assert_eq!(withdrawals(&budget), 0, "nine seconds on, all of it is still spent");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(withdrawals(&budget), 10, "once the window has passed, only the reserve is back");
    }

    #[tokio::test(start_paused = true)]
    async fn an_empty_budget_allows_nothing() {
        let budget = budget(0, 0);
        (0..100).for_each(|_| budget.deposit());
        assert!(!budget.withdraw(), "no percent and no reserve: never a retry");
    }
}
