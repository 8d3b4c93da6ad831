//! The Anthropic Messages door (`POST /v1/messages`) over real loopback TCP:
//! DESIGN.md §3's fault classes with each provider kind as the failing
//! primary, streamed and whole, answered in Anthropic's events and body with
//! no byte of the failed attempt; the same-dialect path that sends an
//! anthropic-kind target the client's body as it came; and the edge's
//! errors in Anthropic's shape.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::{Duration, Instant};

use baton::mock::{Fault, MockProvider, refusing_addr};
use baton::providers::ProviderKind;
use serde_json::{Value, json};
use support::{Proxy, Received, Server, Spawned, mocks_toml, read_response, route_toml, within};

const FIRST_TOKEN_MS: u64 = 500;
const IDLE_MS: u64 = 500;
const SECONDARY_FIRST_TOKEN_MS: u64 = 50;
/// Slack for a loaded two-core machine; the bounds test behaviour, not speed.
const MARGIN_MS: u64 = 500;
const HARD_LIMIT: Duration = Duration::from_secs(20);
const PRIMARY_MARKER: &str = "leaky";

/// The secondary is of another kind than the primary, so a failover also
/// crosses from the native path to a translated one, or back.
fn secondary_kind(primary: ProviderKind) -> ProviderKind {
    match primary {
        ProviderKind::OpenAi => ProviderKind::Anthropic,
        ProviderKind::Anthropic => ProviderKind::Gemini,
        ProviderKind::Gemini => ProviderKind::OpenAi,
    }
}

fn messages_body(stream: bool) -> Value {
    json!({ "model": "chat", "max_tokens": 256, "stream": stream,
        "messages": [{ "role": "user", "content": "say something" }] })
}

/// Posts `body` to `path` as the Anthropic SDK does, with `headers` besides.
async fn post(server: &impl Server, path: &str, body: &Value, headers: &[(&str, &str)]) -> Received {
    let mut request = reqwest::Client::new()
        .post(server.url(path))
        .header("content-type", "application/json")
        .header("anthropic-version", "2023-06-01");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let started = Instant::now();
    read_response(request.body(body.to_string()).send().await.expect("the proxy answers"), started).await
}

async fn post_messages(server: &impl Server, body: &Value) -> Received {
    post(server, "/v1/messages", body, &[]).await
}

/// Each SSE event of an answer, as (name, data).
fn sse_events(got: &Received) -> Vec<(String, Value)> {
    got.raw
        .split_terminator("\n\n")
        .filter_map(|event| {
            let mut lines = event.lines();
            let name = lines.next()?.strip_prefix("event: ")?.to_owned();
            let data = serde_json::from_str(lines.next()?.strip_prefix("data: ")?).ok()?;
            Some((name, data))
        })
        .collect()
}

/// The text an Anthropic client assembles from `text_delta`s.
fn streamed_text(events: &[(String, Value)]) -> String {
    events
        .iter()
        .filter(|(_, data)| data["delta"]["type"] == "text_delta")
        .filter_map(|(_, data)| data["delta"]["text"].as_str())
        .collect()
}

fn waits_for_deadline(fault: Fault) -> bool {
    matches!(fault, Fault::StallHeaders | Fault::StallFirstToken | Fault::RoleThenStall | Fault::SlowFirstToken)
}

