//! The request log over real databases: a SQLite file in a temporary
//! directory and a throwaway PostgreSQL database (which must be running: CI
//! provides it). Every request leaves a row, refusals included; the log
//! filters and pages newest first; spend is grouped from the rows; bodies are
//! kept only when asked.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use baton::store::now_ms;
use serde_json::{Value, json};
use support::backend::Backend;
use support::records::*;
use support::{admin_get as admin, chat_body, post_raw, post_with, run};

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
