//! Idle connections per origin. A connection waits here undriven, so whether
//! the provider closed it meanwhile shows only when it is taken; the newest
//! leaves first, as the likeliest to still be open.
//!
//! Each thread keeps idle connections of its own: a connection is driven by
//! the reactor of the runtime that opened it, and with a runtime per thread
//! (how `baton serve` runs) one taken by another thread's runtime would cost
//! a cross-thread wake-up per read.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::thread::{self, ThreadId};
use std::time::Duration;

// The runtime's clock, so idle timeouts can be tested on paused time.
use tokio::time::Instant;

use super::Origin;
use super::connection::{Connection, Idle};

/// How long connections to a provider that sent stray bytes are not kept.
const DISTRUST_FOR: Duration = Duration::from_secs(60);

/// Keep-alive connections, at most `max_per_origin` per origin and thread,
/// none older than `idle_timeout`.
pub(super) struct Pool {
    idle: Mutex<HashMap<(ThreadId, Origin), VecDeque<Connection>>>,
    max_per_origin: usize,
    idle_timeout: Duration,
    /// The owners whose runtime runs a reaper for their idle connections.
    reaping: Mutex<HashSet<ThreadId>>,
    /// Origins that sent bytes no request asked for, and until when their
    /// connections are closed after one answer instead of kept.
    distrusted: Mutex<HashMap<Origin, Instant>>,
}

impl Pool {
    pub(super) fn new(max_per_origin: usize, idle_timeout: Duration) -> Self {
        let (reaping, distrusted) = (Mutex::new(HashSet::new()), Mutex::new(HashMap::new()));
        Pool { idle: Mutex::new(HashMap::new()), max_per_origin, idle_timeout, reaping, distrusted }
    }

    /// `origin` sent stray bytes: its connections are not kept for a while,
    /// and the idle ones go now.
    pub(super) fn distrust(&self, origin: Origin) {
        tracing::warn!(host = %origin.host, port = origin.port, "a provider sent bytes no request asked for; its connections are not reused for 60 s");
        let dropped: Vec<Connection> = {
            let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            let keys: Vec<(ThreadId, Origin)> = idle.keys().filter(|(_, o)| *o == origin).cloned().collect();
            keys.iter().filter_map(|key| idle.remove(key)).flatten().collect()
        };
        drop(dropped);
        self.distrusted.lock().unwrap_or_else(PoisonError::into_inner).insert(origin, Instant::now() + DISTRUST_FOR);
    }

    fn is_distrusted(&self, origin: &Origin) -> bool {
        let mut distrusted = self.distrusted.lock().unwrap_or_else(PoisonError::into_inner);
        match distrusted.get(origin) {
            Some(until) if *until > Instant::now() => true,
            Some(_) => {
                distrusted.remove(origin);
                false
            }
            None => false,
        }
    }

    /// Closes this thread's idle connections older than the idle timeout,
    /// so connections left after a burst do not hold descriptors forever.
    fn reap(&self, owner: ThreadId) {
        let expired: Vec<Connection> = {
            let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            let mut expired = Vec::new();
            for (_, queue) in idle.iter_mut().filter(|((queue_owner, _), _)| *queue_owner == owner) {
                let fresh = queue.iter().position(|conn| conn.idle_for() <= self.idle_timeout).unwrap_or(queue.len());
                expired.extend(queue.drain(..fresh));
            }
            idle.retain(|_, queue| !queue.is_empty());
            expired
        };
        drop(expired);
    }

    /// Starts, on the runtime that drives this thread's connections, a task
    /// that reaps them four times per idle timeout (so none outlives it by
    /// more than a quarter), unless one already runs; it ends with the pool
    /// or the runtime.
    fn ensure_reaper(self: &Arc<Self>, owner: ThreadId) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        if !self.reaping.lock().unwrap_or_else(PoisonError::into_inner).insert(owner) {
            return;
        }
        let pool = Arc::downgrade(self);
        let every = (self.idle_timeout / 4).max(Duration::from_millis(10));
        runtime.spawn(async move {
            let _running = ReaperGuard { pool: Weak::clone(&pool), owner };
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(pool) = pool.upgrade() else { return };
                pool.reap(owner);
            }
        });
    }

    /// The newest idle connection to `origin` that is still open.
    pub(super) fn take(&self, origin: &Origin) -> Option<Connection> {
        loop {
            let (newest, expired) = {
                let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
                let queue = idle.get_mut(&(thread::current().id(), origin.clone()))?;
                let fresh = queue.iter().position(|conn| conn.idle_for() <= self.idle_timeout).unwrap_or(queue.len());
                let expired: Vec<Connection> = queue.drain(..fresh).collect();
                (queue.pop_back(), expired)
            };
            drop(expired);
            let mut conn = newest?;
            match conn.idle_check() {
                Idle::Open => return Some(conn),
                Idle::Stray => {
                    self.distrust(origin.clone());
                    return None;
                }
                Idle::Gone => {}
            }
        }
    }

    /// Keeps `conn` for the next request to `origin`, dropping the oldest
    /// when there are already enough.
    pub(super) fn put(self: &Arc<Self>, origin: Origin, conn: Connection) {
        if self.is_distrusted(&origin) {
            return;
        }
        self.ensure_reaper(thread::current().id());
        let evicted = {
            let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            let queue = idle.entry((thread::current().id(), origin)).or_default();
            queue.push_back(conn);
            (queue.len() > self.max_per_origin).then(|| queue.pop_front()).flatten()
        };
        drop(evicted);
    }
}

/// Marks a reaper as gone when its task ends (its runtime shut down), so
/// the next connection kept starts another.
struct ReaperGuard {
    pool: Weak<Pool>,
    owner: ThreadId,
}

impl Drop for ReaperGuard {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.upgrade() {
            pool.reaping.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.owner);
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::net::{TcpListener, TcpStream};
    use tokio_util::either::Either;

    use super::*;
    use crate::egress::Egress;

    /// A connection to a loopback listener, and the listener's end of it.
    async fn connection() -> (Connection, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let client = TcpStream::connect(listener.local_addr().expect("an address")).await.expect("connects");
        let (server, _) = listener.accept().await.expect("accepts");
        (Connection::new(Either::Left(client)), server)
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_connection_is_reused_until_the_idle_timeout_and_not_after() {
        let pool = Arc::new(Pool::new(4, Duration::from_secs(60)));
        let origin = Origin { https: false, host: "127.0.0.1".to_owned(), port: 1, egress: Egress::DIRECT };
        let (conn, _server) = connection().await;
        pool.put(origin.clone(), conn);
        tokio::time::advance(Duration::from_secs(59)).await;
        let conn = pool.take(&origin).expect("59 s idle: still fresh");
        pool.put(origin.clone(), conn);
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(pool.take(&origin).is_none(), "61 s idle: past the idle timeout");
    }
}
