//! The one task that writes: it takes rows off the queue in batches (up to
//! [`MAX_ROWS`] or every [`FLUSH_EVERY`]), redacts their bodies, and
//! inserts each batch in one transaction. A database that fails or stalls
//! marks the store down once — one log line, `baton_store_up 0` — and from
//! then on rows are dropped and counted while it reconnects in the
//! background with a growing backoff; the first success is logged once too.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::db::{Db, DbError};
use super::insert::{MAX_ROWS, insert};
use super::{Inner, RequestRow, Spent, ledger, now_ms, retention};
use crate::clock::later;
use crate::config::StoreBackend;

/// The longest a row waits in a batch that is not full.
pub const FLUSH_EVERY: Duration = Duration::from_millis(200);
/// Rows waiting together that say the queue is busy: written at once.
const BUSY: usize = MAX_ROWS / 8;
/// The most rows one flush takes off the queue (written [`MAX_ROWS`] a
/// statement, in one transaction).
const MAX_QUEUED_TAKEN: usize = 8 * MAX_ROWS;
/// The bound on writing one batch; past it the database counts as down.
const WRITE_LIMIT: Duration = Duration::from_secs(10);
/// The first wait before reconnecting, doubled on each failure…
const RETRY_FIRST: Duration = Duration::from_millis(250);
/// …up to this.
const RETRY_MAX: Duration = Duration::from_secs(10);

/// One attempt to open the database.
type Opening = Pin<Box<dyn Future<Output = Result<Db, DbError>> + Send>>;

/// Who is told, once each, how the store started.
pub(super) struct Tells {
    /// The spend from before this start; sent at the first open.
    pub(super) spent: Option<oneshot::Sender<Vec<Spent>>>,
    /// Whether the first attempt to open succeeded; sent after it.
    pub(super) first_open: Option<oneshot::Sender<bool>>,
}

/// The writer's state.
pub(super) struct Writer {
    inner: Weak<Inner>,
    backend: StoreBackend,
    retention_days: u32,
    /// Wall-clock time this store started: the ledger read at the first
    /// open holds only what came before, which no budget here has counted.
    started_ms: i64,
    /// Who hears of the first open and of the ledger's spend.
    tells: Tells,
    db: Option<Db>,
    /// Reconnects failed in a row, for the backoff.
    failures: u32,
    /// Whether the store is marked down (logged, gauge at 0).
    down: bool,
    /// Whether the retention sweep has been started.
    sweeping: bool,
    /// When the next reconnect is due, while there is no database.
    retry_at: Instant,
}

impl Writer {
    pub(super) fn new(inner: Weak<Inner>, backend: StoreBackend, retention_days: u32, tells: Tells) -> Self {
        let started_ms = now_ms();
        Writer {
            inner,
            backend,
            retention_days,
            started_ms,
            tells,
            db: None,
            failures: 0,
            down: false,
            sweeping: false,
            retry_at: Instant::now(),
        }
    }

    /// Runs until every handle is gone and the queue is empty.
    pub(super) async fn run(
        mut self,
        mut rows: mpsc::Receiver<RequestRow>,
        mut drains: mpsc::Receiver<oneshot::Sender<()>>,
    ) {
        let mut batch: Vec<RequestRow> = Vec::with_capacity(MAX_ROWS);
        let mut flush_at = Instant::now();
        // An attempt to open the database, which may take seconds: the loop
        // goes on beside it, so rows arriving meanwhile meet a store that
        // is down, and are dropped and counted, as at any other moment.
        let mut opening: Option<Opening> = None;
        loop {
            tokio::select! {
                // Only an empty batch waits on the queue: once one has begun,
                // the rest is taken when it is due, not with a wake-up a row.
                received = rows.recv_many(&mut batch, MAX_ROWS), if batch.is_empty() => {
                    if received == 0 {
                        self.flush(&mut batch).await;
                        break;
                    }
                    // Many at once: the queue is busy, and waiting would only fill it.
                    let wait = if received >= BUSY { Duration::ZERO } else { FLUSH_EVERY };
                    flush_at = later(Instant::now(), wait);
                }
                () = tokio::time::sleep_until(flush_at), if !batch.is_empty() && self.db.is_some() => {
                    while batch.len() < MAX_QUEUED_TAKEN && let Ok(row) = rows.try_recv() {
                        batch.push(row);
                    }
                    self.flush(&mut batch).await;
                }
                () = tokio::time::sleep_until(self.retry_at), if self.db.is_none() && opening.is_none() => {
                    let backend = self.backend.clone();
                    opening = Some(Box::pin(async move { Db::open(&backend).await }));
                }
                Some(opened) = async { Some(opening.as_mut()?.await) }, if opening.is_some() => {
                    opening = None;
                    self.opened(opened).await;
                }
                Some(done) = drains.recv() => {
                    while let Ok(row) = rows.try_recv() {
                        batch.push(row);
                        if batch.len() >= MAX_ROWS {
                            self.flush(&mut batch).await;
                        }
                    }
                    self.flush(&mut batch).await;
                    let _ = done.send(());
                }
            }
            if self.down {
                // Nothing is held for a database that may be gone for hours.
                self.dropped(batch.len());
                batch.clear();
            } else if batch.len() >= MAX_ROWS && self.db.is_some() {
                self.flush(&mut batch).await;
            }
        }
        if let Some(db) = self.db.take() {
            db.close().await;
        }
    }

