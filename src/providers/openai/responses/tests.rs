//! Golden bodies for a provider that speaks the Responses API: a Chat
//! Completions conversation as input items, a Responses body as sent; and
//! the decoder on Responses transcripts.

use serde_json::{Value, json};

use super::decode::ResponsesDecoder;
use super::*;
use crate::event::{Event, FinishReason, ToolCallDelta, Usage};
use crate::providers::SseEvent;
use crate::providers::samples::{self, asking, parsed};

#[test]
fn a_tool_conversation_becomes_input_items() {
    let mut sample = samples::tool_conversation();
    sample["max_tokens"] = json!(300);
    sample["response_format"] =
        json!({ "type": "json_schema", "json_schema": { "name": "plan", "schema": { "type": "object" } } });
    sample["reasoning_effort"] = json!("low");
    let req = parsed(sample);
    assert_eq!(OpenAiResponses.unsupported(&req), Vec::new());
    assert_eq!(
        body("gpt-x", &req),
        json!({
            "model": "gpt-x",
            "stream": true,
            "store": false,
            "input": [
                { "type": "message", "role": "developer", "content": [{ "type": "input_text", "text": "You are a travel agent." }] },
                { "type": "message", "role": "user",
                    "content": [{ "type": "input_text", "text": "Weather in Paris and the time in Rome?" }] },
                { "type": "message", "role": "assistant", "content": [{ "type": "output_text", "text": "Let me look both up." }] },
                { "type": "function_call", "call_id": "call_paris", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}" },
                { "type": "function_call", "call_id": "call_rome", "name": "get_time", "arguments": "{\"city\":\"Rome\"}" },
                { "type": "function_call_output", "call_id": "call_paris", "output": "{\"temp_c\":18}" },
                { "type": "function_call_output", "call_id": "call_rome", "output": "14:05" },
                { "type": "message", "role": "user", "content": [{ "type": "input_text", "text": "Is it lunch time there?" }] },
            ],
            "tools": [
                { "type": "function", "name": "get_weather", "description": "Weather for a city", "parameters": samples::weather_schema() },
                { "type": "function", "name": "get_time", "description": "Local time in a city", "parameters": samples::time_schema() },
            ],
            "max_output_tokens": 300,
            "text": { "format": { "type": "json_schema", "name": "plan", "schema": { "type": "object" } } },
            "reasoning": { "effort": "low" },
        })
    );
}

#[test]
fn images_go_as_input_images() {
    let req = parsed(samples::images());
    let input = &body("gpt-x", &req)["input"][0]["content"];
    let images: Vec<&Value> =
        input.as_array().into_iter().flatten().filter(|part| part["type"] == "input_image").collect();
    assert_eq!(images.len(), 2, "{input}");
    assert!(images[0]["image_url"].as_str().is_some_and(|url| url.starts_with("data:image/png;base64,")));
}

#[test]
fn what_the_responses_api_has_no_place_for_is_named() {
    let req = asking(json!({ "stop": ["END"], "top_k": 5, "seed": 7, "logprobs": null }));
    let names: Vec<String> = OpenAiResponses.unsupported(&req).iter().map(ToString::to_string).collect();
    assert_eq!(names, ["seed", "stop", "top_k"]);
}

#[test]
fn a_responses_body_goes_as_sent_with_model_stream_and_no_store() {
    let client = json!({ "model": "chat", "input": "hi", "store": true, "include": ["reasoning.encrypted_content"],
        "tools": [{ "type": "web_search" }], "x_future": { "a": 1 } });
    let head = crate::dialect::test_support::head("/v1/responses", http::HeaderMap::new());
    let ingress = <crate::dialect::responses::OpenAiResponses as crate::dialect::Dialect>::parse(
        bytes::Bytes::from(client.to_string()),
        &head,
    )
    .unwrap_or_else(|err| panic!("parses: {}", err.message()));
    let req = ingress.request;
    assert_eq!(OpenAiResponses.unsupported(&req), Vec::new(), "OpenAI judges its own API's fields");
    let account = crate::providers::Account::new("http://127.0.0.1:9/v1".into());
    let upstream = Upstream {
        account: &account,
        base_url: "http://x/v1",
        api_key: Some("k"),
        model: "gpt-x",
        max_event_bytes: 1 << 20,
        traceparent: None,
        egress: &crate::egress::Egress::DIRECT,
    };
    let request = OpenAiResponses.request(upstream, &req).unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(request.uri(), "http://x/v1/responses");
    let sent: Value = serde_json::from_slice(request.body()).unwrap_or_default();
    let mut expected = client;
    expected["model"] = json!("gpt-x");
    expected["stream"] = json!(true);
    expected["store"] = json!(false);
    assert_eq!(sent, expected);
}

/// Decodes `events` (type, data) and what the end of the body says.
fn decode(events: &[Value]) -> (Vec<Event>, Result<(), ProviderError>) {
    let mut decoder = ResponsesDecoder::default();
    let mut out = Vec::new();
    for data in events {
        let name = data["type"].as_str().unwrap_or("message");
        if let Err(err) = decoder.on_event(&SseEvent::new(name, &data.to_string()), &mut out) {
            return (out, Err(err));
        }
    }
    (out, decoder.finish())
}

/// The first call's delta: its id and name when it begins, then its arguments.
fn call(id: Option<&str>, name: Option<&str>, arguments: &str) -> Event {
    Event::ToolCall(ToolCallDelta {
        index: 0,
        id: id.map(Into::into),
        name: name.map(Into::into),
        arguments: arguments.into(),
    })
}

fn completed(usage: Value) -> Value {
    json!({ "type": "response.completed", "sequence_number": 9, "response": { "id": "resp_1", "status": "completed", "usage": usage } })
}

