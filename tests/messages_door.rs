//! What only the Anthropic Messages door does, over real loopback TCP: the
//! same-dialect path that sends an anthropic-kind target the client's body
//! and API headers as sent; the translation, and its refusals by name, for
//! a target of another kind; and every error at the door in Anthropic's
//! shape, with the key in `x-api-key` or as a Bearer token.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::mock::{MockHandle, MockProvider};
use serde_json::{Value, json};
use support::{Proxy, Received, Server, Spawned, mocks_toml, post_with, within};

const FIRST_TOKEN_MS: u64 = 500;
const IDLE_MS: u64 = 500;
const HARD_LIMIT: Duration = Duration::from_secs(20);

fn messages_body(stream: bool) -> Value {
    json!({ "model": "chat", "max_tokens": 256, "stream": stream,
        "messages": [{ "role": "user", "content": "say something" }] })
}

/// Posts `body` to `path` as the Anthropic SDK does, with `headers` besides.
async fn post(server: &impl Server, path: &str, body: &Value, headers: &[(&str, &str)]) -> Received {
    let mut all = vec![("anthropic-version", "2023-06-01")];
    all.extend_from_slice(headers);
    post_with(server, path, body, &all).await
}

async fn post_messages(server: &impl Server, body: &Value) -> Received {
    post(server, "/v1/messages", body, &[]).await
}

/// The text an Anthropic client assembles from `text_delta`s.
fn streamed_text(got: &Received) -> String {
    got.named_events()
        .iter()
        .filter(|(_, data)| data["delta"]["type"] == "text_delta")
        .filter_map(|(_, data)| data["delta"]["text"].as_str().map(str::to_owned))
        .collect()
}

/// A request with what only Anthropic's API knows: a beta field, cache
/// hints, a signed thinking block, a server tool.
fn claude_code_body() -> Value {
    json!({
        "model": "chat", "max_tokens": 512, "stream": true,
        "system": [{ "type": "text", "text": "You are a coding agent.", "cache_control": { "type": "ephemeral" } }],
        "messages": [
            { "role": "user", "content": "list the files" },
            { "role": "assistant", "content": [
                { "type": "thinking", "thinking": "I will call ls.", "signature": "EqQBsig" },
                { "type": "tool_use", "id": "toolu_1", "name": "bash", "input": { "command": "ls" } },
            ] },
            { "role": "user", "content": [
                { "type": "tool_result", "tool_use_id": "toolu_1", "content": "README.md", "is_error": false,
                  "cache_control": { "type": "ephemeral" } },
            ] },
        ],
        "tools": [{ "name": "bash", "description": "run a command", "input_schema": { "type": "object" } }],
        "thinking": { "type": "enabled", "budget_tokens": 1024 },
        "context_management": { "edits": [{ "type": "clear_tool_uses_20250919" }] },
        "x_field_from_the_future": [1, 2, 3],
    })
}

#[tokio::test]
async fn an_anthropic_target_gets_the_clients_body_and_api_headers_as_sent() {
    within(HARD_LIMIT, async {
        let claude = MockProvider::anthropic().marker("native").spawned().await;
        let proxy = Proxy::start(&mocks_toml(&[("claude", &claude)], FIRST_TOKEN_MS, IDLE_MS)).await;
        let body = claude_code_body();
        let beta = "context-management-2025-06-27,interleaved-thinking-2025-05-14";
        let got = post(&proxy, "/v1/messages?beta=true", &body, &[("anthropic-beta", beta)]).await;
        assert_eq!(got.status, 200, "{}", got.raw);
        assert_eq!(streamed_text(&got), "the tool said: README.md", "the mock read the tool result");
        let sent = claude.requests().pop().expect("the target was sent the request");
        let mut expected = body.clone();
        expected["model"] = json!("claude-model");
        assert_eq!(sent.body, expected, "every field arrives as the client sent it, only the model set");
        assert_eq!(sent.headers.get("anthropic-beta").map(String::as_str), Some(beta), "the betas go along");
        assert_eq!(sent.headers.get("anthropic-version").map(String::as_str), Some("2023-06-01"));
    })
    .await;
}

