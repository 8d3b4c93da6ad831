//! The store across a restart, an outage and `kill -9`: budget spend
//! survives a restart; with the database gone every request is still
//! answered and its row counted as dropped; `baton check` reports the
//! store; a killed baton loses no row it said it wrote.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use baton::mock::MockProvider;
use serde_json::{Value, json};
use support::backend::{Backend, TempDir};
use support::postgres::TempDb;
use support::records::*;
use support::{Baton, ChatConfig, Spawned, admin_get as admin, chat_body, eventually, metrics, run};

/// A budget of $5 an hour on key web: one answer (a dollar a token) spends it.
async fn budget_config(store: &str) -> (String, baton::mock::MockHandle) {
    let provider = MockProvider::openai().spawned().await;
    let routes = ChatConfig::new().mock("p", &provider).target_keys(PRICE).toml();
    let keys = KEYS.replacen(
        "key = \"sk-web-0123456789abcdef\"",
        "key = \"sk-web-0123456789abcdef\"\nbudget = { usd_per_hour = 5.0 }",
        1,
    );
    (format!("admin_token = \"{TOKEN}\"\n{routes}\n{keys}\n{store}"), provider)
}

#[test]
fn a_restart_keeps_budget_spend_sqlite_binary() {
    run(HARD_LIMIT, async {
        // No [store]: the default, a baton.db next to the config file.
        let (text, _provider) = budget_config("").await;
        let config = support::config_file(&format!("budget-restart-{:08x}", fastrand::u32(..)), &text);
        let db = config.parent().unwrap().join("baton.db");
        let _ = std::fs::remove_file(&db);
        let baton = Baton::serve(&config).start().await;
        assert_eq!(ask(&baton, Some(WEB), "spend-1", &chat_body(false)).await, 200);
        assert_eq!(ask(&baton, Some(WEB), "spend-2", &chat_body(false)).await, 429, "the budget is spent");
        baton.signal("TERM");
        assert!(baton.exit_within(Duration::from_secs(20)).await.success());
        assert!(db.exists(), "the rows went to {db:?}");

        let baton = Baton::serve(&config).start().await;
        let refused = post_as_web(&baton).await;
        assert_eq!(refused.status, 429, "still spent after the restart: {}", refused.raw);
        assert_eq!(refused.json()["error"]["code"], "budget_exceeded");
        assert_eq!(ask(&baton, Some(BATCH), "other-key", &chat_body(false)).await, 200, "another key has no budget");
        let rows = rows_eventually(&baton, "?key=web", 3).await;
        assert_eq!(rows[0]["outcome"], "budget_exceeded", "the refusal after the restart is in the log: {rows:?}");
        let _ = std::fs::remove_dir_all(config.parent().unwrap());
    });
}

#[test]
fn a_restart_keeps_budget_spend_postgres() {
    run(HARD_LIMIT, async {
        let backend = Backend::postgres().await;
        let (text, _provider) = budget_config(&backend.toml()).await;
        {
            let (proxy, state) = start(&text).await;
            assert_eq!(ask(&proxy, Some(WEB), "spend-1", &chat_body(false)).await, 200);
            rows_eventually(&proxy, "", 1).await;
            drop((proxy, state));
        }
        let (proxy, _state) = start(&text).await;
        let refused = post_as_web(&proxy).await;
        assert_eq!(
            (refused.status, refused.json()["error"]["code"].clone()),
            (429, json!("budget_exceeded")),
            "{}",
            refused.raw
        );
    });
}

