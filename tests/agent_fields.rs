//! What coding agents send that only their own API takes, over loopback,
//! through a route with baton's defaults (`unsupported_params =
//! "drop_safe"`): what asks nothing of the answer (Claude Code's
//! `context_management` and `thinking.display`, the end user, Codex's
//! `namespace` tool) is left out for a target of another kind and named in
//! `x-baton-dropped-params`; what does ask something is refused by name,
//! each tool on its own; `"refuse"` refuses both. A Responses client's
//! freeform (`custom`) tool reaches every other kind as a function taking
//! one string and comes back as a `custom_tool_call`, and its call and
//! output go back in a later turn.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::mock::{MockHandle, MockProvider};
use serde_json::{Value, json};
use support::{ChatConfig, Proxy, Received, Spawned, post_with, within};

const HARD_LIMIT: Duration = Duration::from_secs(30);

/// A baton whose route "chat" has the one target `mock`, with `route_keys`.
async fn one_target(mock: &MockHandle, route_keys: &str) -> Proxy {
    Proxy::start(&ChatConfig::new().keys(route_keys).mock("p", mock).toml()).await
}

/// A Messages body as Claude Code writes one, with its Anthropic-only fields.
fn claude_code_body() -> Value {
    json!({
        "model": "chat", "max_tokens": 1024, "stream": true,
        "messages": [{ "role": "user", "content": "hi" }],
        "thinking": { "type": "enabled", "budget_tokens": 4096, "display": "omitted" },
        "context_management": { "edits": [{ "type": "clear_thinking_20251015", "keep": "all" }] },
        "metadata": { "user_id": "user_abc" },
    })
}

fn dropped(got: &Received) -> Vec<String> {
    let header = got.header("x-baton-dropped-params");
    let mut names: Vec<String> = header.split(", ").filter(|name| !name.is_empty()).map(str::to_owned).collect();
    names.sort();
    names
}

#[tokio::test]
async fn what_asks_nothing_of_the_answer_is_left_out_by_default_and_named() {
    within(HARD_LIMIT, async {
        let gemini = MockProvider::gemini().spawned().await;
        let proxy = one_target(&gemini, "").await;
        let got = post_with(&proxy, "/v1/messages", &claude_code_body(), &[]).await;
        assert_eq!(got.status, 200, "{}", got.raw);
        assert_eq!(dropped(&got), ["context_management", "metadata.user_id", "thinking"]);
        let sent = gemini.requests().pop().expect("the target was asked");
        let thinking = &sent.body["generationConfig"]["thinkingConfig"];
        assert_eq!(thinking["thinkingBudget"], 4096, "the thinking budget is translated, not left out: {sent:?}");
        assert!(!sent.body.to_string().contains("context_management"));
    })
    .await;
}

#[tokio::test]
async fn refuse_refuses_even_what_asks_nothing_and_drop_safe_refuses_what_does() {
    within(HARD_LIMIT, async {
        let openai = MockProvider::openai().spawned().await;
        let strict = one_target(&openai, "unsupported_params = \"refuse\"").await;
        let refused = post_with(&strict, "/v1/messages", &claude_code_body(), &[]).await;
        assert_eq!(refused.status, 400, "{}", refused.raw);
        assert!(refused.raw.contains("context_management"), "{}", refused.raw);

        let defaults = one_target(&openai, "").await;
        let mut body = claude_code_body();
        body["mcp_servers"] = json!([{ "type": "url", "url": "https://mcp.example/sse", "name": "docs" }]);
        let refused = post_with(&defaults, "/v1/messages", &body, &[]).await;
        assert_eq!(refused.status, 400, "{}", refused.raw);
        let message = refused.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(message.contains("mcp_servers"), "what changes the answer is refused by name: {message}");
        assert!(!message.contains("context_management"), "and only that: {message}");
        assert!(openai.requests().is_empty(), "no target was asked");
    })
    .await;
}

