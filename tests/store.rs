//! The store over real databases: a SQLite file in a temporary directory and
//! a throwaway PostgreSQL database (which must be running: CI provides it).
//! Every request leaves a row, refusals included; the log filters and pages
//! newest first; spend is grouped from the rows; a restart keeps budget
//! spend; with the database gone every request is still answered and its row
//! counted as dropped; old rows are swept.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use baton::config;
use baton::mock::{Fault, MockProvider, Schedule};
use baton::store::query::Filter;
use baton::store::{Records, RequestRow, StoreSignals, now_ms, retention};
use serde_json::{Value, json};
use support::backend::{Backend, TempDir};
use support::postgres::TempDb;
use support::{
    Baton, ChatConfig, Proxy, Received, Server, Spawned, admin_get as admin, chat_body, eventually, metrics, post_raw,
    post_with, run,
};

const HARD_LIMIT: Duration = Duration::from_secs(60);
/// How long a row may take to be visible: one batch interval, on a loaded machine.
const ROWS_WITHIN: Duration = Duration::from_secs(15);
const TOKEN: &str = "admin-token-0123456789";
const WEB: &str = "sk-web-0123456789abcdef";
const BATCH: &str = "sk-batch-0123456789abcd";
const KEYS: &str = "[[keys]]\nname = \"web\"\nkey = \"sk-web-0123456789abcdef\"\n\n\
                    [[keys]]\nname = \"batch\"\nkey = \"sk-batch-0123456789abcd\"\n";
/// A token costs a dollar either way, so every answer's cost is its token count.
const PRICE: &str = "price = { input_per_mtok = 1000000.0, output_per_mtok = 1000000.0 }";

/// A route "chat" whose primary fails its first request (a failover) and
/// whose secondary always answers, both priced; the keys, the admin token
/// and `store`.
async fn proxy_config(store: &str, extra_top: &str) -> (String, Vec<baton::mock::MockHandle>) {
    let primary = MockProvider::openai().fault(Fault::Http5xx).schedule(Schedule::FirstRequests(1)).spawned().await;
    let secondary = MockProvider::openai().spawned().await;
    let routes = ChatConfig::new()
        .top(&format!("admin_token = \"{TOKEN}\"\n{extra_top}"))
        .mock("primary", &primary)
        .target_keys(PRICE)
        .mock("secondary", &secondary)
        .target_keys(PRICE)
        .toml();
    (format!("{routes}\n{KEYS}\n{store}"), vec![primary, secondary])
}

/// A SQLite store in a fresh directory named after `name`, and the config
/// over it, with `top` at its top.
async fn on_sqlite(name: &str, top: &str) -> (Backend, String, Vec<baton::mock::MockHandle>) {
    let backend = Backend::sqlite(name);
    let (text, mocks) = proxy_config(&backend.toml(), top).await;
    (backend, text, mocks)
}

async fn start(text: &str) -> (Proxy, baton::AppState) {
    Proxy::start_recorded_text(text).await
}

/// A chat request as key `key` (none: no key) with request id `id`.
async fn ask(server: &impl Server, key: Option<&str>, id: &str, body: &Value) -> u16 {
    let auth = key.map(|key| format!("Bearer {key}"));
    let mut headers = vec![("x-request-id", id)];
    if let Some(auth) = &auth {
        headers.push(("authorization", auth.as_str()));
    }
    post_with(server, "/v1/chat/completions", body, &headers).await.status
}

/// A chat request from the web key straight to `server`.
async fn post_as_web(server: &impl Server) -> Received {
    post_with(server, "/v1/chat/completions", &chat_body(false), &[("authorization", "Bearer sk-web-0123456789abcdef")])
        .await
}

