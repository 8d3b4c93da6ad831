//! The store read back for the admin endpoints: request rows newest first,
//! filtered and paged by a keyset cursor (a row's time and sequence number,
//! so a page never shifts when rows arrive), and spend grouped by key,
//! route, provider or model per hour or day, summed from those rows.

use serde_json::{Value, json};
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use super::db::{Db, DbError};
use super::time::rfc3339;
use crate::access::DRILL_KEY;

/// Rows a page holds when the request does not say.
pub const DEFAULT_LIMIT: u32 = 100;
/// The most rows one page may hold.
pub const MAX_LIMIT: u32 = 1000;

/// Which rows `/admin/requests` wants.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// Only this key's.
    pub key: Option<String>,
    /// Only this route's.
    pub route: Option<String>,
    /// Only those this provider answered.
    pub provider: Option<String>,
    /// Only those that ended so.
    pub outcome: Option<String>,
    /// Only those that arrived at or after this (Unix ms).
    pub since: Option<i64>,
    /// Only those that arrived before this (Unix ms).
    pub until: Option<i64>,
    /// At most this many.
    pub limit: u32,
    /// Only those after this place in the order.
    pub cursor: Option<Cursor>,
}

/// Whether a row is a drill's, as SQL: a scheduled drill's (recorded under
/// [`DRILL_KEY`]) or a request an operator drilled (an attempt of class
/// `drill`). A drill fails over on purpose, so its failovers are counted
/// apart from the incidents' (here in the spend, and in the charts).
pub(super) fn is_drill() -> String {
    format!("(COALESCE(key, '') = '{DRILL_KEY}' OR attempt_log LIKE '%\"class\":\"drill\"%')")
}

/// A place in the log's order (newest first): the last row of a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    time_ms: i64,
    seq: i64,
}

impl Cursor {
    /// The cursor as the client holds it: opaque, URL-safe.
    pub fn encode(self) -> String {
        format!("{:x}-{:x}", self.time_ms, self.seq)
    }

    /// A cursor a previous page gave, or `None` for anything else.
    pub fn decode(text: &str) -> Option<Cursor> {
        let (time, seq) = text.split_once('-')?;
        let parse = |hex: &str| (!hex.is_empty() && hex.len() <= 16).then(|| u64::from_str_radix(hex, 16).ok())?;
        let (time_ms, seq) = (i64::try_from(parse(time)?).ok()?, i64::try_from(parse(seq)?).ok()?);
        Some(Cursor { time_ms, seq })
    }
}

/// One page of the log.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The rows, newest first, as JSON objects.
    pub data: Vec<Value>,
    /// Where the next page starts, when there is one.
    pub next_cursor: Option<String>,
}

/// The rows `filter` asks for, newest first.
pub async fn requests(db: &Db, filter: &Filter) -> Result<Page, DbError> {
    let mut sql = String::from(
        "SELECT seq, id, time_ms, key, dialect, route, model_asked, provider, model, attempts, attempt_log, \
         ttft_ms, duration_ms, input_tokens, output_tokens, cached_tokens, reasoning_tokens, cost_usd, outcome, \
         status, trace_id, request_body, answer_text FROM requests WHERE 1 = 1",
    );
    let mut binds: Vec<Bind> = Vec::new();
    let mut condition = |sql: &mut String, column: &str, op: &str, value: Bind| {
        binds.push(value);
        sql.push_str(&format!(" AND {column} {op} ${}", binds.len()));
    };
    for (column, value) in
        [("key", &filter.key), ("route", &filter.route), ("provider", &filter.provider), ("outcome", &filter.outcome)]
    {
        if let Some(value) = value {
            condition(&mut sql, column, "=", Bind::Text(value.clone()));
        }
    }
    if let Some(since) = filter.since {
        condition(&mut sql, "time_ms", ">=", Bind::Int(since));
    }
    if let Some(until) = filter.until {
        condition(&mut sql, "time_ms", "<", Bind::Int(until));
    }
    if let Some(cursor) = filter.cursor {
        condition(&mut sql, "time_ms", "<=", Bind::Int(cursor.time_ms));
        let at = binds.len();
        binds.push(Bind::Int(cursor.seq));
        sql.push_str(&format!(" AND (time_ms < ${at} OR seq < ${})", at + 1));
    }
    binds.push(Bind::Int(i64::from(filter.limit) + 1));
    sql.push_str(&format!(" ORDER BY time_ms DESC, seq DESC LIMIT ${}", binds.len()));
    let mut query = sqlx::query(AssertSqlSafe(sql));
    for bind in binds {
        query = match bind {
            Bind::Text(text) => query.bind(text),
            Bind::Int(n) => query.bind(n),
        };
    }
    let mut rows = query.fetch_all(db.pool()).await?;
    let more = rows.len() > usize::try_from(filter.limit).unwrap_or(usize::MAX);
    rows.truncate(usize::try_from(filter.limit).unwrap_or(usize::MAX));
    let next_cursor = match rows.last() {
        Some(last) if more => Some(Cursor { time_ms: last.try_get("time_ms")?, seq: last.try_get("seq")? }.encode()),
        _ => None,
    };
    let data = rows.iter().map(row_json).collect::<Result<_, _>>()?;
    Ok(Page { data, next_cursor })
}

/// A value bound to a query, in the order its placeholder was written.
enum Bind {
    Text(String),
    Int(i64),
}