    /// Writes `batch` (emptying it), or drops and counts it when the
    /// database is down or fails now.
    async fn flush(&mut self, batch: &mut Vec<RequestRow>) {
        if batch.is_empty() {
            return;
        }
        let Some(db) = &self.db else {
            self.dropped(batch.len());
            batch.clear();
            return;
        };
        let redactor = self.inner.upgrade().map(|inner| inner.redactor.load_full());
        for row in batch.iter_mut() {
            for body in [&mut row.request_body, &mut row.answer_text] {
                // With the handle gone (the last rows, at the end) there is
                // nothing to redact with: such bodies are not kept.
                *body = body.as_deref().zip(redactor.as_ref()).map(|(text, redactor)| redactor.redact(text));
            }
        }
        let written = match tokio::time::timeout(WRITE_LIMIT, insert(db, batch.as_mut_slice())).await {
            Ok(written) => written,
            Err(_) => Err(DbError::Timeout(WRITE_LIMIT)),
        };
        let rows = batch.len();
        batch.clear();
        match written {
            Ok(()) => {
                if let Some(inner) = self.inner.upgrade() {
                    inner.signals.records_written(count(rows));
                }
            }
            Err(err) => {
                self.dropped(rows);
                self.went_down(&err);
            }
        }
    }

    /// Takes in an attempt to open the database; on the first success
    /// ever, reads the ledger for the budgets and starts the retention sweep.
    async fn opened(&mut self, opened: Result<Db, DbError>) {
        let Some(inner) = self.inner.upgrade() else { return };
        match opened {
            Ok(db) => {
                if let Some(spent) = self.tells.spent.take() {
                    let read = ledger::spent_before(&db, self.started_ms, now_ms()).await;
                    let _ = spent.send(read.unwrap_or_else(|err| {
                        tracing::warn!(error = %err, "store: the spend ledger could not be read; budgets start at zero");
                        Vec::new()
                    }));
                }
                if self.down {
                    tracing::info!(backend = inner.backend, "store is back: request rows are written again");
                } else {
                    tracing::info!(backend = inner.backend, "store is open");
                }
                inner.db.store(Some(Arc::new(db.clone())));
                inner.signals.store_up(true);
                if !self.sweeping {
                    self.sweeping = true;
                    tokio::spawn(retention::run(Weak::clone(&self.inner), self.retention_days));
                }
                self.db = Some(db);
                self.failures = 0;
                self.down = false;
                if let Some(first) = self.tells.first_open.take() {
                    let _ = first.send(true);
                }
            }
            Err(err) => {
                self.went_down(&err);
                self.failures = self.failures.saturating_add(1);
                if let Some(first) = self.tells.first_open.take() {
                    let _ = first.send(false);
                }
            }
        }
    }

    /// Marks the store down, once: one log line, the gauge at 0, readers
    /// turned away; the next reconnect is due after the backoff.
    fn went_down(&mut self, err: &DbError) {
        self.retry_at = later(Instant::now(), self.backoff());
        if let Some(db) = self.db.take() {
            tokio::spawn(async move { db.close().await });
        }
        let Some(inner) = self.inner.upgrade() else { return };
        inner.db.store(None);
        if !self.down {
            self.down = true;
            inner.signals.store_up(false);
            tracing::error!(backend = inner.backend, error = %err, "store unavailable: request rows are dropped and counted until it is back; requests go on");
        }
    }

    fn dropped(&self, rows: usize) {
        if let Some(inner) = self.inner.upgrade() {
            inner.signals.records_dropped(count(rows));
        }
    }

    fn backoff(&self) -> Duration {
        RETRY_FIRST.saturating_mul(1u32 << self.failures.min(6)).min(RETRY_MAX)
    }
}

fn count(rows: usize) -> u64 {
    u64::try_from(rows).unwrap_or(u64::MAX)
}