/// The log's rows for `query` once there are at least `count` of them.
async fn rows_eventually(server: &impl Server, query: &str, count: usize) -> Vec<Value> {
    let path = format!("/admin/requests{query}");
    let enough = eventually(ROWS_WITHIN, || async {
        let (status, body) = admin(server, &path, Some(TOKEN)).await;
        status == 200 && body["data"].as_array().is_some_and(|rows| rows.len() >= count)
    })
    .await;
    let (status, body) = admin(server, &path, Some(TOKEN)).await;
    assert!(enough, "{count} rows for {query:?} within {ROWS_WITHIN:?}; got {status} {body}");
    body["data"].as_array().cloned().unwrap_or_default()
}

fn by_id<'a>(rows: &'a [Value], id: &str) -> &'a Value {
    rows.iter().find(|row| row["id"] == id).unwrap_or_else(|| panic!("a row for {id} in {rows:?}"))
}

/// The value of an unlabelled metric line, as `name value`.
fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

async fn every_request_leaves_a_row(backend: Backend) {
    let (text, _mocks) = proxy_config(&backend.toml(), "").await;
    let (proxy, _state) = start(&text).await;
    assert_eq!(ask(&proxy, Some(WEB), "row-failover", &chat_body(true)).await, 200);
    assert_eq!(ask(&proxy, Some(WEB), "row-plain", &chat_body(false)).await, 200);
    assert_eq!(ask(&proxy, None, "row-no-key", &chat_body(false)).await, 401);
    let mut unknown = chat_body(false);
    unknown["model"] = json!("nope");
    assert_eq!(ask(&proxy, Some(WEB), "row-unknown", &unknown).await, 404);
    let malformed = post_raw(&proxy, "/v1/chat/completions", b"{".to_vec(), "application/json").await;
    assert_eq!(malformed.status, 401, "no key: refused before the body is read");
    let headers = [("authorization", "Bearer sk-web-0123456789abcdef"), ("x-request-id", "row-malformed")];
    let client = reqwest::Client::new();
    let mut request = client.post(proxy.url("/v1/chat/completions")).header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(name, value);
    }
    assert_eq!(request.body("{").send().await.expect("answers").status().as_u16(), 400);
    let drill = [
        ("authorization", "Bearer sk-web-0123456789abcdef"),
        ("x-request-id", "row-drill"),
        ("x-baton-drill", "primary=http_5xx"),
        ("x-baton-admin-token", TOKEN),
    ];
    assert_eq!(post_with(&proxy, "/v1/chat/completions", &chat_body(false), &drill).await.status, 200);

    let rows = rows_eventually(&proxy, "", 7).await;
    let failover = by_id(&rows, "row-failover");
    assert_eq!(
        (&failover["status"], &failover["outcome"], &failover["key"], &failover["route"], &failover["model_asked"]),
        (&json!(200), &json!("ok"), &json!("web"), &json!("chat"), &json!("chat")),
        "{failover}"
    );
    assert_eq!(
        (&failover["provider"], &failover["model"], &failover["attempts"]),
        (&json!("secondary"), &json!("secondary-model"), &json!(2))
    );
    let log = failover["attempt_log"].as_array().expect("attempts");
    assert_eq!((&log[0]["provider"], &log[0]["class"]), (&json!("primary"), &json!("http_5xx")), "{failover}");
    assert_eq!((&log[1]["provider"], &log[1]["class"]), (&json!("secondary"), &json!("committed")));
    assert_eq!(failover["dialect"], "openai_chat");
    assert!(failover["ttft_ms"].as_i64().is_some() && failover["duration_ms"].as_i64().is_some(), "{failover}");
    let tokens = failover["input_tokens"].as_i64().unwrap() + failover["output_tokens"].as_i64().unwrap();
    assert!(tokens > 0, "usage recorded: {failover}");
    assert!((failover["cost_usd"].as_f64().unwrap() - tokens as f64).abs() < 1e-6, "a dollar a token: {failover}");
    assert!(failover["request_body"].is_null() && failover["answer_text"].is_null(), "no bodies unless asked");

    let plain = by_id(&rows, "row-plain");
    assert_eq!((&plain["provider"], &plain["attempts"], &plain["status"]), (&json!("primary"), &json!(1), &json!(200)));
    let no_key = by_id(&rows, "row-no-key");
    assert_eq!(
        (&no_key["status"], &no_key["outcome"], &no_key["key"]),
        (&json!(401), &json!("invalid_api_key"), &Value::Null)
    );
    assert!(no_key["route"].is_null() && no_key["provider"].is_null() && no_key["attempts"] == 0, "{no_key}");
    let unknown = by_id(&rows, "row-unknown");
    assert_eq!(
        (&unknown["status"], &unknown["key"], &unknown["model_asked"]),
        (&json!(404), &json!("web"), &json!("nope"))
    );
    let bad = by_id(&rows, "row-malformed");
    assert_eq!((&bad["status"], &bad["key"], &bad["model_asked"]), (&json!(400), &json!("web"), &Value::Null), "{bad}");
    assert_eq!(rows.iter().filter(|row| row["status"] == 401).count(), 2, "both keyless requests: {rows:?}");
    let drilled = by_id(&rows, "row-drill");
    let log = drilled["attempt_log"].as_array().expect("attempts");
    assert_eq!((&log[0]["provider"], &log[0]["class"]), (&json!("primary"), &json!("drill")), "{drilled}");
    assert_eq!((&drilled["provider"], &drilled["status"]), (&json!("secondary"), &json!(200)), "{drilled}");
}

