//! `GET /admin/history`, what the page's charts draw, over real databases (a
//! SQLite file in a temporary directory and a PostgreSQL server of the
//! test's own): requests, failovers and mean time to first token per
//! provider, spend per key, route and provider per day, and what the
//! requests that failed over cost against their route's first target —
//! each matching the rows the requests left. Parameters it cannot read are
//! a 400 naming them; it is open on loopback without an admin token, like
//! `/admin/status`, and without a store it is a 404.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use baton::config;
use baton::mock::{Fault, MockProvider, Schedule};
use baton::store::history::{self, OTHER, TOP_GROUPS, Window};
use baton::store::query::GroupBy;
use baton::store::time::rfc3339;
use baton::store::{Records, RequestRow, StoreSignals, now_ms};
use serde_json::{Value, json};
use support::backend::Backend;
use support::{
    ChatConfig, Proxy, Server, Spawned, admin_get as get, chat_body, eventually, post_with, provider_toml, run,
};

const HARD_LIMIT: Duration = Duration::from_secs(60);
/// How long a row may take to be visible: one batch interval, on a loaded machine.
const ROWS_WITHIN: Duration = Duration::from_secs(15);
const TOKEN: &str = "admin-token-0123456789";
const KEYS: &str = "[[keys]]\nname = \"web\"\nkey = \"sk-web-0123456789abcdef\"\n\n\
                    [[keys]]\nname = \"batch\"\nkey = \"sk-batch-0123456789abcd\"\n";
const WEB: &str = "sk-web-0123456789abcdef";
const BATCH: &str = "sk-batch-0123456789abcd";
/// The first target charges half a dollar an input token and a dollar an output token,
const FIRST_PRICE: &str = "price = { input_per_mtok = 500000.0, output_per_mtok = 1000000.0 }";
/// the second a dime a token either way.
const SECOND_PRICE: &str = "price = { input_per_mtok = 100000.0, output_per_mtok = 100000.0 }";
/// A breaker that never opens, so every failure is a failover and not a skip.
const NEVER_OPENS: &str = "breaker = { failure_threshold = 1000000, window = 1000000 }";
const DAY_MS: i64 = 86_400_000;

/// Route "chat": a primary that fails its first two requests, then answers,
/// and a secondary, both priced. Route "unpriced": an unpriced provider that
/// always fails, then the same secondary. Keys web and batch, the admin token.
async fn history_config(store: &str) -> (String, Vec<baton::mock::MockHandle>) {
    let primary = MockProvider::openai().fault(Fault::Http5xx).schedule(Schedule::FirstRequests(2)).spawned().await;
    let secondary = MockProvider::openai().spawned().await;
    let broken = MockProvider::openai().fault(Fault::Http5xx).spawned().await;
    let chat = ChatConfig::new()
        .top(&format!("admin_token = \"{TOKEN}\""))
        .mock("primary", &primary)
        .provider_keys(NEVER_OPENS)
        .target_keys(FIRST_PRICE)
        .mock("secondary", &secondary)
        .target_keys(SECOND_PRICE)
        .toml();
    let broken_provider = provider_toml("broken", broken.provider_kind(), &broken.base_url());
    let unpriced = format!(
        "{}\n{NEVER_OPENS}\n\n[[routes]]\nmodel = \"unpriced\"\ntargets = [{{ provider = \"broken\", model = \"broken-model\" }}, \
         {{ provider = \"secondary\", model = \"secondary-model\", {SECOND_PRICE} }}]\n",
        broken_provider.trim_end()
    );
    (format!("{chat}\n{unpriced}\n{KEYS}\n{store}"), vec![primary, secondary, broken])
}

async fn start(text: &str) -> Proxy {
    Proxy::start_recorded_text(text).await.0
}

/// A chat request for `model` as `key`, streamed or not; its status.
async fn ask(server: &impl Server, key: &str, model: &str, stream: bool) -> u16 {
    let mut body = chat_body(stream);
    body["model"] = json!(model);
    let auth = format!("Bearer {key}");
    post_with(server, "/v1/chat/completions", &body, &[("authorization", auth.as_str())]).await.status
}

