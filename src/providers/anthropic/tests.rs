//! Golden bodies: exactly what Anthropic's Messages API is sent for each
//! part of the request surface, and what it is not sent at all.

use super::*;
use crate::request::Message;

#[test]
fn system_moves_out_and_max_tokens_is_always_set() {
    let req = ChatRequest {
        messages: vec![
            Message::text(Role::System, "be brief"),
            Message::text(Role::User, "hi"),
            Message::text(Role::Assistant, "hello"),
            Message::text(Role::User, "again"),
        ],
        stop: vec!["END".into()],
        ..ChatRequest::default()
    };
    let value = serde_json::to_value(body("claude-sonnet-4-5", &req)).unwrap_or_default();
    assert_eq!(
        value,
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": DEFAULT_MAX_TOKENS,
            "system": "be brief",
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
                {"role": "user", "content": "again"},
            ],
            "stream": true,
            "stop_sequences": ["END"],
        })
    );
}

use crate::providers::samples::{self, asking, parsed};

/// The body of a one-message request besides `fields`.
fn hi(fields: Value) -> Value {
    let mut base = json!({ "model": "claude-x", "max_tokens": DEFAULT_MAX_TOKENS,
        "messages": [{ "role": "user", "content": "hi" }], "stream": true });
    if let (Some(base), Value::Object(fields)) = (base.as_object_mut(), fields) {
        base.extend(fields);
    }
    base
}

fn tools() -> Value {
    json!([
        { "name": "get_weather", "description": "Weather for a city", "input_schema": samples::weather_schema() },
        { "name": "get_time", "description": "Local time in a city", "input_schema": samples::time_schema() },
    ])
}

fn names(fields: &[Field]) -> Vec<String> {
    fields.iter().map(ToString::to_string).collect()
}

#[test]
fn a_tool_conversation_becomes_tool_use_and_one_user_turn_of_results() {
    let req = parsed(samples::tool_conversation());
    assert_eq!(unsupported(&req), Vec::new());
    let expected = json!({
        "model": "claude-x",
        "max_tokens": DEFAULT_MAX_TOKENS,
        "system": "You are a travel agent.",
        "messages": [
            { "role": "user", "content": "Weather in Paris and the time in Rome?" },
            { "role": "assistant", "content": [
                { "type": "text", "text": "Let me look both up." },
                { "type": "tool_use", "id": "call_paris", "name": "get_weather", "input": { "city": "Paris" } },
                { "type": "tool_use", "id": "call_rome", "name": "get_time", "input": { "city": "Rome" } },
            ] },
            { "role": "user", "content": [
                { "type": "tool_result", "tool_use_id": "call_paris",
                    "content": [{ "type": "text", "text": "{\"temp_c\":18}" }] },
                { "type": "tool_result", "tool_use_id": "call_rome", "content": [{ "type": "text", "text": "14:05" }] },
                { "type": "text", "text": "Is it lunch time there?" },
            ] },
        ],
        "stream": true,
        "tools": tools(),
    });
    assert_eq!(body("claude-x", &req), expected);
}

#[test]
fn an_empty_tool_result_has_no_content_and_a_tool_without_parameters_takes_an_empty_object() {
    let req = parsed(json!({
        "messages": [
            { "role": "user", "content": "ping it" },
            { "role": "assistant", "content": null, "tool_calls": [{ "id": "c1", "type": "function",
                "function": { "name": "ping", "arguments": "" } }] },
            { "role": "tool", "tool_call_id": "c1", "content": "" },
        ],
        "tools": [{ "type": "function", "function": { "name": "ping" } }],
    }));
    let expected = json!({
        "model": "claude-x",
        "max_tokens": DEFAULT_MAX_TOKENS,
        "messages": [
            { "role": "user", "content": "ping it" },
            { "role": "assistant", "content": [{ "type": "tool_use", "id": "c1", "name": "ping", "input": {} }] },
            { "role": "user", "content": [{ "type": "tool_result", "tool_use_id": "c1" }] },
        ],
        "stream": true,
        "tools": [{ "name": "ping", "input_schema": { "type": "object" } }],
    });
    assert_eq!(body("claude-x", &req), expected);
}

