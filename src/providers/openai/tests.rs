//! Golden bodies: exactly what an OpenAI-kind server is sent for each part
//! of the request surface — the client's request as it came.

use super::*;

/// The body as JSON, to compare with the expected one.
fn body(model: &str, req: &ChatRequest) -> Value {
    serde_json::to_value(super::body(model, req)).expect("a body always serializes")
}

#[test]
fn body_carries_messages_and_sampling_and_asks_for_usage() {
    let req = ChatRequest {
        messages: vec![Message::text(Role::System, "be brief"), Message::text(Role::User, "hi")],
        max_tokens: Some(50),
        temperature: Some(0.5),
        stop: vec!["END".into()],
        ..ChatRequest::default()
    };
    let value = body("gpt-4o-mini", &req);
    assert_eq!(
        value,
        json!({
            "model": "gpt-4o-mini",
            "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": 50,
            "temperature": 0.5,
            "stop": ["END"],
        })
    );
}

use crate::providers::samples::{self, asking, parsed};

/// What every streamed body carries besides the request's own fields.
fn streamed(model: &str, messages: Value) -> Value {
    json!({ "model": model, "messages": messages, "stream": true, "stream_options": { "include_usage": true } })
}

/// `base` with `fields` set at the top level.
fn with(mut base: Value, fields: Value) -> Value {
    if let (Some(base), Value::Object(fields)) = (base.as_object_mut(), fields) {
        base.extend(fields);
    }
    base
}

fn hi() -> Value {
    json!([{ "role": "user", "content": "hi" }])
}

#[test]
fn a_tool_conversation_goes_as_the_client_sent_it() {
    let req = parsed(samples::tool_conversation());
    assert_eq!(OpenAi.unsupported(&req), Vec::new());
    // The messages go upstream exactly as the client wrote them.
    let sent = samples::tool_conversation();
    let expected = with(streamed("gpt-x", sent["messages"].clone()), json!({ "tools": samples::tools() }));
    assert_eq!(body("gpt-x", &req), expected);
}

#[test]
fn an_assistant_turn_of_tool_calls_only_has_null_content() {
    let req = parsed(json!({ "messages": [
        { "role": "user", "content": "weather?" },
        { "role": "assistant", "content": null, "tool_calls": [{ "id": "c1", "type": "function",
            "function": { "name": "get_weather", "arguments": "{}" } }] },
        { "role": "tool", "tool_call_id": "c1", "content": "sunny" },
    ] }));
    let expected = streamed(
        "m",
        json!([
            { "role": "user", "content": "weather?" },
            { "role": "assistant", "content": null, "tool_calls": [{ "id": "c1", "type": "function",
                "function": { "name": "get_weather", "arguments": "{}" } }] },
            { "role": "tool", "tool_call_id": "c1", "content": "sunny" },
        ]),
    );
    assert_eq!(body("m", &req), expected);
}

#[test]
fn images_by_data_url_and_by_https_url_go_as_is() {
    let req = parsed(samples::images());
    let expected = streamed(
        "m",
        json!([{ "role": "user", "content": [
            { "type": "text", "text": "What is in these?" },
            { "type": "image_url", "image_url": { "url": format!("data:image/png;base64,{}", samples::PNG_DATA) } },
            { "type": "image_url", "image_url": { "url": "https://example.com/cat.jpg", "detail": "low" } },
        ] }]),
    );
    assert_eq!(body("m", &req), expected);
    assert_eq!(OpenAi.unsupported(&req), Vec::new());
}

#[test]
fn every_tool_choice_and_parallel_tool_calls_go_as_is() {
    let choices = [
        json!("auto"),
        json!("none"),
        json!("required"),
        json!({ "type": "function", "function": { "name": "get_time" } }),
    ];
    for choice in choices {
        let fields = json!({ "tools": samples::tools(), "tool_choice": choice, "parallel_tool_calls": false });
        let req = asking(fields.clone());
        assert_eq!(body("m", &req), with(streamed("m", hi()), fields), "tool_choice {choice}");
    }
}

#[test]
fn response_formats_go_as_is() {
    let schema = json!({ "type": "object", "properties": { "answer": { "type": "string" } },
        "required": ["answer"], "additionalProperties": false });
    let formats = [
        json!({ "type": "json_object" }),
        json!({ "type": "json_schema", "json_schema": { "name": "reply", "description": "the reply",
            "schema": schema, "strict": true } }),
        json!({ "type": "json_schema", "json_schema": { "name": "anything" } }),
    ];
    for format in formats {
        let fields = json!({ "response_format": format });
        assert_eq!(body("m", &asking(fields.clone())), with(streamed("m", hi()), fields), "{format}");
    }
}

#[test]
fn reasoning_effort_goes_as_is() {
    for effort in ["minimal", "low", "medium", "high", "xhigh"] {
        let fields = json!({ "reasoning_effort": effort });
        assert_eq!(body("o-x", &asking(fields.clone())), with(streamed("o-x", hi()), fields));
    }
}

#[test]
fn the_limit_is_sent_in_the_field_the_client_used() {
    for field in ["max_tokens", "max_completion_tokens"] {
        let fields = json!({ field: 300 });
        assert_eq!(body("m", &asking(fields.clone())), with(streamed("m", hi()), fields), "{field}");
    }
}

#[test]
fn cache_hints_are_left_out() {
    let req = parsed(json!({
        "messages": [
            { "role": "system", "content": [{ "type": "text", "text": "policy", "cache_control": { "type": "ephemeral" } }] },
            { "role": "user", "content": "hi" },
        ],
        "tools": [{ "type": "function", "cache_control": { "type": "ephemeral" },
            "function": { "name": "get_weather", "parameters": samples::weather_schema() } }],
    }));
    let expected = with(
        streamed("m", json!([{ "role": "system", "content": "policy" }, { "role": "user", "content": "hi" }])),
        json!({ "tools": [{ "type": "function", "function": { "name": "get_weather",
            "parameters": samples::weather_schema() } }] }),
    );
    assert_eq!(body("m", &req), expected);
}

#[test]
fn a_tool_without_parameters_is_sent_without_them() {
    let req = asking(json!({ "tools": [{ "type": "function", "function": { "name": "now" } }] }));
    let expected =
        with(streamed("m", hi()), json!({ "tools": [{ "type": "function", "function": { "name": "now" } }] }));
    assert_eq!(body("m", &req), expected);
}

#[test]
fn fields_baton_does_not_know_are_passed_through_verbatim() {
    let req = parsed(with(
        json!({ "messages": [{ "role": "user", "content": "hi", "name": "ann", "x_message_hint": 1 }] }),
        samples::unknown_fields(),
    ));
    assert_eq!(OpenAi.unsupported(&req), Vec::new(), "log probabilities come back with the text");
    let expected = with(
        streamed("m", json!([{ "role": "user", "content": "hi", "name": "ann", "x_message_hint": 1 }])),
        samples::unknown_fields(),
    );
    assert_eq!(body("m", &req), expected);
}

#[test]
fn asking_for_what_the_answer_cannot_bring_back_is_named() {
    let ask = |extra: Value| {
        OpenAi.unsupported(&parsed(with(json!({ "messages": [{ "role": "user", "content": "hi" }] }), extra)))
    };
    assert_eq!(ask(json!({ "logprobs": false, "modalities": ["text"], "audio": null })), Vec::new());
    assert_eq!(
        ask(json!({ "modalities": ["text", "audio"], "audio": { "voice": "alloy", "format": "mp3" } })),
        vec![Field::top("modalities"), Field::top("audio")]
    );
}
