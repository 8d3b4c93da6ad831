//! Limits and money over loopback: a key over its rpm or tpm, the cost of
//! each answer in the log, the metrics and the status, and budgets that
//! block, downgrade or warn, all before any provider is asked.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::mock::{MockHandle, MockProvider};
use serde_json::{Value, json};
use support::{Baton, ChatConfig, Proxy, Spawned, eventually, metrics, run};

const HARD_LIMIT: Duration = Duration::from_secs(30);

const SECRET: &str = "sk-web-0123456789abcdef";

/// $0.10 an input token and $0.20 an output token: the mock's 10 + 8
/// tokens cost $2.60 an answer.
const PRICE: &str = "price = { input_per_mtok = 100000.0, output_per_mtok = 200000.0 }";
const ANSWER_USD: f64 = 2.6;

/// The key "web" with `limits`, after the route(s).
fn key(limits: &str) -> String {
    format!("\n[[keys]]\nname = \"web\"\nkey = \"{SECRET}\"\n{limits}\n")
}

/// A route "chat" on `mock`, priced.
fn priced(mock: &MockHandle) -> ChatConfig {
    ChatConfig::new().deadlines(5000, 5000).mock("p", mock).target_keys(PRICE)
}

/// A second route "cheap" on the provider `cheap`, unpriced.
fn cheap_route(cheap: &MockHandle) -> String {
    format!(
        "\n[[providers]]\nname = \"cheap\"\nkind = \"openai\"\nbase_url = \"{}\"\n\n[[routes]]\nmodel = \"cheap\"\ntargets = [{{ provider = \"cheap\", model = \"c\" }}]\n",
        cheap.base_url()
    )
}

/// Asks route "chat" for an answer, as key "web" when `keyed`.
async fn ask(proxy: &impl support::Server, keyed: bool, max_tokens: u32) -> reqwest::Response {
    let body = json!({ "model": "chat", "max_tokens": max_tokens, "messages": [{ "role": "user", "content": "hi" }] });
    let request = reqwest::Client::new().post(proxy.url("/v1/chat/completions")).json(&body);
    let request = if keyed { request.bearer_auth(SECRET) } else { request };
    request.send().await.expect("the proxy answers")
}

async fn status_of(proxy: &Proxy) -> Value {
    reqwest::get(proxy.url("/admin/status")).await.unwrap().json().await.unwrap()
}

async fn error_of(response: reqwest::Response) -> (u16, Option<String>, Value) {
    let status = response.status().as_u16();
    let retry_after = response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
    (status, retry_after, response.json::<Value>().await.unwrap_or_default())
}

/// A priced OpenAI provider, and a baton over it whose key has `limits`.
async fn keyed(limits: &str) -> (MockHandle, Proxy) {
    let provider = MockProvider::openai().spawned().await;
    let proxy = Proxy::start(&format!("{}{}", priced(&provider).toml(), key(limits))).await;
    (provider, proxy)
}

#[test]
fn a_key_over_its_rpm_gets_429_with_retry_after_before_any_provider_is_tried() {
    run(HARD_LIMIT, async {
        let (provider, proxy) = keyed("rpm = 2").await;
        for i in 0..2 {
            assert_eq!(ask(&proxy, true, 50).await.status(), 200, "request {i} of the burst");
        }
        let (status, retry_after, body) = error_of(ask(&proxy, true, 50).await).await;
        assert_eq!(status, 429, "{body}");
        assert_eq!(body["error"]["code"], "rate_limit_exceeded", "{body}");
        assert_eq!(body["error"]["type"], "rate_limit_error", "{body}");
        let wait: u64 = retry_after.expect("a Retry-After").parse().unwrap();
        assert!((29..=30).contains(&wait), "the GCRA's wait, 60 s / 2, rounded up: {wait}");
        assert!(body["error"]["message"].as_str().unwrap().contains("\"web\""), "the key is named: {body}");
        assert_eq!(provider.requests().len(), 2, "the refused request reached no provider");
        let keys = &status_of(&proxy).await["keys"][0];
        assert_eq!(keys["rpm"]["per_minute"], 2, "{keys}");
        assert_eq!(keys["rpm"]["available"], 0, "{keys}");
    });
}

