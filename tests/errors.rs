//! What a client gets when no answer can be had, and when its own request is
//! wrong: OpenAI-shaped errors with fitting statuses, and nothing sent upstream.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::mock::{Fault, MockProvider};
use baton::providers::ProviderKind;
use serde_json::{Value, json};
use support::{ChatConfig, Proxy, Received, Spawned, chat_body, mocks_toml, post_chat, post_raw, run};

const HARD_LIMIT: Duration = Duration::from_secs(20);

fn assert_openai_error(got: &Received, status: u16, code: &str) -> String {
    assert_eq!(got.status, status, "status; body: {}", got.raw);
    assert_eq!(got.header("content-type"), "application/json", "errors are JSON");
    let body = got.json();
    assert_eq!(body["error"]["code"], code, "error code; body: {}", got.raw);
    assert!(body["error"]["type"].is_string(), "error type is set: {}", got.raw);
    body["error"]["message"].as_str().expect("a message").to_owned()
}

/// The message of an OpenAI error with `status` and `code`, which lists
/// alpha's attempt as `alpha (alpha-model): {classes[0]}` and beta's likewise.
fn assert_attempts_listed(got: &Received, status: u16, code: &str, classes: [&str; 2]) -> String {
    let message = assert_openai_error(got, status, code);
    for (name, class) in ["alpha", "beta"].into_iter().zip(classes) {
        let attempt = format!("{name} ({name}-model): {class}");
        assert!(message.contains(&attempt), "the message lists {name}'s attempt as {attempt:?}: {message}");
    }
    message
}

/// What a client gets from a route over `first` ("alpha") and `second` ("beta").
async fn two_failing(first: MockProvider, second: MockProvider, first_token_ms: u64) -> Received {
    let (a, b) = (first.spawned().await, second.spawned().await);
    let proxy = Proxy::start(&mocks_toml(&[("alpha", &a), ("beta", &b)], first_token_ms, 1000)).await;
    post_chat(&proxy, &chat_body(true)).await
}

#[test]
fn all_rate_limited_is_429_with_the_shortest_retry_after() {
    run(HARD_LIMIT, async {
        let got = two_failing(
            MockProvider::openai().fault(Fault::Http429).retry_after_secs(7),
            MockProvider::anthropic().fault(Fault::Http429).retry_after_secs(3),
            1000,
        )
        .await;
        assert_attempts_listed(&got, 429, "all_rate_limited", ["http_429", "http_429"]);
        assert_eq!(got.header("retry-after"), "3", "the shortest wait any provider asked for");
    });
}

#[test]
fn all_timed_out_is_504() {
    run(HARD_LIMIT, async {
        let got = two_failing(
            MockProvider::gemini().fault(Fault::StallFirstToken),
            MockProvider::openai().fault(Fault::StallHeaders),
            200,
        )
        .await;
        assert_attempts_listed(&got, 504, "all_timed_out", ["first_token_timeout after", "first_token_timeout after"]);
        assert!(got.headers.get("retry-after").is_none(), "no Retry-After unless rate-limited");
    });
}

#[test]
fn a_mix_of_failures_is_502_listing_each_attempt() {
    run(HARD_LIMIT, async {
        let got = two_failing(
            MockProvider::anthropic().fault(Fault::ErrorEvent),
            MockProvider::openai().fault(Fault::Http429),
            1000,
        )
        .await;
        let message = assert_attempts_listed(&got, 502, "all_failed", ["error_event after", "http_429 after"]);
        assert!(message.contains(" ms"), "elapsed ms per attempt: {message}");
    });
}

#[test]
fn wrong_gateway_credentials_fail_over() {
    run(HARD_LIMIT, async {
        let locked = MockProvider::openai().api_key("right-key").spawned().await;
        let open = MockProvider::gemini().marker("open").spawned().await;
        let config = ChatConfig::new().mock("locked", &locked).provider_keys("api_key = \"wrong-key\"").model("m");
        let proxy = Proxy::start(&config.mock("open", &open).model("m").toml()).await;
        let got = post_chat(&proxy, &chat_body(true)).await;
        assert_eq!(got.status, 200);
        assert_eq!(got.header("x-baton-provider"), "open", "a 401 moves on to the next provider");
        assert!(!got.raw.contains("wrong-key"), "the key never reaches the client");
    });
}