#[test]
fn images_become_base64_and_url_sources() {
    let req = parsed(samples::images());
    assert_eq!(unsupported(&req), Vec::new());
    let content = json!([
        { "type": "text", "text": "What is in these?" },
        { "type": "image", "source": { "type": "base64", "media_type": "image/png", "data": samples::PNG_DATA } },
        { "type": "image", "source": { "type": "url", "url": "https://example.com/cat.jpg" } },
    ]);
    let expected = json!({ "model": "claude-x", "max_tokens": DEFAULT_MAX_TOKENS,
        "messages": [{ "role": "user", "content": content }], "stream": true });
    assert_eq!(body("claude-x", &req), expected);
}

#[test]
fn each_tool_choice_has_its_anthropic_form() {
    let choices = [
        (json!("auto"), json!({ "type": "auto" })),
        (json!("none"), json!({ "type": "none" })),
        (json!("required"), json!({ "type": "any" })),
        (
            json!({ "type": "function", "function": { "name": "get_time" } }),
            json!({ "type": "tool", "name": "get_time" }),
        ),
    ];
    for (choice, theirs) in choices {
        let req = asking(json!({ "tools": samples::tools(), "tool_choice": choice }));
        assert_eq!(body("claude-x", &req), hi(json!({ "tools": tools(), "tool_choice": theirs })), "{choice}");
    }
}

#[test]
fn parallel_tool_calls_false_disables_parallel_tool_use() {
    let serial = [
        (json!({}), json!({ "type": "auto", "disable_parallel_tool_use": true })),
        (json!({ "tool_choice": "required" }), json!({ "type": "any", "disable_parallel_tool_use": true })),
        (
            json!({ "tool_choice": { "type": "function", "function": { "name": "get_time" } } }),
            json!({ "type": "tool", "name": "get_time", "disable_parallel_tool_use": true }),
        ),
        (json!({ "tool_choice": "none" }), json!({ "type": "none" })),
    ];
    for (fields, theirs) in serial {
        let mut fields = fields;
        fields["tools"] = samples::tools();
        fields["parallel_tool_calls"] = json!(false);
        let req = asking(fields.clone());
        assert_eq!(body("claude-x", &req), hi(json!({ "tools": tools(), "tool_choice": theirs })), "{fields}");
    }
}

#[test]
fn json_object_is_asked_for_in_the_system_prompt_and_a_schema_natively() {
    let req =
        parsed(json!({ "messages": [{ "role": "system", "content": "be brief" }, { "role": "user", "content": "hi" }],
        "response_format": { "type": "json_object" } }));
    let system = format!("be brief\n\n{JSON_OBJECT_INSTRUCTION}");
    assert_eq!(body("claude-x", &req), hi(json!({ "system": system })));
    let schema = json!({ "type": "object", "properties": { "answer": { "type": "string" } },
        "required": ["answer"], "additionalProperties": false });
    let req = asking(json!({ "response_format": { "type": "json_schema",
        "json_schema": { "name": "reply", "schema": schema, "strict": true } } }));
    let expected = hi(json!({ "output_config": { "format": { "type": "json_schema", "schema": schema } } }));
    assert_eq!(body("claude-x", &req), expected);
    assert_eq!(unsupported(&req), Vec::new());
}

#[test]
fn reasoning_effort_becomes_a_thinking_budget_below_max_tokens() {
    let efforts = [("low", 1024), ("medium", 4096), ("high", 16_384)];
    for (effort, budget) in efforts {
        let req = asking(json!({ "reasoning_effort": effort }));
        assert_eq!(unsupported(&req), Vec::new(), "{effort}");
        let thinking = json!({ "type": "enabled", "budget_tokens": budget });
        let expected = hi(json!({ "max_tokens": DEFAULT_MAX_TOKENS + budget, "thinking": thinking }));
        assert_eq!(body("claude-x", &req), expected, "{effort} without a limit: the answer keeps the default");
        let req = asking(json!({ "reasoning_effort": effort, "max_completion_tokens": 20_000 }));
        assert_eq!(body("claude-x", &req), hi(json!({ "max_tokens": 20_000, "thinking": thinking })), "{effort}");
    }
    for effort in ["none", "minimal"] {
        let req = asking(json!({ "reasoning_effort": effort }));
        assert_eq!(unsupported(&req), Vec::new(), "{effort}");
        assert_eq!(body("claude-x", &req), hi(json!({})), "{effort}: thinking stays off");
    }
}

