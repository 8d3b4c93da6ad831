//! The same-dialect path for the OpenAI APIs, over real loopback TCP: a
//! Chat Completions client's body and OpenAI headers reach an openai-kind
//! target as sent, and the log probabilities it asked for come back, in
//! every chunk they belong to and in a whole answer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::mock::{MockHandle, MockProvider};
use serde_json::{Value, json};
use support::raw::{RawProvider, SSE_HEAD, Step};
use support::{ChatConfig, Proxy, Received, Spawned, mocks_toml, post_chat, post_with, within};

const FIRST_TOKEN_MS: u64 = 500;
const IDLE_MS: u64 = 500;
const HARD_LIMIT: Duration = Duration::from_secs(20);

/// A Chat Completions body with what baton does not translate: log
/// probabilities, a seed, a field from the future, a message field.
fn rich_chat_body() -> Value {
    json!({
        "model": "chat",
        "stream": true,
        "messages": [
            { "role": "developer", "content": "be brief" },
            { "role": "user", "content": [{ "type": "text", "text": "hi" }], "name": "ann" },
        ],
        "stop": "END",
        "logprobs": true,
        "top_logprobs": 2,
        "seed": 7,
        "service_tier": "flex",
        "x_field_from_the_future": { "nested": [1, 2] },
    })
}

/// A baton whose route "chat" has `provider` ("gpt") as its one target.
async fn one_target(provider: MockProvider) -> (MockHandle, Proxy) {
    let gpt = provider.spawned().await;
    let proxy = Proxy::start(&mocks_toml(&[("gpt", &gpt)], FIRST_TOKEN_MS, IDLE_MS)).await;
    (gpt, proxy)
}

/// `got`, once it is known to be answered.
fn answered(got: Received) -> Received {
    assert_eq!(got.status, 200, "{}", got.raw);
    got
}

#[tokio::test]
async fn an_openai_target_gets_the_chat_body_and_openai_headers_as_sent() {
    within(HARD_LIMIT, async {
        let (gpt, proxy) = one_target(MockProvider::openai()).await;
        let body = rich_chat_body();
        let headers = [("openai-beta", "assistants=v2"), ("openai-project", "proj_1"), ("x-other", "kept here")];
        answered(post_with(&proxy, "/v1/chat/completions", &body, &headers).await);
        let sent = gpt.requests().pop().expect("the target was sent the request");
        let mut expected = body.clone();
        expected["model"] = json!("gpt-model");
        expected["stream_options"] = json!({ "include_usage": true });
        assert_eq!(sent.body, expected, "every field as the client sent it; model and usage set");
        assert_eq!(sent.headers.get("openai-beta").map(String::as_str), Some("assistants=v2"));
        assert_eq!(sent.headers.get("openai-project").map(String::as_str), Some("proj_1"));
        assert_eq!(sent.headers.get("x-other"), None, "only the API's own headers go along");
    })
    .await;
}

#[tokio::test]
async fn a_chat_body_with_cache_hints_is_written_anew_without_them() {
    within(HARD_LIMIT, async {
        let (gpt, proxy) = one_target(MockProvider::openai()).await;
        let hinted = json!({ "type": "text", "text": "hi", "cache_control": { "type": "ephemeral" } });
        let body = json!({ "model": "chat", "messages": [{ "role": "user", "content": [hinted] }], "seed": 7 });
        answered(post_chat(&proxy, &body).await);
        let sent = gpt.requests().pop().expect("the target was sent the request");
        assert_eq!(sent.body["messages"][0]["content"], "hi", "the text, without its hint");
        assert!(!sent.body.to_string().contains("cache_control"), "{}", sent.body);
        assert_eq!(sent.body["seed"], 7, "what baton does not translate still goes along");
    })
    .await;
}

/// Log probabilities of one token, as OpenAI writes them.
fn entry(token: &str, logprob: f64) -> Value {
    json!({ "token": token, "logprob": logprob, "bytes": token.as_bytes(),
        "top_logprobs": [{ "token": token, "logprob": logprob, "bytes": token.as_bytes() }] })
}

