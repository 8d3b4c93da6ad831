//! The request log summed for the page's charts: requests, failovers and
//! mean time to first token per provider per bucket of time; spend per
//! key, route or provider per day; and the usage of the requests that
//! failed over, per route and day, for pricing at the route's first target.
//! Aggregates only, never a row, each query's groups bounded: the busiest
//! few groups by name and the rest summed as one.

use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use super::db::{Db, DbError};
use super::query::{GroupBy, is_drill};
use crate::event::Usage;

/// Groups a chart names before the rest are summed as [`OTHER`]: more
/// colours than this do not read as distinct series.
pub const TOP_GROUPS: i64 = 8;
/// The name of the group that sums every group past the busiest few.
pub const OTHER: &str = "(other)";
/// The most groups one query returns, whatever the rows hold.
pub const MAX_GROUPS: i64 = 5000;

/// A span of time cut into equal buckets, aligned to UTC: the first bucket
/// starts at `since_ms`, the last holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// The first bucket's start, Unix milliseconds.
    pub since_ms: i64,
    /// How long one bucket is.
    pub bucket_ms: i64,
    /// How many buckets.
    pub buckets: i64,
}

impl Window {
    /// `buckets` buckets of `bucket_ms` (above zero), the last holding `now_ms`.
    pub fn ending(now_ms: i64, bucket_ms: i64, buckets: i64) -> Window {
        let bucket_ms = bucket_ms.max(1);
        let current = now_ms.div_euclid(bucket_ms).saturating_mul(bucket_ms);
        let since_ms = current.saturating_sub(bucket_ms.saturating_mul(buckets.max(1) - 1));
        Window { since_ms, bucket_ms, buckets: buckets.max(1) }
    }

    /// Where the last bucket ends.
    pub fn until_ms(&self) -> i64 {
        self.since_ms.saturating_add(self.bucket_ms.saturating_mul(self.buckets))
    }
}

/// One provider's requests in one bucket: those it answered, or, as `-`,
/// those no provider answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Activity {
    /// The provider that answered (`-`: none; [`OTHER`]: the rest summed).
    pub provider: String,
    /// The bucket's start, Unix milliseconds.
    pub bucket_ms: i64,
    /// Requests.
    pub requests: i64,
    /// Of them, those answered after an earlier attempt failed, drills' left out.
    pub failovers: i64,
    /// Their mean time to the first token, as the client saw it.
    pub ttft_ms_mean: Option<f64>,
}

/// Requests, failovers and mean time to first token per answering provider
/// and bucket of `window`, oldest bucket first; the providers past the
/// busiest [`TOP_GROUPS`] summed as [`OTHER`].
pub async fn activity(db: &Db, window: &Window) -> Result<Vec<Activity>, DbError> {
    let columns = format!(
        "CAST(COALESCE(SUM(CASE WHEN attempts > 1 AND NOT {drill} THEN 1 ELSE 0 END), 0) AS BIGINT) AS failovers, \
         CAST(AVG(ttft_ms) AS DOUBLE PRECISION) AS ttft_ms",
        drill = is_drill()
    );
    let rows = per_group_and_bucket(db, window, &top_groups("provider", "COUNT(*)"), &columns).await?;
    rows.iter()
        .map(|row| {
            Ok(Activity {
                provider: row.try_get("grp")?,
                bucket_ms: row.try_get("bucket")?,
                requests: row.try_get("requests")?,
                failovers: row.try_get("failovers")?,
                ttft_ms_mean: row.try_get("ttft_ms")?,
            })
        })
        .collect()
}

/// One group's spend in one bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct Spend {
    /// The key, route or provider (`-`: none; [`OTHER`]: the rest summed).
    pub group: String,
    /// The bucket's start, Unix milliseconds.
    pub bucket_ms: i64,
    /// Requests.
    pub requests: i64,
    /// What they cost, USD (a request without a price costs nothing here).
    pub cost_usd: f64,
}

/// Requests and cost per `group` and bucket of `window`, oldest bucket
/// first; the groups past the [`TOP_GROUPS`] that spent most summed as [`OTHER`].
pub async fn spend(db: &Db, group: GroupBy, window: &Window) -> Result<Vec<Spend>, DbError> {
    let grp = top_groups(group.column(), "COALESCE(SUM(cost_usd), 0.0)");
    let columns = "CAST(COALESCE(SUM(cost_usd), 0.0) AS DOUBLE PRECISION) AS cost_usd";
    let rows = per_group_and_bucket(db, window, &grp, columns).await?;
    rows.iter()
        .map(|row| {
            Ok(Spend {
                group: row.try_get("grp")?,
                bucket_ms: row.try_get("bucket")?,
                requests: row.try_get("requests")?,
                cost_usd: row.try_get("cost_usd")?,
            })
        })
        .collect()
}