/// Every row of the log, once there are `count`.
async fn rows(server: &impl Server, count: usize) -> Vec<Value> {
    let enough = eventually(ROWS_WITHIN, || async {
        let (_, body) = get(server, "/admin/requests?limit=1000", Some(TOKEN)).await;
        body["data"].as_array().is_some_and(|rows| rows.len() >= count)
    })
    .await;
    let (status, body) = get(server, "/admin/requests?limit=1000", Some(TOKEN)).await;
    assert!(enough && status == 200, "{count} rows within {ROWS_WITHIN:?}: {status} {body}");
    body["data"].as_array().cloned().unwrap()
}

/// Whether a row is a drill's: recorded under the drill key, or with a
/// drilled attempt.
fn is_drill(row: &Value) -> bool {
    row["key"] == "drill" || row["attempt_log"].as_array().is_some_and(|log| log.iter().any(|a| a["class"] == "drill"))
}

/// A row's text field, `-` when empty.
fn name(row: &Value, field: &str) -> String {
    row[field].as_str().unwrap_or("-").to_owned()
}

fn bucket(row: &Value, bucket_ms: i64) -> String {
    let time = row["time_ms"].as_i64().unwrap();
    rfc3339(time.div_euclid(bucket_ms) * bucket_ms)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// The rows' requests, failovers (drills' left out) and mean first token per provider and minute.
fn expected_activity(rows: &[Value]) -> BTreeMap<(String, String), (i64, i64, Option<f64>)> {
    let mut sums: BTreeMap<(String, String), (i64, i64, f64, i64)> = BTreeMap::new();
    for row in rows {
        let entry = sums.entry((name(row, "provider"), bucket(row, 60_000))).or_default();
        entry.0 += 1;
        entry.1 += i64::from(row["attempts"].as_i64().unwrap() > 1 && !is_drill(row));
        if let Some(ttft) = row["ttft_ms"].as_i64() {
            (entry.2, entry.3) = (entry.2 + ttft as f64, entry.3 + 1);
        }
    }
    sums.into_iter().map(|(at, (n, f, ttft, timed))| (at, (n, f, (timed > 0).then(|| ttft / timed as f64)))).collect()
}

/// The rows' requests and cost per `field` and UTC day.
fn expected_spend(rows: &[Value], field: &str) -> BTreeMap<(String, String), (i64, f64)> {
    let mut sums: BTreeMap<(String, String), (i64, f64)> = BTreeMap::new();
    for row in rows {
        let entry = sums.entry((name(row, field), bucket(row, DAY_MS))).or_default();
        entry.0 += 1;
        entry.1 += row["cost_usd"].as_f64().unwrap_or(0.0);
    }
    sums
}

async fn history_sums_what_was_sent(backend: Backend) {
    let (text, _mocks) = history_config(&backend.toml()).await;
    let proxy = start(&text).await;
    // Two failovers on chat (web), then two answers by its primary (batch),
    // one failover on unpriced (web), and one request no route serves.
    for (key, model, stream, status) in [
        (WEB, "chat", true, 200),
        (WEB, "chat", false, 200),
        (BATCH, "chat", true, 200),
        (BATCH, "chat", false, 200),
        (WEB, "unpriced", false, 200),
        (BATCH, "nope", false, 404),
    ] {
        assert_eq!(ask(&proxy, key, model, stream).await, status, "{key} on {model}");
    }
    // And one drilled: its primary fails on purpose, the secondary answers.
    let mut drill = chat_body(false);
    drill["model"] = json!("chat");
    let auth = format!("Bearer {WEB}");
    let headers =
        [("authorization", auth.as_str()), ("x-baton-drill", "primary=http_5xx"), ("x-baton-admin-token", TOKEN)];
    assert_eq!(post_with(&proxy, "/v1/chat/completions", &drill, &headers).await.status, 200);
    let rows = rows(&proxy, 7).await;
    assert_eq!(rows.iter().filter(|row| is_drill(row)).count(), 1, "{rows:?}");
    let (status, history) = get(&proxy, "/admin/history?range=1h&days=2", Some(TOKEN)).await;
    assert_eq!(status, 200, "{history}");

    // Activity: per provider and minute, as the rows say, and as sent.
    let activity = &history["activity"];
    assert_eq!(
        (&activity["range"], &activity["bucket_ms"], &activity["buckets"]),
        (&json!("1h"), &json!(60_000), &json!(60))
    );
    let mut got = BTreeMap::new();
    for group in activity["data"].as_array().unwrap() {
        let at = (group["provider"].as_str().unwrap().to_owned(), group["bucket"].as_str().unwrap().to_owned());
        let ttft = group["ttft_ms_mean"].as_f64();
        got.insert(at, (group["requests"].as_i64().unwrap(), group["failovers"].as_i64().unwrap(), ttft));
    }
    let want = expected_activity(&rows);
    assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "{activity}");
    for (at, (requests, failovers, ttft)) in &want {
        let (got_requests, got_failovers, got_ttft) = got[at];
        assert_eq!((got_requests, got_failovers), (*requests, *failovers), "{at:?}");
        assert!(ttft.zip(got_ttft).is_none_or(|(a, b)| close(a, b)) && ttft.is_some() == got_ttft.is_some(), "{at:?}");
    }
    let per_provider = |provider: &str| {
        got.iter().filter(|((p, _), _)| p == provider).fold((0, 0), |(n, f), (_, (gn, gf, _))| (n + gn, f + gf))
    };
    assert_eq!(per_provider("secondary"), (4, 3), "three answered after a failover, and the drill apart");
    assert_eq!(per_provider("primary"), (2, 0));
    assert_eq!(per_provider("-"), (1, 0), "the request no provider answered");

    // Spend per key, route and provider per day.
    let spend = &history["spend"];
    assert_eq!((&spend["bucket_ms"], &spend["buckets"]), (&json!(DAY_MS), &json!(2)));
    for (field, list) in [("key", "by_key"), ("route", "by_route"), ("provider", "by_provider")] {
        let got: BTreeMap<(String, String), (i64, f64)> = spend[list]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| {
                let at = (g["group"].as_str().unwrap().to_owned(), g["bucket"].as_str().unwrap().to_owned());
                (at, (g["requests"].as_i64().unwrap(), g["cost_usd"].as_f64().unwrap()))
            })
            .collect();
        let want = expected_spend(&rows, field);
        assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "{list}: {spend}");
        for (at, (requests, cost)) in &want {
            assert!(got[at].0 == *requests && close(got[at].1, *cost), "{list} {at:?}: {:?} against {cost}", got[at]);
        }
    }

    // The cost of failovers: chat's at its primary's price, unpriced's not compared.
    let cost = &history["failover_cost"];
    let failed: Vec<&Value> =
        rows.iter().filter(|row| row["attempts"].as_i64().unwrap() > 1 && !is_drill(row)).collect();
    let chat: Vec<&Value> = failed.iter().copied().filter(|row| row["route"] == "chat").collect();
    assert_eq!((failed.len(), chat.len()), (3, 2), "{rows:?}");
    let tokens = |row: &Value, field: &str| row[field].as_i64().unwrap() as f64;
    let paid: f64 = chat.iter().map(|row| row["cost_usd"].as_f64().unwrap()).sum();
    let at_first: f64 = chat.iter().map(|row| 0.5 * tokens(row, "input_tokens") + tokens(row, "output_tokens")).sum();
    let paid_check: f64 =
        chat.iter().map(|row| 0.1 * (tokens(row, "input_tokens") + tokens(row, "output_tokens"))).sum();
    assert!(close(paid, paid_check), "the secondary charged a dime a token: {paid} {paid_check}");
    let total = &cost["total"];
    assert_eq!((&total["requests"], &cost["not_compared"]), (&json!(2), &json!(1)), "{cost}");
    assert!(close(total["cost_usd"].as_f64().unwrap(), paid), "{cost} against {paid}");
    assert!(close(total["first_target_usd"].as_f64().unwrap(), at_first), "{cost} against {at_first}");
    assert!(at_first > paid, "the primary is the dearer: {cost}");
    for group in cost["data"].as_array().unwrap() {
        if group["route"] == "chat" {
            assert_eq!(group["first_target"], json!({ "provider": "primary", "model": "primary-model" }));
        } else {
            assert_eq!((&group["route"], &group["first_target_usd"]), (&json!("unpriced"), &Value::Null), "{group}");
            assert_eq!(group["first_target"], json!({ "provider": "broken", "model": "broken-model" }));
        }
    }

    // Each route's failover rate per day, the drill apart.
    let rates: BTreeMap<String, Value> = history["failover_rate"]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| (row["route"].as_str().unwrap().to_owned(), row.clone()))
        .collect();
    let counts = |route: &str| {
        let row = &rates[route];
        [&row["requests"], &row["failovers"], &row["drills"], &row["drill_failovers"]].map(|n| n.as_i64().unwrap())
    };
    assert_eq!(counts("chat"), [4, 2, 1, 1], "{rates:?}");
    assert_eq!(rates["chat"]["rate"], 0.5);
    assert_eq!(counts("unpriced"), [1, 1, 0, 0], "{rates:?}");
    let (_, spend) = get(&proxy, "/admin/spend?group_by=route&bucket=day", Some(TOKEN)).await;
    let chat = spend["data"].as_array().unwrap().iter().find(|row| row["group"] == "chat").cloned().unwrap();
    assert_eq!((&chat["requests"], &chat["failovers"], &chat["drills"]), (&json!(5), &json!(2), &json!(1)), "{chat}");
    assert_eq!((&chat["failover_rate"], &chat["drill_failovers"]), (&json!(0.5), &json!(1)), "{chat}");

    every_range_holds_every_request(&proxy).await;
    refusals_name_their_parameter(&proxy).await;
}

