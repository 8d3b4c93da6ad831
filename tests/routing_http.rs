//! Routing as a client sees it over loopback: a route served under its
//! aliases and listed by them, first attempts spread by weight, and a
//! request too large for a target's context window sent elsewhere or
//! refused with 400 `context_length_exceeded`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::mock::{MockHandle, MockProvider};
use serde_json::{Value, json};
use support::{ChatConfig, Proxy, Spawned, chat_body, post_chat, run};

const HARD_LIMIT: Duration = Duration::from_secs(30);

const KEYS: &str = "[[keys]]\nname = \"web\"\nkey = \"sk-web-0123456789abcdef\"\n\n\
                    [[keys]]\nname = \"fast\"\nkey = \"sk-fast-0123456789abcd\"\nroutes = [\"tier:balanced\"]\n";

/// Sends `model` with `key`; the status and the JSON body.
async fn ask(proxy: &Proxy, key: &str, model: &str) -> (u16, Value) {
    let mut body = chat_body(false);
    body["model"] = model.into();
    let client = reqwest::Client::new();
    let response =
        client.post(proxy.url("/v1/chat/completions")).bearer_auth(key).json(&body).send().await.expect("answers");
    (response.status().as_u16(), response.json().await.unwrap_or_default())
}

/// The model ids `/v1/models` lists for `key`.
async fn models(proxy: &Proxy, key: &str) -> Vec<String> {
    let response = reqwest::Client::new().get(proxy.url("/v1/models")).bearer_auth(key).send().await.expect("answers");
    let body: Value = response.json().await.expect("a JSON list");
    body["data"].as_array().expect("data").iter().filter_map(|m| m["id"].as_str().map(str::to_owned)).collect()
}

