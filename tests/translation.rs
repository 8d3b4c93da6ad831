//! What each provider receives: the client's OpenAI-style request translated
//! into the provider's own request, at the SDK's URL, with the key in the
//! provider's header — and the key never echoed back to the client.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::mock::{MockHandle, MockProvider, RecordedRequest};
use baton::providers::ProviderKind;
use serde_json::{Value, json};
use support::{ChatConfig, Proxy, Spawned, post_chat, run};

const HARD_LIMIT: Duration = Duration::from_secs(20);
const KEY: &str = "sk-test-0123456789";

fn rich_request() -> Value {
    json!({
        "model": "chat",
        "stream": true,
        "messages": [
            { "role": "system", "content": "be brief" },
            { "role": "user", "content": "hi" },
            { "role": "assistant", "content": "hello" },
            { "role": "user", "content": [{ "type": "text", "text": "weather " }, { "type": "text", "text": "in Paris?" }] },
        ],
        "max_tokens": 77,
        "temperature": 0.3,
        "top_p": 0.8,
        "stop": "END",
        "tools": [{ "type": "function", "function": {
            "name": "get_weather", "description": "Weather for a city",
            "parameters": { "type": "object", "properties": { "city": { "type": "string" } } },
        }}],
    })
}

/// A route "chat" over `provider` as "p", asking for `model` with `KEY`.
fn keyed(provider: &MockHandle, model: &str) -> String {
    ChatConfig::new().mock("p", provider).provider_keys(&format!("api_key = \"{KEY}\"")).model(model).toml()
}

/// Sends the rich request to a provider of `kind` that demands `KEY`, and
/// returns what the provider received, which it received at `path`.
async fn received_by(kind: ProviderKind, path: &str) -> RecordedRequest {
    let provider = MockProvider::new(kind).api_key(KEY).spawned().await;
    let proxy = Proxy::start(&keyed(&provider, "m-1")).await;
    let got = post_chat(&proxy, &rich_request()).await;
    assert_eq!(got.status, 200, "{kind}: the provider accepted the key and the request: {}", got.raw);
    assert_eq!(got.streamed_text(), provider.provider().expected_text());
    let request = provider.requests().pop().expect("one request");
    assert_eq!(request.path, path);
    request
}

#[test]
fn openai_receives_chat_completions() {
    run(HARD_LIMIT, async {
        let request = received_by(ProviderKind::OpenAi, "/v1/chat/completions").await;
        assert_eq!(request.headers["authorization"], format!("Bearer {KEY}"));
        let body = request.body;
        assert_eq!(body["model"], "m-1");
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"], json!({ "include_usage": true }));
        assert_eq!(body["messages"][0], json!({ "role": "system", "content": "be brief" }));
        let parts = json!([{ "type": "text", "text": "weather " }, { "type": "text", "text": "in Paris?" }]);
        assert_eq!(body["messages"][3], json!({ "role": "user", "content": parts }), "parts as the client sent them");
        assert_eq!(
            (body["max_tokens"].clone(), body["temperature"].clone(), body["top_p"].clone()),
            (json!(77), json!(0.3), json!(0.8))
        );
        assert_eq!(body["stop"], json!("END"), "the body goes as the client wrote it");
        assert_eq!(body["tools"][0]["function"]["name"], "get_weather");
        assert_eq!(body["tools"][0]["type"], "function");
    });
}

#[test]
fn anthropic_receives_messages() {
    run(HARD_LIMIT, async {
        let request = received_by(ProviderKind::Anthropic, "/v1/messages").await;
        assert_eq!(request.headers["x-api-key"], KEY);
        assert_eq!(request.headers["anthropic-version"], "2023-06-01");
        assert!(!request.headers.contains_key("authorization"), "Anthropic takes the key in x-api-key only");
        let body = request.body;
        assert_eq!(body["model"], "m-1");
        assert_eq!(body["system"], "be brief");
        let roles: Vec<&str> =
            body["messages"].as_array().expect("messages").iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, vec!["user", "assistant", "user"]);
        assert_eq!(body["max_tokens"], 77);
        assert_eq!(body["stop_sequences"], json!(["END"]));
        assert_eq!(body["tools"][0]["name"], "get_weather");
        assert_eq!(body["tools"][0]["input_schema"]["properties"]["city"]["type"], "string");
    });
}

#[test]
fn gemini_receives_stream_generate_content() {
    run(HARD_LIMIT, async {
        let request = received_by(ProviderKind::Gemini, "/v1beta/models/m-1:streamGenerateContent?alt=sse").await;
        assert_eq!(request.headers["x-goog-api-key"], KEY);
        let body = request.body;
        assert_eq!(body["systemInstruction"], json!({ "parts": [{ "text": "be brief" }] }));
        let roles: Vec<&str> =
            body["contents"].as_array().expect("contents").iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, vec!["user", "model", "user"]);
        assert_eq!(body["contents"][2]["parts"], json!([{ "text": "weather " }, { "text": "in Paris?" }]));
        assert_eq!(body["generationConfig"]["maxOutputTokens"], 77);
        assert_eq!(body["generationConfig"]["stopSequences"], json!(["END"]));
        assert_eq!(body["tools"][0]["functionDeclarations"][0]["name"], "get_weather");
    });
}

#[test]
fn a_rejected_key_never_reaches_the_client() {
    run(HARD_LIMIT, async {
        // Vertex AI takes no key: its token comes from an exchange (a refused
        // one is `auth`, in the token cache's own tests).
        for kind in ProviderKind::ALL.into_iter().filter(|kind| *kind != ProviderKind::Vertex) {
            let provider = MockProvider::new(kind).api_key("the-right-one").spawned().await;
            let proxy = Proxy::start(&keyed(&provider, "m")).await;
            for stream in [true, false] {
                let mut body = rich_request();
                body["stream"] = json!(stream);
                // The Responses API has no stop sequences, and they are not what this is about.
                body.as_object_mut().map(|fields| fields.remove("stop"));
                let got = post_chat(&proxy, &body).await;
                assert_eq!(got.status, 502, "{kind}: a 401 upstream is a failed attempt: {}", got.raw);
                assert!(got.raw.contains("http_auth"), "{kind}: the failure class is named: {}", got.raw);
                assert!(!got.raw.contains(KEY), "{kind}: the key leaked: {}", got.raw);
                let headers = format!("{:?}", got.headers);
                assert!(!headers.contains(KEY), "{kind}: the key leaked into headers");
            }
        }
    });
}
