//! The in-process store: the same contract as Redis, for replicas that
//! share one process (tests, and engines embedded side by side). Each
//! replica gets its own [`MemoryState::replica`] handle over the same state.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::{
    Adjust, BreakerAction, Limit, Probe, ProviderReport, ProviderView, SharedState, StateFuture, Taken, Unavailable,
};
use crate::clock::later;
use crate::limits::{BudgetWindow, Gcra, Spend};

/// State shared by every handle, as a Redis holds it.
#[derive(Default)]
struct Inner {
    limits: HashMap<String, (u64, Gcra)>,
    /// When each provider's opening ends.
    open_until: HashMap<String, Instant>,
    /// Who holds each provider's probe (a replica's id, or `CLOSED`), until when.
    probes: HashMap<String, (u64, Instant)>,
    /// When each provider's `Retry-After` cooldown ends.
    cooling_until: HashMap<String, Instant>,
    /// Each budget scope's spend.
    spend: HashMap<String, Spend>,
    /// Each lease's holder, until when.
    leases: HashMap<String, (u64, Instant)>,
}

/// The holder recorded when a probe succeeded.
const CLOSED: u64 = 0;

/// One replica's handle on state shared in this process.
#[derive(Clone)]
pub struct MemoryState {
    inner: Arc<Mutex<Inner>>,
    id: u64,
}

impl Default for MemoryState {
    fn default() -> Self {
        MemoryState { inner: Arc::default(), id: fastrand::u64(1..) }
    }
}

impl MemoryState {
    /// Fresh state, with this as its first replica's handle.
    pub fn new() -> Self {
        MemoryState::default()
    }

    /// Another replica's handle on the same state.
    pub fn replica(&self) -> MemoryState {
        MemoryState { inner: Arc::clone(&self.inner), id: fastrand::u64(1..) }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Inner {
    fn gcra(&mut self, limit: &Limit) -> &mut Gcra {
        let entry = self.limits.entry(limit.name.clone()).or_insert_with(|| (0, Gcra::per_minute(limit.per_minute)));
        if entry.0 != limit.per_minute {
            *entry = (limit.per_minute, Gcra::per_minute(limit.per_minute));
        }
        &mut entry.1
    }

    fn breaker(&mut self, id: u64, report: &ProviderReport, now: Instant) -> ProviderView {
        let provider = &report.provider;
        self.open_until.retain(|_, until| *until > now);
        self.probes.retain(|_, (_, until)| *until > now);
        self.cooling_until.retain(|_, until| *until > now);
        if let Some(left) = report.cooldown {
            let until = later(now, left);
            let current = self.cooling_until.entry(provider.clone()).or_insert(until);
            *current = (*current).max(until);
        }
        match report.action {
            BreakerAction::Opened(left) => {
                let until = later(now, left);
                let current = self.open_until.entry(provider.clone()).or_insert(until);
                *current = (*current).max(until);
                self.probes.remove(provider);
            }
            BreakerAction::Closed(keep) => {
                self.open_until.remove(provider);
                self.probes.insert(provider.clone(), (CLOSED, later(now, keep)));
            }
            BreakerAction::ClaimProbe(hold) if !self.open_until.contains_key(provider) => {
                self.probes.entry(provider.clone()).or_insert((id, later(now, hold)));
            }
            BreakerAction::ClaimProbe(_) | BreakerAction::Read => {}
        }
        let open_for = self.open_until.get(provider).map(|until| until.saturating_duration_since(now));
        let probe = match self.probes.get(provider) {
            None => Probe::Free,
            Some((CLOSED, _)) => Probe::Closed,
            Some((holder, _)) if *holder == id => Probe::Mine,
            Some(_) => Probe::Taken,
        };
        let cooling_for = self.cooling_until.get(provider).map(|until| until.saturating_duration_since(now));
        ProviderView { open_for, probe, cooling_for }
    }
}

impl SharedState for MemoryState {
    fn take<'a>(&'a self, limits: &'a [Limit]) -> StateFuture<'a, Taken> {
        Box::pin(async move {
            let now = Instant::now();
            let mut inner = self.lock();
            let mut taken = Vec::with_capacity(limits.len());
            for (index, limit) in limits.iter().enumerate() {
                let mut gcra = inner.gcra(limit).clone();
                if let Err(retry_after) = gcra.take(limit.amount, now) {
                    return Ok(Taken::Refused { index, retry_after });
                }
                taken.push(gcra);
            }
            for (limit, gcra) in limits.iter().zip(taken) {
                *inner.gcra(limit) = gcra;
            }
            Ok(Taken::Admitted)
        })
    }

    fn adjust<'a>(&'a self, changes: &'a [(Limit, Adjust)]) -> StateFuture<'a, ()> {
        Box::pin(async move {
            let now = Instant::now();
            let mut inner = self.lock();
            for (limit, how) in changes {
                let gcra = inner.gcra(limit);
                match how {
                    Adjust::GiveBack => gcra.give_back(limit.amount, now),
                    Adjust::Charge => gcra.charge(limit.amount, now),
                }
            }
            Ok(())
        })
    }

    fn sync_providers<'a>(&'a self, reports: &'a [ProviderReport]) -> StateFuture<'a, Vec<ProviderView>> {
        Box::pin(async move {
            let now = Instant::now();
            let mut inner = self.lock();
            Ok(reports.iter().map(|report| inner.breaker(self.id, report, now)).collect())
        })
    }

    fn spend<'a>(&'a self, scopes: &'a [(String, f64)]) -> StateFuture<'a, Vec<[f64; 3]>> {
        Box::pin(async move {
            let now = Instant::now();
            let mut inner = self.lock();
            let totals = scopes.iter().map(|(scope, usd)| {
                let spend = inner.spend.entry(scope.clone()).or_default();
                if *usd > 0.0 {
                    spend.add(*usd, now);
                }
                BudgetWindow::ALL.map(|window| spend.over(window, now))
            });
            Ok(totals.collect())
        })
    }

    fn ping(&self) -> StateFuture<'_, ()> {
        Box::pin(async { Ok::<(), Unavailable>(()) })
    }

    fn lease<'a>(&'a self, name: &'a str, ttl: Duration) -> StateFuture<'a, bool> {
        Box::pin(async move {
            let now = Instant::now();
            let mut inner = self.lock();
            inner.leases.retain(|_, (_, until)| *until > now);
            if inner.leases.contains_key(name) {
                return Ok(false);
            }
            inner.leases.insert(name.to_owned(), (self.id, later(now, ttl)));
            Ok(true)
        })
    }

    fn used<'a>(&'a self, limits: &'a [Limit]) -> StateFuture<'a, Vec<f64>> {
        Box::pin(async move {
            let now = Instant::now();
            let inner = self.lock();
            let share = |limit: &Limit| match inner.limits.get(&limit.name) {
                Some((per_minute, gcra)) if *per_minute > 0 => {
                    per_minute.saturating_sub(gcra.available(now)) as f64 / *per_minute as f64
                }
                _ => 0.0,
            };
            Ok(limits.iter().map(share).collect())
        })
    }
}

/// Whole milliseconds, at least one, for a store that counts in them.
pub(super) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX).max(1)
}