#[test]
fn with_postgres_stopped_every_request_is_answered_and_rows_are_counted_dropped() {
    run(HARD_LIMIT, async {
        let mut db = TempDb::create().await;
        let backend = format!("[store]\nbackend = \"postgres\"\nurl = \"{}\"\n", db.url());
        let (text, _mocks) = proxy_config(&backend, "").await;
        let (proxy, _state) = start(&text).await;
        for i in 0..3 {
            assert_eq!(ask(&proxy, Some(WEB), &format!("before-{i}"), &chat_body(i == 0)).await, 200);
        }
        rows_eventually(&proxy, "", 3).await;
        assert_eq!(metric(&metrics(&proxy).await, "baton_store_up"), Some(1.0));

        db.stop();
        for i in 0..20 {
            assert_eq!(ask(&proxy, Some(WEB), &format!("after-{i}"), &chat_body(i % 2 == 0)).await, 200, "request {i}");
        }
        let down = eventually(ROWS_WITHIN, || async {
            let text = metrics(&proxy).await;
            metric(&text, "baton_store_up") == Some(0.0)
                && metric(&text, "baton_records_dropped_total").is_some_and(|n| n >= 1.0)
        })
        .await;
        assert!(down, "the store went down and counted its drops:\n{}", metrics(&proxy).await);
        for path in ["/admin/requests", "/admin/history"] {
            let (status, body) = admin(&proxy, path, Some(TOKEN)).await;
            assert_eq!((status, &body["error"]["code"]), (503, &json!("store_unavailable")), "{path}: {body}");
        }
        for i in 0..5 {
            assert_eq!(ask(&proxy, Some(WEB), &format!("down-{i}"), &chat_body(false)).await, 200, "still answered");
        }

        // The server comes back: the store re-joins and writes again.
        db.restart().await;
        let back = eventually(Duration::from_secs(30), || async {
            metric(&metrics(&proxy).await, "baton_store_up") == Some(1.0)
        })
        .await;
        assert!(back, "the store re-joined");
        assert_eq!(ask(&proxy, Some(WEB), "back-0", &chat_body(false)).await, 200);
        let rows = rows_eventually(&proxy, "", 4).await;
        assert_eq!(rows[0]["id"], "back-0", "written again: {rows:?}");
        let ids: Vec<&Value> = rows[1..].iter().map(|row| &row["id"]).collect();
        assert_eq!(
            ids,
            [&json!("before-2"), &json!("before-1"), &json!("before-0")],
            "what was written survived the crash"
        );
    });
}

#[test]
fn with_the_sqlite_file_unwritable_every_request_is_answered_and_the_store_is_down_once() {
    run(HARD_LIMIT, async {
        // A regular file where the directory should be: nobody, root included, can create the database.
        let dir = TempDir::new("unwritable");
        let blocker = dir.path().join("not-a-dir");
        std::fs::write(&blocker, "").unwrap();
        let store = format!("[store]\npath = \"{}\"\n", blocker.join("baton.db").display());
        let (text, _mocks) = proxy_config(&store, "").await;
        let config = support::config_file(&format!("unwritable-{:08x}", fastrand::u32(..)), &text);
        let baton = Baton::serve(&config).start().await;
        for i in 0..10 {
            assert_eq!(ask(&baton, Some(WEB), &format!("r-{i}"), &chat_body(i % 2 == 0)).await, 200, "request {i}");
        }
        let dropped = eventually(ROWS_WITHIN, || async {
            let text = metrics(&baton).await;
            metric(&text, "baton_store_up") == Some(0.0) && metric(&text, "baton_records_dropped_total") == Some(10.0)
        })
        .await;
        assert!(dropped, "every row counted as dropped:\n{}", metrics(&baton).await);
        let (status, _) = admin(&baton, "/admin/requests", Some(TOKEN)).await;
        assert_eq!(status, 503);
        let down_lines = baton.log_lines().iter().filter(|line| line.contains("store unavailable")).count();
        assert_eq!(down_lines, 1, "down is said once: {:#?}", baton.log_lines());
        let _ = std::fs::remove_dir_all(config.parent().unwrap());
    });
}

