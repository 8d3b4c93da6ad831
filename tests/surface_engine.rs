//! The request surface in the engine, on paused time with scripted
//! providers: the capability rule (skip, refuse, drop), structured answers
//! checked before they commit, and reasoning that is neither answer text
//! nor a stall.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

use std::sync::Arc;
use std::time::Duration;

use baton::config::{self, Config};
use baton::core::{Call, Engine, Failure, ProxyError};
use baton::event::{ChatRequest, Event, FinishReason, Message, Role};
use baton::providers::scripted::{Script, Scripted};
use baton::request::{JsonSchema, ResponseFormat};
use futures_util::StreamExt;
use serde_json::json;
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);

/// Providers named after their kinds (`openai`, `anthropic`, `gemini`), a
/// route "chat" over `targets` (each asking for the model of its provider's
/// name) with `route` keys added.
fn config(route: &str, targets: &[&str]) -> Config {
    let mut text = String::new();
    for kind in ["openai", "anthropic", "gemini"] {
        let url = if kind == "openai" { "http://openai.invalid/v1" } else { "http://x.invalid" };
        text.push_str(&format!("[[providers]]\nname = \"{kind}\"\nkind = \"{kind}\"\nbase_url = \"{url}\"\n\n"));
    }
    let targets: Vec<String> = targets.iter().map(|t| format!("{{ provider = \"{t}\", model = \"{t}\" }}")).collect();
    text.push_str(&format!("[[routes]]\nmodel = \"chat\"\n{route}\ntargets = [{}]\n", targets.join(", ")));
    config::parse(&text, "surface.toml", &|_| None).expect("a valid test config")
}

fn engine(config: &Config, scripted: &Arc<Scripted>) -> Engine {
    Engine::with_opener(config, Arc::clone(scripted) as Arc<dyn baton::providers::Opener>)
}

fn call(request: ChatRequest) -> Call {
    Call {
        id: Arc::from("req_surface"),
        request: Box::new(request),
        drills: Default::default(),
        trace: Default::default(),
    }
}

fn asking(text: &str) -> ChatRequest {
    ChatRequest { messages: vec![Message::text(Role::User, text)], ..ChatRequest::default() }
}

/// A request with a field only an OpenAI-kind target passes on.
fn seeded() -> ChatRequest {
    let mut request = asking("pick a number");
    request.extra.insert("logit_bias".into(), json!({ "50256": -100 }));
    request
}

fn counted() -> ChatRequest {
    let schema = json!({ "type": "object", "properties": { "n": { "type": "integer" } }, "required": ["n"] });
    let format =
        ResponseFormat::JsonSchema(JsonSchema { name: "count".into(), description: None, schema, strict: None });
    ChatRequest { response_format: Some(format), ..asking("count") }
}

async fn text_of(engine: &Engine, config: &Config, request: ChatRequest) -> (Result<String, Failure>, String) {
    let route = config.route("chat").expect("route");
    let mut committed = engine.stream(route, call(request)).await.expect("committed");
    let mut text = String::new();
    while let Some(event) = committed.events.next().await {
        match event {
            Ok(Event::Text(fragment)) => text.push_str(&fragment),
            Ok(_) => {}
            Err(failure) => return (Err(failure), committed.winner.provider.to_string()),
        }
    }
    (Ok(text), committed.winner.provider.to_string())
}

#[tokio::test(start_paused = true)]
async fn a_target_that_cannot_honour_a_field_is_skipped_before_anything_is_sent() {
    let config = config("", &["anthropic", "openai"]);
    let scripted = Scripted::new();
    scripted
        .then("anthropic", Script::answer().text("never").finish())
        .then("openai", Script::answer().text("7").finish());
    let (text, provider) = text_of(&engine(&config, &scripted), &config, seeded()).await;
    assert_eq!((text.unwrap().as_str(), provider.as_str()), ("7", "openai"));
    assert_eq!(scripted.opened_for("anthropic"), 0, "nothing was sent to the target that cannot honour it");
    let sent = &scripted.opened()[0].request;
    assert_eq!(sent.extra.get("logit_bias"), Some(&json!({ "50256": -100 })), "passed on verbatim");
}

#[tokio::test(start_paused = true)]
async fn when_no_target_can_honour_a_field_the_client_is_told_which_and_why() {
    let config = config("", &["anthropic", "gemini"]);
    let scripted = Scripted::new();
    let route = config.route("chat").expect("route");
    let Err(err) = engine(&config, &scripted).stream(route, call(seeded())).await else { panic!("refused") };
    assert!(matches!(err, ProxyError::Unsupported { .. }), "{err:?}");
    assert_eq!(err.status(), 400);
    assert_eq!(err.kind(), "unsupported_parameter");
    let message = err.to_string();
    assert!(message.contains("logit_bias") && message.contains("anthropic") && message.contains("gemini"), "{message}");
    assert!(scripted.opened().is_empty(), "nothing was sent");
}

#[tokio::test(start_paused = true)]
async fn a_route_that_drops_unsupported_fields_sends_without_them_and_says_so() {
    let config = config("unsupported_params = \"drop\"", &["gemini"]);
    let scripted = Scripted::new();
    scripted.then("gemini", Script::answer().text("4").finish());
    let route = config.route("chat").expect("route");
    let committed = engine(&config, &scripted).stream(route, call(seeded())).await.expect("answered");
    assert_eq!(committed.winner.dropped, ["logit_bias"]);
    assert_eq!(scripted.opened()[0].request.extra.get("logit_bias"), None, "sent without it");
}

