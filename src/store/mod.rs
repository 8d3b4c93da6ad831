//! What outlives the process: the request log, whose cost column is the
//! spend ledger, in SQLite or PostgreSQL (`[store]`). Never on the
//! availability path: a request hands its row to a bounded queue and goes
//! on; one writer task inserts the rows in batches, and when the database is
//! slow, full or gone the rows are dropped and counted, never waited for.

mod db;
pub mod history;
mod insert;
pub mod keyring;
pub mod keys;
pub mod ledger;
pub mod query;
pub mod redact;
pub mod responses;
pub mod retention;
mod row;
pub mod time;
mod writer;

use std::sync::{Arc, Weak};
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};
use tokio::sync::{mpsc, oneshot};

pub use db::{Db, DbError, Flavor, SchemaVersion};
pub use insert::MAX_ROWS;
pub use keyring::Keyring;
pub use ledger::Spent;
pub use redact::Redactor;
pub use responses::{ChainError, KeptTurn};
pub use row::{RequestRow, now_ms};

use crate::config::{Config, StoreBackend};

/// Rows waiting for the writer at most; past it a row is dropped and
/// counted. Eight thousand rows is more than a second of a busy replica.
pub const QUEUE_ROWS: usize = 8192;

/// What the store tells the metrics; implemented by the proxy's metrics,
/// so the store needs nothing from above it.
pub trait StoreSignals: Send + Sync {
    /// `rows` records could not be kept (a full queue, a database down).
    fn records_dropped(&self, rows: u64);
    /// `rows` records were written.
    fn records_written(&self, rows: u64);
    /// The database answers, or no longer does.
    fn store_up(&self, up: bool);
}

/// Counts of what a store said, for a store run without the proxy's
/// metrics: the tests and benchmarks that drive it alone read them.
#[cfg(any(test, feature = "test-support"))]
#[derive(Debug, Default)]
pub struct CountedSignals {
    /// Rows written.
    pub written: std::sync::atomic::AtomicU64,
    /// Rows dropped.
    pub dropped: std::sync::atomic::AtomicU64,
}

#[cfg(any(test, feature = "test-support"))]
impl StoreSignals for CountedSignals {
    fn records_dropped(&self, rows: u64) {
        self.dropped.fetch_add(rows, std::sync::atomic::Ordering::Relaxed);
    }
    fn records_written(&self, rows: u64) {
        self.written.fetch_add(rows, std::sync::atomic::Ordering::Relaxed);
    }
    fn store_up(&self, _up: bool) {}
}

/// The store's handle, shared by every request: cheap to clone, and
/// nothing it does waits for the database.
#[derive(Clone)]
pub struct Records {
    inner: Arc<Inner>,
}

struct Inner {
    queue: mpsc::Sender<RequestRow>,
    drain: mpsc::Sender<oneshot::Sender<()>>,
    signals: Arc<dyn StoreSignals>,
    /// The open database while it answers; none while the store is down.
    db: ArcSwapOption<Db>,
    log_bodies: bool,
    redactor: ArcSwap<Redactor>,
    backend: &'static str,
    /// Responses kept for a later turn's `previous_response_id`.
    kept: responses::Kept,
}

/// A handle that does not keep the store running, for background tasks
/// that should end with it.
#[derive(Clone)]
pub struct WeakRecords(Weak<Inner>);

impl WeakRecords {
    /// The store, while anything else still holds it.
    pub fn upgrade(&self) -> Option<Records> {
        self.0.upgrade().map(|inner| Records { inner })
    }
}

/// What [`Records::start`] hands back besides the handle.
pub struct Started {
    /// Whether the first attempt to open the database succeeded, once it is made.
    pub first_open: oneshot::Receiver<bool>,
    /// The spend the ledger held from before this start, once the database
    /// first opens (right after `first_open` on a success; later otherwise).
    pub spent: oneshot::Receiver<Vec<Spent>>,
}

impl Records {
    /// Starts the store `config` asks for (none for `backend = "none"`):
    /// the writer task and, once the database opens, its retention sweep.
    /// Must run inside a tokio runtime, which the tasks then live on.
    pub fn start(config: &Config, signals: Arc<dyn StoreSignals>) -> Option<(Records, Started)> {
        let backend = config.store.backend.clone();
        if backend == StoreBackend::None {
            return None;
        }
        let (queue, rows) = mpsc::channel(QUEUE_ROWS);
        let (drain, drains) = mpsc::channel(4);
        let (spent_tx, spent) = oneshot::channel();
        let (first_tx, first_open) = oneshot::channel();
        let (kept, kept_jobs) = responses::Kept::new(config.store.retention_days);
        let inner = Arc::new(Inner {
            queue,
            drain,
            signals,
            db: ArcSwapOption::empty(),
            log_bodies: config.store.log_bodies,
            redactor: ArcSwap::from_pointee(Redactor::new(config)),
            backend: config.store.backend_name(),
            kept,
        });
        tokio::spawn(responses::run(Arc::downgrade(&inner), kept_jobs));
        let tells = writer::Tells { spent: Some(spent_tx), first_open: Some(first_tx) };
        let task = writer::Writer::new(Arc::downgrade(&inner), backend, config.store.retention_days, tells);
        tokio::spawn(task.run(rows, drains));
        Some((Records { inner }, Started { first_open, spent }))
    }