#[test]
fn a_keys_token_reservations_are_settled_to_the_reported_usage() {
    run(HARD_LIMIT, async {
        let (_provider, proxy) = keyed("tpm = 3000").await;
        // Each reserves 1 + 1,400 tokens; unsettled, the third would pass 3,000.
        for i in 0..5 {
            let response = ask(&proxy, true, 1400).await;
            assert_eq!(response.status(), 200, "request {i}: the last one's 18 tokens were settled");
        }
        let available = status_of(&proxy).await["keys"][0]["tpm"]["available"].as_u64().unwrap();
        assert!(available >= 3000 - 5 * 18, "5 answers of 18 tokens used, not 5 reservations: {available} left");
        let (status, retry_after, body) = error_of(ask(&proxy, true, 4000).await).await;
        assert_eq!((status, retry_after), (429, None), "more than the tpm never fits: no wait to give: {body}");
        assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    });
}

#[test]
fn each_answer_costs_its_usage_at_its_targets_price_in_metrics_and_status() {
    run(HARD_LIMIT, async {
        let (_provider, proxy) = keyed("").await;
        assert_eq!(ask(&proxy, true, 50).await.status(), 200);
        let streamed = json!({ "model": "chat", "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
        let response = reqwest::Client::new()
            .post(proxy.url("/v1/chat/completions"))
            .bearer_auth(SECRET)
            .json(&streamed)
            .send()
            .await
            .unwrap();
        assert!(response.text().await.unwrap().ends_with("data: [DONE]\n\n"));
        let metric = |text: &str, key: &str| {
            let name = format!("baton_cost_usd_total{{route=\"chat\",provider=\"p\",key=\"{key}\"}} ");
            text.lines().find_map(|line| line.strip_prefix(name.as_str())).map(|v| v.parse::<f64>().unwrap())
        };
        let settled = || async { metric(&metrics(&proxy).await, "web").is_some_and(|usd| usd > 5.0) };
        assert!(eventually(Duration::from_secs(2), settled).await, "{}", metrics(&proxy).await);
        let text = metrics(&proxy).await;
        let cost = metric(&text, "web").unwrap();
        assert!((cost - 2.0 * ANSWER_USD).abs() < 1e-9, "two answers of $2.60, streamed or not: {cost}\n{text}");
        let status = status_of(&proxy).await;
        for (what, usd) in [
            ("key", &status["keys"][0]["spend"]["total_usd"]),
            ("key 1 h", &status["keys"][0]["spend"]["last_1h"]),
            ("route", &status["routes"][0]["spend"]["total_usd"]),
            ("provider", &status["providers"][0]["spend_usd"]),
            ("global", &status["spend"]["total_usd"]),
        ] {
            assert!((usd.as_f64().unwrap() - 2.0 * ANSWER_USD).abs() < 1e-9, "{what} spend: {status}");
        }
        assert!(!status.to_string().contains(SECRET), "no secret in the status");
    });
}

#[test]
fn the_request_log_line_carries_the_key_and_the_cost() {
    run(HARD_LIMIT, async {
        let provider = MockProvider::openai().spawned().await;
        let config = priced(&provider).top("listen = \"127.0.0.1:0\"").toml();
        let path = support::config_file("money-log", &format!("{config}{}", key("")));
        let baton = Baton::serve(&path).json_logs().start().await;
        assert_eq!(ask(&baton, true, 50).await.status(), 200);
        let line = || {
            baton
                .log_lines()
                .iter()
                .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                .find(|line| line["message"] == "request")
        };
        assert!(eventually(Duration::from_secs(2), || async { line().is_some() }).await, "a request line");
        let line = line().unwrap();
        assert_eq!(line["key"], "web", "{line}");
        assert!((line["cost_usd"].as_f64().unwrap() - ANSWER_USD).abs() < 1e-9, "{line}");
    });
}

#[test]
fn a_spent_blocking_budget_answers_429_budget_exceeded() {
    run(HARD_LIMIT, async {
        let provider = MockProvider::openai().spawned().await;
        let budget = "\n[[budgets]]\nscope = \"global\"\nwindow = \"1h\"\nusd = 2.0\naction = \"block\"\n";
        let proxy = Proxy::start(&format!("{}{budget}", priced(&provider).toml())).await;
        assert_eq!(ask(&proxy, false, 50).await.status(), 200, "nothing spent yet");
        let mut refused = None;
        for _ in 0..50 {
            let response = ask(&proxy, false, 50).await;
            if response.status() != 200 {
                refused = Some(response);
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (status, retry_after, body) = error_of(refused.expect("once $2.60 is spent, refused")).await;
        assert_eq!(status, 429, "{body}");
        assert_eq!(body["error"]["code"], "budget_exceeded", "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("global") && message.contains("1h"), "names scope and window: {message}");
        let wait: u64 = retry_after.expect("a Retry-After").parse().unwrap();
        assert!((3500..=3660).contains(&wait), "about an hour: {wait}");
        let budgets = &status_of(&proxy).await["budgets"][0];
        assert_eq!((budgets["scope"].as_str(), budgets["usd"].as_f64()), (Some("global"), Some(2.0)), "{budgets}");
        assert!(budgets["spent_usd"].as_f64().unwrap() >= ANSWER_USD, "{budgets}");
    });
}

#[test]
fn a_downgrade_budget_serves_the_other_route_and_a_warning_serves_this_one() {
    run(HARD_LIMIT, async {
        let provider = MockProvider::openai().spawned().await;
        let cheap = MockProvider::openai().spawned().await;
        let budgets = "\n[[budgets]]\nscope = \"route:chat\"\nwindow = \"1m\"\nusd = 5.0\naction = \"downgrade\"\ndowngrade_to = \"cheap\"\n\
             \n[[budgets]]\nscope = \"global\"\nwindow = \"1d\"\nusd = 1.0\naction = \"warn\"\n";
        let text = format!("{}{}{budgets}", priced(&provider).toml(), cheap_route(&cheap));
        let proxy = Proxy::start(&text).await;
        let first = ask(&proxy, false, 50).await;
        assert_eq!(first.status(), 200);
        assert!(first.headers().get("x-baton-downgraded").is_none(), "nothing spent yet: not downgraded");
        let warned = || async {
            metrics(&proxy)
                .await
                .contains("baton_budget_exceeded_total{scope=\"global\",window=\"1d\",action=\"warn\"}")
        };
        // The first answer's cost is charged once it ends; the next requests see it.
        let mut served = Vec::new();
        for _ in 0..3 {
            let response = ask(&proxy, false, 50).await;
            assert_eq!(response.status(), 200, "a warning or a downgrade refuses nothing");
            let header = |name| response.headers().get(name).map(|v| v.to_str().unwrap().to_owned());
            served.push((header("x-baton-provider"), header("x-baton-downgraded")));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let text = metrics(&proxy).await;
        assert!(warned().await, "the warn budget is counted: {text}");
        assert!(text.contains("baton_cost_usd_total{route=\"chat\",provider=\"p\",key=\"-\"}"), "no key: `-`: {text}");
        assert_eq!(served[0], (Some("p".to_owned()), None), "$2.60 of chat's $5: still chat");
        assert_eq!(served[2], (Some("cheap".to_owned()), Some("chat".to_owned())), "past $5: served by cheap");
        assert!(!cheap.requests().is_empty(), "the cheap route's provider answered");
    });
}

#[test]
fn max_usd_per_request_skips_the_targets_it_cannot_afford_and_refuses_when_none_fits() {
    run(HARD_LIMIT, async {
        let costly = MockProvider::openai().spawned().await;
        let frugal = MockProvider::openai().spawned().await;
        let route = ChatConfig::new()
            .top("max_usd_per_request = 50.0")
            .deadlines(5000, 5000)
            .mock("costly", &costly)
            .target_keys(PRICE)
            .mock("frugal", &frugal)
            .target_keys("price = { input_per_mtok = 1000.0, output_per_mtok = 2000.0 }");
        let proxy = Proxy::start(&route.toml()).await;
        // 1 + 300 tokens: $60.10 on costly, $0.60 on frugal.
        let response = ask(&proxy, false, 300).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["x-baton-provider"], "frugal", "costly's estimate is over the cap");
        assert_eq!(response.headers()["x-baton-attempts"], "1", "a skipped target is no attempt");
        assert_eq!(costly.requests().len(), 0, "the costly provider was never asked");
        let (status, retry_after, body) = error_of(ask(&proxy, false, 30_000).await).await;
        assert_eq!((status, retry_after), (400, None), "asking again would not help: {body}");
        assert_eq!(body["error"]["code"], "over_cost_cap", "{body}");
        assert_eq!(frugal.requests().len(), 1, "the refused request reached no provider");
    });
}
