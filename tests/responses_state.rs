//! Responses conversations kept by baton, over real loopback TCP: a turn
//! the client lets baton keep is found again by `previous_response_id`,
//! whichever provider (of whichever kind) answers the next turn, on SQLite
//! and on PostgreSQL, across a restart; `GET` and `DELETE
//! /v1/responses/{id}`; an `item_reference` is the kept item it names; a
//! key sees only its own; `store: false` keeps nothing; encrypted reasoning goes back only to the provider that wrote
//! it; without a store a chained turn is refused by name.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::mock::{Fault, MockHandle, MockProvider, Schedule};
use serde_json::{Value, json};
use support::backend::Backend;
use support::{ChatConfig, Proxy, Received, Spawned, post_with, within};

const HARD_LIMIT: Duration = Duration::from_secs(60);
const ANN: &str = "sk-ann-0123456789abcdef";
const BOB: &str = "sk-bob-0123456789abcdef";

/// Posts a Responses body as the key `key` (none: no key).
async fn respond(proxy: &Proxy, body: &Value, key: Option<&str>) -> Received {
    let bearer = key.map(|key| format!("Bearer {key}"));
    let headers: Vec<(&str, &str)> = bearer.iter().map(|value| ("authorization", value.as_str())).collect();
    post_with(proxy, "/v1/responses", body, &headers).await
}

/// `GET` or `DELETE` on a kept response, as `key`: the status and the body.
async fn on_response(proxy: &Proxy, method: reqwest::Method, id: &str, key: Option<&str>) -> (u16, Value) {
    let mut request = reqwest::Client::new().request(method, proxy.url(&format!("/v1/responses/{id}")));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let answer = request.send().await.expect("the proxy answers");
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap_or(Value::Null))
}

/// The response object of an answer, streamed (its `response.completed`) or whole.
fn response_of(got: &Received) -> Value {
    assert_eq!(got.status, 200, "{}", got.raw);
    if got.raw.trim_start().starts_with('{') {
        return got.json();
    }
    let events = got.named_events();
    let (_, completed) = events.iter().find(|(name, _)| name == "response.completed").expect("a completed answer");
    completed["response"].clone()
}

/// The text of a response object's messages.
fn output_text(response: &Value) -> String {
    let items = response["output"].as_array().cloned().unwrap_or_default();
    let parts = items
        .iter()
        .filter(|item| item["type"] == "message")
        .flat_map(|item| item["content"].as_array().cloned().unwrap_or_default());
    parts.filter_map(|part| part["text"].as_str().map(str::to_owned)).collect()
}

/// The texts an Anthropic-kind provider was sent, message by message, as `role: text`.
fn anthropic_turns(sent: &Value) -> Vec<String> {
    let messages = sent["messages"].as_array().cloned().unwrap_or_default();
    messages
        .iter()
        .map(|message| {
            let text = match &message["content"] {
                Value::String(text) => text.clone(),
                blocks => blocks.as_array().into_iter().flatten().filter_map(|b| b["text"].as_str()).collect(),
            };
            format!("{}: {text}", message["role"].as_str().unwrap_or_default())
        })
        .collect()
}

/// A baton keeping turns in `backend`, with the keys of Ann and Bob and a
/// route "chat" to `mock`.
async fn keyed(backend: &Backend, name: &str, mock: &MockHandle) -> (Proxy, baton::AppState) {
    let keys = format!("[[keys]]\nname = \"ann\"\nkey = \"{ANN}\"\n\n[[keys]]\nname = \"bob\"\nkey = \"{BOB}\"\n");
    Proxy::start_recorded_text(&format!("{}{keys}{}", backend.toml(), ChatConfig::new().mock(name, mock).toml())).await
}

