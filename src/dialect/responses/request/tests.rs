//! Responses bodies into the normalised request: every field translated or
//! left under the API's own name, and what needs state refused by name.

use serde_json::json;

use super::*;
use crate::request::{ReasoningShown, Setting};

fn parsed(body: Value) -> Ingress<Options> {
    parse(body.to_string().into()).unwrap_or_else(|err| panic!("a valid body parses: {}", err.message()))
}

fn refused(body: Value) -> String {
    parse(body.to_string().into()).err().map(|err| err.message().to_owned()).unwrap_or_default()
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
fn a_conversation_is_refused_by_name_and_bad_bodies_say_what_is_wrong() {
    let stateful = refused(json!({ "model": "m", "input": "again", "conversation": "conv_1" }));
    assert!(stateful.contains("`conversation` is not supported"), "{stateful}");
    let cases = [
        (json!({ "input": "x" }), "`model`: field required"),
        (json!({ "model": "m" }), "`input`: field required"),
        (json!({ "model": "m", "input": 3 }), "`input` must be a string or a list"),
        (json!({ "model": "m", "input": [{ "role": "robot", "content": "x" }] }), "input[0].role"),
        (json!({ "model": "m", "input": [{ "type": "function_call", "name": "f" }] }), "`input[0].call_id`"),
        (json!({ "model": "m", "input": "x", "text": { "format": { "type": "yaml" } } }), "text.format.type"),
        (json!({ "model": "m", "input": "x", "max_output_tokens": "lots" }), "`max_output_tokens`"),
        (json!({ "model": "m", "input": [{ "type": "item_reference" }] }), "`input[0].id`: field required"),
    ];
    for (body, expected) in cases {
        let message = refused(body.clone());
        assert!(message.contains(expected), "{body} → {message:?}, expected it to name {expected:?}");
    }
}

#[test]
fn a_chained_turn_reads_the_previous_id_and_whether_to_keep_it() {
    let chained = parsed(json!({ "model": "m", "input": "again", "previous_response_id": "resp_1" }));
    assert_eq!(chained.options.previous.as_deref(), Some("resp_1"));
    assert!(chained.options.store, "kept unless the client says not");
    assert_eq!(chained.options.echo["previous_response_id"], "resp_1", "the response names it");
    assert!(!chained.request.extra.contains_key("previous_response_id"), "never sent upstream");
    let unkept = parsed(json!({ "model": "m", "input": "x", "store": false }));
    assert!(!unkept.options.store);
    assert!(!unkept.request.extra.contains_key("store"));
}

#[test]
fn a_stored_conversation_goes_before_the_turn_and_its_reasoning_names_its_maker() {
    let mut ingress = parsed(json!({ "model": "m", "instructions": "be brief",
        "input": [{ "type": "function_call_output", "call_id": "c1", "output": "42" }] }));
    let turn = StoredTurn {
        input: vec![
            json!({ "type": "message", "role": "user", "content": [{ "type": "input_text", "text": "what?" }] }),
        ],
        output: vec![
            json!({ "id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "sealed" }),
            json!({ "id": "fc_1", "type": "function_call", "status": "completed", "call_id": "c1", "name": "f", "arguments": "{}" }),
        ],
        maker: Arc::from("gpt"),
    };
    continue_from(&mut ingress.request, &ingress.options, vec![turn], &Referenced::new()).expect("a good chain");
    let request = &ingress.request;
    let roles: Vec<Role> = request.messages.iter().map(|message| message.role).collect();
    assert_eq!(roles, [Role::System, Role::User, Role::Assistant, Role::Tool], "instructions, then the turns in order");
    assert_eq!(request.messages[0].joined_text(), "be brief", "this turn's instructions only");
    let answer = &request.messages[2];
    assert_eq!(answer.made_by.as_deref(), Some("gpt"));
    assert!(matches!(&answer.content[0], Part::Thinking { signature: Some(sealed), .. } if sealed == "sealed"));
    assert_eq!(answer.tool_calls[0].id, "c1");
    assert_eq!(request.messages[3].tool_call_id.as_deref(), Some("c1"));
    assert!(request.messages[1].made_by.is_none(), "what the client sent was made by none");
    assert!(request.native.is_none(), "the body as sent no longer says it all");
    let elsewhere = request.for_provider("claude").expect("the reasoning is left out for another provider");
    assert!(elsewhere.messages[2].content.is_empty() && elsewhere.messages[2].tool_calls.len() == 1);
    assert!(request.for_provider("gpt").is_none(), "its maker reads it as it is");
}

#[test]
fn an_item_reference_is_collected_then_becomes_the_item_it_names() {
    let mut ingress = parsed(json!({ "model": "m", "input": [
        { "role": "user", "content": "hi" },
        { "type": "item_reference", "id": "msg_x" },
        { "role": "user", "content": "and?" },
    ] }));
    assert_eq!(ingress.options.references, ["msg_x"], "collected for the door to find");
    assert_eq!(ingress.request.messages.len(), 2, "and left out until it is found");
    let mut referenced = Referenced::new();
    let said = json!({ "id": "msg_x", "type": "message", "role": "assistant", "content": [{ "type": "output_text", "text": "hello" }] });
    referenced.insert("msg_x".to_owned(), (said, Arc::from("gpt")));
    continue_from(&mut ingress.request, &ingress.options, Vec::new(), &referenced).expect("found");
    let texts: Vec<String> = ingress.request.messages.iter().map(Message::joined_text).collect();
    assert_eq!(texts, ["hi", "hello", "and?"]);
    assert_eq!(ingress.request.messages[1].made_by.as_deref(), Some("gpt"));
    let missing = continue_from(&mut ingress.request, &ingress.options, Vec::new(), &Referenced::new());
    assert!(missing.is_err_and(|err| err.message().contains("msg_x")));
}
