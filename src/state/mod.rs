//! The state several replicas share — key rate limits, budget spend,
//! breaker openings and `Retry-After` cooldowns — behind one small trait, [`SharedState`], with two stores:
//! [`MemoryState`], in this process, and [`RedisState`], in one Redis that
//! every replica reaches. Every check-and-update is one atomic call.
//!
//! A store is reached through a [`Store`], which makes sure it is never
//! what takes baton down: each call is bounded by a short timeout; the
//! first failure marks the store down (logged once, `baton_state_backend_up
//! 0`), after which no request waits for it at all and each replica uses
//! its own local state; a background task pings it and re-joins when it
//! answers again.

mod breakers;
mod handle;
mod memory;
mod redis;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use thiserror::Error;

pub use breakers::{BREAKER_SYNC_EVERY, spawn_sync};
pub use handle::Store;
pub use memory::MemoryState;
pub use redis::RedisState;

/// What a [`Store`] tells the metrics: whether the shared state answers.
/// Implemented by the proxy's metrics, so the state needs nothing from
/// above it.
pub trait StateSignals: Send + Sync {
    /// The shared state store answers, or no longer does.
    fn state_backend_up(&self, up: bool);
}

/// What a store said of its availability, in order: for tests that drive a
/// [`Store`] without the proxy's metrics.
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct SaidUp(std::sync::Mutex<Vec<bool>>);

#[cfg(test)]
impl SaidUp {
    /// The last thing said: whether the store answered.
    pub(crate) fn last(&self) -> Option<bool> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).last().copied()
    }
}

#[cfg(test)]
impl StateSignals for SaidUp {
    fn state_backend_up(&self, up: bool) {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(up);
    }
}

/// What a store's calls return: boxed, so the trait can be used as `dyn`.
pub type StateFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, Unavailable>> + Send + 'a>>;

/// The store could not answer; the caller uses its local state instead.
#[derive(Debug, Error)]
#[error("the shared state store is unavailable: {0}")]
pub struct Unavailable(pub String);

/// One rate limit to take from: a GCRA of `per_minute` units per minute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    /// The limit's name in the store, without the prefix (`key:web:rpm`).
    pub name: String,
    /// Its units per minute.
    pub per_minute: u64,
    /// The units to take, give back or charge.
    pub amount: u64,
}

/// How a [`SharedState::take`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// Every limit had room and each was taken from.
    Admitted,
    /// The limit at `index` had no room, and none was taken from.
    Refused {
        /// Which of the limits asked.
        index: usize,
        /// When its units would fit.
        retry_after: Duration,
    },
}

/// Units given back to a limit, or charged past it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adjust {
    /// Reserved but not used.
    GiveBack,
    /// Used beyond the reservation: taken even past the limit.
    Charge,
}

/// What one replica tells the store about one provider, each sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderReport {
    /// The provider's name.
    pub provider: String,
    /// What this replica's breaker did since the last sync.
    pub action: BreakerAction,
    /// A `Retry-After` cooldown it was asked for since, with what is left of it.
    pub cooldown: Option<Duration>,
}

/// A breaker's news for the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerAction {
    /// Nothing new: only read the cluster's view.
    Read,
    /// It opened here, for this much longer.
    Opened(Duration),
    /// Its probe succeeded here: the provider is back; the news is kept
    /// this long for replicas still waiting.
    Closed(Duration),
    /// Its cooldown is over here: it asks to be the cluster's one probe,
    /// held this long at most.
    ClaimProbe(Duration),
}

/// The cluster's view of one provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderView {
    /// Its breaker is open somewhere, for this much longer.
    pub open_for: Option<Duration>,
    /// Who holds the half-open probe.
    pub probe: Probe,
    /// It asked some replica, with `Retry-After`, to wait this much longer.
    pub cooling_for: Option<Duration>,
}

/// The cluster's half-open probe of one provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// Nobody is probing.
    Free,
    /// This replica is.
    Mine,
    /// Another replica is.
    Taken,
    /// A probe succeeded: the breaker is closed everywhere.
    Closed,
}

/// A store of shared state. Each method is one atomic round trip, so two
/// replicas never race between a read and a write.
pub trait SharedState: Send + Sync {
    /// Takes `amount` from every limit, or from none when one has no room.
    fn take<'a>(&'a self, limits: &'a [Limit]) -> StateFuture<'a, Taken>;

    /// Gives units back to limits, or charges them past them.
    fn adjust<'a>(&'a self, changes: &'a [(Limit, Adjust)]) -> StateFuture<'a, ()>;

    /// Reports each provider's breaker and cooldown news and reads the
    /// cluster's view of each, in one round trip for all of them.
    fn sync_providers<'a>(&'a self, reports: &'a [ProviderReport]) -> StateFuture<'a, Vec<ProviderView>>;

    /// Adds `usd` to each scope (`global`, `key:web`, `route:chat`) and reads
    /// what each has spent, cluster-wide, over the last minute, hour and
    /// day ([`BudgetWindow::ALL`](crate::limits::BudgetWindow::ALL)'s order).
    fn spend<'a>(&'a self, scopes: &'a [(String, f64)]) -> StateFuture<'a, Vec<[f64; 3]>>;

    /// Whether the store answers.
    fn ping(&self) -> StateFuture<'_, ()>;

    /// Takes the lease `name` for `ttl` unless another holder has it
    /// (Redis `SET NX PX`): whether it was taken. One replica of many runs
    /// a scheduled drill this way.
    fn lease<'a>(&'a self, name: &'a str, ttl: Duration) -> StateFuture<'a, bool>;

    /// How much of each limit is in use across the cluster, 0 when idle
    /// and 1 when full (more when usage was charged past it).
    fn used<'a>(&'a self, limits: &'a [Limit]) -> StateFuture<'a, Vec<f64>>;
}
