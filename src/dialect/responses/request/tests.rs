//! Responses bodies into the normalised request: every field translated or
//! left under the API's own name, and what needs state refused by name.

use serde_json::json;

use super::*;
use crate::request::{ReasoningShown, Setting};

fn parsed(body: Value) -> Ingress<Options> {
    parse(body.to_string().as_bytes()).unwrap_or_else(|err| panic!("a valid body parses: {}", err.message()))
}

fn refused(body: Value) -> String {
    parse(body.to_string().as_bytes()).err().map(|err| err.message().to_owned()).unwrap_or_default()
}

#[test]
fn a_codex_turn_becomes_the_normalised_request() {
    let body = json!({
        "model": "chat", "stream": true, "store": false,
        "instructions": "You are a coding agent.",
        "input": [
            { "type": "message", "role": "developer", "content": [{ "type": "input_text", "text": "be careful" }] },
            { "type": "message", "role": "user", "content": [{ "type": "input_text", "text": "list files" }] },
            { "type": "reasoning", "id": "rs_1", "summary": [{ "type": "summary_text", "text": "call ls" }],
              "encrypted_content": "gAAAA" },
            { "type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "shell",
              "arguments": "{\"command\":[\"ls\"]}" },
            { "type": "function_call_output", "call_id": "call_1", "output": "README.md" },
        ],
        "tools": [{ "type": "function", "name": "shell", "description": "run", "strict": false,
                    "parameters": { "type": "object" } }],
        "tool_choice": "auto", "parallel_tool_calls": false,
        "reasoning": { "effort": "medium", "summary": "auto" },
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "session-1",
        "client_metadata": { "session_id": "s-1" },
        "max_output_tokens": 800,
    });
    let Ingress { model, stream, request, options } = parsed(body);
    assert_eq!((model.as_str(), stream), ("chat", true));
    let roles: Vec<Role> = request.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::System, Role::System, Role::User, Role::Assistant, Role::Tool]);
    let assistant = &request.messages[3];
    assert_eq!(assistant.content, [Part::Thinking { text: "call ls".into(), signature: Some("gAAAA".into()) }]);
    assert_eq!(
        assistant.tool_calls,
        [ToolCall { id: "call_1".into(), name: "shell".into(), arguments: "{\"command\":[\"ls\"]}".into() }]
    );
    assert_eq!(request.messages[4].tool_call_id.as_deref(), Some("call_1"));
    assert_eq!(request.tools[0].name, "shell");
    assert_eq!((request.tool_choice, request.parallel_tool_calls), (Some(ToolChoice::Auto), Some(false)));
    assert_eq!(request.reasoning_effort.as_deref(), Some("medium"));
    assert_eq!(request.shows_reasoning, ReasoningShown::FromAny, "a summary was asked for");
    assert_eq!(request.cache_key.as_deref(), Some("session-1"));
    assert_eq!(request.max_tokens, Some(800));
    assert!(request.extra.is_empty(), "everything was translated or honoured: {:?}", request.extra);
    assert_eq!(options.echo["instructions"], "You are a coding agent.", "the response echoes the request");
    assert_eq!(request.dialect, ClientDialect::Responses);
}

#[test]
fn built_in_tools_and_unknown_fields_stay_under_the_apis_names() {
    let Ingress { request, .. } = parsed(json!({
        "model": "chat", "input": [{ "role": "user", "content": [
            { "type": "input_text", "text": "look" },
            { "type": "input_image", "image_url": "https://x.example/a.png", "detail": "high" },
            { "type": "input_file", "file_id": "file-1" },
        ] }],
        "tools": [{ "type": "web_search" }, { "type": "function", "name": "f" }],
        "text": { "format": { "type": "json_object" }, "verbosity": "low" },
        "include": ["reasoning.encrypted_content", "web_search_call.action.sources"],
        "truncation": "auto",
        "x_future": 1,
    }));
    let mut extra: Vec<&str> = request.extra.keys().map(String::as_str).collect();
    extra.sort_unstable();
    assert_eq!(extra, ["include", "text", "tools", "truncation", "x_future"]);
    assert_eq!(request.extra["include"], json!(["web_search_call.action.sources"]));
    assert_eq!(request.extra["text"], json!({ "verbosity": "low" }), "the format was translated");
    assert_eq!(request.response_format, Some(ResponseFormat::JsonObject));
    let content = &request.messages[0].content;
    assert!(matches!(&content[1], Part::Image(image) if image.url == "https://x.example/a.png"));
    assert!(matches!(content[2], Part::Other(_)), "a file by id is kept as sent");
    assert_eq!(request.field(Setting::ResponseFormat).to_string(), "text.format", "refusals speak Responses");
}

#[test]
fn state_is_refused_by_name_and_bad_bodies_say_what_is_wrong() {
    let stateful = refused(json!({ "model": "m", "input": "again", "previous_response_id": "resp_1" }));
    assert!(stateful.contains("`previous_response_id` is not supported"), "{stateful}");
    let cases = [
        (json!({ "input": "x" }), "`model`: field required"),
        (json!({ "model": "m" }), "`input`: field required"),
        (json!({ "model": "m", "input": 3 }), "`input` must be a string or a list"),
        (json!({ "model": "m", "input": [{ "role": "robot", "content": "x" }] }), "input[0].role"),
        (json!({ "model": "m", "input": [{ "type": "function_call", "name": "f" }] }), "`input[0].call_id`"),
        (json!({ "model": "m", "input": "x", "text": { "format": { "type": "yaml" } } }), "text.format.type"),
        (json!({ "model": "m", "input": "x", "max_output_tokens": "lots" }), "`max_output_tokens`"),
        (
            json!({ "model": "m", "input": [{ "type": "item_reference", "id": "msg_1" }] }),
            "`input[0]` is an item_reference",
        ),
    ];
    for (body, expected) in cases {
        let message = refused(body.clone());
        assert!(message.contains(expected), "{body} → {message:?}, expected it to name {expected:?}");
    }
}