#[test]
fn a_request_the_provider_rejects_is_returned_without_failover() {
    run(HARD_LIMIT, async {
        for kind in ProviderKind::ALL {
            let picky = MockProvider::new(kind).fault(Fault::BadRequest).spawned().await;
            let spare = MockProvider::openai().spawned().await;
            let proxy = Proxy::start(&mocks_toml(&[("picky", &picky), ("spare", &spare)], 1000, 1000)).await;
            for stream in [true, false] {
                let got = post_chat(&proxy, &chat_body(stream)).await;
                let message = assert_openai_error(&got, 400, "upstream_rejected");
                assert!(message.contains("temperature must be at most 2"), "{kind}: the provider's reason: {message}");
                assert_eq!(got.json()["error"]["type"], "invalid_request_error");
            }
            assert!(spare.requests().is_empty(), "{kind}: a client error is not retried elsewhere");
        }
    });
}

#[test]
fn context_length_moves_on_only_to_a_larger_window() {
    run(HARD_LIMIT, async {
        for kind in ProviderKind::ALL {
            let small = MockProvider::new(kind).fault(Fault::ContextLength).spawned().await;
            let same = MockProvider::openai().marker("same").spawned().await;
            let large = MockProvider::anthropic().marker("large").spawned().await;
            let config = ChatConfig::new()
                .mock("small", &small)
                .model("s")
                .target_keys("context_window = 8192")
                .mock("same", &same)
                .model("m")
                .target_keys("context_window = 8192")
                .mock("large", &large)
                .model("l")
                .target_keys("context_window = 200000");
            let proxy = Proxy::start(&config.toml()).await;
            let got = post_chat(&proxy, &chat_body(true)).await;
            assert_eq!(got.status, 200, "{kind}: {}", got.raw);
            assert_eq!(got.header("x-baton-provider"), "large", "{kind}: the larger window answers");
            assert_eq!(got.streamed_text(), large.provider().expected_text());
            assert!(same.requests().is_empty(), "{kind}: a target with no larger window is skipped");
        }
    });
}

#[test]
fn context_length_fails_over_to_a_target_without_a_declared_window() {
    run(HARD_LIMIT, async {
        for kind in ProviderKind::ALL {
            let small = MockProvider::new(kind).fault(Fault::ContextLength).spawned().await;
            let other = MockProvider::openai().marker("other").spawned().await;
            // A breaker that one charged failure would open.
            let config = ChatConfig::new()
                .mock("small", &small)
                .provider_keys("breaker = { failure_threshold = 1 }")
                .mock("other", &other);
            let proxy = Proxy::start(&config.toml()).await;
            for stream in [true, false] {
                let got = post_chat(&proxy, &chat_body(stream)).await;
                assert_eq!(got.status, 200, "{kind}: {}", got.raw);
                assert_eq!(got.header("x-baton-provider"), "other", "{kind}: the next target answers");
                assert_eq!(got.header("x-baton-attempts"), "2");
            }
            let metrics = support::metrics(&proxy).await;
            let failovers = metrics
                .lines()
                .find(|line| line.starts_with("baton_failovers_total{") && line.contains("context_length"));
            assert!(failovers.is_some(), "{kind}: counted as a context-length failover:\n{metrics}");
            let breaker = metrics.lines().find(|line| line.starts_with("baton_breaker_state{provider=\"small\"}"));
            assert_eq!(
                breaker.map(|line| line.ends_with(" 0")),
                Some(true),
                "{kind}: still closed: a prompt too long is not the provider's fault"
            );
        }
    });
}