/// What the priced requests of one route that failed over used and cost in one bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct FailedOver {
    /// The route that served them.
    pub route: String,
    /// The bucket's start, Unix milliseconds.
    pub bucket_ms: i64,
    /// Requests answered after an earlier attempt failed, with a cost.
    pub requests: i64,
    /// Their usage summed, cache reads held to the prompt's size row by row,
    /// so a price applied to it gives the sum of the rows' costs at that price.
    pub usage: Usage,
    /// What the providers that answered them cost, USD.
    pub cost_usd: f64,
}

/// The usage and cost of the requests that failed over (more than one
/// attempt sent; drills left out) and were answered at a known cost, per route and bucket
/// of `window`, newest bucket first; at most [`MAX_GROUPS`] groups, so with
/// more routes than that allows the oldest buckets are left out.
pub async fn failed_over(db: &Db, window: &Window) -> Result<Vec<FailedOver>, DbError> {
    // Token sums as doubles: a sum of BIGINTs can overflow in SQLite, and a
    // double is exact to 2^53 tokens.
    let sql = format!(
        "SELECT route, (time_ms / $1) * $1 AS bucket, COUNT(*) AS requests, \
         CAST(COALESCE(SUM(CAST(input_tokens AS DOUBLE PRECISION)), 0.0) AS DOUBLE PRECISION) AS input_tokens, \
         CAST(COALESCE(SUM(CAST(CASE WHEN input_tokens IS NULL THEN 0 \
             WHEN cached_tokens > input_tokens THEN input_tokens ELSE COALESCE(cached_tokens, 0) END \
             AS DOUBLE PRECISION)), 0.0) AS DOUBLE PRECISION) AS cached_tokens, \
         CAST(COALESCE(SUM(CAST(output_tokens AS DOUBLE PRECISION)), 0.0) AS DOUBLE PRECISION) AS output_tokens, \
         CAST(COALESCE(SUM(cost_usd), 0.0) AS DOUBLE PRECISION) AS cost_usd \
         FROM requests WHERE time_ms >= $2 AND time_ms < $3 AND attempts > 1 AND NOT {drill} \
         AND provider IS NOT NULL AND route IS NOT NULL AND cost_usd IS NOT NULL \
         GROUP BY route, bucket ORDER BY bucket DESC, route LIMIT $4",
        drill = is_drill()
    );
    let rows = per_route(db, sql, window).await?;
    rows.iter().map(failed_over_row).collect()
}

/// One route's requests in one bucket, the drills' apart.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteFailovers {
    /// The route that served them.
    pub route: String,
    /// The bucket's start, Unix milliseconds.
    pub bucket_ms: i64,
    /// Requests that were not drills.
    pub requests: i64,
    /// Of them, those answered after an earlier attempt failed.
    pub failovers: i64,
    /// Drills' requests.
    pub drills: i64,
    /// Of them, those answered after an earlier attempt failed.
    pub drill_failovers: i64,
}

/// Each route's requests and failovers per bucket of `window`, drills
/// apart, oldest bucket first; at most [`MAX_GROUPS`] groups.
pub async fn route_failovers(db: &Db, window: &Window) -> Result<Vec<RouteFailovers>, DbError> {
    let count = |when: &str| format!("CAST(COALESCE(SUM(CASE WHEN {when} THEN 1 ELSE 0 END), 0) AS BIGINT)");
    let drill = is_drill();
    let sql = format!(
        "SELECT route, (time_ms / $1) * $1 AS bucket, {requests} AS requests, {failovers} AS failovers, \
         {drills} AS drills, {drill_failovers} AS drill_failovers \
         FROM requests WHERE time_ms >= $2 AND time_ms < $3 AND route IS NOT NULL \
         GROUP BY route, bucket ORDER BY bucket, route LIMIT $4",
        requests = count(&format!("NOT {drill}")),
        failovers = count(&format!("attempts > 1 AND NOT {drill}")),
        drills = count(&drill),
        drill_failovers = count(&format!("attempts > 1 AND {drill}")),
    );
    let rows = per_route(db, sql, window).await?;
    rows.iter()
        .map(|row| {
            Ok(RouteFailovers {
                route: row.try_get("route")?,
                bucket_ms: row.try_get("bucket")?,
                requests: row.try_get("requests")?,
                failovers: row.try_get("failovers")?,
                drills: row.try_get("drills")?,
                drill_failovers: row.try_get("drill_failovers")?,
            })
        })
        .collect()
}