/// A route "chat": an OpenAI Responses target that fails after its first
/// request, then an Anthropic one; kept in `backend`'s store.
async fn failing_over(backend: &Backend) -> (MockHandle, MockHandle, String) {
    let gpt = MockProvider::openai_responses().marker("gpt").fault(Fault::Http5xx).schedule(Schedule::AfterRequests(1));
    let gpt = gpt.spawned().await;
    let claude = MockProvider::anthropic().marker("claude").spawned().await;
    let text = format!("{}{}", backend.toml(), ChatConfig::new().mock("gpt", &gpt).mock("claude", &claude).toml());
    (gpt, claude, text)
}

async fn a_conversation_goes_on_on_another_kind_after_its_provider_fails(backend: Backend) {
    let (gpt, claude, text) = failing_over(&backend).await;
    let (proxy, _state) = Proxy::start_recorded_text(&text).await;
    let first = response_of(&respond(&proxy, &json!({ "model": "chat", "input": "first question" }), None).await);
    assert_eq!(first["store"], true, "kept, as OpenAI keeps a turn unless told not to");
    let gpt_said = output_text(&first);
    assert_eq!(gpt_said, gpt.provider().expected_text());
    let second_body = json!({ "model": "chat", "stream": true, "input": "second question",
        "previous_response_id": first["id"], "instructions": "be brief" });
    let second = response_of(&respond(&proxy, &second_body, None).await);
    assert_eq!(second["previous_response_id"], first["id"]);
    assert_eq!(gpt.requests().len(), 2, "the second turn went to the failing provider first");
    let sent = claude.requests().pop().expect("claude answered the second turn");
    assert_eq!(sent.body["system"].as_str().or(sent.body["system"][0]["text"].as_str()), Some("be brief"));
    assert_eq!(
        anthropic_turns(&sent.body),
        ["user: first question".to_owned(), format!("assistant: {gpt_said}"), "user: second question".to_owned()],
        "the first turn, answered by another provider of another kind, came along"
    );
    let third_body = json!({ "model": "chat", "input": [{ "role": "user", "content": "third question" }],
        "previous_response_id": second["id"] });
    let third = response_of(&respond(&proxy, &third_body, None).await);
    let sent = claude.requests().pop().expect("claude answered the third turn");
    let claude_said = output_text(&second);
    assert_eq!(
        anthropic_turns(&sent.body),
        [
            "user: first question".to_owned(),
            format!("assistant: {gpt_said}"),
            "user: second question".to_owned(),
            format!("assistant: {claude_said}"),
            "user: third question".to_owned()
        ]
    );
    assert!(sent.body.get("system").is_none(), "instructions are the turn's own, not carried over");
    assert_eq!(output_text(&third), claude.provider().expected_text(), "a whole new answer");

    let (status, kept) = on_response(&proxy, reqwest::Method::GET, second["id"].as_str().unwrap(), None).await;
    assert_eq!(status, 200);
    assert_eq!(kept, second, "the response as the client got it");
    let (status, deleted) = on_response(&proxy, reqwest::Method::DELETE, second["id"].as_str().unwrap(), None).await;
    assert_eq!((status, deleted), (200, json!({ "id": second["id"], "object": "response", "deleted": true })));
    let (status, gone) = on_response(&proxy, reqwest::Method::GET, second["id"].as_str().unwrap(), None).await;
    assert_eq!(status, 404);
    assert_eq!(gone["error"]["code"], "response_not_found", "{gone}");
    let broken =
        respond(&proxy, &json!({ "model": "chat", "input": "more", "previous_response_id": third["id"] }), None).await;
    assert_eq!(broken.status, 404, "a chain with a deleted turn is not silently shortened: {}", broken.raw);
    assert!(broken.json()["error"]["message"].as_str().unwrap().contains(second["id"].as_str().unwrap()));
}

on_each_backend!(a_conversation_goes_on_on_another_kind_after_its_provider_fails within HARD_LIMIT =>
    a_conversation_goes_on_after_failover_sqlite("chain"), a_conversation_goes_on_after_failover_postgres);