#[test]
fn check_reports_the_store_and_its_schema() {
    run(HARD_LIMIT, async {
        let (_backend, text, _mocks) = on_sqlite("check", "").await;
        let config = support::config_file(&format!("check-{:08x}", fastrand::u32(..)), &text);
        let report = |config: &PathBuf| {
            let out = Baton::once(&["check", "--config", config.to_str().unwrap()]).output().expect("check runs");
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        assert!(report(&config).contains("not created yet"), "{}", report(&config));
        drop(start(&text).await);
        let out = report(&config);
        assert!(out.contains("reachable, schema current (version 2)"), "{out}");
        let _ = std::fs::remove_dir_all(config.parent().unwrap());
    });
}

/// `kill -9` under load: the rows the store said it wrote are all in the
/// file, no answered request has more than one row, the file is sound, and
/// a baton started again on it reads it and writes on.
#[test]
fn kill_9_under_load_loses_at_most_the_batch_in_flight_and_corrupts_nothing() {
    run(HARD_LIMIT, async {
        let (text, _mocks) = proxy_config("", "").await;
        let config = support::config_file(&format!("kill-9-{:08x}", fastrand::u32(..)), &text);
        let file = config.parent().unwrap().join("baton.db");
        let baton = Baton::serve(&config).start().await;

        // Eight clients asking back to back until the process is gone.
        let answered = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut clients = Vec::new();
        for client in 0..8 {
            let (url, answered, stop) = (baton.url("/v1/chat/completions"), Arc::clone(&answered), Arc::clone(&stop));
            clients.push(tokio::spawn(async move {
                let http = reqwest::Client::new();
                for i in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let sent = http.post(&url).bearer_auth(WEB).header("x-request-id", format!("load-{client}-{i}"));
                    let Ok(response) = sent.json(&chat_body(i % 2 == 0)).send().await else { break };
                    if response.status() == 200 && response.bytes().await.is_ok() {
                        answered.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
        let busy = eventually(ROWS_WITHIN, || async {
            metric(&metrics(&baton).await, "baton_records_written_total").is_some_and(|rows| rows >= 200.0)
        })
        .await;
        assert!(busy, "rows were being written under load");
        let written = metric(&metrics(&baton).await, "baton_records_written_total").unwrap_or(0.0) as u64;
        baton.signal("KILL");
        let status = baton.exit_within(Duration::from_secs(10)).await;
        assert!(!status.success(), "killed, not stopped");
        stop.store(true, Ordering::Relaxed);
        for client in clients {
            let _ = client.await;
        }
        let answered = answered.load(Ordering::Relaxed);

        let url = format!("sqlite://{}?mode=ro", file.display());
        let pool = sqlx::sqlite::SqlitePoolOptions::new().connect(&url).await.expect("the file opens");
        let check: String = sqlx::query_scalar("PRAGMA integrity_check").fetch_one(&pool).await.expect("checked");
        assert_eq!(check, "ok", "the file is sound after kill -9");
        let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM requests").fetch_one(&pool).await.expect("counted");
        let distinct: i64 =
            sqlx::query_scalar("SELECT COUNT(DISTINCT id) FROM requests").fetch_one(&pool).await.expect("counted");
        pool.close().await;
        let rows = u64::try_from(rows).unwrap();
        assert!(rows >= written, "every row written before the kill is kept: {rows} in the file, {written} written");
        assert_eq!(i64::try_from(rows).unwrap(), distinct, "no request has two rows");
        assert!(rows <= answered + 8, "no row for a request that was not sent: {rows} rows, {answered} answered");
        eprintln!("kill -9 under load: {answered} answered, {written} written before, {rows} kept");

        let baton = Baton::serve(&config).start().await;
        assert_eq!(ask(&baton, Some(WEB), "after-kill", &chat_body(false)).await, 200);
        let written_on = eventually(ROWS_WITHIN, || async {
            admin(&baton, "/admin/requests?limit=1", Some(TOKEN)).await.1["data"][0]["id"] == "after-kill"
        })
        .await;
        assert!(written_on, "the store writes on after the kill");
        let _ = std::fs::remove_dir_all(config.parent().unwrap());
    });
}