/// Each range cuts its span into its buckets, and the last hour's requests are in all of them.
async fn every_range_holds_every_request(proxy: &Proxy) {
    for (query, range, bucket_ms, buckets) in [
        ("range=1h", "1h", 60_000, 60),
        ("range=24h", "24h", 3_600_000, 24),
        ("", "24h", 3_600_000, 24),
        ("range=7d", "7d", 6 * 3_600_000, 28),
        ("range=30d&days=365", "30d", DAY_MS, 30),
    ] {
        let (status, history) = get(proxy, &format!("/admin/history?{query}"), Some(TOKEN)).await;
        assert_eq!(status, 200, "{query}: {history}");
        let activity = &history["activity"];
        assert_eq!(
            (&activity["range"], &activity["bucket_ms"], &activity["buckets"]),
            (&json!(range), &json!(bucket_ms), &json!(buckets))
        );
        let since = baton::store::time::parse_instant(activity["since"].as_str().unwrap(), 0).unwrap();
        assert_eq!(since % bucket_ms, 0, "{query}: buckets start on the bucket");
        let requests: i64 = activity["data"].as_array().unwrap().iter().map(|g| g["requests"].as_i64().unwrap()).sum();
        assert_eq!(requests, 7, "{query}: six sent and one drilled: {activity}");
        let expected_days = if query.contains("days=365") { 365 } else { 30 };
        assert_eq!(history["spend"]["days"], expected_days, "{query}");
    }
}

