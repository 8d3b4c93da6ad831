//! Golden bodies: exactly what Gemini's `generateContent` is sent for each
//! part of the request surface, and what it is not sent at all.

use super::*;
use crate::request::Message;

#[test]
fn roles_become_user_and_model_and_limits_move_to_generation_config() {
    let req = ChatRequest {
        messages: vec![
            Message::text(Role::System, "be brief"),
            Message::text(Role::User, "hi"),
            Message::text(Role::Assistant, "hello"),
        ],
        max_tokens: Some(64),
        top_p: Some(0.9),
        ..ChatRequest::default()
    };
    let value = serde_json::to_value(body(&req)).unwrap_or_default();
    assert_eq!(
        value,
        json!({
            "contents": [
                {"role": "user", "parts": [{"text": "hi"}]},
                {"role": "model", "parts": [{"text": "hello"}]},
            ],
            "systemInstruction": {"parts": [{"text": "be brief"}]},
            "generationConfig": {"maxOutputTokens": 64, "topP": 0.9},
        })
    );
}

use crate::providers::samples::{self, asking, parsed};

/// The body of a one-message request, with `config` as its generation config and `fields` beside it.
fn hi(config: Value, fields: Value) -> Value {
    let mut base = json!({ "contents": [{ "role": "user", "parts": [{ "text": "hi" }] }], "generationConfig": config });
    if let (Some(base), Value::Object(fields)) = (base.as_object_mut(), fields) {
        base.extend(fields);
    }
    base
}

fn declarations() -> Value {
    json!([{ "functionDeclarations": [
        { "name": "get_weather", "description": "Weather for a city", "parametersJsonSchema": samples::weather_schema() },
        { "name": "get_time", "description": "Local time in a city", "parametersJsonSchema": samples::time_schema() },
    ] }])
}

fn names(fields: &[Field]) -> Vec<String> {
    fields.iter().map(ToString::to_string).collect()
}

#[test]
fn a_tool_conversation_becomes_function_calls_and_one_turn_of_named_responses() {
    let req = parsed(samples::tool_conversation());
    assert_eq!(unsupported(&req), Vec::new());
    let expected = json!({
        "contents": [
            { "role": "user", "parts": [{ "text": "Weather in Paris and the time in Rome?" }] },
            { "role": "model", "parts": [
                { "text": "Let me look both up." },
                { "functionCall": { "name": "get_weather", "args": { "city": "Paris" } },
                    "thoughtSignature": NO_THOUGHT_SIGNATURE },
                { "functionCall": { "name": "get_time", "args": { "city": "Rome" } } },
            ] },
            { "role": "user", "parts": [
                { "functionResponse": { "name": "get_weather", "response": { "temp_c": 18 } } },
                { "functionResponse": { "name": "get_time", "response": { "output": "14:05" } } },
                { "text": "Is it lunch time there?" },
            ] },
        ],
        "systemInstruction": { "parts": [{ "text": "You are a travel agent." }] },
        "generationConfig": {},
        "tools": declarations(),
    });
    assert_eq!(body(&req), expected);
}

#[test]
fn a_result_must_answer_a_call_of_the_conversation() {
    let req = parsed(json!({ "messages": [
        { "role": "user", "content": "hi" },
        { "role": "tool", "tool_call_id": "call_nowhere", "content": "42" },
    ] }));
    assert_eq!(names(&unsupported(&req)), ["messages[1].tool_call_id"], "Gemini needs the function's name");
    let broken = parsed(json!({ "messages": [
        { "role": "user", "content": "hi" },
        { "role": "assistant", "tool_calls": [{ "id": "c1", "type": "function",
            "function": { "name": "get_weather", "arguments": "{\"city\": \"Par" } }] },
        { "role": "tool", "tool_call_id": "c1", "content": [
            { "type": "text", "text": "see" },
            { "type": "image_url", "image_url": { "url": format!("data:image/png;base64,{}", samples::PNG_DATA) } },
        ] },
    ] }));
    assert_eq!(
        names(&unsupported(&broken)),
        ["messages[1].tool_calls", "messages[2].content[1] (an image in a tool result)"]
    );
}