#[test]
fn a_route_is_served_and_listed_under_its_aliases_and_a_key_may_be_allowed_one() {
    run(HARD_LIMIT, async {
        let provider = MockProvider::openai().spawned().await;
        let chat = ChatConfig::new().mock("p", &provider).keys("aliases = [\"tier:balanced\", \"gpt-4o-mini\"]").toml();
        let cheap = "[[routes]]\nmodel = \"cheap\"\naliases = [\"tier:cheap\"]\ntargets = [{ provider = \"p\", model = \"c\" }]\n";
        let proxy = Proxy::start(&format!("{KEYS}\n{chat}\n{cheap}")).await;
        let (web, fast) = ("sk-web-0123456789abcdef", "sk-fast-0123456789abcd");

        let (status, body) = ask(&proxy, web, "tier:balanced").await;
        assert_eq!(status, 200, "an alias is served by its route: {body}");
        assert_eq!(body["model"], "p-model", "by the route's target");
        let (status, body) = ask(&proxy, fast, "gpt-4o-mini").await;
        assert_eq!(status, 200, "a key allowed one name of a route may use every name: {body}");
        let (status, body) = ask(&proxy, fast, "chat").await;
        assert_eq!(status, 200, "including the route's own: {body}");
        let (status, body) = ask(&proxy, fast, "tier:cheap").await;
        assert_eq!((status, body["error"]["code"].as_str()), (403, Some("route_not_allowed")), "{body}");
        let (status, body) = ask(&proxy, web, "tier:none").await;
        assert_eq!(status, 404, "{body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("tier:balanced") && message.contains("tier:cheap"), "aliases are named: {message}");

        assert_eq!(models(&proxy, web).await, ["chat", "tier:balanced", "gpt-4o-mini", "cheap", "tier:cheap"]);
        assert_eq!(
            models(&proxy, fast).await,
            ["chat", "tier:balanced", "gpt-4o-mini"],
            "a key sees its routes' names"
        );
    });
}

/// Two providers started, each answering with its own marker.
async fn marked(first: (MockProvider, &str), second: (MockProvider, &str)) -> (MockHandle, MockHandle) {
    (first.0.marker(first.1).spawned().await, second.0.marker(second.1).spawned().await)
}

#[test]
fn a_weighted_route_spreads_first_attempts_by_weight() {
    run(HARD_LIMIT, async {
        let (heavy, light) = marked((MockProvider::openai(), "heavy"), (MockProvider::openai(), "light")).await;
        let config = ChatConfig::new()
            .keys("strategy = \"weighted\"")
            .mock("heavy", &heavy)
            .target_keys("weight = 3")
            .mock("light", &light)
            .target_keys("weight = 1");
        let proxy = Proxy::start(&config.toml()).await;
        let (client, mut heavy_first) = (reqwest::Client::new(), 0);
        for _ in 0..400 {
            let got = client.post(proxy.url("/v1/chat/completions")).json(&chat_body(false)).send().await.unwrap();
            let header = |name: &str| got.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
            assert_eq!((got.status().as_u16(), header("x-baton-attempts")), (200, "1".to_owned()));
            heavy_first += usize::from(header("x-baton-provider") == "heavy");
            got.bytes().await.expect("the whole answer");
        }
        assert_eq!(heavy.requests().len() + light.requests().len(), 400, "one attempt each");
        let share = heavy_first as f64 / 400.0;
        // 0.75 ± 0.10 is more than four standard deviations of 400 draws.
        assert!((share - 0.75).abs() <= 0.10, "weights 3:1 answered {share:.3} from heavy");
    });
}

/// A body of about `tokens` input tokens (four characters each).
fn long_body(stream: bool, tokens: usize, max_tokens: u32) -> Value {
    json!({ "model": "chat", "stream": stream, "max_tokens": max_tokens,
            "messages": [{ "role": "user", "content": "word ".repeat(tokens * 4 / 5) }] })
}

#[test]
fn a_request_too_large_for_a_window_goes_to_a_larger_one_or_gets_400() {
    run(HARD_LIMIT, async {
        let (small, large) = marked((MockProvider::openai(), "small"), (MockProvider::anthropic(), "large")).await;
        let config = ChatConfig::new()
            .mock("small", &small)
            .target_keys("context_window = 4096")
            .mock("large", &large)
            .target_keys("context_window = 16384");
        let proxy = Proxy::start(&config.toml()).await;

        let got = post_chat(&proxy, &long_body(true, 6000, 1000)).await;
        assert_eq!(got.status, 200, "{}", got.raw);
        assert_eq!(got.header("x-baton-provider"), "large", "the larger window answers");
        assert_eq!(got.header("x-baton-attempts"), "1", "the skip is not an attempt");
        assert_eq!(got.streamed_text(), large.provider().expected_text());
        assert!(small.requests().is_empty(), "nothing was sent to the small window");

        for stream in [true, false] {
            let got = post_chat(&proxy, &long_body(stream, 20000, 1000)).await;
            assert_eq!(got.status, 400, "stream {stream}: {}", got.raw);
            let error = &got.json()["error"];
            assert_eq!(error["type"], "invalid_request_error", "{}", got.raw);
            assert_eq!(error["code"], "context_length_exceeded", "{}", got.raw);
            let message = error["message"].as_str().unwrap_or_default();
            assert!(message.contains("about 21000 tokens"), "the estimate is named: {message}");
            assert!(message.contains("4096") && message.contains("16384"), "the windows are named: {message}");
        }
        assert!(small.requests().is_empty(), "a request no window holds is sent nowhere");
        assert_eq!(large.requests().len(), 1, "only the request it could hold");
    });
}

#[tokio::test]
async fn check_prints_each_route_s_strategy_aliases_weights_and_windows_and_names_a_mistake_s_key() {
    let good = "[[providers]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://a.invalid/v1\"\n\n\
                [[providers]]\nname = \"b\"\nkind = \"openai\"\nbase_url = \"http://b.invalid/v1\"\n\n\
                [[routes]]\nmodel = \"chat\"\naliases = [\"tier:fast\"]\nstrategy = \"weighted\"\n\
                targets = [{ provider = \"a\", model = \"m\", weight = 3, context_window = 8192 }, { provider = \"b\", model = \"n\" }]\n";
    let out = support::Baton::once(&["check", "--config"])
        .arg(support::config_file("routing-check-ok", good))
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout} {}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("route \"chat\" (idle 30000 ms) strategy weighted, also \"tier:fast\""), "{stdout}");
    assert!(stdout.contains("model m, first token 10000 ms, 0 retries, weight 3, context window 8192"), "{stdout}");
    assert!(stdout.contains("model n, first token 10000 ms, 0 retries, weight 1, unpriced"), "{stdout}");

    let path = support::config_file("routing-check-bad", &good.replace("weight = 3", "weight = 0"));
    let out = support::Baton::once(&["check", "--config"]).arg(&path).output().expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a zero weight fails the check");
    let expected = format!("{}:15: routes[0].targets[0].weight: must be at least 1", path.display());
    assert!(stderr.contains(&expected), "expected {expected:?} in {stderr:?}");
}