#[test]
fn what_anthropic_refuses_beside_thinking_is_named() {
    let cases = [
        (json!({ "reasoning_effort": "xhigh" }), vec!["reasoning_effort"]),
        (json!({ "max_tokens": 1024 }), vec!["reasoning_effort (together with max_tokens)"]),
        (json!({ "max_completion_tokens": 500 }), vec!["reasoning_effort (together with max_completion_tokens)"]),
        (json!({ "temperature": 0.2 }), vec!["reasoning_effort (together with temperature)"]),
        (json!({ "temperature": 1 }), vec![]),
        // A top-k cut is named alone: the request may go without it and think.
        (json!({ "top_k": 5 }), vec!["top_k"]),
        (json!({ "top_p": 0.5 }), vec!["reasoning_effort (together with top_p)"]),
        (json!({ "top_p": 0.97 }), vec![]),
        (
            json!({ "tools": samples::tools(), "tool_choice": "required" }),
            vec!["reasoning_effort (together with tool_choice)"],
        ),
        (
            json!({ "tools": samples::tools(), "tool_choice": { "type": "function", "function": { "name": "get_time" } } }),
            vec!["reasoning_effort (together with tool_choice)"],
        ),
        (json!({ "tools": samples::tools(), "tool_choice": "auto" }), vec![]),
        (json!({ "tools": samples::tools(), "tool_choice": "none" }), vec![]),
    ];
    for (fields, named) in cases {
        let mut fields = fields;
        if fields.get("reasoning_effort").is_none() {
            fields["reasoning_effort"] = json!("low");
        }
        assert_eq!(names(&unsupported(&asking(fields.clone()))), named, "{fields}");
    }
    let mut conversation = samples::tool_conversation();
    conversation["reasoning_effort"] = json!("medium");
    let req = parsed(conversation);
    assert_eq!(
        names(&unsupported(&req)),
        ["reasoning_effort (together with tool_calls)"],
        "the thinking block of the last tool-calling turn is not in an OpenAI conversation"
    );
    let dropped = req.without(&unsupported(&req));
    assert_eq!(dropped.reasoning_effort, None);
    assert!(body("claude-x", &dropped).get("thinking").is_none());
}

#[test]
fn a_temperature_above_anthropics_range_is_named() {
    assert_eq!(names(&unsupported(&asking(json!({ "temperature": 1.5 })))), ["temperature"]);
    assert_eq!(body("claude-x", &asking(json!({ "temperature": 1.0 }))), hi(json!({ "temperature": 1.0 })));
}

#[test]
fn cache_hints_stay_on_system_parts_message_parts_and_tools() {
    let ephemeral = json!({ "type": "ephemeral" });
    let req = parsed(json!({
        "messages": [
            { "role": "system", "content": [
                { "type": "text", "text": "A long policy.", "cache_control": ephemeral },
                { "type": "text", "text": "Today is Monday." },
            ] },
            { "role": "user", "content": [{ "type": "text", "text": "hi", "cache_control": ephemeral }] },
        ],
        "tools": [{ "type": "function", "cache_control": ephemeral,
            "function": { "name": "get_weather", "parameters": samples::weather_schema() } }],
    }));
    assert_eq!(unsupported(&req), Vec::new());
    let expected = json!({
        "model": "claude-x",
        "max_tokens": DEFAULT_MAX_TOKENS,
        "system": [
            { "type": "text", "text": "A long policy.", "cache_control": ephemeral },
            { "type": "text", "text": "Today is Monday." },
        ],
        "messages": [{ "role": "user", "content": [{ "type": "text", "text": "hi", "cache_control": ephemeral }] }],
        "stream": true,
        "tools": [{ "name": "get_weather", "input_schema": samples::weather_schema(), "cache_control": ephemeral }],
    });
    assert_eq!(body("claude-x", &req), expected);
}

#[test]
fn user_and_top_k_are_translated_and_the_other_unknown_fields_named() {
    let req = parsed(json!({ "messages": [{ "role": "user", "content": "hi", "name": "ann" }],
        "user": "user-1234", "top_k": 40, "stop": ["END"] }));
    assert_eq!(names(&unsupported(&req)), ["messages[0].name"]);
    let expected = hi(json!({ "metadata": { "user_id": "user-1234" }, "top_k": 40, "stop_sequences": ["END"] }));
    assert_eq!(body("claude-x", &req.without(&unsupported(&req))), expected);
    let mut fields = samples::unknown_fields();
    fields["store"] = json!(false);
    let req = asking(fields);
    assert_eq!(
        names(&unsupported(&req)),
        ["frequency_penalty", "logprobs", "metadata", "presence_penalty", "seed", "top_logprobs", "x_future_param"],
        "store: false asks for nothing"
    );
    assert_eq!(names(&unsupported(&asking(json!({ "user": 7 })))), ["user"], "only a string is a user id");
}