/// An OpenAI stream of two text chunks, each with its log probabilities.
fn stream_with_logprobs() -> Vec<Step> {
    let chunk = |delta: Value, logprobs: Value, finish: Value| {
        let chunk = json!({ "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-model",
            "choices": [{ "index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish }] });
        format!("data: {chunk}\n\n")
    };
    let body = [
        chunk(json!({ "role": "assistant", "content": "" }), json!({ "content": [], "refusal": null }), Value::Null),
        chunk(json!({ "content": "Hel" }), json!({ "content": [entry("Hel", -0.5)], "refusal": null }), Value::Null),
        chunk(json!({ "content": "lo" }), json!({ "content": [entry("lo", -0.25)], "refusal": null }), Value::Null),
        chunk(json!({}), Value::Null, json!("stop")),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    vec![Step::Write(SSE_HEAD.to_vec()), Step::Write(body.into_bytes()), Step::Close]
}

#[tokio::test]
async fn log_probabilities_come_back_on_the_chunks_they_belong_to() {
    within(HARD_LIMIT, async {
        let openai = RawProvider::start(|_| stream_with_logprobs()).await;
        let proxy = Proxy::start(&ChatConfig::new().raw("p", &openai).toml()).await;
        let got = post_chat(&proxy, &rich_chat_body()).await;
        assert_eq!(got.status, 200, "{}", got.raw);
        let texts: Vec<(Value, Value)> = got
            .chunks()
            .iter()
            .filter_map(|chunk| {
                let choice = &chunk["choices"][0];
                choice["delta"]["content"]
                    .is_string()
                    .then(|| (choice["delta"]["content"].clone(), choice["logprobs"].clone()))
            })
            .collect();
        assert_eq!(
            texts,
            [
                (json!("Hel"), json!({ "content": [entry("Hel", -0.5)], "refusal": null })),
                (json!("lo"), json!({ "content": [entry("lo", -0.25)], "refusal": null })),
            ]
        );
    })
    .await;
}

#[tokio::test]
async fn a_whole_answer_carries_every_tokens_log_probabilities() {
    within(HARD_LIMIT, async {
        let openai = RawProvider::start(|_| stream_with_logprobs()).await;
        let proxy = Proxy::start(&ChatConfig::new().raw("p", &openai).toml()).await;
        let mut body = rich_chat_body();
        body["stream"] = json!(false);
        let got = answered(post_chat(&proxy, &body).await);
        let choice = &got.json()["choices"][0];
        assert_eq!(choice["message"]["content"], "Hello");
        assert_eq!(choice["logprobs"], json!({ "content": [entry("Hel", -0.5), entry("lo", -0.25)], "refusal": null }));
    })
    .await;
}

/// A Responses body with what only OpenAI's own API takes: a built-in
/// tool, an `include`, a field from the future.
fn rich_responses_body() -> Value {
    json!({
        "model": "chat",
        "stream": true,
        "input": [{ "role": "user", "content": [{ "type": "input_text", "text": "hi" }] }],
        "tools": [{ "type": "web_search" }],
        "include": ["reasoning.encrypted_content", "web_search_call.action.sources"],
        "reasoning": { "effort": "low", "summary": "auto" },
        "store": true,
        "x_field_from_the_future": true,
    })
}

#[tokio::test]
async fn a_responses_target_gets_the_responses_body_as_sent_without_storing_it() {
    within(HARD_LIMIT, async {
        let (gpt, proxy) = one_target(MockProvider::openai_responses()).await;
        let body = rich_responses_body();
        let got = answered(post_with(&proxy, "/v1/responses", &body, &[("openai-beta", "responses=v1")]).await);
        let sent = gpt.requests().pop().expect("the target was sent the request");
        assert_eq!(sent.path, "/v1/responses");
        let mut expected = body.clone();
        expected["model"] = json!("gpt-model");
        expected["store"] = json!(false);
        assert_eq!(sent.body, expected, "every field as sent; baton keeps no state, so nothing is stored");
        assert_eq!(sent.headers.get("openai-beta").map(String::as_str), Some("responses=v1"));
        let text: String = got
            .named_events()
            .iter()
            .filter(|(name, _)| name == "response.output_text.delta")
            .filter_map(|(_, data)| data["delta"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(text, gpt.provider().expected_text());
    })
    .await;
}

#[tokio::test]
async fn encrypted_reasoning_reaches_a_responses_client_and_no_other() {
    within(HARD_LIMIT, async {
        let (_gpt, proxy) = one_target(MockProvider::openai_responses().reasoning(2)).await;
        let mut body = rich_responses_body();
        body["stream"] = json!(false);
        let got = answered(post_with(&proxy, "/v1/responses", &body, &[]).await);
        let output = got.json()["output"].clone();
        assert_eq!(output[0]["type"], "reasoning", "{output}");
        assert_eq!(output[0]["encrypted_content"], "ZW5jcnlwdGVkLW1vY2s=", "to send back on the next turn");

        let claude_code = json!({ "model": "chat", "max_tokens": 100, "stream": false,
            "thinking": { "type": "enabled", "budget_tokens": 1024 },
            "messages": [{ "role": "user", "content": "hi" }] });
        let got =
            answered(post_with(&proxy, "/v1/messages", &claude_code, &[("anthropic-version", "2023-06-01")]).await);
        assert!(
            !got.raw.contains("ZW5jcnlwdGVkLW1vY2s="),
            "OpenAI's encrypted reasoning is no Anthropic signature: {}",
            got.raw
        );
    })
    .await;
}
