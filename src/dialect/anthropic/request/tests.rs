//! Messages bodies into the normalised request: every field translated,
//! kept for the same-dialect path, or left under Anthropic's name.

use serde_json::json;

use super::*;
use crate::request::{ReasoningShown, Setting};

fn parsed(body: Value) -> ChatRequest {
    let bytes = Bytes::from(body.to_string());
    parse(bytes, &HeaderMap::new())
        .map(|ingress| ingress.request)
        .unwrap_or_else(|err| panic!("a valid body parses: {}", err.message()))
}

fn refused(body: Value) -> String {
    match parse(Bytes::from(body.to_string()), &HeaderMap::new()) {
        Ok(_) => String::new(),
        Err(err) => err.message().to_owned(),
    }
}

#[test]
fn a_tool_conversation_with_thinking_becomes_the_normalised_request() {
    let body = json!({
        "model": "chat", "max_tokens": 1024, "stream": true,
        "system": [{ "type": "text", "text": "be brief", "cache_control": { "type": "ephemeral" } }],
        "messages": [
            { "role": "user", "content": "Weather in Paris?" },
            { "role": "assistant", "content": [
                { "type": "thinking", "thinking": "use the tool", "signature": "sig" },
                { "type": "text", "text": "Checking." },
                { "type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": { "city": "Paris" } },
            ] },
            { "role": "user", "content": [
                { "type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny" },
                { "type": "text", "text": "and Rome?" },
            ] },
        ],
        "tools": [{ "name": "get_weather", "description": "the weather", "input_schema": { "type": "object" } }],
        "tool_choice": { "type": "any", "disable_parallel_tool_use": true },
        "stop_sequences": ["END"], "temperature": 0.5, "top_k": 40,
        "metadata": { "user_id": "u-1" },
        "thinking": { "type": "enabled", "budget_tokens": 2048 },
    });
    let Ingress { model, stream, request, .. } = parse(Bytes::from(body.to_string()), &HeaderMap::new())
        .unwrap_or_else(|err| panic!("parses: {}", err.message()));
    assert_eq!((model.as_str(), stream), ("chat", true));
    let roles: Vec<Role> = request.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::System, Role::User, Role::Assistant, Role::Tool, Role::User]);
    assert_eq!(
        request.messages[0].content,
        [Part::Text { text: "be brief".into(), cache: Some(json!({ "type": "ephemeral" })) }]
    );
    let assistant = &request.messages[2];
    assert_eq!(
        assistant.content,
        [
            Part::Thinking { text: "use the tool".into(), signature: Some("sig".into()) },
            Part::Text { text: "Checking.".into(), cache: None }
        ]
    );
    assert_eq!(
        assistant.tool_calls,
        [ToolCall { id: "toolu_1".into(), name: "get_weather".into(), arguments: "{\"city\":\"Paris\"}".into() }]
    );
    assert_eq!(request.messages[3].tool_call_id.as_deref(), Some("toolu_1"));
    assert_eq!(request.messages[3].joined_text(), "sunny");
    assert_eq!(request.messages[4].joined_text(), "and Rome?");
    assert_eq!(request.max_tokens, Some(1024));
    assert_eq!(request.tool_choice, Some(ToolChoice::Required));
    assert_eq!(request.parallel_tool_calls, Some(false));
    assert_eq!((request.top_k, request.user.as_deref()), (Some(40), Some("u-1")));
    assert_eq!(request.stop, ["END"]);
    assert_eq!(request.thinking_budget, Some(2048));
    assert_eq!(request.shows_reasoning, ReasoningShown::FromOwnApi, "a client that asks for thinking sees it");
    assert_eq!(request.dialect, ClientDialect::Messages);
    assert!(request.extra.is_empty(), "everything was translated: {:?}", request.extra);
    assert_eq!(request.native.as_ref().map(|native| native.body.len()), Some(body.to_string().len()));
}

#[test]
fn what_has_no_translation_stays_under_anthropics_names() {
    let req = parsed(json!({
        "model": "chat", "max_tokens": 10,
        "messages": [{ "role": "user", "content": [
            { "type": "document", "source": { "type": "text", "media_type": "text/plain", "data": "hi" } },
            { "type": "tool_result", "tool_use_id": "t", "content": "boom", "is_error": true },
        ] }],
        "tools": [{ "type": "web_search_20250305", "name": "web_search" }],
        "context_management": { "edits": [] },
        "metadata": { "user_id": "u", "tier": "x" },
        "output_config": { "effort": "high", "verbosity": "low" },
    }));
    let mut extra: Vec<&str> = req.extra.keys().map(String::as_str).collect();
    extra.sort_unstable();
    assert_eq!(extra, ["context_management", "metadata", "output_config", "tools"]);
    assert_eq!(req.extra["output_config"], json!({ "verbosity": "low" }), "effort was translated");
    assert_eq!(req.reasoning_effort.as_deref(), Some("high"));
    assert!(matches!(req.messages[0].content[0], Part::Other(_)), "a document is kept as sent");
    assert_eq!(req.messages[1].extra.get("is_error"), Some(&json!(true)));
    assert_eq!(req.field(Setting::User).to_string(), "metadata.user_id", "refusals speak Anthropic");
}

