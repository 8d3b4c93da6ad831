//! The whole app as `AppBuilder` wires it, given a scripted opener instead
//! of one over HTTP: a request goes through the real router (edge,
//! extractors, admission, the engine, the answer in the client's dialect)
//! without a socket anywhere, neither to the client nor to a provider.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use baton::config::{self, Config};
use baton::providers::ProviderError;
use baton::providers::scripted::{Script, Scripted};
use baton::{AppBuilder, AppState, app};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

/// Providers `a` and `b` (each target asks for the model of its own name)
/// and a route "chat" trying `a`, then `b`.
fn config() -> Config {
    let mut text = String::new();
    for name in ["a", "b"] {
        text.push_str(&format!(
            "[[providers]]\nname = \"{name}\"\nkind = \"openai\"\nbase_url = \"http://{name}.invalid/v1\"\n\n"
        ));
    }
    text.push_str("[[routes]]\nmodel = \"chat\"\ntargets = [{ provider = \"a\", model = \"a\" }, { provider = \"b\", model = \"b\" }]\n");
    config::parse(&text, "app.toml", &|_| None).expect("a valid test config")
}

/// The app over `scripted`, wired as `baton serve` wires it but for the opener.
fn state(scripted: &Arc<Scripted>) -> AppState {
    AppBuilder::new(config(), Arc::clone(scripted) as Arc<dyn baton::providers::Opener>).build()
}

/// Sends one chat request to the router itself and reads the whole answer:
/// its status, who answered (`x-baton-provider`), and its body.
async fn chat(state: AppState, stream: bool) -> (StatusCode, String, String) {
    let body = json!({ "model": "chat", "stream": stream, "messages": [{ "role": "user", "content": "hi" }] });
    let request = Request::post("/v1/chat/completions")
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .expect("a request");
    let response = app(state).oneshot(request).await.expect("the router never fails");
    let status = response.status();
    let provider = response.headers().get("x-baton-provider").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let bytes = response.into_body().collect().await.expect("the whole body").to_bytes();
    (status, provider, String::from_utf8_lossy(&bytes).into_owned())
}

#[tokio::test]
async fn a_whole_answer_fails_over_inside_the_app_without_a_socket() {
    let scripted = Scripted::new();
    scripted
        .then("a", Script::fails(ProviderError::Server { status: 503, message: String::new() }))
        .then("b", Script::answer().text("from b").finish());
    let (status, provider, body) = chat(state(&scripted), false).await;
    assert_eq!(status, StatusCode::OK, "b answered: {body}");
    assert_eq!(provider, "b", "the answer names the provider that gave it");
    let answer: Value = serde_json::from_str(&body).expect("a JSON answer");
    assert_eq!(answer["choices"][0]["message"]["content"], "from b", "the client gets b's words: {answer}");
    let asked: Vec<String> = scripted.opened().into_iter().map(|opened| opened.model).collect();
    assert_eq!(asked, ["a", "b"], "a was tried first, then b, through the opener the app was given");
}

#[tokio::test]
async fn a_stream_is_relayed_in_the_clients_dialect_through_the_given_opener() {
    let scripted = Scripted::new();
    scripted.then("a", Script::answer().text("hello ").text("world").finish());
    let (status, provider, body) = chat(state(&scripted), true).await;
    assert_eq!(status, StatusCode::OK, "a answered: {body}");
    assert_eq!(provider, "a");
    let text: String = body
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(text, "hello world", "every text delta reached the client in order: {body}");
    assert!(body.trim_end().ends_with("data: [DONE]"), "the stream ends as Chat Completions ends one: {body}");
}

#[tokio::test]
async fn every_provider_failing_is_one_error_in_the_clients_dialect() {
    let scripted = Scripted::new();
    for model in ["a", "b"] {
        scripted.then(model, Script::fails(ProviderError::Server { status: 500, message: String::new() }));
    }
    let (status, _, body) = chat(state(&scripted), false).await;
    assert!(status.is_server_error(), "every target failed: {status} {body}");
    let error: Value = serde_json::from_str(&body).expect("a JSON error");
    assert!(error["error"]["message"].is_string(), "an OpenAI-shaped error: {error}");
    assert_eq!(scripted.opened().len(), 2, "both targets were tried once");
}
