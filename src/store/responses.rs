//! Responses kept for `previous_response_id`: each kept turn's own input
//! items and the response it got, under the response's id and its key's
//! name, so a later turn can rebuild the conversation for whichever target
//! answers it. The newest are held in memory too (up to [`RECENT_BYTES`]),
//! so the next turn finds its previous one at once, before the database
//! has it; the database keeps every one for `retention_days`, across
//! restarts and for every replica sharing it. Keeping never waits for the
//! database: a turn goes to a bounded queue that one task writes.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use sqlx::Row;
use tokio::sync::{mpsc, oneshot};

use super::db::{Db, DbError, Flavor};
use super::{Inner, now_ms};

/// The most a kept turn may hold (its input and its response, as JSON);
/// a bigger one is not kept.
pub const MAX_TURN_BYTES: usize = 16 * 1024 * 1024;
/// The most the newest turns hold in memory; past it the oldest leave it
/// (the database still has them).
pub const RECENT_BYTES: usize = 64 * 1024 * 1024;
/// The most turns a chain is followed back through.
pub const MAX_CHAIN: usize = 1_000;
/// Turns waiting to be written at most; past it a turn is kept in memory only.
const QUEUE_TURNS: usize = 1024;
/// The bound on one statement about a kept turn.
const STATEMENT_LIMIT: Duration = Duration::from_secs(5);
/// How long a turn missing from a shared database is looked for again: a
/// replica that answered the previous turn may still be writing it.
const SHARED_MISS_RETRIES: [Duration; 2] = [Duration::from_millis(150), Duration::from_millis(350)];

/// One kept turn.
#[derive(Debug, Clone, PartialEq)]
pub struct KeptTurn {
    /// The response's id.
    pub id: String,
    /// The name of the client key that asked; empty on a gateway without keys.
    pub owner: String,
    /// When it was kept, Unix milliseconds.
    pub created_ms: i64,
    /// The response it continued, if it was chained.
    pub previous_id: Option<String>,
    /// The provider that answered.
    pub maker: String,
    /// Its input items, a JSON array.
    pub input: String,
    /// The response object, JSON.
    pub response: String,
}

impl KeptTurn {
    fn bytes(&self) -> usize {
        self.input.len() + self.response.len()
    }
}

/// Why a chain could not be rebuilt.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// This id is not kept for this key: never kept, deleted, expired or another key's.
    #[error("no kept response {0}")]
    Missing(String),
    /// The chain goes back more than [`MAX_CHAIN`] turns, or past the byte limit given.
    #[error("the chained conversation is longer than {0}")]
    TooLong(String),
    /// The database did not answer.
    #[error("the response store did not answer: {0}")]
    Unavailable(#[from] DbError),
}

/// What the store does with kept turns: the newest in memory, the queue to
/// the database.
pub(super) struct Kept {
    recent: Mutex<Recent>,
    jobs: mpsc::Sender<Job>,
    retention_days: u32,
}

/// The newest kept turns, oldest first, within [`RECENT_BYTES`].
#[derive(Default)]
struct Recent {
    turns: HashMap<String, Arc<KeptTurn>>,
    order: VecDeque<String>,
    bytes: usize,
}

/// What the writing task is asked to do, in order.
pub(super) enum Job {
    /// Write a turn.
    Keep(Arc<KeptTurn>),
    /// Delete one, saying whether the database had it (none: it did not answer).
    Delete(String, oneshot::Sender<Option<bool>>),
}

impl Kept {
    /// An empty keeper of turns for `retention_days`, and the queue its task reads.
    pub(super) fn new(retention_days: u32) -> (Kept, mpsc::Receiver<Job>) {
        let (jobs, queue) = mpsc::channel(QUEUE_TURNS);
        (Kept { recent: Mutex::default(), jobs, retention_days }, queue)
    }

    fn recent(&self) -> std::sync::MutexGuard<'_, Recent> {
        self.recent.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps `turn`: in memory at once, in the database soon. Whether it
    /// was kept (a turn over [`MAX_TURN_BYTES`] is not).
    pub(super) fn keep(&self, turn: KeptTurn) -> bool {
        if turn.bytes() > MAX_TURN_BYTES {
            tracing::warn!(response_id = %turn.id, bytes = turn.bytes(), "a response is too big to keep for a later turn");
            return false;
        }
        let turn = Arc::new(turn);
        self.recent().insert(Arc::clone(&turn));
        if self.jobs.try_send(Job::Keep(turn)).is_err() {
            tracing::warn!("kept responses: the write queue is full; a turn is kept in memory only");
        }
        true
    }