/// A Responses body with Codex's kinds of tools: a function, a freeform
/// `apply_patch`, and a `namespace` of functions; plus `extra_tools`.
fn codex_body(extra_tools: &[Value]) -> Value {
    let mut tools = vec![
        json!({ "type": "custom", "name": "apply_patch", "description": "Edit files",
            "format": { "type": "grammar", "syntax": "lark", "definition": "start: \"*** Begin Patch\"" } }),
        json!({ "type": "function", "name": "exec_command", "parameters": { "type": "object",
            "properties": { "cmd": { "type": "string" } }, "required": ["cmd"] } }),
        json!({ "type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents",
            "tools": [{ "type": "function", "name": "spawn_agent", "parameters": { "type": "object", "properties": {} } }] }),
    ];
    tools.extend(extra_tools.iter().cloned());
    json!({ "model": "chat", "stream": true, "input": "fix it", "tools": tools, "store": false })
}

#[tokio::test]
async fn each_of_a_clients_own_tools_is_named_on_its_own() {
    within(HARD_LIMIT, async {
        let anthropic = MockProvider::anthropic().spawned().await;
        let proxy = one_target(&anthropic, "").await;
        let ok = post_with(&proxy, "/v1/responses", &codex_body(&[]), &[]).await;
        assert_eq!(ok.status, 200, "{}", ok.raw);
        assert_eq!(dropped(&ok), ["tools (namespace multi_agent_v1)"], "only the namespace tool was left out");
        let sent = anthropic.requests().pop().expect("asked");
        let names: Vec<&str> =
            sent.body["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["apply_patch", "exec_command"], "the freeform tool and the function went along");

        let searching = codex_body(&[json!({ "type": "web_search" })]);
        let refused = post_with(&proxy, "/v1/responses", &searching, &[]).await;
        assert_eq!(refused.status, 400, "{}", refused.raw);
        let message = refused.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(message.contains("tools (web_search)"), "the tool itself is named: {message}");
        assert!(!message.contains("namespace"), "{message}");
    })
    .await;
}

/// The `custom_tool_call` item of a streamed Responses answer.
fn custom_call(got: &Received) -> Value {
    let events = got.named_events();
    assert!(
        !events.iter().any(|(name, _)| name == "response.function_call_arguments.delta"),
        "a freeform call streams no function arguments"
    );
    let done = events.iter().find(|(name, _)| name == "response.custom_tool_call_input.done").expect("its input done");
    let (_, item) = events
        .iter()
        .find(|(name, event)| name == "response.output_item.done" && event["item"]["type"] == "custom_tool_call")
        .expect("a custom_tool_call item");
    assert_eq!(done.1["input"], item["item"]["input"]);
    item["item"].clone()
}

#[tokio::test]
async fn a_freeform_tool_goes_to_every_other_kind_as_a_function_of_one_string_and_comes_back_as_itself() {
    within(HARD_LIMIT, async {
        for mock in [MockProvider::openai(), MockProvider::anthropic(), MockProvider::gemini()] {
            let mock = mock.spawned().await;
            let proxy = one_target(&mock, "").await;
            let got = post_with(&proxy, "/v1/responses", &codex_body(&[]), &[]).await;
            assert_eq!(got.status, 200, "{}", got.raw);
            let call = custom_call(&got);
            assert_eq!((call["name"].as_str(), call["input"].as_str()), (Some("apply_patch"), Some("Paris")), "{call}");
            let sent = mock.requests().pop().expect("asked").body.to_string();
            assert!(sent.contains("lark grammar"), "the grammar is told to the model: {sent}");

            let follow_up = json!({ "model": "chat", "stream": true, "store": false, "tools": codex_body(&[])["tools"],
                "input": [
                    { "role": "user", "content": "fix it" },
                    { "type": "custom_tool_call", "call_id": call["call_id"], "name": "apply_patch", "input": "*** Begin Patch" },
                    { "type": "custom_tool_call_output", "call_id": call["call_id"], "output": "Done!" },
                ] });
            let answered = post_with(&proxy, "/v1/responses", &follow_up, &[]).await;
            assert_eq!(answered.status, 200, "{}", answered.raw);
            let sent = mock.requests().pop().expect("asked again").body.to_string();
            assert!(sent.contains(r#"{\"input\":\"*** Begin Patch\"}"#) || sent.contains(r#"{"input":"*** Begin Patch"}"#) || sent.contains(r#""input":"*** Begin Patch""#), "the call went back as its function's arguments: {sent}");
            assert!(sent.contains("Done!"), "and its output as the call's result: {sent}");
        }
    })
    .await;
}
