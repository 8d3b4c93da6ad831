//! Parsing: every field of a Chat Completions request lands in its place
//! in the normalised request, and a bad one is refused by its path.

use serde_json::{Value, json};

use super::parse;
use crate::request::{
    ChatRequest, Image, JsonSchema, LimitField, Message, Part, ResponseFormat, Role, Tool, ToolCall, ToolChoice,
};

fn request(body: &Value) -> ChatRequest {
    match parse(body.to_string().as_bytes()) {
        Ok(ingress) => ingress.request,
        Err(err) => panic!("the body parses: {}", err.message()),
    }
}

/// The message of the 400 `body` gets.
fn refusal(body: &Value) -> String {
    match parse(body.to_string().as_bytes()) {
        Ok(_) => panic!("{body} is refused"),
        Err(err) => {
            assert_eq!(err.status(), http::StatusCode::BAD_REQUEST, "{}", err.message());
            err.message().to_owned()
        }
    }
}

fn message(role: Role, content: Vec<Part>) -> Message {
    Message { content, ..Message::text(role, "") }
}

fn text(text: &str) -> Part {
    Part::Text { text: text.into(), cache: None }
}

#[test]
fn every_field_lands_where_it_belongs() {
    let schema = json!({ "type": "object", "properties": { "answer": { "type": "string" } } });
    let ephemeral = json!({ "type": "ephemeral" });
    let body = json!({
        "model": "chat",
        "stream": true,
        "stream_options": { "include_usage": true },
        "messages": [
            { "role": "developer", "content": [{ "type": "text", "text": "policy", "cache_control": ephemeral }] },
            { "role": "user", "name": "ann", "content": [
                { "type": "text", "text": "look" },
                { "type": "image_url", "image_url": { "url": "https://x/cat.png", "detail": "high" } },
                { "type": "input_audio", "input_audio": { "data": "AAAA", "format": "wav" } },
            ] },
            { "role": "assistant", "content": null, "tool_calls": [{ "id": "c1", "type": "function",
                "function": { "name": "get_weather", "arguments": "{\"city\":\"Paris\"}" } }] },
            { "role": "tool", "tool_call_id": "c1", "content": "sunny", "x_message_hint": true },
        ],
        "max_completion_tokens": 300,
        "temperature": 0.4,
        "top_p": 0.9,
        "stop": "END",
        "tools": [{ "type": "function", "cache_control": ephemeral, "function": { "name": "get_weather",
            "description": "Weather", "parameters": { "type": "object" }, "strict": true } }],
        "tool_choice": { "type": "function", "function": { "name": "get_weather" } },
        "parallel_tool_calls": false,
        "response_format": { "type": "json_schema", "json_schema": { "name": "reply", "description": "the reply",
            "schema": schema, "strict": true } },
        "reasoning_effort": "low",
        "seed": 7,
        "x_future_param": [1],
    });
    let ingress = parse(body.to_string().as_bytes()).unwrap_or_else(|err| panic!("{}", err.message()));
    assert_eq!((ingress.model.as_str(), ingress.stream, ingress.options.include_usage), ("chat", true, true));
    let mut user = message(
        Role::User,
        vec![
            text("look"),
            Part::Image(Image { url: "https://x/cat.png".into(), detail: Some("high".into()), cache: None }),
            Part::Other(json!({ "type": "input_audio", "input_audio": { "data": "AAAA", "format": "wav" } })),
        ],
    );
    user.name = Some("ann".into());
    let mut assistant = message(Role::Assistant, Vec::new());
    assistant.tool_calls =
        vec![ToolCall { id: "c1".into(), name: "get_weather".into(), arguments: "{\"city\":\"Paris\"}".into() }];
    let mut result = message(Role::Tool, vec![text("sunny")]);
    result.tool_call_id = Some("c1".into());
    result.extra.insert("x_message_hint".into(), json!(true));
    let mut expected = ChatRequest {
        messages: vec![
            message(Role::System, vec![Part::Text { text: "policy".into(), cache: Some(ephemeral.clone()) }]),
            user,
            assistant,
            result,
        ],
        max_tokens: Some(300),
        limit_field: LimitField::MaxCompletionTokens,
        temperature: Some(0.4),
        top_p: Some(0.9),
        stop: vec!["END".into()],
        tools: vec![Tool {
            name: "get_weather".into(),
            description: Some("Weather".into()),
            parameters: json!({ "type": "object" }),
            strict: Some(true),
            cache: Some(ephemeral),
        }],
        tool_choice: Some(ToolChoice::Function("get_weather".into())),
        parallel_tool_calls: Some(false),
        response_format: Some(ResponseFormat::JsonSchema(JsonSchema {
            name: "reply".into(),
            description: Some("the reply".into()),
            schema,
            strict: Some(true),
        })),
        reasoning_effort: Some("low".into()),
        ..ChatRequest::default()
    };
    expected.extra.insert("seed".into(), json!(7));
    expected.extra.insert("x_future_param".into(), json!([1]));
    assert_eq!(ingress.request, expected);
}

