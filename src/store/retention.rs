//! Retention: request rows and kept responses older than `retention_days`
//! are deleted once the store opens and every hour after, so the store
//! stays the size its operator chose.

use std::sync::Weak;
use std::time::Duration;

use super::Inner;
use super::db::{Db, DbError};

/// How often the sweep runs after the first.
pub const SWEEP_EVERY: Duration = Duration::from_secs(3600);
/// The bound on one sweep, so a huge backlog cannot hold a connection for long.
const SWEEP_LIMIT: Duration = Duration::from_secs(60);

/// Deletes the rows that arrived, and the responses kept, before
/// `retention_days` ended at `now_ms`; how many rows went.
pub async fn sweep(db: &Db, retention_days: u32, now_ms: i64) -> Result<u64, DbError> {
    let cutoff = now_ms.saturating_sub(i64::from(retention_days) * 86_400_000);
    let deleted = sqlx::query("DELETE FROM requests WHERE time_ms < $1").bind(cutoff).execute(db.pool()).await?;
    super::responses::sweep(db, cutoff).await?;
    Ok(deleted.rows_affected())
}

/// Sweeps now and every [`SWEEP_EVERY`] while the store's handle lives,
/// whenever the database answers.
pub(super) async fn run(inner: Weak<Inner>, retention_days: u32) {
    let mut every = tokio::time::interval(SWEEP_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(db) = inner.upgrade().and_then(|inner| inner.db.load_full()) else {
            if inner.strong_count() == 0 {
                return;
            }
            continue;
        };
        match tokio::time::timeout(SWEEP_LIMIT, sweep(&db, retention_days, super::now_ms())).await {
            Ok(Ok(0)) => {}
            Ok(Ok(deleted)) => tracing::info!(deleted, retention_days, "request log: old rows deleted"),
            Ok(Err(err)) => tracing::warn!(error = %err, "request log: retention sweep failed; next in an hour"),
            Err(_) => tracing::warn!("request log: retention sweep took over a minute; next in an hour"),
        }
    }
}
