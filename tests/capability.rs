//! The capability rule (docs/request-surface.md) over loopback: a target that
//! cannot honour a field of the request is skipped before a byte is sent, the
//! client hears a 400 naming the field and the targets when none can, a route
//! that drops such fields says which; a tool round trip reaches every kind in
//! its own form; a provider's 404 fails over without charging its breaker; and
//! a resumed stream still refuses answers with tool calls.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::mock::{Fault, MockHandle, MockProvider};
use baton::providers::ProviderKind;
use baton::resilience::BreakerState;
use serde_json::{Value, json};
use support::raw::{RawProvider, Step};
use support::{ChatConfig, Proxy, Received, Spawned, metrics, post_chat, run, sample_with};

const HARD_LIMIT: Duration = Duration::from_secs(20);

fn tools() -> Value {
    json!([{ "type": "function", "function": { "name": "get_weather", "description": "Weather for a city",
        "parameters": { "type": "object", "properties": { "city": { "type": "string" } }, "required": ["city"] } } }])
}

/// A chat request for route "chat" with `fields` added.
fn asking(stream: bool, fields: Value) -> Value {
    let mut body =
        json!({ "model": "chat", "stream": stream, "messages": [{ "role": "user", "content": "weather?" }] });
    if let (Some(body), Value::Object(fields)) = (body.as_object_mut(), fields) {
        body.extend(fields);
    }
    body
}

/// A route "chat" over `targets` in order, with `route_keys`.
fn route(route_keys: &str, targets: &[(&str, &MockHandle)]) -> String {
    let config = ChatConfig::new().keys(route_keys);
    targets.iter().fold(config, |config, (name, mock)| config.mock(name, mock)).toml()
}

/// A baton whose route "chat" tries `first`, then `second`: each a name
/// and the provider it names, started here.
async fn two_targets(first: (&str, MockProvider), second: (&str, MockProvider)) -> (MockHandle, MockHandle, Proxy) {
    let (a, b) = (first.1.spawned().await, second.1.spawned().await);
    let proxy = Proxy::start(&route("", &[(first.0, &a), (second.0, &b)])).await;
    (a, b, proxy)
}

/// Asks `proxy` with `fields`, streamed and not: each time a 400
/// `unsupported_parameter` whose message names each of `names`.
async fn refused_naming(proxy: &Proxy, fields: Value, names: &[&str]) {
    for stream in [true, false] {
        let got = post_chat(proxy, &asking(stream, fields.clone())).await;
        assert_eq!(got.status, 400, "stream {stream}: {}", got.raw);
        assert_eq!(got.json()["error"]["code"], "unsupported_parameter", "{}", got.raw);
        let message = error_message(&got);
        for name in names {
            assert!(message.contains(name), "stream {stream}: the message names {name}: {message}");
        }
    }
}

