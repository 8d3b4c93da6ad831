//! The store on its own, without a proxy: old rows swept by age, at start
//! and on demand; a full queue drops and counts at once and never waits; a
//! missing cost and a present one share a statement.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use baton::config;
use baton::store::query::Filter;
use baton::store::{CountedSignals, Records, RequestRow, now_ms, retention};
use support::backend::Backend;
use support::records::{HARD_LIMIT, ROWS_WITHIN};
use support::{ChatConfig, eventually, run};

fn store_config(store: &str, retention_days: u32) -> config::Config {
    let text = format!(
        "{store}retention_days = {retention_days}\n\n{}",
        ChatConfig::new().provider("p", baton::providers::ProviderKind::OpenAi, "http://127.0.0.1:1/v1").toml()
    );
    config::parse(&text, "retention.toml", &|_| None).expect("valid")
}

async fn open(config: &config::Config) -> (Records, Arc<CountedSignals>) {
    let counts = Arc::new(CountedSignals::default());
    let (records, started) = Records::start(config, Arc::clone(&counts) as _).expect("a store");
    assert!(started.first_open.await.expect("told"), "the database opens");
    (records, counts)
}

fn row(id: &str, age_days: i64) -> RequestRow {
    let mut row = RequestRow::new(id, "openai_chat", now_ms() - age_days * 86_400_000 - 1000);
    row.outcome = "ok".to_owned();
    row.status = 200;
    row
}

async fn ids(records: &Records) -> Vec<String> {
    let db = records.db().expect("up");
    let page = baton::store::query::requests(&db, &Filter { limit: 100, ..Filter::default() }).await.expect("read");
    page.data.iter().map(|row| row["id"].as_str().unwrap().to_owned()).collect()
}

async fn retention_sweeps_old_rows(backend: Backend) {
    // Kept ten years first, so the sweep at start leaves these rows alone.
    let (records, counts) = open(&store_config(&backend.toml(), 3650)).await;
    for (id, age) in [("old-1", 5), ("old-2", 3), ("new-1", 1), ("new-2", 0)] {
        records.record(row(id, age));
    }
    assert!(records.drain(Duration::from_secs(10)).await);
    assert_eq!(counts.written.load(Ordering::Relaxed), 4);
    assert_eq!(ids(&records).await, ["new-2", "new-1", "old-2", "old-1"]);
    let db = records.db().unwrap();
    assert_eq!(retention::sweep(&db, 2, now_ms()).await.expect("sweep"), 2);
    assert_eq!(ids(&records).await, ["new-2", "new-1"], "older than two days: gone");

    // Once at start, too: opened again with two days' retention.
    records.record(row("old-3", 4));
    assert!(records.drain(Duration::from_secs(10)).await);
    assert_eq!(ids(&records).await, ["new-2", "new-1", "old-3"]);
    drop((db, records));
    let (records, _) = open(&store_config(&backend.toml(), 2)).await;
    let swept = eventually(ROWS_WITHIN, || async { ids(&records).await == ["new-2", "new-1"] }).await;
    assert!(swept, "the sweep at start removed old-3: {:?}", ids(&records).await);
}

on_each_backend!(retention_sweeps_old_rows within HARD_LIMIT => retention_sweeps_old_rows_sqlite("retention"), retention_sweeps_old_rows_postgres);

#[test]
fn a_full_queue_drops_and_counts_and_never_waits() {
    run(HARD_LIMIT, async {
        let backend = Backend::sqlite("full");
        let (records, counts) = open(&store_config(&backend.toml(), 30)).await;
        // On this one-thread runtime the writer cannot run during the loop:
        // the queue fills, and every row past it is dropped at once.
        let offered = baton::store::QUEUE_ROWS + 3000;
        for i in 0..offered {
            records.record(row(&format!("r-{i}"), 0));
        }
        let overflow = u64::try_from(offered - baton::store::QUEUE_ROWS).unwrap();
        assert_eq!(counts.dropped.load(Ordering::Relaxed), overflow, "past the queue: dropped and counted");
        assert!(records.drain(Duration::from_secs(30)).await);
        assert_eq!(counts.written.load(Ordering::Relaxed), u64::try_from(baton::store::QUEUE_ROWS).unwrap());
        assert_eq!(counts.dropped.load(Ordering::Relaxed), overflow, "what was queued was written");
    });
}

/// Rows with and without a cost, alternating through the same one-row
/// statement: a statement prepared with a missing cost must still take one.
async fn a_cost_may_be_missing_or_not_from_row_to_row(backend: Backend) {
    let (records, counts) = open(&store_config(&backend.toml(), 30)).await;
    // Missing on every third: each connection of the pool meets both.
    let cost = |i: u32| (!i.is_multiple_of(3)).then_some(0.25 * f64::from(i));
    for i in 0..24 {
        let mut row = row(&format!("c-{i}"), 0);
        row.cost_usd = cost(i);
        records.record(row);
        assert!(records.drain(Duration::from_secs(10)).await);
    }
    assert_eq!((counts.written.load(Ordering::Relaxed), counts.dropped.load(Ordering::Relaxed)), (24, 0));
    let db = records.db().expect("still up");
    let page = baton::store::query::requests(&db, &Filter { limit: 100, ..Filter::default() }).await.expect("read");
    let costs: Vec<Option<f64>> = page.data.iter().rev().map(|row| row["cost_usd"].as_f64()).collect();
    assert_eq!(costs, (0..24).map(cost).collect::<Vec<_>>());
}

on_each_backend!(a_cost_may_be_missing_or_not_from_row_to_row within HARD_LIMIT => a_cost_may_be_missing_or_not_from_row_to_row_sqlite("costs"), a_cost_may_be_missing_or_not_from_row_to_row_postgres);