fn row_json(row: &AnyRow) -> Result<Value, DbError> {
    let text = |name: &str| row.try_get::<Option<String>, _>(name);
    let int = |name: &str| row.try_get::<Option<i64>, _>(name);
    let time_ms: i64 = row.try_get("time_ms")?;
    let log: String = row.try_get("attempt_log")?;
    Ok(json!({
        "id": text("id")?,
        "time": rfc3339(time_ms),
        "time_ms": time_ms,
        "key": text("key")?,
        "dialect": text("dialect")?,
        "route": text("route")?,
        "model_asked": text("model_asked")?,
        "provider": text("provider")?,
        "model": text("model")?,
        "attempts": int("attempts")?,
        "attempt_log": serde_json::from_str::<Value>(&log).unwrap_or(Value::Null),
        "ttft_ms": int("ttft_ms")?,
        "duration_ms": int("duration_ms")?,
        "input_tokens": int("input_tokens")?,
        "output_tokens": int("output_tokens")?,
        "cached_tokens": int("cached_tokens")?,
        "reasoning_tokens": int("reasoning_tokens")?,
        "cost_usd": row.try_get::<Option<f64>, _>("cost_usd")?,
        "outcome": text("outcome")?,
        "status": int("status")?,
        "trace_id": text("trace_id")?,
        "request_body": text("request_body")?,
        "answer_text": text("answer_text")?,
    }))
}

/// What spend is grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    /// The client key (`-` for none).
    Key,
    /// The route that served.
    Route,
    /// The provider that answered.
    Provider,
    /// The upstream model that answered.
    Model,
}

impl GroupBy {
    /// The name the endpoint takes.
    pub fn from_name(name: &str) -> Option<GroupBy> {
        match name {
            "key" => Some(GroupBy::Key),
            "route" => Some(GroupBy::Route),
            "provider" => Some(GroupBy::Provider),
            "model" => Some(GroupBy::Model),
            _ => None,
        }
    }

    /// The column it groups by.
    pub(super) fn column(self) -> &'static str {
        match self {
            GroupBy::Key => "key",
            GroupBy::Route => "route",
            GroupBy::Provider => "provider",
            GroupBy::Model => "model",
        }
    }
}

/// How long one bucket of spend is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bucket {
    /// An hour (UTC).
    Hour,
    /// A day (UTC).
    Day,
}

impl Bucket {
    /// The name the endpoint takes.
    pub fn from_name(name: &str) -> Option<Bucket> {
        match name {
            "hour" => Some(Bucket::Hour),
            "day" => Some(Bucket::Day),
            _ => None,
        }
    }

    /// Its length in milliseconds.
    pub fn millis(self) -> i64 {
        match self {
            Bucket::Hour => 3_600_000,
            Bucket::Day => 86_400_000,
        }
    }
}

/// Requests, failovers (drills' apart, with the rate of the rest), tokens and cost per `group` and `bucket` for the
/// rows since `since_ms`, newest bucket first.
pub async fn spend(db: &Db, group: GroupBy, bucket: Bucket, since_ms: i64) -> Result<Vec<Value>, DbError> {
    let sql = format!(
        "SELECT COALESCE({column}, '-') AS grp, (time_ms / $1) * $1 AS bucket, COUNT(*) AS requests, \
         CAST(COALESCE(SUM(CASE WHEN attempts > 1 AND NOT {drill} THEN 1 ELSE 0 END), 0) AS BIGINT) AS failovers, \
         CAST(COALESCE(SUM(CASE WHEN {drill} THEN 1 ELSE 0 END), 0) AS BIGINT) AS drills, \
         CAST(COALESCE(SUM(CASE WHEN attempts > 1 AND {drill} THEN 1 ELSE 0 END), 0) AS BIGINT) AS drill_failovers, \
         CAST(COALESCE(SUM(input_tokens), 0) AS BIGINT) AS input_tokens, \
         CAST(COALESCE(SUM(output_tokens), 0) AS BIGINT) AS output_tokens, \
         CAST(COALESCE(SUM(cost_usd), 0.0) AS DOUBLE PRECISION) AS cost_usd \
         FROM requests WHERE time_ms >= $2 GROUP BY grp, bucket ORDER BY bucket DESC, grp",
        column = group.column(),
        drill = is_drill(),
    );
    let rows = sqlx::query(AssertSqlSafe(sql)).bind(bucket.millis()).bind(since_ms).fetch_all(db.pool()).await?;
    rows.iter()
        .map(|row| {
            let (requests, drills) = (row.try_get::<i64, _>("requests")?, row.try_get::<i64, _>("drills")?);
            let failovers = row.try_get::<i64, _>("failovers")?;
            Ok(json!({
                "group": row.try_get::<String, _>("grp")?,
                "bucket": rfc3339(row.try_get("bucket")?),
                "requests": requests,
                "failovers": failovers,
                "failover_rate": failover_rate(failovers, requests - drills),
                "drills": drills,
                "drill_failovers": row.try_get::<i64, _>("drill_failovers")?,
                "input_tokens": row.try_get::<i64, _>("input_tokens")?,
                "output_tokens": row.try_get::<i64, _>("output_tokens")?,
                "cost_usd": row.try_get::<f64, _>("cost_usd")?,
            }))
        })
        .collect()
}

/// The share of `requests` that failed over, `None` with none.
pub fn failover_rate(failovers: i64, requests: i64) -> Option<f64> {
    (requests > 0).then(|| failovers as f64 / requests as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_round_trips_and_nothing_else_decodes() {
        let cursor = Cursor { time_ms: 1_796_117_400_123, seq: 42 };
        assert_eq!(Cursor::decode(&cursor.encode()), Some(cursor));
        for bad in ["", "-", "12", "zz-1", "1-", "-1", "1-2-3", "ffffffffffffffff-1", "11111111111111111-1"] {
            assert_eq!(Cursor::decode(bad), None, "{bad:?}");
        }
    }
}