#[test]
fn text_calls_and_usage_decode_to_events() {
    let (events, end) = decode(&[
        json!({ "type": "response.created", "sequence_number": 0, "response": { "id": "resp_1", "status": "in_progress" } }),
        json!({ "type": "response.output_item.added", "output_index": 0, "item": { "type": "message", "id": "msg_1" } }),
        json!({ "type": "response.output_text.delta", "output_index": 0, "delta": "Hi", "logprobs": [] }),
        json!({ "type": "response.output_text.annotation.added", "annotation": { "type": "url_citation", "start_index": "x" } }),
        json!({ "type": "response.output_item.added", "output_index": 1,
            "item": { "type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": "" } }),
        json!({ "type": "response.function_call_arguments.delta", "output_index": 1, "delta": "{\"city\":" }),
        json!({ "type": "response.function_call_arguments.delta", "output_index": 1, "delta": "\"Paris\"}" }),
        completed(json!({ "input_tokens": 12, "input_tokens_details": { "cached_tokens": 4 }, "output_tokens": 7,
            "output_tokens_details": { "reasoning_tokens": 2 }, "total_tokens": 19 })),
    ]);
    assert!(end.is_ok());
    assert_eq!(
        events,
        [
            Event::Text("Hi".into()),
            call(Some("call_1"), Some("get_weather"), ""),
            call(None, None, "{\"city\":"),
            call(None, None, "\"Paris\"}"),
            Event::Usage(Usage {
                input_tokens: Some(12),
                output_tokens: Some(7),
                cached_input_tokens: Some(4),
                reasoning_tokens: Some(2),
            }),
            Event::Finish(FinishReason::ToolCalls),
        ]
    );
}

#[test]
fn reasoning_summaries_and_encrypted_reasoning_decode() {
    let (events, _) = decode(&[
        json!({ "type": "response.reasoning_summary_text.delta", "output_index": 0, "delta": "thinking" }),
        json!({ "type": "response.output_item.done", "output_index": 0,
            "item": { "type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA" } }),
        completed(json!({ "input_tokens": 1, "output_tokens": 1 })),
    ]);
    assert_eq!(events[..2], [Event::Reasoning("thinking".into()), Event::Signature("gAAA".into())]);
}

#[test]
fn a_freeform_tool_call_decodes_as_its_functions_one_string() {
    let (events, end) = decode(&[
        json!({ "type": "response.output_item.added", "output_index": 0,
            "item": { "type": "custom_tool_call", "id": "ctc_1", "call_id": "call_1", "name": "apply_patch", "input": "" } }),
        json!({ "type": "response.custom_tool_call_input.delta", "output_index": 0, "item_id": "ctc_1", "delta": "*** Begin" }),
        json!({ "type": "response.output_item.done", "output_index": 0, "item": { "type": "custom_tool_call",
            "id": "ctc_1", "call_id": "call_1", "name": "apply_patch", "input": "*** Begin Patch\n\"x\"" } }),
        completed(json!({ "input_tokens": 1, "output_tokens": 1 })),
    ]);
    assert!(end.is_ok());
    let arguments = json!({ "input": "*** Begin Patch\n\"x\"" }).to_string();
    assert_eq!(events[..2], [call(Some("call_1"), Some("apply_patch"), ""), call(None, None, &arguments)]);
    assert_eq!(events.last(), Some(&Event::Finish(FinishReason::ToolCalls)));
}

#[test]
fn a_limit_cut_answer_ends_with_length() {
    let (events, end) = decode(&[json!({ "type": "response.incomplete",
        "response": { "status": "incomplete", "incomplete_details": { "reason": "max_output_tokens" } } })]);
    assert!(end.is_ok());
    assert_eq!(events, [Event::Finish(FinishReason::Length)]);
}

#[test]
fn failures_in_the_stream_fail_the_attempt() {
    let failed = json!({ "type": "response.failed",
        "response": { "status": "failed", "error": { "code": "server_error", "message": "boom" } } });
    let (_, end) = decode(&[failed]);
    assert!(matches!(&end, Err(ProviderError::ErrorEvent(detail)) if detail == "server_error: boom"), "{end:?}");
    let (_, end) = decode(&[json!({ "type": "error", "code": 500, "message": "overloaded" })]);
    assert!(matches!(&end, Err(ProviderError::ErrorEvent(detail)) if detail == "500: overloaded"), "{end:?}");
}

#[test]
fn a_stream_without_its_end_is_truncated_and_garbage_is_malformed() {
    let (_, end) = decode(&[json!({ "type": "response.output_text.delta", "output_index": 0, "delta": "Hi" })]);
    assert!(matches!(end, Err(ProviderError::Truncated)));
    let (_, end) = decode(&[json!({ "type": "response.output_text.delta", "output_index": 0, "delta": 42 })]);
    assert!(matches!(end, Err(ProviderError::Malformed(_))), "{end:?}");
}

#[test]
fn a_tool_result_with_an_image_keeps_it_as_an_input_part() {
    let image = json!({ "type": "image_url", "image_url": { "url": "https://example.com/chart.png" } });
    let req = parsed(json!({ "messages": [
        { "role": "user", "content": "plot it" },
        { "role": "assistant", "content": null, "tool_calls": [
            { "id": "call_1", "type": "function", "function": { "name": "plot", "arguments": "{}" } }] },
        { "role": "tool", "tool_call_id": "call_1", "content": [{ "type": "text", "text": "done" }, image] },
    ] }));
    assert_eq!(
        body("gpt-x", &req)["input"][2],
        json!({ "type": "function_call_output", "call_id": "call_1", "output": [
            { "type": "input_text", "text": "done" },
            { "type": "input_image", "image_url": "https://example.com/chart.png" },
        ] })
    );
}