    /// The turn `id` of `owner`, while it is kept.
    pub(super) async fn get(&self, db: Option<&Db>, id: &str, owner: &str) -> Result<Option<Arc<KeptTurn>>, DbError> {
        let oldest = now_ms().saturating_sub(i64::from(self.retention_days) * 86_400_000);
        let found = self.recent().turns.get(id).cloned();
        let found = match (found, db) {
            (Some(turn), _) => Some(turn),
            (None, Some(db)) => read(db, id).await?.map(Arc::new),
            (None, None) => None,
        };
        Ok(found.filter(|turn| turn.owner == owner && turn.created_ms >= oldest))
    }

    /// The turn `id` of `owner`, looked for again a little later when a
    /// shared database does not have it yet.
    async fn get_shared(&self, db: Option<&Db>, id: &str, owner: &str) -> Result<Option<Arc<KeptTurn>>, DbError> {
        let found = self.get(db, id, owner).await?;
        if found.is_some() || db.is_none_or(|db| db.flavor() != Flavor::Postgres) {
            return Ok(found);
        }
        for wait in SHARED_MISS_RETRIES {
            tokio::time::sleep(wait).await;
            if let Some(turn) = self.get(db, id, owner).await? {
                return Ok(Some(turn));
            }
        }
        Ok(None)
    }

    /// The conversation `id` ends, oldest turn first: `id`'s turn and each
    /// it continued, all `owner`'s, at most `max_bytes` of JSON together.
    pub(super) async fn chain(
        &self,
        db: Option<&Db>,
        id: &str,
        owner: &str,
        max_bytes: usize,
    ) -> Result<Vec<Arc<KeptTurn>>, ChainError> {
        let mut turns = Vec::new();
        let mut bytes = 0usize;
        let mut next = Some(id.to_owned());
        while let Some(id) = next {
            if turns.len() == MAX_CHAIN {
                return Err(ChainError::TooLong(format!("{MAX_CHAIN} turns")));
            }
            let turn = self.get_shared(db, &id, owner).await?.ok_or(ChainError::Missing(id))?;
            bytes = bytes.saturating_add(turn.bytes());
            if bytes > max_bytes {
                return Err(ChainError::TooLong(format!("{max_bytes} bytes, the largest request body")));
            }
            next = turn.previous_id.clone();
            turns.push(turn);
        }
        turns.reverse();
        Ok(turns)
    }

    /// Deletes the turn `id` of `owner`: whether there was one. The
    /// database has let it go when this returns.
    pub(super) async fn delete(&self, db: Option<&Db>, id: &str, owner: &str) -> Result<bool, DbError> {
        if self.get(db, id, owner).await?.is_none() {
            return Ok(false);
        }
        self.recent().remove(id);
        let (done, deleted) = oneshot::channel();
        if self.jobs.send(Job::Delete(id.to_owned(), done)).await.is_err() {
            return Err(DbError::Off);
        }
        match tokio::time::timeout(STATEMENT_LIMIT * 2, deleted).await {
            Ok(Ok(Some(_))) => Ok(true),
            Ok(Ok(None) | Err(_)) => Err(DbError::Off),
            Err(_) => Err(DbError::Timeout(STATEMENT_LIMIT * 2)),
        }
    }
}

impl Recent {
    fn insert(&mut self, turn: Arc<KeptTurn>) {
        self.bytes += turn.bytes();
        self.order.push_back(turn.id.clone());
        self.turns.insert(turn.id.clone(), turn);
        while self.bytes > RECENT_BYTES {
            let Some(oldest) = self.order.pop_front() else { break };
            self.remove(&oldest);
        }
    }

    fn remove(&mut self, id: &str) {
        if let Some(turn) = self.turns.remove(id) {
            self.bytes -= turn.bytes();
        }
    }
}

/// What a statement about a kept turn gives, within [`STATEMENT_LIMIT`].
async fn bounded<T>(statement: impl Future<Output = Result<T, sqlx::Error>>) -> Result<T, DbError> {
    Ok(tokio::time::timeout(STATEMENT_LIMIT, statement).await.map_err(|_| DbError::Timeout(STATEMENT_LIMIT))??)
}

/// The turn `id` as the database has it.
async fn read(db: &Db, id: &str) -> Result<Option<KeptTurn>, DbError> {
    let statement =
        sqlx::query("SELECT owner, created_ms, previous_id, maker, input, response FROM responses WHERE id = $1")
            .bind(id)
            .fetch_optional(db.pool());
    let row = bounded(statement).await?;
    row.map(|row| {
        Ok(KeptTurn {
            id: id.to_owned(),
            owner: row.try_get("owner")?,
            created_ms: row.try_get("created_ms")?,
            previous_id: row.try_get("previous_id")?,
            maker: row.try_get("maker")?,
            input: row.try_get("input")?,
            response: row.try_get("response")?,
        })
    })
    .transpose()
}

