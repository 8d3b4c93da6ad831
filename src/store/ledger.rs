//! The spend ledger read back: what each key and route spent over the
//! budget windows still open, summed per slice of time, so budgets start
//! where the last run left them instead of at zero.

use std::time::Duration;

use sqlx::Row;

use super::db::{Db, DbError};

/// The longest budget window (a day), plus one of its slices.
const LOOKBACK_MS: i64 = 86_400_000 + 86_400_000 / 60;
/// The minute window, plus one of its slices.
const MINUTE_LOOKBACK_MS: i64 = 61_000;

/// How finely a [`Spent`] was summed, which says which windows it fills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// Per second, over the last minute: for the minute windows.
    Second,
    /// Per minute, over the last day: for the hour and day windows.
    Minute,
}

/// What one key spent on one route in one slice of time.
#[derive(Debug, Clone, PartialEq)]
pub struct Spent {
    /// The client key, if the requests had one.
    pub key: Option<String>,
    /// The route that served them.
    pub route: Option<String>,
    /// The sum of their costs.
    pub usd: f64,
    /// How long ago the slice ended (the newest such spend could have been).
    pub age: Duration,
    /// Which windows it belongs to.
    pub resolution: Resolution,
}

/// Everything the ledger holds from before `before_ms` that a budget window
/// open at `now_ms` still covers.
pub async fn spent_before(db: &Db, before_ms: i64, now_ms: i64) -> Result<Vec<Spent>, DbError> {
    let mut spent = slices(db, before_ms, now_ms, 1000, MINUTE_LOOKBACK_MS, Resolution::Second).await?;
    spent.extend(slices(db, before_ms, now_ms, 60_000, LOOKBACK_MS, Resolution::Minute).await?);
    Ok(spent)
}

async fn slices(
    db: &Db,
    before_ms: i64,
    now_ms: i64,
    slice_ms: i64,
    lookback_ms: i64,
    resolution: Resolution,
) -> Result<Vec<Spent>, DbError> {
    let rows = sqlx::query(
        "SELECT key, route, (time_ms / $1) * $1 AS slice, CAST(SUM(cost_usd) AS DOUBLE PRECISION) AS usd \
         FROM requests WHERE cost_usd > 0 AND time_ms >= $2 AND time_ms < $3 \
         GROUP BY key, route, slice",
    )
    .bind(slice_ms)
    .bind(now_ms.saturating_sub(lookback_ms))
    .bind(before_ms)
    .fetch_all(db.pool())
    .await?;
    let mut spent = Vec::with_capacity(rows.len());
    for row in rows {
        let slice: i64 = row.try_get("slice")?;
        let usd: Option<f64> = row.try_get("usd")?;
        let ended = slice.saturating_add(slice_ms - 1).min(now_ms);
        let age = Duration::from_millis(u64::try_from(now_ms.saturating_sub(ended)).unwrap_or(0));
        spent.push(Spent {
            key: row.try_get("key")?,
            route: row.try_get("route")?,
            usd: usd.unwrap_or(0.0),
            age,
            resolution,
        });
    }
    Ok(spent)
}