#[tokio::test]
async fn another_kind_gets_the_request_translated_and_names_what_it_cannot_take() {
    within(HARD_LIMIT, async {
        let openai = MockProvider::openai().marker("translated").spawned().await;
        let defaults = mocks_toml(&[("oai", &openai)], FIRST_TOKEN_MS, IDLE_MS);
        let refusing = |config: String| async move {
            let proxy = Proxy::start(&config).await;
            let got = post_messages(&proxy, &claude_code_body()).await;
            assert_eq!(got.status, 400, "{}", got.raw);
            assert_eq!(got.json()["type"], "error");
            assert_eq!(got.json()["error"]["type"], "invalid_request_error");
            got.json()["error"]["message"].as_str().unwrap_or_default().to_owned()
        };
        // By default only what asks something of the answer is refused;
        // context_management (Claude Code's) would be left out.
        let message = refusing(defaults.clone()).await;
        for named in ["x_field_from_the_future", "oai"] {
            assert!(message.contains(named), "the refusal names {named}: {message}");
        }
        assert!(!message.contains("context_management"), "{message}");
        let strict = defaults.replace("[[routes]]\n", "[[routes]]\nunsupported_params = \"refuse\"\n");
        let message = refusing(strict).await;
        for named in ["context_management", "x_field_from_the_future", "oai"] {
            assert!(message.contains(named), "the strict refusal names {named}: {message}");
        }
        assert!(openai.requests().is_empty(), "nothing was sent");

        let dropping = defaults.replace("[[routes]]\n", "[[routes]]\nunsupported_params = \"drop\"\n");
        let proxy = Proxy::start(&dropping).await;
        let got = post_messages(&proxy, &claude_code_body()).await;
        assert_eq!(got.status, 200, "{}", got.raw);
        assert_eq!(got.header("x-baton-dropped-params"), "context_management, x_field_from_the_future");
        assert_eq!(streamed_text(&got), "the tool said: README.md", "the mock read the tool result");
        let sent = openai.requests().pop().expect("the target was sent the request").body;
        let messages = sent["messages"].as_array().cloned().unwrap_or_default();
        let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool"], "{sent}");
        assert_eq!(messages[2]["tool_calls"][0]["id"], "toolu_1");
        assert_eq!(messages[2]["tool_calls"][0]["function"]["arguments"], "{\"command\":\"ls\"}");
        assert_eq!(messages[3]["tool_call_id"], "toolu_1");
        assert_eq!(sent["max_completion_tokens"], 512);
        assert_eq!(sent["reasoning_effort"], "low", "a 1,024-token budget is a low effort");
        assert!(!sent.to_string().contains("EqQBsig"), "Anthropic's signature is not OpenAI's to check: {sent}");
    })
    .await;
}

/// A baton whose one target is an Anthropic provider ("claude"), with
/// `top` before its config and `bottom` after it.
async fn claude_with(top: &str, bottom: &str) -> (MockHandle, Proxy) {
    let claude = MockProvider::anthropic().spawned().await;
    let proxy =
        Proxy::start(&format!("{top}{}\n{bottom}", mocks_toml(&[("claude", &claude)], FIRST_TOKEN_MS, IDLE_MS))).await;
    (claude, proxy)
}

#[tokio::test]
async fn errors_at_the_door_are_in_anthropics_shape() {
    within(HARD_LIMIT, async {
        let (_claude, proxy) =
            claude_with("", "[[keys]]\nname = \"agent\"\nkey = \"sk-agent-0123456789abcdef\"\n").await;
        let expect = |got: &Received, status: u16, kind: &str| {
            assert_eq!(got.status, status, "{}", got.raw);
            assert_eq!(got.json()["type"], "error", "{}", got.raw);
            assert_eq!(got.json()["error"]["type"], kind, "{}", got.raw);
        };
        expect(&post_messages(&proxy, &messages_body(false)).await, 401, "authentication_error");
        let wrong = post(&proxy, "/v1/messages", &messages_body(false), &[("x-api-key", "sk-nope")]).await;
        expect(&wrong, 401, "authentication_error");
        let key = [("x-api-key", "sk-agent-0123456789abcdef")];
        let mut unknown = messages_body(false);
        unknown["model"] = json!("nope");
        expect(&post(&proxy, "/v1/messages", &unknown, &key).await, 404, "not_found_error");
        let no_limit = json!({ "model": "chat", "messages": [{ "role": "user", "content": "hi" }] });
        expect(&post(&proxy, "/v1/messages", &no_limit, &key).await, 400, "invalid_request_error");
        let bearer = [("authorization", "Bearer sk-agent-0123456789abcdef")];
        let got = post(&proxy, "/v1/messages", &messages_body(false), &bearer).await;
        assert_eq!(got.status, 200, "the key as a Bearer token: {}", got.raw);
        expect(&post(&proxy, "/v1/messages/nothing", &messages_body(false), &key).await, 404, "not_found_error");
        let models = reqwest::Client::new()
            .get(proxy.url("/v1/models"))
            .header("anthropic-version", "2023-06-01")
            .header("x-api-key", "sk-agent-0123456789abcdef")
            .send()
            .await
            .expect("answers");
        let models: Value = models.json().await.unwrap_or_default();
        assert_eq!(models["data"][0]["type"], "model", "Anthropic's list: {models}");
        assert_eq!(models["data"][0]["id"], "chat");
        assert_eq!(models["has_more"], false);
        let head = reqwest::Client::new().head(proxy.url("/")).send().await.expect("answers");
        assert_eq!(head.status(), 200, "HEAD / answers, as the SDKs' health check expects");
        let count = json!({ "model": "chat", "messages": [{ "role": "user", "content": "12345678" }] });
        expect(&post(&proxy, "/v1/messages/count_tokens", &count, &[]).await, 401, "authentication_error");
        let mut unknown = count.clone();
        unknown["model"] = json!("nope");
        expect(&post(&proxy, "/v1/messages/count_tokens", &unknown, &key).await, 404, "not_found_error");
    })
    .await;
}