async fn run(kind: ProviderKind, fault: Fault, stream: bool) {
    within(HARD_LIMIT, async {
        let primary = MockProvider::new(kind).marker(PRIMARY_MARKER).fault(fault).spawned().await;
        let secondary = MockProvider::new(secondary_kind(kind))
            .marker("clean")
            .first_token_after(Duration::from_millis(SECONDARY_FIRST_TOKEN_MS))
            .spawned()
            .await;
        let config = if fault == Fault::Refuse {
            let dead = refusing_addr().await.expect("free port");
            let base =
                if kind == ProviderKind::OpenAi { format!("http://{dead}/v1") } else { format!("http://{dead}") };
            route_toml(
                &[("primary", kind, base), ("secondary", secondary.provider_kind(), secondary.base_url())],
                FIRST_TOKEN_MS,
                IDLE_MS,
            )
        } else {
            mocks_toml(&[("primary", &primary), ("secondary", &secondary)], FIRST_TOKEN_MS, IDLE_MS)
        };
        let proxy = Proxy::start(&config).await;
        let got = post_messages(&proxy, &messages_body(stream)).await;
        let name = fault.name();
        if matches!(fault, Fault::MidstreamStall | Fault::MidstreamClose) && stream {
            return expect_midstream_error(&got, fault);
        }
        assert_eq!(got.status, 200, "{name}: the secondary answers; body: {}", got.raw);
        assert_eq!(got.header("x-baton-provider"), "secondary", "{name}: the secondary answered");
        assert_eq!(got.header("x-baton-attempts"), "2", "{name}: two attempts were made");
        assert!(!got.raw.contains(PRIMARY_MARKER), "{name}: a byte of the failed attempt leaked: {}", got.raw);
        assert!(!got.raw.contains("mock"), "{name}: the primary's error leaked: {}", got.raw);
        let expected = secondary.provider().expected_text();
        if stream {
            assert_eq!(got.header("content-type"), "text/event-stream", "{name}: an SSE answer");
            let events = sse_events(&got);
            assert_eq!(streamed_text(&events), expected, "{name}: exactly the secondary's text");
            assert_eq!(events.first().map(|(n, _)| n.as_str()), Some("message_start"), "{name}: {}", got.raw);
            assert_eq!(events.last().map(|(n, _)| n.as_str()), Some("message_stop"), "{name}: {}", got.raw);
            assert_eq!(events[0].1["message"]["model"], "secondary-model", "{name}: the model that answered");
            let delta = events.iter().find(|(n, _)| n == "message_delta").map(|(_, d)| d.clone()).unwrap_or_default();
            assert_eq!(delta["delta"]["stop_reason"], "end_turn", "{name}");
            assert!(delta["usage"]["output_tokens"].as_u64().is_some_and(|n| n > 0), "{name}: usage: {delta}");
            let bound = if waits_for_deadline(fault) {
                FIRST_TOKEN_MS + SECONDARY_FIRST_TOKEN_MS + MARGIN_MS
            } else {
                FIRST_TOKEN_MS
            };
            assert!(got.first_byte <= Duration::from_millis(bound), "{name}: first byte after {:?}", got.first_byte);
        } else {
            let body = got.json();
            assert_eq!(body["type"], "message", "{name}: one message body: {body}");
            assert_eq!(body["content"][0], json!({ "type": "text", "text": expected }), "{name}");
            assert_eq!(body["model"], "secondary-model", "{name}");
            assert_eq!(body["stop_reason"], "end_turn", "{name}");
            assert!(body["usage"]["output_tokens"].as_u64().is_some_and(|n| n > 0), "{name}: usage: {body}");
        }
        if waits_for_deadline(fault) {
            assert!(got.first_byte >= Duration::from_millis(FIRST_TOKEN_MS), "{name}: held until the deadline");
        }
    })
    .await;
}

fn expect_midstream_error(got: &Received, fault: Fault) {
    let name = fault.name();
    assert_eq!(got.status, 200, "{name}: the primary committed");
    assert_eq!(got.header("x-baton-provider"), "primary", "{name}");
    let events = sse_events(got);
    assert_eq!(streamed_text(&events), baton::mock::wire::answer_text(PRIMARY_MARKER, 3), "{name}: tokens before it");
    assert!(events.iter().all(|(n, _)| n != "message_stop"), "{name}: no message_stop after a failure: {}", got.raw);
    let (last, error) = events.last().cloned().unwrap_or_default();
    assert_eq!(last, "error", "{name}: an error event ends the stream: {}", got.raw);
    assert_eq!(error["type"], "error", "{name}");
    assert_eq!(error["error"]["type"], "api_error", "{name}: {error}");
    let bound = Duration::from_millis(IDLE_MS + MARGIN_MS);
    assert!(got.total <= bound, "{name}: the stream ended after {:?}", got.total);
}