async fn a_kept_conversation_outlives_the_process_that_kept_it(backend: Backend) {
    let (_gpt, claude, text) = failing_over(&backend).await;
    let (first_proxy, _first_state) = Proxy::start_recorded_text(&text).await;
    let first = response_of(&respond(&first_proxy, &json!({ "model": "chat", "input": "remember me" }), None).await);
    drop(first_proxy);
    // Another process (or replica) on the same store: it reads only the database.
    let (proxy, state) = Proxy::start_recorded_text(&text).await;
    let records = state.records().expect("a store").clone();
    let id = first["id"].as_str().unwrap().to_owned();
    let written = support::eventually(Duration::from_secs(10), || async {
        records.kept_turn(&id, "").await.ok().flatten().is_some()
    })
    .await;
    assert!(written, "the turn reached the database");
    let body = json!({ "model": "chat", "input": "and now?", "previous_response_id": first["id"] });
    response_of(&respond(&proxy, &body, None).await);
    let sent = claude.requests().pop().expect("claude answered");
    assert_eq!(anthropic_turns(&sent.body)[0], "user: remember me", "read back from the database");
}

on_each_backend!(a_kept_conversation_outlives_the_process_that_kept_it within HARD_LIMIT =>
    a_kept_conversation_outlives_the_process_sqlite("restart"), a_kept_conversation_outlives_the_process_postgres);

#[test]
fn a_key_sees_only_its_own_responses_and_store_false_keeps_nothing() {
    support::run(HARD_LIMIT, async {
        let backend = Backend::sqlite("owners");
        let gpt = MockProvider::openai_responses().spawned().await;
        let (proxy, _state) = keyed(&backend, "gpt", &gpt).await;
        let anns = response_of(&respond(&proxy, &json!({ "model": "chat", "input": "mine" }), Some(ANN)).await);
        let id = anns["id"].as_str().unwrap();
        assert_eq!(on_response(&proxy, reqwest::Method::GET, id, Some(ANN)).await.0, 200);
        let (status, body) = on_response(&proxy, reqwest::Method::GET, id, Some(BOB)).await;
        assert_eq!((status, body["error"]["type"].as_str()), (404, Some("invalid_request_error")), "{body}");
        assert_eq!(on_response(&proxy, reqwest::Method::DELETE, id, Some(BOB)).await.0, 404);
        assert_eq!(on_response(&proxy, reqwest::Method::GET, id, None).await.0, 401, "no key, no answer");
        let chained = json!({ "model": "chat", "input": "yours?", "previous_response_id": id });
        let refused = respond(&proxy, &chained, Some(BOB)).await;
        assert_eq!(refused.status, 404, "{}", refused.raw);
        assert_eq!(refused.json()["error"]["code"], "previous_response_not_found");
        assert_eq!(gpt.requests().len(), 1, "a refused chain reaches no provider");

        let unkept = response_of(
            &respond(&proxy, &json!({ "model": "chat", "input": "forget me", "store": false }), Some(ANN)).await,
        );
        assert_eq!(unkept["store"], false);
        assert_eq!(on_response(&proxy, reqwest::Method::GET, unkept["id"].as_str().unwrap(), Some(ANN)).await.0, 404);
        let (status, unknown) = on_response(&proxy, reqwest::Method::GET, "resp_never", Some(ANN)).await;
        assert_eq!(
            (status, unknown["error"]["message"].as_str()),
            (404, Some("Response with id 'resp_never' not found."))
        );
    });
}