/// Writes `turn`.
async fn write(db: &Db, turn: &KeptTurn) -> Result<(), DbError> {
    let statement = sqlx::query(
        "INSERT INTO responses (id, owner, created_ms, previous_id, maker, input, response) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(&turn.id)
    .bind(&turn.owner)
    .bind(turn.created_ms)
    .bind(&turn.previous_id)
    .bind(&turn.maker)
    .bind(&turn.input)
    .bind(&turn.response)
    .execute(db.pool());
    bounded(statement).await?;
    Ok(())
}

/// Deletes turn `id`: whether the database had it.
async fn delete(db: &Db, id: &str) -> Result<bool, DbError> {
    let statement = sqlx::query("DELETE FROM responses WHERE id = $1").bind(id).execute(db.pool());
    let done = bounded(statement).await?;
    Ok(done.rows_affected() > 0)
}

/// Deletes the turns kept before `cutoff_ms`; how many went.
pub(super) async fn sweep(db: &Db, cutoff_ms: i64) -> Result<u64, DbError> {
    let deleted = sqlx::query("DELETE FROM responses WHERE created_ms < $1").bind(cutoff_ms).execute(db.pool()).await?;
    Ok(deleted.rows_affected())
}

/// The task that writes kept turns and deletes them, in the order asked,
/// while the store's handle lives. A turn that cannot be written (the
/// database down or failing) stays in memory only, and says so once until
/// a write succeeds again.
pub(super) async fn run(inner: Weak<Inner>, mut jobs: mpsc::Receiver<Job>) {
    let mut failing = false;
    while let Some(job) = jobs.recv().await {
        let db = inner.upgrade().and_then(|inner| inner.db.load_full());
        match job {
            Job::Keep(turn) => {
                let written = match &db {
                    Some(db) => write(db, &turn).await.map_err(|err| err.to_string()),
                    None => Err("the store is down".to_owned()),
                };
                match written {
                    Ok(()) => failing = false,
                    Err(error) if !failing => {
                        failing = true;
                        tracing::warn!(%error, "kept responses: a turn could not be written; kept in memory only");
                    }
                    Err(_) => {}
                }
            }
            Job::Delete(id, done) => {
                let deleted = match &db {
                    Some(db) => delete(db, &id).await.ok(),
                    None => None,
                };
                let _ = done.send(deleted);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(id: &str, bytes: usize) -> Arc<KeptTurn> {
        Arc::new(KeptTurn {
            id: id.to_owned(),
            owner: String::new(),
            created_ms: now_ms(),
            previous_id: None,
            maker: "p".to_owned(),
            input: "x".repeat(bytes),
            response: String::new(),
        })
    }

    #[test]
    fn memory_lets_the_oldest_go_past_its_bound() {
        let mut recent = Recent::default();
        recent.insert(turn("a", RECENT_BYTES / 2));
        recent.insert(turn("b", RECENT_BYTES / 2));
        assert_eq!(recent.bytes, RECENT_BYTES);
        recent.insert(turn("c", 1));
        assert!(!recent.turns.contains_key("a") && recent.turns.contains_key("b") && recent.turns.contains_key("c"));
        assert_eq!(recent.bytes, RECENT_BYTES / 2 + 1);
        recent.remove("b");
        recent.remove("b");
        assert_eq!(recent.bytes, 1, "a turn leaves once");
    }

    #[tokio::test]
    async fn a_turn_is_found_only_by_its_owner_and_a_chain_only_whole() {
        let (kept, _queue) = Kept::new(30);
        let mut first = (*turn("resp_1", 10)).clone();
        first.owner = "ann".to_owned();
        let mut second = first.clone();
        second.id = "resp_2".to_owned();
        second.previous_id = Some("resp_1".to_owned());
        assert!(kept.keep(first) && kept.keep(second));
        assert!(kept.get(None, "resp_2", "ann").await.expect("memory answers").is_some());
        assert!(kept.get(None, "resp_2", "bob").await.expect("memory answers").is_none(), "another key's");
        let chain = kept.chain(None, "resp_2", "ann", 1_000).await.expect("whole");
        let ids: Vec<&str> = chain.iter().map(|turn| turn.id.as_str()).collect();
        assert_eq!(ids, ["resp_1", "resp_2"], "oldest first");
        assert!(matches!(kept.chain(None, "resp_2", "ann", 15).await, Err(ChainError::TooLong(_))));
        kept.recent().remove("resp_1");
        assert!(
            matches!(kept.chain(None, "resp_2", "ann", 1_000).await, Err(ChainError::Missing(id)) if id == "resp_1")
        );
        let mut huge = (*turn("resp_3", MAX_TURN_BYTES + 1)).clone();
        huge.owner = "ann".to_owned();
        assert!(!kept.keep(huge), "too big to keep");
    }
}