macro_rules! matrix {
    ($($kind_name:ident => $kind:expr),* $(,)?) => {
        $(
            mod $kind_name {
                use super::*;
                matrix!(@faults $kind;
                    refuse => Fault::Refuse,
                    http_5xx => Fault::Http5xx,
                    http_429 => Fault::Http429,
                    stall_headers => Fault::StallHeaders,
                    stall_first_token => Fault::StallFirstToken,
                    role_then_stall => Fault::RoleThenStall,
                    close_before_token => Fault::CloseBeforeToken,
                    malformed => Fault::Malformed,
                    error_event => Fault::ErrorEvent,
                    slow_first_token => Fault::SlowFirstToken,
                    midstream_stall => Fault::MidstreamStall,
                    midstream_close => Fault::MidstreamClose,
                );
            }
        )*
    };
    (@faults $kind:expr; $($name:ident => $fault:expr),* $(,)?) => {
        mod streamed {
            use super::*;
            $( #[tokio::test] async fn $name() { run($kind, $fault, true).await; } )*
        }
        mod whole {
            use super::*;
            $( #[tokio::test] async fn $name() { run($kind, $fault, false).await; } )*
        }
    };
}

matrix! {
    openai_primary => ProviderKind::OpenAi,
    anthropic_primary => ProviderKind::Anthropic,
    gemini_primary => ProviderKind::Gemini,
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
        assert_eq!(streamed_text(&sse_events(&got)), "the tool said: README.md", "the mock read the tool result");
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
        let strict = mocks_toml(&[("oai", &openai)], FIRST_TOKEN_MS, IDLE_MS);
        let proxy = Proxy::start(&strict).await;
        let got = post_messages(&proxy, &claude_code_body()).await;
        assert_eq!(got.status, 400, "{}", got.raw);
        assert_eq!(got.json()["type"], "error");
        assert_eq!(got.json()["error"]["type"], "invalid_request_error");
        let message = got.json()["error"]["message"].as_str().unwrap_or_default().to_owned();
        for named in ["context_management", "x_field_from_the_future", "oai"] {
            assert!(message.contains(named), "the refusal names {named}: {message}");
        }
        assert!(openai.requests().is_empty(), "nothing was sent");

        let dropping = strict.replace("[[routes]]\n", "[[routes]]\nunsupported_params = \"drop\"\n");
        let proxy = Proxy::start(&dropping).await;
        let got = post_messages(&proxy, &claude_code_body()).await;
        assert_eq!(got.status, 200, "{}", got.raw);
        assert_eq!(got.header("x-baton-dropped-params"), "context_management, x_field_from_the_future");
        assert_eq!(streamed_text(&sse_events(&got)), "the tool said: README.md", "the mock read the tool result");
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

#[tokio::test]
async fn errors_at_the_door_are_in_anthropics_shape() {
    within(HARD_LIMIT, async {
        let claude = MockProvider::anthropic().spawned().await;
        let keyed = format!(
            "{}\n[[keys]]\nname = \"agent\"\nkey = \"sk-agent-0123456789abcdef\"\n",
            mocks_toml(&[("claude", &claude)], FIRST_TOKEN_MS, IDLE_MS)
        );
        let proxy = Proxy::start(&keyed).await;
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
        let counted = post(&proxy, "/v1/messages/count_tokens", &count, &key).await;
        assert_eq!((counted.status, counted.json()), (200, json!({ "input_tokens": 2 })), "{}", counted.raw);
        expect(&post(&proxy, "/v1/messages/count_tokens", &count, &[]).await, 401, "authentication_error");
    })
    .await;
}