#[test]
fn an_image_by_data_url_goes_inline_and_one_by_https_url_as_file_data() {
    let req = parsed(samples::images());
    assert_eq!(names(&unsupported(&req)), Vec::<String>::new());
    let expected = json!({
        "contents": [{ "role": "user", "parts": [
            { "text": "What is in these?" },
            { "inlineData": { "mimeType": "image/png", "data": samples::PNG_DATA } },
            { "fileData": { "mimeType": "image/jpeg", "fileUri": "https://example.com/cat.jpg" } },
        ] }],
        "generationConfig": {},
    });
    assert_eq!(body(&req), expected);
    let unknown = parsed(json!({ "messages": [{ "role": "user", "content": [
        { "type": "image_url", "image_url": { "url": "https://example.com/cat" } },
        { "type": "image_url", "image_url": { "url": "https://example.com/cat.svg?x=1" } },
        { "type": "image_url", "image_url": { "url": "https://example.com/a.PNG?x=1#y" } },
    ] }] }));
    assert_eq!(
        names(&unsupported(&unknown)),
        [
            "messages[0].content[0] (an image by URL of a type Gemini does not take)",
            "messages[0].content[1] (an image by URL of a type Gemini does not take)"
        ],
        "the media type comes from the extension"
    );
}

#[test]
fn each_tool_choice_becomes_a_function_calling_mode() {
    let choices = [
        (json!("auto"), json!({ "mode": "AUTO" })),
        (json!("none"), json!({ "mode": "NONE" })),
        (json!("required"), json!({ "mode": "ANY" })),
        (
            json!({ "type": "function", "function": { "name": "get_time" } }),
            json!({ "mode": "ANY", "allowedFunctionNames": ["get_time"] }),
        ),
    ];
    for (choice, config) in choices {
        let req = asking(json!({ "tools": samples::tools(), "tool_choice": choice }));
        assert_eq!(unsupported(&req), Vec::new(), "{choice}");
        let expected =
            hi(json!({}), json!({ "tools": declarations(), "toolConfig": { "functionCallingConfig": config } }));
        assert_eq!(body(&req), expected, "{choice}");
    }
}

#[test]
fn parallel_tool_calls_false_is_named_and_true_is_honoured() {
    let req = asking(json!({ "tools": samples::tools(), "parallel_tool_calls": false }));
    assert_eq!(names(&unsupported(&req)), ["parallel_tool_calls"], "Gemini cannot keep to one call");
    let req = asking(json!({ "tools": samples::tools(), "parallel_tool_calls": true }));
    assert_eq!(unsupported(&req), Vec::new());
    assert_eq!(body(&req), hi(json!({}), json!({ "tools": declarations() })));
}

#[test]
fn response_formats_become_a_mime_type_and_a_json_schema() {
    let json_mode = asking(json!({ "response_format": { "type": "json_object" } }));
    assert_eq!(body(&json_mode), hi(json!({ "responseMimeType": "application/json" }), json!({})));
    let schema = json!({ "type": "object", "properties": { "answer": { "type": "string" } }, "required": ["answer"] });
    let req = asking(json!({ "response_format": { "type": "json_schema",
        "json_schema": { "name": "reply", "schema": schema, "strict": true } } }));
    let config = json!({ "responseMimeType": "application/json", "responseJsonSchema": schema });
    assert_eq!(body(&req), hi(config, json!({})));
    assert_eq!(unsupported(&req), Vec::new());
}

#[test]
fn reasoning_effort_becomes_a_thinking_config() {
    let efforts = [("none", 0, false), ("minimal", 512, true), ("low", 1024, true), ("medium", 8192, true)];
    for (effort, budget, include) in efforts.into_iter().chain([("high", 24_576, true)]) {
        let req = asking(json!({ "reasoning_effort": effort, "max_completion_tokens": 30_000 }));
        assert_eq!(unsupported(&req), Vec::new(), "{effort}");
        let config = json!({ "maxOutputTokens": 30_000,
            "thinkingConfig": { "thinkingBudget": budget, "includeThoughts": include } });
        assert_eq!(body(&req), hi(config, json!({})), "{effort}");
    }
    assert_eq!(names(&unsupported(&asking(json!({ "reasoning_effort": "xhigh" })))), ["reasoning_effort"]);
}

#[test]
fn seed_top_k_and_penalties_are_translated_and_the_other_unknown_fields_named() {
    let req = asking(samples::unknown_fields());
    assert_eq!(names(&unsupported(&req)), ["logprobs", "metadata", "store", "top_logprobs", "user", "x_future_param"]);
    let config = json!({ "seed": 42, "topK": 40, "presencePenalty": 0.5, "frequencyPenalty": 0.25 });
    assert_eq!(body(&req.without(&unsupported(&req))), hi(config, json!({})));
    let named = parsed(json!({ "messages": [{ "role": "user", "content": "hi", "name": "ann" }] }));
    assert_eq!(names(&unsupported(&named)), ["messages[0].name"]);
}