#[test]
fn a_prompt_too_long_for_every_target_is_context_length_exceeded() {
    run(HARD_LIMIT, async {
        let small = MockProvider::anthropic().fault(Fault::ContextLength).spawned().await;
        let smaller = MockProvider::gemini().fault(Fault::ContextLength).spawned().await;
        let proxy = Proxy::start(&mocks_toml(&[("small", &small), ("smaller", &smaller)], 1000, 1000)).await;
        let got = post_chat(&proxy, &chat_body(false)).await;
        let message = assert_openai_error(&got, 400, "context_length_exceeded");
        assert!(message.contains("small (small-model) said the prompt is too long"), "{message}");
        assert!(message.contains("smaller (smaller-model)"), "{message}");
        assert!(!message.contains("prompt is too long:"), "the providers' own words are not relayed: {message}");
        assert_eq!((small.requests().len(), smaller.requests().len()), (1, 1), "each was asked once");
    });
}

async fn healthy_proxy() -> (Proxy, baton::mock::MockHandle) {
    let provider = MockProvider::openai().spawned().await;
    let proxy = Proxy::start(&mocks_toml(&[("only", &provider)], 1000, 1000)).await;
    (proxy, provider)
}

#[test]
fn bad_requests_get_clear_errors_and_nothing_goes_upstream() {
    run(HARD_LIMIT, async {
        let (proxy, provider) = healthy_proxy().await;
        let cases: Vec<(&str, Vec<u8>, u16, &str, &str)> = vec![
            (
                "malformed json",
                b"{\"model\": \"chat\", ".to_vec(),
                400,
                "invalid_request",
                "the request body is not valid JSON (line 1, column 18: EOF",
            ),
            (
                "not json at all",
                b"hello".to_vec(),
                400,
                "invalid_request",
                "the request body is not valid JSON (line 1, column 1: expected value)",
            ),
            ("missing messages", br#"{"model": "chat"}"#.to_vec(), 400, "invalid_request", "messages"),
            (
                "empty messages",
                br#"{"model": "chat", "messages": []}"#.to_vec(),
                400,
                "invalid_request",
                "at least one message",
            ),
            (
                "unknown role",
                br#"{"model": "chat", "messages": [{"role": "wizard", "content": "hi"}]}"#.to_vec(),
                400,
                "invalid_request",
                "\"wizard\" is not one of system, developer, user, assistant, tool",
            ),
            (
                "unknown model",
                br#"{"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}"#.to_vec(),
                404,
                "model_not_found",
                "serves: chat",
            ),
        ];
        for (name, body, status, code, needle) in cases {
            let got = post_raw(&proxy, "/v1/chat/completions", body, "application/json").await;
            let message = assert_openai_error(&got, status, code);
            assert!(message.contains(needle), "{name}: the message names what was wrong: {message}");
        }
        assert!(provider.requests().is_empty(), "no bad request reached the provider");
    });
}

#[test]
fn an_oversized_body_is_413() {
    run(HARD_LIMIT, async {
        let provider = MockProvider::openai().spawned().await;
        let config = format!("max_body_bytes = 1024\n{}", mocks_toml(&[("only", &provider)], 1000, 1000));
        let proxy = Proxy::start(&config).await;
        let big = json!({ "model": "chat", "messages": [{ "role": "user", "content": "x".repeat(4096) }] });
        let got = post_chat(&proxy, &big).await;
        let message = assert_openai_error(&got, 413, "request_too_large");
        assert!(message.contains("1024"), "the limit is named: {message}");
        assert!(provider.requests().is_empty());
    });
}

#[test]
fn wrong_method_and_unknown_path() {
    run(HARD_LIMIT, async {
        let (proxy, _provider) = healthy_proxy().await;
        let client = reqwest::Client::new();
        let started = std::time::Instant::now();
        let got = support::read_response(
            client.get(proxy.url("/v1/chat/completions")).send().await.expect("answer"),
            started,
        )
        .await;
        assert_openai_error(&got, 405, "method_not_allowed");
        let got =
            support::read_response(client.get(proxy.url("/v2/nothing")).send().await.expect("answer"), started).await;
        let message = assert_openai_error(&got, 404, "not_found");
        assert!(message.contains("/v2/nothing"), "{message}");
    });
}

#[test]
fn models_lists_routes_and_healthz_answers() {
    run(HARD_LIMIT, async {
        let (proxy, _provider) = healthy_proxy().await;
        let models: Value = reqwest::get(proxy.url("/v1/models")).await.expect("models").json().await.expect("json");
        assert_eq!(models["object"], "list");
        assert_eq!(models["data"][0]["id"], "chat");
        assert_eq!(models["data"][0]["object"], "model");
        let health = reqwest::get(proxy.url("/healthz")).await.expect("healthz");
        assert_eq!(health.status(), 200);
        let page = reqwest::get(proxy.url("/")).await.expect("page");
        assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
        let html = page.text().await.expect("html");
        assert!(html.contains("Playground") && html.contains("/admin/status"), "the page is built in");
        assert!(!html.contains("https://"), "no CDN: the page loads nothing from elsewhere");
    });
}

#[test]
fn a_door_asked_for_without_v1_gets_404_saying_where_it_is() {
    run(HARD_LIMIT, async {
        let provider = MockProvider::openai().spawned().await;
        let proxy = Proxy::start(&ChatConfig::new().mock("p", &provider).toml()).await;
        let body = chat_body(false).to_string();
        let wire = format!(
            "POST /chat/completions HTTP/1.1\r\nhost: baton\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let answer = proxy.exchange(wire.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 404 "), "{answer}");
        assert!(answer.contains("did you mean /v1/chat/completions?"), "the hint names the door: {answer}");
        let other = proxy.exchange(b"GET /nothing HTTP/1.1\r\nhost: baton\r\nconnection: close\r\n\r\n").await;
        assert!(other.contains("no such endpoint: /nothing\""), "no hint where no door is near: {other}");
        assert!(provider.requests().is_empty());
    });
}

