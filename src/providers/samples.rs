//! Requests the adapters' golden tests share, written as an OpenAI client
//! sends them and parsed by the real dialect, so each golden shows one
//! client body against one provider body.

use serde_json::{Value, json};

use crate::dialect::openai::parse;
use crate::request::ChatRequest;

/// `body` (its `model` supplied when absent) as the normalised request.
pub fn parsed(mut body: Value) -> ChatRequest {
    if body.get("model").is_none() {
        body["model"] = json!("chat");
    }
    match parse(body.to_string().as_bytes()) {
        Ok(ingress) => ingress.request,
        Err(err) => panic!("the sample parses: {}", err.message()),
    }
}

/// A one-message request with `fields` added at the top level.
pub fn asking(fields: Value) -> ChatRequest {
    let mut body = json!({ "messages": [{ "role": "user", "content": "hi" }] });
    if let (Some(body), Value::Object(fields)) = (body.as_object_mut(), fields) {
        body.extend(fields);
    }
    parsed(body)
}

/// The tools of [`tool_conversation`], in OpenAI's form.
pub fn tools() -> Value {
    json!([
        { "type": "function", "function": { "name": "get_weather", "description": "Weather for a city",
            "parameters": weather_schema() } },
        { "type": "function", "function": { "name": "get_time", "description": "Local time in a city",
            "parameters": time_schema() } },
    ])
}

/// `get_weather`'s parameters.
pub fn weather_schema() -> Value {
    json!({ "type": "object", "properties": { "city": { "type": "string" } }, "required": ["city"] })
}

/// `get_time`'s parameters.
pub fn time_schema() -> Value {
    json!({ "type": "object", "properties": { "city": { "type": "string" } } })
}

/// An agent's second turn: system, user, the assistant's text and two tool
/// calls of different functions, both results (one JSON, one plain text),
/// and a user follow-up.
pub fn tool_conversation() -> Value {
    json!({
        "messages": [
            { "role": "system", "content": "You are a travel agent." },
            { "role": "user", "content": "Weather in Paris and the time in Rome?" },
            { "role": "assistant", "content": "Let me look both up.", "tool_calls": [
                { "id": "call_paris", "type": "function",
                    "function": { "name": "get_weather", "arguments": "{\"city\":\"Paris\"}" } },
                { "id": "call_rome", "type": "function",
                    "function": { "name": "get_time", "arguments": "{\"city\":\"Rome\"}" } },
            ] },
            { "role": "tool", "tool_call_id": "call_paris", "content": "{\"temp_c\":18}" },
            { "role": "tool", "tool_call_id": "call_rome", "content": "14:05" },
            { "role": "user", "content": "Is it lunch time there?" },
        ],
        "tools": tools(),
    })
}

/// A tiny PNG as a `data:` URL, and its base64 data.
pub const PNG_DATA: &str = "iVBORw0KGgo=";

/// A user message with an image by `data:` URL and one by https URL.
pub fn images() -> Value {
    json!({ "messages": [{ "role": "user", "content": [
        { "type": "text", "text": "What is in these?" },
        { "type": "image_url", "image_url": { "url": format!("data:image/png;base64,{PNG_DATA}") } },
        { "type": "image_url", "image_url": { "url": "https://example.com/cat.jpg", "detail": "low" } },
    ] }] })
}

/// The fields baton does not translate that real clients send, with a
/// made-up one a future API might add.
pub fn unknown_fields() -> Value {
    json!({
        "seed": 42,
        "user": "user-1234",
        "logprobs": true,
        "top_logprobs": 2,
        "metadata": { "run": "nightly" },
        "store": true,
        "top_k": 40,
        "presence_penalty": 0.5,
        "frequency_penalty": 0.25,
        "x_future_param": { "nested": [1, 2] },
    })
}