#[test]
fn encrypted_reasoning_goes_back_only_to_the_provider_that_wrote_it() {
    support::run(HARD_LIMIT, async {
        let backend = Backend::sqlite("reasoning");
        let maker = MockProvider::openai_responses().reasoning(2).spawned().await;
        let other = MockProvider::openai_responses().spawned().await;
        let route = ChatConfig::new().mock("maker", &maker).mock("other", &other).toml();
        let elsewhere =
            "[[routes]]\nmodel = \"elsewhere\"\ntargets = [{ provider = \"other\", model = \"other-model\" }]\n";
        let (proxy, _state) = Proxy::start_recorded_text(&format!("{}{route}\n{elsewhere}", backend.toml())).await;
        let asked = json!({ "model": "chat", "input": "think", "reasoning": { "summary": "auto" },
            "include": ["reasoning.encrypted_content"] });
        let first = response_of(&respond(&proxy, &asked, None).await);
        let reasoning = first["output"].as_array().unwrap().iter().find(|item| item["type"] == "reasoning").cloned();
        assert!(reasoning.is_some_and(|item| item["encrypted_content"].is_string()), "{first}");
        for (route, mock, carries) in [("elsewhere", &other, false), ("chat", &maker, true)] {
            let body = json!({ "model": route, "input": "go on", "previous_response_id": first["id"] });
            response_of(&respond(&proxy, &body, None).await);
            let sent = mock.requests().pop().expect("the target was sent the turn");
            let input = sent.body["input"].as_array().cloned().unwrap_or_default();
            let encrypted =
                input.iter().any(|item| item["type"] == "reasoning" && item["encrypted_content"].is_string());
            assert_eq!(encrypted, carries, "route {route}: {}", sent.body);
            assert!(input.iter().any(|item| item["role"] == "assistant"), "the answer itself goes to both");
        }
    });
}

#[tokio::test]
async fn without_a_store_a_chained_turn_and_a_reference_are_refused_by_name() {
    within(HARD_LIMIT, async {
        let gpt = MockProvider::openai_responses().spawned().await;
        let text = format!("[store]\nbackend = \"none\"\n{}", ChatConfig::new().mock("gpt", &gpt).toml());
        let (proxy, _state) = Proxy::start_recorded_text(&text).await;
        let answer = response_of(&respond(&proxy, &json!({ "model": "chat", "input": "hi" }), None).await);
        assert_eq!(answer["store"], false, "nothing is kept, and the answer says so");
        let chained = json!({ "model": "chat", "input": "again", "previous_response_id": answer["id"] });
        let refused = respond(&proxy, &chained, None).await;
        assert_eq!(refused.status, 400);
        assert!(
            refused.json()["error"]["message"].as_str().unwrap().contains("`previous_response_id`"),
            "{}",
            refused.raw
        );
        let referring = json!({ "model": "chat", "input": [{ "type": "item_reference", "id": "msg_1" }] });
        let refused = respond(&proxy, &referring, None).await;
        assert_eq!(refused.status, 400);
        assert!(refused.json()["error"]["message"].as_str().unwrap().contains("`item_reference`"), "{}", refused.raw);
        assert_eq!(gpt.requests().len(), 1);
    })
    .await;
}

#[test]
fn an_item_reference_is_found_in_the_kept_turn_it_names() {
    support::run(HARD_LIMIT, async {
        let backend = Backend::sqlite("references");
        let claude = MockProvider::anthropic().spawned().await;
        let (proxy, _state) = keyed(&backend, "claude", &claude).await;
        let first = response_of(&respond(&proxy, &json!({ "model": "chat", "input": "first" }), Some(ANN)).await);
        let message = first["output"].as_array().unwrap().iter().find(|item| item["type"] == "message").unwrap();
        let id = message["id"].as_str().unwrap();
        let referring = json!({ "model": "chat", "input": [
            { "role": "user", "content": "first" },
            { "type": "item_reference", "id": id },
            { "role": "user", "content": "and?" },
        ] });
        response_of(&respond(&proxy, &referring, Some(ANN)).await);
        let sent = claude.requests().pop().expect("asked");
        let said = output_text(&first);
        assert_eq!(
            anthropic_turns(&sent.body),
            ["user: first".to_owned(), format!("assistant: {said}"), "user: and?".to_owned()],
            "the reference became the item it names"
        );
        for (key, what) in [(Some(BOB), "another key's item"), (Some(ANN), "an item never kept")] {
            let mut body = referring.clone();
            if key == Some(ANN) {
                body["input"][1]["id"] = json!("msg_0123");
            }
            let refused = respond(&proxy, &body, key).await;
            assert_eq!(refused.status, 404, "{what}: {}", refused.raw);
            assert_eq!(refused.json()["error"]["code"], "item_not_found", "{what}");
        }
    });
}