/// The finish reason a streamed answer ended with, or a whole one's.
fn finish_of(got: &Received, stream: bool) -> String {
    if stream {
        let chunks = got.chunks();
        let mut reasons =
            chunks.iter().filter_map(|c| c.pointer("/choices/0/finish_reason")?.as_str().map(str::to_owned));
        reasons.next_back().unwrap_or_default()
    } else {
        got.json()["choices"][0]["finish_reason"].as_str().unwrap_or_default().to_owned()
    }
}

#[test]
fn a_content_filter_s_refusal_is_the_answer_unless_the_route_fails_over_on_refusals() {
    run(HARD_LIMIT, async {
        for kind in ProviderKind::ALL {
            for stream in [true, false] {
                let context = format!("{kind}, stream {stream}");
                let filtered = MockProvider::new(kind).fault(Fault::ContentFilter).spawned().await;
                let clean = MockProvider::openai().marker("clean").spawned().await;
                let config = ChatConfig::new().mock("filtered", &filtered).mock("clean", &clean);
                let body = chat_body(stream);
                let proxy = Proxy::start(&config.toml()).await;
                let got = post_chat(&proxy, &body).await;
                assert_eq!(got.status, 200, "{context}: {}", got.raw);
                assert_eq!(got.header("x-baton-provider"), "filtered", "{context}: the refusal is the answer");
                assert_eq!(finish_of(&got, stream), "content_filter", "{context}: {}", got.raw);
                assert!(clean.requests().is_empty(), "{context}: no other target is asked");

                let config = ChatConfig::new()
                    .keys("fail_over_on_refusal = true")
                    .mock("filtered", &filtered)
                    .mock("clean", &clean);
                let proxy = Proxy::start(&config.toml()).await;
                let got = post_chat(&proxy, &body).await;
                assert_eq!(got.status, 200, "{context}: {}", got.raw);
                assert_eq!(got.header("x-baton-provider"), "clean", "{context}: the next target answers");
                assert_eq!(got.header("x-baton-attempts"), "2", "{context}");
                assert_eq!(finish_of(&got, stream), "stop", "{context}: {}", got.raw);
                let text = if stream {
                    got.streamed_text()
                } else {
                    got.json()["choices"][0]["message"]["content"].as_str().unwrap_or_default().to_owned()
                };
                assert_eq!(text, clean.provider().expected_text(), "{context}");
            }
        }
    });
}