on_each_backend!(every_request_leaves_a_row within HARD_LIMIT => every_request_leaves_a_row_sqlite("rows"), every_request_leaves_a_row_postgres);

async fn the_log_filters_pages_and_sums_spend(backend: Backend) {
    let (text, _mocks) = proxy_config(&backend.toml(), "").await;
    let (proxy, _state) = start(&text).await;
    for i in 0..4 {
        assert_eq!(ask(&proxy, Some(WEB), &format!("web-{i}"), &chat_body(i % 2 == 0)).await, 200);
    }
    for i in 0..3 {
        assert_eq!(ask(&proxy, Some(BATCH), &format!("batch-{i}"), &chat_body(false)).await, 200);
    }
    let mut unknown = chat_body(false);
    unknown["model"] = json!("nope");
    assert_eq!(ask(&proxy, Some(BATCH), "batch-unknown", &unknown).await, 404);
    let all = rows_eventually(&proxy, "", 8).await;
    assert_eq!(all.len(), 8);
    let times: Vec<i64> = all.iter().map(|row| row["time_ms"].as_i64().unwrap()).collect();
    assert!(times.windows(2).all(|pair| pair[0] >= pair[1]), "newest first: {times:?}");

    let (_, web) = admin(&proxy, "/admin/requests?key=web", Some(TOKEN)).await;
    let web = web["data"].as_array().unwrap();
    assert!(web.len() == 4 && web.iter().all(|row| row["key"] == "web"), "{web:?}");
    let (_, answered) =
        admin(&proxy, "/admin/requests?key=batch&outcome=ok&route=chat&provider=primary", Some(TOKEN)).await;
    assert_eq!(answered["data"].as_array().unwrap().len(), 3, "{answered}");
    let (_, none) = admin(&proxy, &format!("/admin/requests?since={}", now_ms() + 60_000), Some(TOKEN)).await;
    assert_eq!(none["data"], json!([]), "nothing from the future");
    let (_, none) = admin(&proxy, "/admin/requests?until=2000-01-01T00:00:00Z", Some(TOKEN)).await;
    assert_eq!(none["data"], json!([]), "nothing before 2000");
    let (_, recent) = admin(&proxy, "/admin/requests?since=1h&limit=1000", Some(TOKEN)).await;
    assert_eq!(recent["data"].as_array().unwrap().len(), 8);

    // Paging: three at a time, with new rows arriving between pages.
    let ids = |rows: &[Value]| rows.iter().map(|row| row["id"].as_str().unwrap().to_owned()).collect::<Vec<_>>();
    let (_, first) = admin(&proxy, "/admin/requests?limit=3", Some(TOKEN)).await;
    let mut paged = ids(first["data"].as_array().unwrap());
    let mut cursor = first["next_cursor"].as_str().map(str::to_owned);
    assert_eq!(ask(&proxy, Some(WEB), "late-0", &chat_body(false)).await, 200);
    assert_eq!(ask(&proxy, Some(WEB), "late-1", &chat_body(false)).await, 200);
    rows_eventually(&proxy, "", 10).await;
    while let Some(at) = cursor.take() {
        let (status, page) = admin(&proxy, &format!("/admin/requests?limit=3&cursor={at}"), Some(TOKEN)).await;
        assert_eq!(status, 200, "{page}");
        paged.extend(ids(page["data"].as_array().unwrap()));
        cursor = page["next_cursor"].as_str().map(str::to_owned);
    }
    assert_eq!(paged, ids(&all), "every row once, in order: the late rows are newer and shift nothing");

    for (query, names) in [
        ("limit=0", "\"limit\""),
        ("limit=abc", "\"limit\""),
        ("cursor=zz", "\"cursor\""),
        ("since=yesterday", "\"since\""),
        ("until=", "\"until\""),
        ("keys=web", "\"keys\""),
        ("key=a&key=b", "\"key\""),
    ] {
        let (status, body) = admin(&proxy, &format!("/admin/requests?{query}"), Some(TOKEN)).await;
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(status == 400 && message.contains(names), "{query}: {status} {body}");
    }
    for token in [None, Some("wrong-token-0123456789")] {
        let (status, _) = admin(&proxy, "/admin/requests", token).await;
        assert_eq!(status, 403, "the log needs the admin token ({token:?})");
        let (status, _) = admin(&proxy, "/admin/spend", token).await;
        assert_eq!(status, 403, "and so does spend ({token:?})");
    }

    // Spend, summed from the rows themselves.
    let all = rows_eventually(&proxy, "", 10).await;
    let (status, spend) = admin(&proxy, "/admin/spend?group_by=key&bucket=hour&since=1d", Some(TOKEN)).await;
    assert_eq!(status, 200, "{spend}");
    let groups = spend["data"].as_array().unwrap();
    for key in ["web", "batch"] {
        let mine: Vec<&Value> = all.iter().filter(|row| row["key"] == key).collect();
        let cost: f64 = mine.iter().filter_map(|row| row["cost_usd"].as_f64()).sum();
        let failovers = mine.iter().filter(|row| row["attempts"].as_i64().unwrap_or(0) > 1).count();
        let output: i64 = mine.iter().filter_map(|row| row["output_tokens"].as_i64()).sum();
        let in_groups: Vec<&Value> = groups.iter().filter(|group| group["group"] == key).collect();
        let sum = |field: &str| in_groups.iter().map(|group| group[field].as_f64().unwrap()).sum::<f64>();
        assert!((sum("cost_usd") - cost).abs() < 1e-6, "{key}: {cost} in {groups:?}");
        assert_eq!(sum("requests") as usize, mine.len(), "{key}");
        assert_eq!(sum("failovers") as usize, failovers, "{key}");
        assert_eq!(sum("output_tokens") as i64, output, "{key}");
        assert!(in_groups.iter().all(|group| group["bucket"].as_str().unwrap().ends_with(":00:00.000Z")), "hours");
    }
    assert_eq!(groups.iter().map(|g| g["failovers"].as_i64().unwrap()).sum::<i64>(), 1, "one failover in all");
    let (_, providers) = admin(&proxy, "/admin/spend?group_by=provider&bucket=day", Some(TOKEN)).await;
    let names: Vec<&str> = providers["data"].as_array().unwrap().iter().map(|g| g["group"].as_str().unwrap()).collect();
    for name in ["primary", "secondary", "-"] {
        assert!(names.contains(&name), "{name} in {providers}");
    }
    let (status, body) = admin(&proxy, "/admin/spend?group_by=colour", Some(TOKEN)).await;
    assert!(status == 400 && body["error"]["message"].as_str().unwrap().contains("\"group_by\""), "{body}");
}