async fn refusals_name_their_parameter(proxy: &Proxy) {
    for (query, names) in [
        ("range=2h", "\"range\""),
        ("range=", "\"range\""),
        ("days=0", "\"days\""),
        ("days=366", "\"days\""),
        ("days=ten", "\"days\""),
        ("range=1h&range=24h", "\"range\""),
        ("since=1h", "\"since\""),
    ] {
        let (status, body) = get(proxy, &format!("/admin/history?{query}"), Some(TOKEN)).await;
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(status == 400 && message.contains(names), "{query}: {status} {body}");
    }
    for token in [None, Some("wrong-token-0123456789")] {
        let (status, _) = get(proxy, "/admin/history", token).await;
        assert_eq!(status, 403, "with an admin_token set, the history needs it ({token:?})");
    }
}

on_each_backend!(history_sums_what_was_sent within HARD_LIMIT => history_sums_what_was_sent_sqlite("history"), history_sums_what_was_sent_postgres);

#[test]
fn on_loopback_without_an_admin_token_it_is_open_and_without_a_store_it_is_404() {
    run(HARD_LIMIT, async {
        let backend = Backend::sqlite("history-open");
        let (text, _mocks) = history_config(&backend.toml()).await;
        let proxy = start(&text.replace(&format!("admin_token = \"{TOKEN}\""), "")).await;
        let (status, body) = get(&proxy, "/admin/history", None).await;
        assert_eq!(status, 200, "open on loopback, as /admin/status is: {body}");
        assert_eq!(body["activity"]["data"], json!([]), "nothing sent, nothing summed");

        let (text, _mocks) = history_config("[store]\nbackend = \"none\"\n").await;
        let proxy = start(&text).await;
        let (status, body) = get(&proxy, "/admin/history", Some(TOKEN)).await;
        assert_eq!((status, &body["error"]["code"]), (404, &json!("store_off")), "{body}");
    });
}

