//! How OpenAI's Responses API writes its stream, as its API reference shows
//! it: named events, each with its `type` and `sequence_number` (the mock
//! numbers them all 0: no decoder may depend on them), output items opened
//! with `output_item.added` and closed with `output_item.done`.

use std::net::SocketAddr;

use serde_json::{Value, json};

use crate::providers::simulate::{
    Asked, Call, Counts, Ending, Json, Offered, PROMPT_TOKENS, Simulated, WireEvent, array_at, count_parts, pick,
    str_at, text_of,
};

/// A simulated OpenAI speaking its Responses API.
pub struct SimulatedResponses;

impl Simulated for SimulatedResponses {
    fn base_url(&self, addr: SocketAddr) -> String {
        format!("http://{addr}/v1")
    }

    fn is_chat_path(&self, path: &str) -> bool {
        path.ends_with("/responses")
    }

    fn auth_header(&self, key: &str) -> (&'static str, String) {
        ("authorization", format!("Bearer {key}"))
    }

    fn turns(&self) -> (&'static str, &'static str) {
        ("input", "assistant")
    }

    fn asked(&self, body: &Value) -> Asked {
        Asked { tool: tool(body), tool_results: results(body), json: json_asked(body), images: images(body) }
    }

    fn opening(&self, model: &str, thinking: bool, _cached: usize) -> Vec<WireEvent> {
        opening(model, thinking)
    }

    fn reasoning(&self, _model: &str, text: &str) -> WireEvent {
        reasoning(text)
    }

    fn end_of_reasoning(&self) -> Vec<WireEvent> {
        end_of_reasoning()
    }

    fn text_in(&self, _model: &str, block: usize, text: &str) -> WireEvent {
        text_in(block, text)
    }

    fn tool_call(&self, _model: &str) -> Vec<WireEvent> {
        tool_call()
    }

    fn ending(&self, model: &str, end: &Ending<'_>) -> Vec<WireEvent> {
        ending(model, end)
    }

    fn refusal(&self, model: &str) -> Vec<WireEvent> {
        let mut done = response(model, "incomplete");
        done["incomplete_details"] = json!({ "reason": "content_filter" });
        vec![event("response.incomplete", json!({ "response": done }))]
    }

    fn error_event(&self) -> WireEvent {
        error_event()
    }

    fn malformed(&self) -> WireEvent {
        malformed()
    }

    fn error_body(&self, _status: u16, message: &str) -> String {
        json!({"error": {"message": message, "type": "server_error", "param": null, "code": null}}).to_string()
    }

    fn context_length_message(&self) -> &'static str {
        "Your input exceeds the context window of this model. Please adjust your input and try again."
    }

    fn huge_line(&self, padding: &str) -> WireEvent {
        huge_line(padding)
    }

    fn wrong_types(&self) -> WireEvent {
        wrong_types()
    }

    fn overflowing_finish(&self, model: &str) -> Vec<WireEvent> {
        overflowing_finish(model)
    }
}

/// One named event.
fn event(kind: &str, mut fields: Value) -> WireEvent {
    fields["type"] = json!(kind);
    fields["sequence_number"] = json!(0);
    format!("event: {kind}\ndata: {fields}\n\n").into_bytes()
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
fn opening(model: &str, thinking: bool) -> Vec<WireEvent> {
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
fn open_message(index: usize) -> Vec<WireEvent> {
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
fn reasoning(text: &str) -> WireEvent {
    event(
        "response.reasoning_summary_text.delta",
        json!({ "item_id": "rs_mock", "output_index": 0, "summary_index": 0, "delta": text }),
    )
}

/// The reasoning item closed, with its encrypted form, and the message opened.
fn end_of_reasoning() -> Vec<WireEvent> {
    let mut events = vec![event(
        "response.output_item.done",
        json!({ "output_index": 0, "item": { "id": "rs_mock", "type": "reasoning", "summary": [],
            "encrypted_content": "ZW5jcnlwdGVkLW1vY2s=" } }),
    )];
    events.extend(open_message(1));
    events
}

/// One text token of the message at `index`.
fn text_in(index: usize, text: &str) -> WireEvent {
    event(
        "response.output_text.delta",
        json!({ "item_id": message_id(index), "output_index": index, "content_index": 0, "delta": text,
            "logprobs": [] }),
    )
}

/// A function call item at `index`: added, its arguments a fragment an event, done.
fn call_at(index: usize, call: &Call<'_>) -> Vec<WireEvent> {
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
fn tool_call() -> Vec<WireEvent> {
    let arguments = ["{\"city\": \"Paris\"}".to_owned()];
    call_at(1, &Call { id: "call_mock", name: "get_weather", arguments: &arguments })
}

/// The message closed, the call made, and `response.completed` with usage.
fn ending(model: &str, end: &Ending<'_>) -> Vec<WireEvent> {
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
fn overflowing_finish(model: &str) -> Vec<WireEvent> {
    let max = u64::MAX;
    let mut done = response(model, "completed");
    done["usage"] = json!({ "input_tokens": max, "output_tokens": max, "total_tokens": max });
    vec![event("response.completed", json!({ "response": done }))]
}

/// An `error` event in the stream.
fn error_event() -> WireEvent {
    event(
        "error",
        json!({ "code": "server_error", "message": "The server had an error processing your request.",
        "param": null }),
    )
}

/// A text delta cut off inside its JSON.
fn malformed() -> WireEvent {
    b"event: response.output_text.delta\ndata: {\"type\": \"response.output_text.delta\", \"delta\": tru\n\n".to_vec()
}

/// An event carrying nothing, with `padding` on its one line.
fn huge_line(padding: &str) -> WireEvent {
    event("response.in_progress", json!({ "response": { "status": "in_progress" }, "padding": padding }))
}

/// A first text delta whose fields have the wrong types.
fn wrong_types() -> WireEvent {
    event("response.output_text.delta", json!({ "output_index": "0", "delta": 42 }))
}

fn tool(body: &Value) -> Option<Offered> {
    if body.get("tool_choice").and_then(Value::as_str) == Some("none") {
        return None;
    }
    let named = str_at(body, "/tool_choice/name");
    let functions = array_at(body, "/tools").iter().filter(|tool| str_at(tool, "/type") == Some("function"));
    pick(functions, named, "/name", &["/parameters"])
}

/// The outputs of the calls the input ends with.
fn results(body: &Value) -> Vec<String> {
    let input = array_at(body, "/input");
    let trailing = input.iter().rev().take_while(|item| str_at(item, "/type") == Some("function_call_output"));
    let mut results: Vec<String> = trailing.map(|item| text_of(item.get("output").unwrap_or(&Value::Null))).collect();
    results.reverse();
    results
}

fn json_asked(body: &Value) -> Option<Json> {
    match str_at(body, "/text/format/type")? {
        "json_object" => Some(Json::Object),
        "json_schema" => Some(Json::Schema(body.pointer("/text/format/schema")?.clone())),
        _ => None,
    }
}

fn images(body: &Value) -> usize {
    count_parts(array_at(body, "/input"), "/content", |part| str_at(part, "/type") == Some("input_image"))
}