#[test]
fn images_become_data_urls_or_urls() {
    let req = parsed(json!({ "model": "chat", "max_tokens": 10, "messages": [{ "role": "user", "content": [
        { "type": "image", "source": { "type": "base64", "media_type": "image/png", "data": "iVBO" } },
        { "type": "image", "source": { "type": "url", "url": "https://x.example/cat.jpg" } },
    ] }] }));
    let urls: Vec<&str> = req.messages[0]
        .content
        .iter()
        .filter_map(|part| match part {
            Part::Image(image) => Some(image.url.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(urls, ["data:image/png;base64,iVBO", "https://x.example/cat.jpg"]);
}

#[test]
fn a_bad_body_is_refused_naming_what_is_wrong() {
    let cases = [
        (json!({ "max_tokens": 5, "messages": [] }), "`model`: field required"),
        (json!({ "model": "m", "messages": [{ "role": "user", "content": "x" }] }), "`max_tokens`: field required"),
        (json!({ "model": "m", "max_tokens": 5, "messages": [] }), "at least one message"),
        (json!({ "model": "m", "max_tokens": "many", "messages": [] }), "`max_tokens`"),
        (
            json!({ "model": "m", "max_tokens": 5, "messages": [{ "role": "robot", "content": "x" }] }),
            "messages[0].role",
        ),
        (
            json!({ "model": "m", "max_tokens": 5, "messages": [{ "role": "user", "content": [{ "type": "text" }] }] }),
            "`messages[0].content[0].text`: field required",
        ),
        (
            json!({ "model": "m", "max_tokens": 5, "messages": [{ "role": "user", "content": "x" }],
                "tool_choice": { "type": "sometimes" } }),
            "tool_choice.type",
        ),
    ];
    for (body, expected) in cases {
        let message = refused(body.clone());
        assert!(message.contains(expected), "{body} → {message:?}, expected it to name {expected:?}");
    }
    assert!(refused(json!([1])).contains("must be an object"));
}

#[test]
fn the_apis_own_headers_go_with_the_body() {
    let mut headers = HeaderMap::new();
    headers.insert("anthropic-version", http::HeaderValue::from_static("2023-06-01"));
    headers.insert("anthropic-beta", http::HeaderValue::from_static("context-management-2025-06-27"));
    headers.insert("x-api-key", http::HeaderValue::from_static("sk-client"));
    let body = Bytes::from(
        json!({ "model": "m", "max_tokens": 5, "messages": [{ "role": "user", "content": "x" }] }).to_string(),
    );
    let native = parse(body, &headers).ok().and_then(|ingress| ingress.request.native);
    let names: Vec<&str> = native.iter().flat_map(|native| &native.headers).map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["anthropic-version", "anthropic-beta"], "the client's key never goes upstream");
}

#[test]
fn count_tokens_needs_no_limit() {
    let body = json!({ "model": "chat", "messages": [{ "role": "user", "content": "12345678" }] }).to_string();
    let counted = count_tokens_request(Bytes::from(body), &HeaderMap::new())
        .map(|(model, req)| (model, req.estimated_input_tokens()));
    assert_eq!(counted.ok(), Some(("chat".to_owned(), 2)));
}

#[test]
fn a_system_message_mid_conversation_is_an_instruction_in_its_place() {
    let req = parsed(json!({ "model": "m", "max_tokens": 5, "messages": [
        { "role": "user", "content": "hi" },
        { "role": "system", "content": [{ "type": "text", "text": "# Environment: linux" }] },
    ] }));
    let roles: Vec<Role> = req.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::System], "as Claude Code sends it to models it thinks take one");
    assert_eq!(req.messages[1].joined_text(), "# Environment: linux");
}

#[test]
fn what_a_block_or_thinking_carries_beyond_the_translation_is_kept() {
    let req = parsed(json!({ "model": "m", "max_tokens": 5,
        "thinking": { "type": "enabled", "budget_tokens": 1024, "display": "omitted" },
        "messages": [{ "role": "user", "content": [
            { "type": "text", "text": "see", "citations": [{ "type": "char_location" }] },
            { "type": "text", "text": "and", "citations": null },
        ] }] }));
    assert_eq!(req.thinking_budget, Some(1024));
    assert_eq!(req.extra.get("thinking"), Some(&json!({ "display": "omitted" })));
    assert!(matches!(req.messages[0].content[0], Part::Other(_)), "a text block with citations is kept whole");
    assert!(matches!(req.messages[0].content[1], Part::Text { .. }), "`citations: null` asks for nothing");
    let dropped = req.without(&[req.field(Setting::ThinkingBudget)]);
    assert_eq!((dropped.thinking_budget, dropped.extra.get("thinking")), (None, None), "dropping takes both");
}
