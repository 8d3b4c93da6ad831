//! Writes a batch of request rows as one multi-row `INSERT` in one
//! transaction: one round trip and one commit (one fsync) per batch, not
//! per row, which is what lets one writer keep up with the proxy.

use std::mem::take;

use sqlx::AssertSqlSafe;

use super::db::{Db, DbError, Flavor};
use super::row::RequestRow;

/// The columns written, in the order each row's values are bound (`seq`
/// is the database's to number).
const COLUMNS: [&str; 22] = [
    "id",
    "time_ms",
    "key",
    "dialect",
    "route",
    "model_asked",
    "provider",
    "model",
    "attempts",
    "attempt_log",
    "ttft_ms",
    "duration_ms",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "reasoning_tokens",
    "cost_usd",
    "outcome",
    "status",
    "trace_id",
    "request_body",
    "answer_text",
];

/// Values bound per row.
const BOUND: usize = COLUMNS.len();
/// Where `cost_usd` is among them. It is bound as text and cast: sqlx 0.9's
/// `Any` driver sends a missing `f64` to PostgreSQL as a `float4`, so a
/// statement first prepared with a missing cost then refused every row
/// with one ("incorrect binary data format"); text is text either way.
const COST: usize = 16;

/// The most rows one statement carries: 512 × 22 values stays under
/// SQLite's 32,766 bound variables and PostgreSQL's 65,535.
pub const MAX_ROWS: usize = 512;

/// The rows one statement carries: a batch is written as statements of
/// these sizes only, largest first, so each connection prepares at most
/// four statements once and reuses them. Preparing a statement of the
/// batch's own size every time cost SQLite more than the rows' writing.
const CHUNKS: [usize; 4] = [MAX_ROWS, 64, 8, 1];

/// Writes `rows` in one transaction, moving their text out rather than
/// copying it: the rows are spent once written, or once they could not be.
pub async fn insert(db: &Db, rows: &mut [RequestRow]) -> Result<(), DbError> {
    let mut tx = db.pool().begin().await?;
    for chunk in chunks(rows) {
        let sql = statement(chunk.len(), db.flavor());
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for row in chunk {
            let log = row.attempt_log();
            query = query
                .bind(take(&mut row.id))
                .bind(row.time_ms)
                .bind(take(&mut row.key))
                .bind(row.dialect)
                .bind(take(&mut row.route))
                .bind(take(&mut row.model_asked))
                .bind(take(&mut row.provider))
                .bind(take(&mut row.model))
                .bind(i64::from(row.attempts))
                .bind(log)
                .bind(row.ttft_ms.map(count))
                .bind(count(row.duration_ms))
                .bind(row.usage.input_tokens.map(count))
                .bind(row.usage.output_tokens.map(count))
                .bind(row.usage.cached_input_tokens.map(count))
                .bind(row.usage.reasoning_tokens.map(count))
                .bind(row.cost_usd.filter(|usd| usd.is_finite()).map(|usd| usd.to_string()))
                .bind(take(&mut row.outcome))
                .bind(i64::from(row.status))
                .bind(take(&mut row.trace_id))
                .bind(take(&mut row.request_body))
                .bind(take(&mut row.answer_text));
        }
        query.execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// `rows` cut into statements of the [`CHUNKS`] sizes, largest first.
fn chunks(mut rows: &mut [RequestRow]) -> impl Iterator<Item = &mut [RequestRow]> {
    std::iter::from_fn(move || {
        let size = CHUNKS.into_iter().find(|size| *size <= rows.len())?;
        let (chunk, rest) = std::mem::take(&mut rows).split_at_mut(size);
        rows = rest;
        Some(chunk)
    })
}

/// `INSERT INTO requests (…) VALUES ($1, …), (…)` for `rows` rows. Only
/// counts go into the text; every value is bound. SQLite gets plain `?`:
/// it resolves each `$N` by name against those before it, which made
/// preparing a 512-row statement take 150 ms (measured) instead of 4.
fn statement(rows: usize, flavor: Flavor) -> String {
    let mut sql = format!("INSERT INTO requests ({}) VALUES ", COLUMNS.join(", "));
    for row in 0..rows {
        sql.push_str(if row == 0 { "(" } else { ", (" });
        for column in 0..BOUND {
            if column > 0 {
                sql.push_str(", ");
            }
            if column == COST {
                sql.push_str("CAST(");
            }
            match flavor {
                Flavor::Sqlite => sql.push('?'),
                Flavor::Postgres => {
                    sql.push('$');
                    sql.push_str(itoa::Buffer::new().format(row * BOUND + column + 1));
                }
            }
            if column == COST {
                sql.push_str(" AS DOUBLE PRECISION)");
            }
        }
        sql.push(')');
    }
    sql
}

/// A count as the database's signed 64 bits, saturating.
pub(super) fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_cut_into_the_four_statement_sizes_largest_first() {
        let mut rows = vec![RequestRow::new("r", "openai_chat", 0); 2 * MAX_ROWS + 64 * 3 + 8 + 5];
        let sizes: Vec<usize> = chunks(&mut rows).map(|chunk| chunk.len()).collect();
        assert_eq!(sizes, [MAX_ROWS, MAX_ROWS, 64, 64, 64, 8, 1, 1, 1, 1, 1]);
        assert_eq!(chunks(&mut rows[..0]).count(), 0);
    }

    #[test]
    fn each_row_binds_every_column_once_in_order() {
        let sql = statement(2, Flavor::Postgres);
        assert!(sql.starts_with("INSERT INTO requests (id, time_ms, key,"));
        assert!(!sql.contains("seq"), "the database numbers the rows");
        assert!(sql.contains("($1, $2, $3,") && sql.contains("$22), ($23, $24,") && sql.ends_with("$44)"), "{sql}");
        let sqlite = statement(2, Flavor::Sqlite);
        assert_eq!(sqlite.matches('?').count(), 44, "{sqlite}");
        assert!(sqlite.ends_with("?, ?)") && !sqlite.contains('$'), "{sqlite}");
        assert_eq!(COLUMNS[COST], "cost_usd");
        assert!(sql.contains("CAST($17 AS DOUBLE PRECISION), $18") && sql.contains("CAST($39 AS"), "{sql}");
    }
}
