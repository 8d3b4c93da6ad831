//! How OpenAI's Responses API writes its stream, as its API reference shows
//! it: named events, each with its `type` and `sequence_number` (the mock
//! numbers them all 0: no decoder may depend on them), output items opened
//! with `output_item.added` and closed with `output_item.done`.

use serde_json::{Value, json};

use super::wire::{Call, Counts, Ending, PROMPT_TOKENS};

/// One named event.
fn event(kind: &str, mut fields: Value) -> String {
    fields["type"] = json!(kind);
    fields["sequence_number"] = json!(0);
    format!("event: {kind}\ndata: {fields}\n\n")
}

/// The `response` object of the stream's first and last events.
fn response(model: &str, status: &str) -> Value {
    json!({ "id": "resp_mock", "object": "response", "created_at": 0, "status": status, "model": model,
        "output": [], "store": false })
}

fn message_id(index: usize) -> String {
    format!("msg_mock_{index}")
}

/// `response.created`, `response.in_progress` and the first item opened:
/// a reasoning item when the answer thinks first, else the message.
pub fn opening(model: &str, thinking: bool) -> Vec<String> {
    let mut events = vec![
        event("response.created", json!({ "response": response(model, "in_progress") })),
        event("response.in_progress", json!({ "response": response(model, "in_progress") })),
    ];
    if thinking {
        events.push(event(
            "response.output_item.added",
            json!({ "output_index": 0, "item": { "id": "rs_mock", "type": "reasoning", "summary": [] } }),
        ));
        events.push(event(
            "response.reasoning_summary_part.added",
            json!({ "item_id": "rs_mock", "output_index": 0, "summary_index": 0,
                "part": { "type": "summary_text", "text": "" } }),
        ));
    } else {
        events.extend(open_message(0));
    }
    events
}

/// The message item at `index`, opened with its one text part.
fn open_message(index: usize) -> Vec<String> {
    let id = message_id(index);
    vec![
        event(
            "response.output_item.added",
            json!({ "output_index": index, "item": { "id": id, "type": "message", "status": "in_progress",
                "role": "assistant", "content": [] } }),
        ),
        event(
            "response.content_part.added",
            json!({ "item_id": id, "output_index": index, "content_index": 0,
                "part": { "type": "output_text", "text": "", "annotations": [] } }),
        ),
    ]
}

/// One delta of the reasoning summary.
pub fn reasoning(text: &str) -> String {
    event(
        "response.reasoning_summary_text.delta",
        json!({ "item_id": "rs_mock", "output_index": 0, "summary_index": 0, "delta": text }),
    )
}

/// The reasoning item closed, with its encrypted form, and the message opened.
pub fn end_of_reasoning() -> Vec<String> {
    let mut events = vec![event(
        "response.output_item.done",
        json!({ "output_index": 0, "item": { "id": "rs_mock", "type": "reasoning", "summary": [],
            "encrypted_content": "ZW5jcnlwdGVkLW1vY2s=" } }),
    )];
    events.extend(open_message(1));
    events
}

/// One text token of the message at `index`.
pub fn text_in(index: usize, text: &str) -> String {
    event(
        "response.output_text.delta",
        json!({ "item_id": message_id(index), "output_index": index, "content_index": 0, "delta": text,
            "logprobs": [] }),
    )
}

/// A function call item at `index`: added, its arguments a fragment an event, done.
fn call_at(index: usize, call: &Call<'_>) -> Vec<String> {
    let id = format!("fc_mock_{index}");
    let item = |arguments: &str, status: &str| {
        json!({ "id": id, "type": "function_call", "status": status, "call_id": call.id, "name": call.name,
            "arguments": arguments })
    };
    let mut events =
        vec![event("response.output_item.added", json!({ "output_index": index, "item": item("", "in_progress") }))];
    events.extend(call.arguments.iter().map(|fragment| {
        event(
            "response.function_call_arguments.delta",
            json!({ "item_id": id, "output_index": index, "delta": fragment }),
        )
    }));
    let arguments = call.arguments.concat();
    events.push(event(
        "response.function_call_arguments.done",
        json!({ "item_id": id, "output_index": index, "arguments": arguments }),
    ));
    events.push(event(
        "response.output_item.done",
        json!({ "output_index": index, "item": item(&arguments, "completed") }),
    ));
    events
}

/// A whole tool call (`get_weather` for Paris) after the message.
pub fn tool_call() -> Vec<String> {
    let arguments = ["{\"city\": \"Paris\"}".to_owned()];
    call_at(1, &Call { id: "call_mock", name: "get_weather", arguments: &arguments })
}

/// The message closed, the call made, and `response.completed` with usage.
pub fn ending(model: &str, end: &Ending<'_>) -> Vec<String> {
    let Counts { output, reasoning, cached } = end.counts;
    let index = end.text_block;
    let mut events = vec![
        event(
            "response.content_part.done",
            json!({ "item_id": message_id(index), "output_index": index, "content_index": 0,
                "part": { "type": "output_text", "text": "", "annotations": [] } }),
        ),
        event(
            "response.output_item.done",
            json!({ "output_index": index, "item": { "id": message_id(index), "type": "message",
                "status": "completed", "role": "assistant", "content": [] } }),
        ),
    ];
    if let Some(call) = end.call {
        events.extend(call_at(index + 1, &call));
    }
    let usage = json!({
        "input_tokens": PROMPT_TOKENS, "input_tokens_details": { "cached_tokens": cached },
        "output_tokens": output + reasoning, "output_tokens_details": { "reasoning_tokens": reasoning },
        "total_tokens": PROMPT_TOKENS + output + reasoning,
    });
    let mut done = response(model, "completed");
    done["usage"] = usage;
    events.push(event("response.completed", json!({ "response": done })));
    events
}

/// The events that end an answer with every usage count `u64::MAX`.
pub fn overflowing_finish(model: &str) -> Vec<String> {
    let max = u64::MAX;
    let mut done = response(model, "completed");
    done["usage"] = json!({ "input_tokens": max, "output_tokens": max, "total_tokens": max });
    vec![event("response.completed", json!({ "response": done }))]
}

/// An `error` event in the stream.
pub fn error_event() -> String {
    event(
        "error",
        json!({ "code": "server_error", "message": "The server had an error processing your request.",
        "param": null }),
    )
}

/// A text delta cut off inside its JSON.
pub fn malformed() -> String {
    "event: response.output_text.delta\ndata: {\"type\": \"response.output_text.delta\", \"delta\": tru\n\n".to_owned()
}

/// An event carrying nothing, with `padding` on its one line.
pub fn huge_line(padding: &str) -> String {
    event("response.in_progress", json!({ "response": { "status": "in_progress" }, "padding": padding }))
}

/// A first text delta whose fields have the wrong types.
pub fn wrong_types() -> String {
    event("response.output_text.delta", json!({ "output_index": "0", "delta": 42 }))
}