on_each_backend!(the_log_filters_pages_and_sums_spend within HARD_LIMIT => the_log_filters_pages_and_sums_spend_sqlite("filters"), the_log_filters_pages_and_sums_spend_postgres);

#[test]
fn without_an_admin_token_the_log_is_off_even_on_loopback() {
    run(HARD_LIMIT, async {
        let (_backend, text, _mocks) = on_sqlite("no-token", "").await;
        let (proxy, _state) = start(&text.replace(&format!("admin_token = \"{TOKEN}\""), "")).await;
        for path in ["/admin/requests", "/admin/spend"] {
            let (status, body) = admin(&proxy, path, Some(TOKEN)).await;
            assert!(status == 403 && body.to_string().contains("no admin_token"), "{path}: {status} {body}");
        }
    });
}

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
fn bodies_are_kept_only_when_asked_capped_and_without_keys() {
    run(HARD_LIMIT, async {
        let backend = Backend::sqlite("bodies");
        let store = format!("{}log_bodies = true\n", backend.toml());
        let (text, _mocks) = proxy_config(&store, "").await;
        let text = text.replacen(
            "[[providers]]\nname = \"secondary\"",
            "[[providers]]\nname = \"secondary\"\napi_key = \"provider-secret-9876543210\"",
            1,
        );
        let (proxy, _state) = start(&text).await;
        let mut body = chat_body(true);
        let long = "x".repeat(20_000);
        body["messages"][0]["content"] =
            json!(format!("my keys: provider-secret-9876543210 {BATCH} sk-live-ABCDEFGHIJKLMNOPQRSTUVWX {long}"));
        assert_eq!(ask(&proxy, Some(WEB), "with-body", &body).await, 200);
        let rows = rows_eventually(&proxy, "", 1).await;
        let logged = rows[0]["request_body"].as_str().expect("the body is kept");
        assert!(logged.contains("my keys: [redacted] [redacted] [redacted] xxx"), "{}", &logged[..200]);
        for secret in ["provider-secret", "sk-batch", "sk-live"] {
            assert!(!logged.contains(secret), "{secret} kept");
        }
        assert!(logged.len() <= 16 * 1024 && logged.len() > 15 * 1024, "capped at 16 KiB: {}", logged.len());
        let answer = rows[0]["answer_text"].as_str().expect("the answer's text is kept");
        assert!(!answer.is_empty() && answer.len() <= 16 * 1024, "{answer}");
    });
}

/// Counts what the store says, for a store started without a proxy.
#[derive(Default)]
struct Counts {
    written: AtomicU64,
    dropped: AtomicU64,
}

impl StoreSignals for Counts {
    fn records_dropped(&self, rows: u64) {
        self.dropped.fetch_add(rows, Ordering::Relaxed);
    }
    fn records_written(&self, rows: u64) {
        self.written.fetch_add(rows, Ordering::Relaxed);
    }
    fn store_up(&self, _up: bool) {}
}

fn store_config(store: &str, retention_days: u32) -> config::Config {
    let text = format!(
        "{store}retention_days = {retention_days}\n\n{}",
        ChatConfig::new().provider("p", baton::providers::ProviderKind::OpenAi, "http://127.0.0.1:1/v1").toml()
    );
    config::parse(&text, "retention.toml", &|_| None).expect("valid")
}

async fn open(config: &config::Config) -> (Records, Arc<Counts>) {
    let counts = Arc::new(Counts::default());
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
        assert!(out.contains("reachable, schema current (version 1)"), "{out}");
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