#[tokio::test]
async fn count_tokens_asks_an_anthropic_target_and_else_estimates() {
    within(HARD_LIMIT, async {
        // The simulated Anthropic counts a token a word; baton estimates four characters a token.
        let count = json!({ "model": "chat", "system": "be brief",
            "messages": [{ "role": "user", "content": "one two three 12345678" }] });
        let gpt = MockProvider::openai().spawned().await;
        let claude = MockProvider::anthropic().spawned().await;
        let proxy = Proxy::start(&mocks_toml(&[("gpt", &gpt), ("claude", &claude)], FIRST_TOKEN_MS, IDLE_MS)).await;
        let beta = [("anthropic-beta", "token-counting-2024-11-01")];
        let counted = post(&proxy, "/v1/messages/count_tokens", &count, &beta).await;
        assert_eq!((counted.status, counted.json()), (200, json!({ "input_tokens": 4 })), "{}", counted.raw);
        assert_eq!(counted.header("x-baton-provider"), "claude", "the route's Anthropic target counted");
        let sent = claude.requests().pop().expect("the count was asked for");
        assert_eq!(sent.path, "/v1/messages/count_tokens");
        let mut expected = count.clone();
        expected["model"] = json!("claude-model");
        assert_eq!(sent.body, expected, "the body as sent, the model set");
        assert_eq!(sent.headers.get("anthropic-beta").map(String::as_str), Some("token-counting-2024-11-01"));

        let locked = MockProvider::anthropic().api_key("another-key").spawned().await;
        let proxy = Proxy::start(&mocks_toml(&[("locked", &locked), ("gpt", &gpt)], FIRST_TOKEN_MS, IDLE_MS)).await;
        let estimated = post(&proxy, "/v1/messages/count_tokens", &count, &[]).await;
        let chars = "be brief".len() + "one two three 12345678".len();
        assert_eq!(estimated.json(), json!({ "input_tokens": chars.div_ceil(4) }), "{}", estimated.raw);
        assert_eq!(estimated.header("x-baton-provider"), "estimate", "a refused count falls back to the estimate");
        assert!(!estimated.raw.contains("invalid api key"), "the provider's error is not relayed");
    })
    .await;
}

#[tokio::test]
async fn thinking_is_shown_with_its_signature_from_anthropic_and_not_from_another_kind() {
    within(HARD_LIMIT, async {
        let mut body = messages_body(true);
        body["thinking"] = json!({ "type": "enabled", "budget_tokens": 1024 });
        let claude = MockProvider::anthropic().reasoning(2).spawned().await;
        let proxy = Proxy::start(&mocks_toml(&[("claude", &claude)], FIRST_TOKEN_MS, IDLE_MS)).await;
        let events = post_messages(&proxy, &body).await.named_events();
        let deltas: Vec<&str> = events.iter().filter_map(|(_, data)| data["delta"]["type"].as_str()).collect();
        let first_text = deltas.iter().position(|kind| *kind == "text_delta").unwrap_or(usize::MAX);
        assert_eq!(
            &deltas[..first_text.min(deltas.len())],
            ["thinking_delta", "thinking_delta", "signature_delta"],
            "the thinking block comes first, signed: {events:?}"
        );
        let blocks: Vec<&Value> = events
            .iter()
            .filter(|(name, _)| name == "content_block_start")
            .map(|(_, data)| &data["content_block"]["type"])
            .collect();
        assert_eq!(blocks, [&json!("thinking"), &json!("text")]);

        let openai = MockProvider::openai().reasoning(2).spawned().await;
        let proxy = Proxy::start(&mocks_toml(&[("oai", &openai)], FIRST_TOKEN_MS, IDLE_MS)).await;
        let got = post_messages(&proxy, &body).await;
        assert_eq!(got.status, 200, "{}", got.raw);
        assert!(
            !got.raw.contains("thinking_delta"),
            "reasoning without Anthropic's signature could not be sent back: {}",
            got.raw
        );
        assert_eq!(streamed_text(&got), openai.provider().expected_text());
    })
    .await;
}

#[tokio::test]
async fn a_refused_preflight_on_the_door_is_in_anthropics_shape() {
    within(HARD_LIMIT, async {
        let (_claude, proxy) = claude_with("cors_origins = [\"https://app.example\"]\n", "").await;
        let refused = reqwest::Client::new()
            .request(reqwest::Method::OPTIONS, proxy.url("/v1/messages"))
            .header("origin", "https://evil.example")
            .header("access-control-request-method", "POST")
            .send()
            .await
            .expect("answers");
        assert_eq!(refused.status(), 403);
        let body: Value = refused.json().await.unwrap_or_default();
        assert_eq!((body["type"].clone(), body["error"]["type"].clone()), (json!("error"), json!("permission_error")));
    })
    .await;
}