#[tokio::test(start_paused = true)]
async fn an_answer_sent_whole_that_is_not_valid_for_its_schema_fails_over_and_a_fence_comes_off() {
    let config = config("", &["openai", "anthropic"]);
    let scripted = Scripted::new();
    scripted.then("openai", Script::answer().text("Sure! Here it is: {\"n\": 3}").finish());
    scripted.then("anthropic", Script::answer().text("```json\n{\"n\":").text(" 3}\n```").finish());
    let route = config.route("chat").expect("route");
    let completed = engine(&config, &scripted).complete(route, &call(counted())).await.expect("answered");
    assert_eq!(&*completed.winner.provider, "anthropic");
    assert_eq!(completed.winner.attempts, 2);
    let text: String =
        completed.events.iter().filter_map(|e| if let Event::Text(t) = e { Some(t.as_str()) } else { None }).collect();
    assert_eq!(text, "{\"n\": 3}", "the fence came off");
    assert!(!Failure::InvalidOutput(String::new()).counts_against_provider(), "not charged to the breaker");
}

#[tokio::test(start_paused = true)]
async fn when_every_answer_is_invalid_the_client_hears_so_and_a_route_may_turn_the_check_off() {
    let scripted = Scripted::new();
    scripted.then("openai", Script::answer().text("{\"n\": \"three\"}").finish());
    let strict = config("", &["openai"]);
    let route = strict.route("chat").expect("route");
    let Err(err) = engine(&strict, &scripted).complete(route, &call(counted())).await else { panic!("invalid") };
    assert!(err.to_string().contains("invalid_output"), "{err}");
    let lenient = config("validate_json = false", &["openai"]);
    let route = lenient.route("chat").expect("route");
    assert!(engine(&lenient, &scripted).complete(route, &call(counted())).await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_streamed_answer_is_checked_at_its_end_and_an_invalid_one_ends_with_an_error() {
    let config = config("", &["openai"]);
    let scripted = Scripted::new();
    scripted.then("openai", Script::answer().text("{\"n\":").text(" 3}").finish());
    let (text, _) = text_of(&engine(&config, &scripted), &config, counted()).await;
    assert_eq!(text.unwrap(), "{\"n\": 3}");
    let scripted = Scripted::new();
    scripted.then("openai", Script::answer().text("{\"n\":").text(" \"x\"}").finish());
    let (ended, _) = text_of(&engine(&config, &scripted), &config, counted()).await;
    assert!(matches!(ended, Err(Failure::InvalidOutput(_))), "{ended:?}");
    let scripted = Scripted::new();
    let call_tool = Script::answer()
        .event(Event::ToolCall(baton::event::ToolCallDelta {
            index: 0,
            id: Some("c".into()),
            name: Some("f".into()),
            arguments: "{}".into(),
        }))
        .event(Event::Finish(FinishReason::ToolCalls));
    scripted.then("openai", call_tool);
    let (called, _) = text_of(&engine(&config, &scripted), &config, counted()).await;
    assert!(called.is_ok(), "an answer that calls a tool is not the JSON answer: {called:?}");
}

#[tokio::test(start_paused = true)]
async fn reasoning_is_no_answer_text_and_with_keep_alive_no_stall() {
    let thinking = || {
        Script::answer()
            .wait(400 * MS)
            .event(Event::Reasoning("hmm".into()))
            .wait(400 * MS)
            .event(Event::Reasoning("so".into()))
            .wait(400 * MS)
            .text("42")
            .finish()
    };
    let patient = config("first_token_timeout_ms = 500\nreasoning_keeps_alive = true", &["openai", "gemini"]);
    let scripted = Scripted::new();
    scripted.then("openai", thinking()).then("gemini", Script::answer().text("fallback").finish());
    let start = Instant::now();
    let (text, provider) = text_of(&engine(&patient, &scripted), &patient, asking("think")).await;
    assert_eq!((text.unwrap().as_str(), provider.as_str()), ("42", "openai"), "thinking kept it alive");
    assert_eq!(start.elapsed(), 1200 * MS);

    let impatient = config("first_token_timeout_ms = 500", &["openai", "gemini"]);
    let scripted = Scripted::new();
    scripted.then("openai", thinking()).then("gemini", Script::answer().text("fallback").finish());
    let (text, provider) = text_of(&engine(&impatient, &scripted), &impatient, asking("think")).await;
    assert_eq!((text.unwrap().as_str(), provider.as_str()), ("fallback", "gemini"), "without it, the deadline holds");
}

#[tokio::test(start_paused = true)]
async fn reasoning_reaches_the_client_only_when_the_route_streams_it() {
    for (route, expected) in [("", 0), ("stream_reasoning = true", 2)] {
        let config = config(route, &["openai"]);
        let scripted = Scripted::new();
        let answer =
            Script::answer().event(Event::Reasoning("a".into())).event(Event::Reasoning("b".into())).text("c").finish();
        scripted.then("openai", answer);
        let route = config.route("chat").expect("route");
        let committed = engine(&config, &scripted).stream(route, call(asking("x"))).await.expect("answered");
        let events: Vec<Event> = committed.events.filter_map(|e| async move { e.ok() }).collect().await;
        let reasoning = events.iter().filter(|e| matches!(e, Event::Reasoning(_))).count();
        assert_eq!(reasoning, expected, "route {route:?}: {events:?}");
        assert!(events.contains(&Event::Text("c".into())));
    }
}
