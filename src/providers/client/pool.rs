//! Idle connections per origin. A connection waits here undriven, so whether
//! the provider closed it meanwhile shows only when it is taken; the newest
//! leaves first, as the likeliest to still be open.
//!
//! A thread that runs a runtime of its own keeps its own idle connections
//! ([`use_own_connections`]): a connection is driven by the reactor of the
//! runtime that opened it, and one taken by another thread's runtime would
//! cost a cross-thread wake-up per read.

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use super::{Connection, Origin};

thread_local! {
    /// Whose idle connections this thread takes and returns; 0 unless set.
    static OWNER: Cell<usize> = const { Cell::new(0) };
}

/// Makes this thread take and return idle connections of its own, apart
/// from other threads': for a thread that runs its own single-threaded
/// runtime. `owner` must differ between such threads.
pub fn use_own_connections(owner: usize) {
    OWNER.set(owner);
}

/// Keep-alive connections, at most `max_per_origin` per origin and owner,
/// none older than `idle_timeout`.
pub(super) struct Pool {
    idle: Mutex<HashMap<(usize, Origin), VecDeque<Connection>>>,
    max_per_origin: usize,
    idle_timeout: Duration,
}

impl Pool {
    pub(super) fn new(max_per_origin: usize, idle_timeout: Duration) -> Self {
        Pool { idle: Mutex::new(HashMap::new()), max_per_origin, idle_timeout }
    }

    /// The newest idle connection to `origin` that is still open.
    pub(super) fn take(&self, origin: &Origin) -> Option<Connection> {
        loop {
            let (newest, expired) = {
                let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
                let queue = idle.get_mut(&(OWNER.get(), origin.clone()))?;
                let fresh = queue.iter().position(|conn| conn.idle_for() <= self.idle_timeout).unwrap_or(queue.len());
                let expired: Vec<Connection> = queue.drain(..fresh).collect();
                (queue.pop_back(), expired)
            };
            drop(expired);
            let mut conn = newest?;
            if conn.is_reusable() {
                return Some(conn);
            }
        }
    }

    /// Keeps `conn` for the next request to `origin`, dropping the oldest
    /// when there are already enough.
    pub(super) fn put(&self, origin: Origin, conn: Connection) {
        let evicted = {
            let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            let queue = idle.entry((OWNER.get(), origin)).or_default();
            queue.push_back(conn);
            (queue.len() > self.max_per_origin).then(|| queue.pop_front()).flatten()
        };
        drop(evicted);
    }
}
