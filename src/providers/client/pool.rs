//! Idle connections per origin. A connection waits here undriven, so whether
//! the provider closed it meanwhile shows only when it is taken; the newest
//! leaves first, as the likeliest to still be open.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use super::{Connection, Origin};

/// Keep-alive connections, at most `max_per_origin` each, none older than
/// `idle_timeout`.
pub(super) struct Pool {
    idle: Mutex<HashMap<Origin, VecDeque<Connection>>>,
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
                let queue = idle.get_mut(origin)?;
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
            let queue = idle.entry(origin).or_default();
            queue.push_back(conn);
            (queue.len() > self.max_per_origin).then(|| queue.pop_front()).flatten()
        };
        drop(evicted);
    }
}