struct Quiet;

impl StoreSignals for Quiet {
    fn records_dropped(&self, _rows: u64) {}
    fn records_written(&self, _rows: u64) {}
    fn store_up(&self, _up: bool) {}
}

/// More keys and providers than a chart names: the busiest keep their
/// names, the rest are summed as one group, the same in both databases.
async fn past_the_busiest_groups_the_rest_are_summed(backend: Backend) {
    let text = format!(
        "{}\n{}",
        backend.toml(),
        ChatConfig::new().provider("p", baton::providers::ProviderKind::OpenAi, "http://127.0.0.1:1/v1").toml()
    );
    let config = config::parse(&text, "groups.toml", &|_| None).expect("valid");
    let (records, started) = Records::start(&config, Arc::new(Quiet)).expect("a store");
    assert!(started.first_open.await.expect("told"), "the database opens");
    // Key k{i} spends i dollars over i requests answered by provider p{i}; twelve of each.
    let now = now_ms();
    let minute = now.div_euclid(60_000) * 60_000;
    for i in 1..=12_i64 {
        for n in 0..i {
            let mut row = RequestRow::new(&format!("r-{i}-{n}"), "openai_chat", minute);
            (row.key, row.provider, row.cost_usd) = (Some(format!("k{i:02}")), Some(format!("p{i:02}")), Some(1.0));
            (row.outcome, row.status, row.attempts) = ("ok".to_owned(), 200, 1);
            records.record(row);
        }
    }
    assert!(records.drain(Duration::from_secs(10)).await);
    let db = records.db().expect("up");
    let window = Window::ending(now, DAY_MS, 1);
    let spend = history::spend(&db, GroupBy::Key, &window).await.expect("read");
    let mut names: Vec<&str> = spend.iter().map(|g| g.group.as_str()).collect();
    names.sort_unstable();
    let top = usize::try_from(TOP_GROUPS).unwrap();
    let mut expected: Vec<String> = (5..=12).map(|i| format!("k{i:02}")).collect();
    expected.push(OTHER.to_owned());
    expected.sort_unstable();
    assert_eq!(names, expected, "the eight that spent most, and the rest as one");
    assert_eq!(spend.len(), top + 1);
    let other = spend.iter().find(|g| g.group == OTHER).unwrap();
    assert_eq!((other.requests, other.cost_usd), (10, 10.0), "k01..k04: 1 + 2 + 3 + 4");
    let activity = history::activity(&db, &Window::ending(now, 60_000, 60)).await.expect("read");
    let providers: Vec<&str> = activity.iter().map(|g| g.provider.as_str()).collect();
    assert_eq!(providers.len(), top + 1, "{providers:?}");
    assert!(providers.contains(&"p12") && !providers.contains(&"p04") && providers.contains(&OTHER), "{providers:?}");
    assert_eq!(activity.iter().map(|g| g.requests).sum::<i64>(), 78, "every row counted once");
}

on_each_backend!(past_the_busiest_groups_the_rest_are_summed within HARD_LIMIT => past_the_busiest_groups_the_rest_are_summed_sqlite("groups"), past_the_busiest_groups_the_rest_are_summed_postgres);