    /// Hands `row` to the writer, or drops and counts it when the queue is full.
    pub fn record(&self, row: RequestRow) {
        if self.inner.queue.try_send(row).is_err() {
            self.inner.signals.records_dropped(1);
        }
    }

    /// A row for a request arriving now, to fill in as it is served.
    pub fn begin(&self, id: &str, dialect: &'static str) -> Recording {
        Recording { records: self.clone(), row: Box::new(RequestRow::new(id, dialect, now_ms())) }
    }

    /// A handle that lets the store end when every other is gone.
    pub fn downgrade(&self) -> WeakRecords {
        WeakRecords(Arc::downgrade(&self.inner))
    }

    /// The database, while it answers: what the admin endpoints read.
    pub fn db(&self) -> Option<Arc<Db>> {
        self.inner.db.load_full()
    }

    /// Whether the database answers now.
    pub fn is_up(&self) -> bool {
        self.inner.db.load().is_some()
    }

    /// The backend's name.
    pub fn backend(&self) -> &'static str {
        self.inner.backend
    }

    /// Keeps a Responses turn for a later `previous_response_id`: whether
    /// it was kept. Never waits for the database.
    pub fn keep_turn(&self, turn: KeptTurn) -> bool {
        self.inner.kept.keep(turn)
    }

    /// The kept turn `id`, when it is `owner`'s and still kept.
    pub async fn kept_turn(&self, id: &str, owner: &str) -> Result<Option<Arc<KeptTurn>>, DbError> {
        self.inner.kept.get(self.db().as_deref(), id, owner).await
    }

    /// The conversation kept turn `id` ends, oldest turn first, within
    /// `max_bytes` of JSON.
    pub async fn kept_chain(&self, id: &str, owner: &str, max_bytes: usize) -> Result<Vec<Arc<KeptTurn>>, ChainError> {
        self.inner.kept.chain(self.db().as_deref(), id, owner, max_bytes).await
    }

    /// Deletes kept turn `id` of `owner`: whether there was one.
    pub async fn forget_turn(&self, id: &str, owner: &str) -> Result<bool, DbError> {
        self.inner.kept.delete(self.db().as_deref(), id, owner).await
    }

    /// The secrets of a reloaded config, for bodies logged from now on.
    pub fn redact_with(&self, config: &Config) {
        self.inner.redactor.store(Arc::new(Redactor::new(config)));
    }

    /// Writes what is queued now, waiting at most `limit`: before the
    /// process ends, so the last requests' rows are kept. Whether it finished.
    pub async fn drain(&self, limit: Duration) -> bool {
        let (done, finished) = oneshot::channel();
        if self.inner.drain.try_send(done).is_err() {
            return false;
        }
        tokio::time::timeout(limit, finished).await.is_ok_and(|answered| answered.is_ok())
    }
}

/// One request's row while it is served: filled in as the request learns
/// who sent it and who answered, and handed to the queue once, when it ends.
pub struct Recording {
    records: Records,
    row: Box<RequestRow>,
}

impl Recording {
    /// The row so far.
    pub fn row(&mut self) -> &mut RequestRow {
        &mut self.row
    }

    /// Whether bodies are kept (`log_bodies`): only then is anything copied.
    pub fn keeps_bodies(&self) -> bool {
        self.records.inner.log_bodies
    }

    /// Keeps the start of the request body, when bodies are kept.
    pub fn request_body(&mut self, body: &[u8]) {
        if self.keeps_bodies() {
            let start = &body[..body.len().min(redact::BODY_CAP + redact::CAPTURE_MARGIN)];
            self.row.request_body = Some(String::from_utf8_lossy(start).into_owned());
        }
    }

    /// Keeps more of the answer's text, up to the cap, when bodies are kept.
    pub fn answer(&mut self, text: &str) {
        if !self.keeps_bodies() {
            return;
        }
        let kept = self.row.answer_text.get_or_insert_with(String::new);
        let room = (redact::BODY_CAP + redact::CAPTURE_MARGIN).saturating_sub(kept.len());
        kept.push_str(redact::cap(text, room));
    }

    /// The request ended: its row goes to the queue.
    pub fn finish(self) {
        self.records.record(*self.row);
    }
}