fn failed_over_row(row: &AnyRow) -> Result<FailedOver, DbError> {
    // `as` saturates and maps NaN to 0: a sum is never negative, at worst huge.
    let tokens = |name: &str| row.try_get::<f64, _>(name).map(|sum| Some(sum as u64));
    Ok(FailedOver {
        route: row.try_get("route")?,
        bucket_ms: row.try_get("bucket")?,
        requests: row.try_get("requests")?,
        usage: Usage {
            input_tokens: tokens("input_tokens")?,
            output_tokens: tokens("output_tokens")?,
            cached_input_tokens: tokens("cached_tokens")?,
            reasoning_tokens: None,
        },
        cost_usd: row.try_get("cost_usd")?,
    })
}

/// The expression that names a row's group by `column`: itself (`-` when
/// empty) when it is among the [`TOP_GROUPS`] ranked highest by `rank` in
/// the window (`$2` to `$3`), else [`OTHER`]. Ties rank by name, so the
/// choice is the same on every read and in both databases.
fn top_groups(column: &str, rank: &str) -> String {
    let named = format!("COALESCE({column}, '-')");
    format!(
        "CASE WHEN {named} IN (SELECT {named} FROM requests WHERE time_ms >= $2 AND time_ms < $3 \
         GROUP BY {named} ORDER BY {rank} DESC, {named} LIMIT $4) THEN {named} ELSE '{OTHER}' END"
    )
}

/// The rows of requests in `window` per group (`grp`, an SQL expression)
/// and bucket, oldest bucket first: each with its `grp`, its `bucket`, its
/// count of `requests`, and `columns` (more aggregates, with their names).
async fn per_group_and_bucket(db: &Db, window: &Window, grp: &str, columns: &str) -> Result<Vec<AnyRow>, DbError> {
    let sql = format!(
        "SELECT {grp} AS grp, (time_ms / $1) * $1 AS bucket, COUNT(*) AS requests, {columns} \
         FROM requests WHERE time_ms >= $2 AND time_ms < $3 \
         GROUP BY grp, bucket ORDER BY bucket, grp LIMIT $5"
    );
    Ok(bound(sql, window).fetch_all(db.pool()).await?)
}

/// `sql` with the window bound to `$1` (bucket), `$2`..`$3` (span), `$4`
/// (named groups) and `$5` (groups returned).
/// The rows of `sql`, a query per route and bucket of `window`: `$1` the
/// bucket, `$2` and `$3` the span, `$4` at most [`MAX_GROUPS`] rows.
async fn per_route(db: &Db, sql: String, window: &Window) -> Result<Vec<AnyRow>, DbError> {
    let query = sqlx::query(AssertSqlSafe(sql)).bind(window.bucket_ms).bind(window.since_ms).bind(window.until_ms());
    Ok(query.bind(MAX_GROUPS).fetch_all(db.pool()).await?)
}

fn bound(sql: String, window: &Window) -> sqlx::query::Query<'static, sqlx::Any, sqlx::any::AnyArguments> {
    sqlx::query(AssertSqlSafe(sql))
        .bind(window.bucket_ms)
        .bind(window.since_ms)
        .bind(window.until_ms())
        .bind(TOP_GROUPS)
        .bind(MAX_GROUPS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_ends_with_the_bucket_that_holds_now() {
        let hour = 3_600_000;
        let now = 1_796_117_400_123; // 2026-12-01T09:30:00.123Z
        let window = Window::ending(now, hour, 24);
        assert_eq!(window.since_ms, 1_796_117_400_123 - 30 * 60_000 - 123 - 23 * hour, "on the hour, 23 before");
        assert_eq!(window.until_ms(), window.since_ms + 24 * hour);
        assert!(window.since_ms <= now && now < window.until_ms());
        assert_eq!(Window::ending(now, 0, 0).buckets, 1, "never empty, never a zero bucket");
    }
}