#[test]
fn the_legacy_limit_and_the_simple_forms_parse_too() {
    let req = request(&json!({ "model": "chat", "messages": [{ "role": "user", "content": "hi" }],
        "max_tokens": 50, "stop": ["a", "b"], "tool_choice": "required",
        "response_format": { "type": "json_object" } }));
    assert_eq!((req.max_tokens, req.limit_field), (Some(50), LimitField::MaxTokens));
    assert_eq!(req.stop, ["a", "b"]);
    assert_eq!(req.tool_choice, Some(ToolChoice::Required));
    assert_eq!(req.response_format, Some(ResponseFormat::JsonObject));
    for (mode, choice) in [("auto", ToolChoice::Auto), ("none", ToolChoice::None)] {
        let req = request(&json!({ "model": "chat", "messages": [{ "role": "user", "content": "hi" }],
            "tool_choice": mode }));
        assert_eq!(req.tool_choice, Some(choice));
    }
}

#[test]
fn null_fields_are_absent() {
    let body = json!({
        "model": "chat", "stream": null, "stream_options": null, "n": null,
        "messages": [
            { "role": "user", "content": "hi", "name": null },
            { "role": "assistant", "content": null, "tool_calls": null },
        ],
        "max_tokens": null, "max_completion_tokens": null, "temperature": null, "top_p": null, "stop": null,
        "tools": null, "tool_choice": null, "parallel_tool_calls": null, "response_format": null,
        "reasoning_effort": null,
    });
    let expected = ChatRequest {
        messages: vec![Message::text(Role::User, "hi"), message(Role::Assistant, Vec::new())],
        ..ChatRequest::default()
    };
    assert_eq!(request(&body), expected);
    let unknown = request(&json!({ "model": "chat", "messages": [{ "role": "user", "content": "hi" }], "seed": null }));
    assert_eq!(unknown.extra.get("seed"), Some(&Value::Null), "an unknown field is kept as sent, null too");
}

#[test]
fn a_bad_field_is_refused_by_its_path() {
    let conversation = |third: Value| {
        json!({ "model": "chat", "messages": [
            { "role": "user", "content": "hi" }, { "role": "assistant", "content": "hello" }, third,
        ] })
    };
    let cases = [
        (conversation(json!({ "role": "assistant", "tool_calls": "get_weather" })), "`messages[2].tool_calls`"),
        (conversation(json!({ "role": "assistant", "tool_calls": [{ "id": "c1" }] })), "`messages[2].tool_calls`"),
        (conversation(json!({ "role": "user", "name": 7, "content": "x" })), "`messages[2].name`"),
        (
            conversation(json!({ "role": "user", "content": [{ "type": "image_url", "image_url": "x" }] })),
            "`messages[2].content[0].image_url`",
        ),
        (conversation(json!({ "role": "user", "content": [{ "type": "text" }] })), "messages[2].content[0]"),
        (conversation(json!({ "role": "user", "content": 7 })), "messages[2].content"),
        (conversation(json!({ "role": "robot", "content": "x" })), "messages[2].role"),
        (conversation(json!({ "content": "x" })), "messages[2]"),
        (
            json!({ "model": "chat", "messages": [{ "role": "user", "content": "hi" }], "tools": [{ "type": "code" }] }),
            "tools[0]",
        ),
        (
            json!({ "model": "chat", "messages": [{ "role": "user", "content": "hi" }], "tool_choice": "always" }),
            "tool_choice",
        ),
        (
            json!({ "model": "chat", "messages": [{ "role": "user", "content": "hi" }], "temperature": "hot" }),
            "`temperature`",
        ),
        (
            json!({ "model": "chat", "messages": [{ "role": "user", "content": "hi" }],
                "response_format": { "type": "json_schema" } }),
            "json_schema",
        ),
    ];
    for (body, path) in cases {
        let message = refusal(&body);
        assert!(message.contains(path), "{body}: the refusal names {path}: {message}");
    }
}

#[test]
fn a_field_name_written_with_escapes_is_the_same_field() {
    let body = br#"{"mod\u0065l": "chat", "messages": [{"r\u006fle": "user", "content": "hi"}], "x\u0079": 1}"#;
    let ingress = parse(body).unwrap_or_else(|err| panic!("{}", err.message()));
    assert_eq!((ingress.model.as_str(), ingress.request.messages[0].role), ("chat", Role::User));
    assert_eq!(ingress.request.extra.get("xy"), Some(&json!(1)), "an unknown field keeps its unescaped name");
}

#[test]
fn a_refusal_names_the_field_and_says_where_once() {
    let body = json!({ "model": "chat", "messages": [{ "role": "user", "content": "hi", "name": 7 }] });
    let message = refusal(&body);
    assert!(message.starts_with("invalid request body: `messages[0].name`: invalid type: integer `7`"), "{message}");
    assert_eq!(message.matches(" at line ").count(), 1, "{message}");
}

#[test]
fn a_tool_message_without_its_call_id_is_refused() {
    let body = json!({ "model": "chat", "messages": [
        { "role": "user", "content": "hi" },
        { "role": "tool", "content": "sunny" },
    ] });
    let message = refusal(&body);
    assert!(message.contains("messages[1]") && message.contains("tool_call_id"), "{message}");
}