fn error_message(got: &Received) -> String {
    got.json()["error"]["message"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn a_target_that_cannot_honour_a_field_is_skipped_and_the_next_answers() {
    run(HARD_LIMIT, async {
        let (gemini, openai, proxy) =
            two_targets(("gem", MockProvider::gemini()), ("oai", MockProvider::openai())).await;
        for stream in [true, false] {
            let body = asking(stream, json!({ "tools": tools(), "parallel_tool_calls": false }));
            let got = post_chat(&proxy, &body).await;
            assert_eq!(got.status, 200, "stream {stream}: the second target answers: {}", got.raw);
            assert_eq!(got.header("x-baton-provider"), "oai", "stream {stream}");
            assert_eq!(got.header("x-baton-attempts"), "1", "stream {stream}: a skip is not an attempt sent");
            assert!(got.header("x-baton-dropped-params").is_empty(), "stream {stream}: nothing was dropped");
        }
        assert!(gemini.requests().is_empty(), "nothing was sent to the target that cannot honour the field");
        let sent = openai.requests();
        assert_eq!(sent.len(), 2);
        assert_eq!(sent[0].body["parallel_tool_calls"], false, "the target that can honour it gets the field");
        let text = metrics(&proxy).await;
        assert_eq!(
            sample_with(&text, "baton_attempts_total", &[("provider", "gem"), ("outcome", "unsupported")]),
            Some(2.0),
            "each skip is counted as unsupported:\n{text}"
        );
    });
}

#[test]
fn a_skip_is_named_in_the_error_when_the_others_fail() {
    run(HARD_LIMIT, async {
        let (anthropic, broken, proxy) = two_targets(
            ("claude", MockProvider::anthropic()),
            ("broken", MockProvider::openai().fault(Fault::Http5xx)),
        )
        .await;
        let got = post_chat(&proxy, &asking(false, json!({ "seed": 7 }))).await;
        assert_eq!(got.status, 502, "the one target sent failed: {}", got.raw);
        let message = error_message(&got);
        assert!(message.contains("claude") && message.contains("cannot honour seed"), "{message}");
        assert!(message.contains("http_5xx"), "{message}");
        assert!(anthropic.requests().is_empty());
        assert_eq!(broken.requests().len(), 1);
    });
}

#[test]
fn when_no_target_can_honour_a_field_the_client_hears_400_naming_it_and_the_targets() {
    run(HARD_LIMIT, async {
        let (anthropic, gemini, proxy) =
            two_targets(("claude", MockProvider::anthropic()), ("gem", MockProvider::gemini())).await;
        refused_naming(&proxy, json!({ "logprobs": true }), &["logprobs", "claude", "gem"]).await;
        let image = json!({ "messages": [{ "role": "user", "content": [
            { "type": "text", "text": "what is it?" },
            { "type": "image_url", "image_url": { "url": "https://example.com/cat.tiff" } },
        ] }] });
        let solo_gemini = Proxy::start(&route("", &[("gem", &gemini)])).await;
        let got = post_chat(&solo_gemini, &asking(false, image)).await;
        assert_eq!(got.status, 400, "{}", got.raw);
        let message = error_message(&got);
        let named = "messages[0].content[1] (an image by URL of a type Gemini does not take)";
        assert!(message.contains(named) && message.contains("gem"), "{message}");
        assert!(anthropic.requests().is_empty() && gemini.requests().is_empty(), "nothing was sent to any provider");
    });
}

#[test]
fn a_thinking_conflict_is_named_for_anthropic_and_another_target_answers() {
    run(HARD_LIMIT, async {
        let (anthropic, _openai, proxy) =
            two_targets(("claude", MockProvider::anthropic()), ("oai", MockProvider::openai())).await;
        let body = asking(false, json!({ "reasoning_effort": "high", "temperature": 0.3 }));
        let got = post_chat(&proxy, &body).await;
        assert_eq!((got.status, got.header("x-baton-provider")), (200, "oai"), "{}", got.raw);
        assert!(anthropic.requests().is_empty(), "Anthropic would refuse thinking with a temperature");
        let solo = Proxy::start(&route("", &[("claude", &anthropic)])).await;
        let got = post_chat(&solo, &body).await;
        assert_eq!(got.status, 400, "{}", got.raw);
        let message = error_message(&got);
        assert!(message.contains("reasoning_effort (together with temperature)"), "{message}");
    });
}

#[test]
fn a_route_that_drops_sends_the_request_without_the_field_and_says_so() {
    run(HARD_LIMIT, async {
        let gemini = MockProvider::gemini().spawned().await;
        let proxy = Proxy::start(&route("unsupported_params = \"drop\"", &[("gem", &gemini)])).await;
        for stream in [true, false] {
            let body = asking(stream, json!({ "seed": 7, "user": "u-1", "x_future_param": 1 }));
            let got = post_chat(&proxy, &body).await;
            assert_eq!(got.status, 200, "stream {stream}: {}", got.raw);
            assert_eq!(got.header("x-baton-dropped-params"), "user, x_future_param", "stream {stream}");
        }
        let sent = gemini.requests();
        assert_eq!(sent.len(), 2);
        assert_eq!(sent[0].body["generationConfig"], json!({ "seed": 7 }), "seed is translated, the rest dropped");
        assert!(!sent[0].body.to_string().contains("u-1"), "the dropped user never reached Gemini");

        let anthropic = MockProvider::anthropic().spawned().await;
        let proxy = Proxy::start(&route("unsupported_params = \"drop\"", &[("claude", &anthropic)])).await;
        let body = asking(false, json!({ "reasoning_effort": "low", "temperature": 0.2 }));
        let got = post_chat(&proxy, &body).await;
        assert_eq!(got.status, 200, "{}", got.raw);
        assert_eq!(got.header("x-baton-dropped-params"), "reasoning_effort (together with temperature)");
        let sent = anthropic.requests().pop().expect("one request");
        assert_eq!(sent.body["temperature"], 0.2, "the temperature stays");
        assert!(sent.body.get("thinking").is_none(), "thinking is what was dropped: {}", sent.body);
    });
}

/// The first turn (tools offered, the provider calls `get_weather`) and the
/// second (the call and its result sent back); what the provider received
/// for the second.
async fn round_trip(kind: ProviderKind) -> Value {
    let provider = MockProvider::new(kind).tool_call().spawned().await;
    let proxy = Proxy::start(&route("", &[("p", &provider)])).await;
    let first = post_chat(&proxy, &asking(false, json!({ "tools": tools() }))).await;
    assert_eq!(first.status, 200, "{kind}: {}", first.raw);
    let message = first.json()["choices"][0]["message"].clone();
    let calls = message["tool_calls"].clone();
    assert_eq!(calls[0]["function"]["name"], "get_weather", "{kind}: the provider called the tool: {message}");
    let id = calls[0]["id"].as_str().expect("the call has an id").to_owned();
    let second = json!({ "model": "chat", "stream": true, "tools": tools(), "messages": [
        { "role": "user", "content": "weather?" },
        { "role": "assistant", "content": null, "tool_calls": calls },
        { "role": "tool", "tool_call_id": id, "content": "18 degrees" },
    ] });
    let got = post_chat(&proxy, &second).await;
    assert_eq!(got.status, 200, "{kind}: {}", got.raw);
    let requests = provider.requests();
    assert_eq!(requests.len(), 2, "{kind}");
    requests[1].body.clone()
}

#[test]
fn a_tool_round_trip_reaches_every_kind_in_its_own_form() {
    run(HARD_LIMIT, async {
        let openai = round_trip(ProviderKind::OpenAi).await;
        assert_eq!(
            openai["messages"],
            json!([
                { "role": "user", "content": "weather?" },
                { "role": "assistant", "content": null, "tool_calls": [{ "id": "call_mock", "type": "function",
                    "function": { "name": "get_weather", "arguments": "{\"city\": \"Paris\"}" } }] },
                { "role": "tool", "tool_call_id": "call_mock", "content": "18 degrees" },
            ])
        );
        let anthropic = round_trip(ProviderKind::Anthropic).await;
        assert_eq!(
            anthropic["messages"],
            json!([
                { "role": "user", "content": "weather?" },
                { "role": "assistant", "content": [
                    { "type": "tool_use", "id": "toolu_mock", "name": "get_weather", "input": { "city": "Paris" } },
                ] },
                { "role": "user", "content": [{ "type": "tool_result", "tool_use_id": "toolu_mock",
                    "content": [{ "type": "text", "text": "18 degrees" }] }] },
            ])
        );
        let gemini = round_trip(ProviderKind::Gemini).await;
        assert_eq!(
            gemini["contents"],
            json!([
                { "role": "user", "parts": [{ "text": "weather?" }] },
                { "role": "model", "parts": [{ "functionCall": { "name": "get_weather", "args": { "city": "Paris" } },
                    "thoughtSignature": "skip_thought_signature_validator" }] },
                { "role": "user", "parts": [{ "functionResponse": { "name": "get_weather",
                    "response": { "output": "18 degrees" } } }] },
            ])
        );
    });
}

/// What OpenAI answers a request to a path it does not serve.
fn not_found() -> Vec<Step> {
    let body = r#"{"error":{"message":"Invalid URL (POST /chat/completions)","type":"invalid_request_error","param":null,"code":null}}"#;
    let head =
        format!("HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", body.len());
    vec![Step::Write(format!("{head}{body}").into_bytes())]
}

#[test]
fn a_providers_404_fails_over_and_is_not_charged_to_its_breaker() {
    run(HARD_LIMIT, async {
        let healthy = MockProvider::openai().marker("clean").spawned().await;
        let anthropic = MockProvider::anthropic().spawned().await;
        let gemini = MockProvider::gemini().spawned().await;
        let openai = RawProvider::start(|_| not_found()).await;
        // Base URLs a config gets wrong: OpenAI's without `/v1`, the others with a version of their own.
        let misconfigured = [
            ("oai", ProviderKind::OpenAi, openai.url.clone()),
            ("claude", ProviderKind::Anthropic, format!("{}/v1", anthropic.base_url())),
            ("gem", ProviderKind::Gemini, format!("{}/v1beta", gemini.base_url())),
        ];
        for (name, kind, base_url) in misconfigured {
            let config = ChatConfig::new()
                .provider(name, kind, &base_url)
                .provider_keys("breaker = { failure_threshold = 1, cooldown_ms = 60000 }")
                .mock("healthy", &healthy)
                .toml();
            let proxy = Proxy::start(&config).await;
            for stream in [true, false, true] {
                let got = post_chat(&proxy, &asking(stream, json!({}))).await;
                assert_eq!(got.status, 200, "{kind} stream {stream}: the next target answers: {}", got.raw);
                assert_eq!(got.header("x-baton-provider"), "healthy", "{kind} stream {stream}");
                assert_eq!(got.header("x-baton-attempts"), "2", "{kind} stream {stream}: the 404 was an attempt");
                assert!(!got.raw.contains("Invalid URL") && !got.raw.contains("no route"), "{kind}: {}", got.raw);
            }
            let text = metrics(&proxy).await;
            assert_eq!(
                sample_with(&text, "baton_attempts_total", &[("provider", name), ("outcome", "upstream_not_found")]),
                Some(3.0),
                "{kind}: every 404 is counted as upstream_not_found:\n{text}"
            );
            let breaker = proxy.engine.health().provider(name).breaker.state();
            assert_eq!(breaker, BreakerState::Closed, "{kind}: a 404 is the config's fault, not the provider's health");
        }
        assert_eq!(openai.requests(), 3, "every request reached the OpenAI-kind provider: its breaker stayed closed");
        assert_eq!(anthropic.requests().len(), 3);
        assert_eq!(gemini.requests().len(), 3);
    });
}

#[test]
fn a_resumed_stream_is_still_refused_for_an_answer_with_tool_calls() {
    run(HARD_LIMIT, async {
        let resuming = |breaks: &MockHandle, continues: &MockHandle| {
            ChatConfig::new()
                .keys("idle_timeout_ms = 300\non_midstream_failure = \"resume\"")
                .mock("breaks", breaks)
                .mock("continues", continues)
                .toml()
        };
        let breaking = || MockProvider::openai().marker("story").fault(Fault::MidstreamClose).tokens_before_fault(3);
        let continues = MockProvider::anthropic().marker("story").spawned().await;

        let plain = breaking().spawned().await;
        let proxy = Proxy::start(&resuming(&plain, &continues)).await;
        let got = post_chat(&proxy, &asking(true, json!({ "tools": tools() }))).await;
        assert_eq!(got.streamed_text(), baton::mock::wire::answer_text("story", 8), "prose is resumed: {}", got.raw);
        assert_eq!(continues.requests().len(), 1, "the continuing provider was asked for the rest");

        let breaks = breaking().tool_call().spawned().await;
        let proxy = Proxy::start(&resuming(&breaks, &continues)).await;
        let got = post_chat(&proxy, &asking(true, json!({ "tools": tools() }))).await;
        assert_eq!(got.status, 200, "{}", got.raw);
        assert_eq!(got.header("x-baton-provider"), "breaks");
        let called = got.chunks().iter().any(|chunk| chunk["choices"][0]["delta"]["tool_calls"].is_array());
        assert!(called, "the tool call reached the client: {}", got.raw);
        let error = got.error_event().unwrap_or_else(|| panic!("the broken stream ends with an error: {}", got.raw));
        assert_eq!(error["error"]["code"], "truncated", "{error}");
        assert!(!got.saw_done(), "no [DONE] after a broken answer");
        assert_eq!(continues.requests().len(), 1, "an answer with tool calls is not continued by another provider");
    });
}
