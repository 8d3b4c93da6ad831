//! How Anthropic's Messages API writes its stream, as its API reference
//! shows it: named events, content blocks opened, filled and closed.

use std::net::SocketAddr;

use serde_json::{Value, json};

use crate::providers::simulate::{
    Asked, Call, Counts, Ending, Json, Offered, PROMPT_TOKENS, Simulated, WireEvent, array_at, count_parts, named,
    pick, str_at, text_of,
};

/// A simulated Anthropic.
pub struct SimulatedAnthropic;

impl Simulated for SimulatedAnthropic {
    fn base_url(&self, addr: SocketAddr) -> String {
        format!("http://{addr}")
    }

    fn is_chat_path(&self, path: &str) -> bool {
        path.split('?').next() == Some("/v1/messages")
    }

    fn is_count_path(&self, path: &str) -> bool {
        path.split('?').next() == Some("/v1/messages/count_tokens")
    }

    fn auth_header(&self, key: &str) -> (&'static str, String) {
        ("x-api-key", key.to_owned())
    }

    fn call_id_prefix(&self) -> &'static str {
        "toolu_mock"
    }

    fn asked(&self, body: &Value) -> Asked {
        Asked { tool: tool(body), tool_results: results(body), json: json_asked(body), images: images(body) }
    }

    fn opening(&self, model: &str, thinking: bool, cached: usize) -> Vec<WireEvent> {
        opening(model, thinking, cached)
    }

    fn reasoning(&self, _model: &str, text: &str) -> WireEvent {
        delta(0, json!({"type": "thinking_delta", "thinking": text}))
    }

    fn end_of_reasoning(&self) -> Vec<WireEvent> {
        end_of_reasoning()
    }

    fn text_in(&self, _model: &str, block: usize, text: &str) -> WireEvent {
        delta(block, json!({"type": "text_delta", "text": text}))
    }

    fn tool_call(&self, _model: &str) -> Vec<WireEvent> {
        let arguments = ["{\"city\": \"Paris\"}".to_owned()];
        let mut events = call_events(1, &Call { id: "toolu_mock", name: "get_weather", arguments: &arguments });
        events.pop();
        events
    }

    fn ending(&self, _model: &str, end: &Ending<'_>) -> Vec<WireEvent> {
        ending(end)
    }

    fn refusal(&self, _model: &str) -> Vec<WireEvent> {
        vec![
            named("content_block_stop", &json!({"type": "content_block_stop", "index": 0})),
            named(
                "message_delta",
                &json!({"type": "message_delta", "delta": {"stop_reason": "refusal", "stop_sequence": null},
                    "usage": {"output_tokens": 0}}),
            ),
            named("message_stop", &json!({"type": "message_stop"})),
        ]
    }

    fn error_event(&self) -> WireEvent {
        named("error", &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))
    }

    fn malformed(&self) -> WireEvent {
        MALFORMED.as_bytes().to_vec()
    }

    fn error_body(&self, _status: u16, message: &str) -> String {
        json!({"type": "error", "error": {"type": "api_error", "message": message}}).to_string()
    }

    fn context_length_message(&self) -> &'static str {
        "prompt is too long: 210000 tokens > 200000 maximum"
    }

    fn huge_line(&self, padding: &str) -> WireEvent {
        named("ping", &json!({"type": "ping", "padding": padding}))
    }

    fn wrong_types(&self) -> WireEvent {
        wrong_types()
    }

    fn overflowing_finish(&self, _model: &str) -> Vec<WireEvent> {
        overflowing_finish()
    }

    fn token_count(&self, body: &Value) -> String {
        token_count(body)
    }
}

/// A `content_block_delta` in `block`.
fn delta(block: usize, delta: Value) -> WireEvent {
    named("content_block_delta", &json!({"type": "content_block_delta", "index": block, "delta": delta}))
}

/// A text delta cut off inside its JSON.
pub(crate) const MALFORMED: &str =
    "event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"te\n\n";

/// `message_start`, the first block (`thinking` when the answer thinks
/// first) and a ping; `message_start` reports the cached prompt tokens.
pub(crate) fn opening(model: &str, thinking: bool, cached: usize) -> Vec<WireEvent> {
    let mut usage = json!({"input_tokens": PROMPT_TOKENS.saturating_sub(cached), "output_tokens": 1});
    if cached > 0 {
        usage["cache_read_input_tokens"] = json!(cached);
    }
    let block =
        if thinking { json!({"type": "thinking", "thinking": ""}) } else { json!({"type": "text", "text": ""}) };
    vec![
        named(
            "message_start",
            &json!({"type": "message_start", "message": {
            "id": "msg_mock", "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null, "usage": usage}}),
        ),
        named("content_block_start", &json!({"type": "content_block_start", "index": 0, "content_block": block})),
        named("ping", &json!({"type": "ping"})),
    ]
}

/// The thinking block signed and closed, and the text block (1) opened.
pub(crate) fn end_of_reasoning() -> Vec<WireEvent> {
    vec![
        delta(0, json!({"type": "signature_delta", "signature": "c2lnbmF0dXJlLW1vY2s="})),
        named("content_block_stop", &json!({"type": "content_block_stop", "index": 0})),
        named(
            "content_block_start",
            &json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        ),
    ]
}

/// The text block closed, the call made, `message_delta` and `message_stop`.
pub(crate) fn ending(end: &Ending<'_>) -> Vec<WireEvent> {
    let Counts { output, reasoning, .. } = end.counts;
    let mut events = vec![named("content_block_stop", &json!({"type": "content_block_stop", "index": end.text_block}))];
    if let Some(call) = end.call {
        events.extend(call_events(end.text_block + 1, &call));
    }
    let reason = if end.call.is_some() { "tool_use" } else { "end_turn" };
    events.push(named(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": null},
        "usage": {"output_tokens": output + reasoning}}),
    ));
    events.push(named("message_stop", &json!({"type": "message_stop"})));
    events
}

/// A first text delta whose fields have the wrong types.
pub(crate) fn wrong_types() -> WireEvent {
    named(
        "content_block_delta",
        &json!({"type": "content_block_delta", "index": "0", "delta": {"type": "text_delta", "text": ["w"]}}),
    )
}

/// The end of an answer with every usage count `u64::MAX`.
pub(crate) fn overflowing_finish() -> Vec<WireEvent> {
    let max = u64::MAX;
    vec![
        named("content_block_stop", &json!({"type": "content_block_stop", "index": 0})),
        named(
            "message_delta",
            &json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                "usage": {"input_tokens": max, "output_tokens": max}}),
        ),
        named("message_stop", &json!({"type": "message_stop"})),
    ]
}

/// A `tool_use` block in `block`, its input as `input_json_delta`s, closed.
fn call_events(block: usize, call: &Call<'_>) -> Vec<WireEvent> {
    let mut events = vec![named(
        "content_block_start",
        &json!({"type": "content_block_start", "index": block,
        "content_block": {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}}),
    )];
    events.extend(
        call.arguments
            .iter()
            .map(|fragment| delta(block, json!({"type": "input_json_delta", "partial_json": fragment}))),
    );
    events.push(named("content_block_stop", &json!({"type": "content_block_stop", "index": block})));
    events
}

/// The answer to a count request: one token a word of the messages' text,
/// so a test can tell the provider's count from baton's estimate.
pub(crate) fn token_count(body: &Value) -> String {
    let words: usize = array_at(body, "/messages")
        .iter()
        .map(|message| match &message["content"] {
            Value::String(text) => text.split_whitespace().count(),
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|block| block["text"].as_str())
                .map(|text| text.split_whitespace().count())
                .sum(),
            _ => 0,
        })
        .sum();
    json!({ "input_tokens": words }).to_string()
}

fn tool(body: &Value) -> Option<Offered> {
    let choice = str_at(body, "/tool_choice/type");
    if choice == Some("none") {
        return None;
    }
    let named = if choice == Some("tool") { str_at(body, "/tool_choice/name") } else { None };
    pick(array_at(body, "/tools").iter(), named, "/name", &["/input_schema"])
}

fn results(body: &Value) -> Vec<String> {
    let Some(last) = array_at(body, "/messages").last().filter(|m| str_at(m, "/role") == Some("user")) else {
        return Vec::new();
    };
    let results = array_at(last, "/content").iter().filter(|block| str_at(block, "/type") == Some("tool_result"));
    results.map(|block| text_of(block.get("content").unwrap_or(&Value::Null))).collect()
}

fn json_asked(body: &Value) -> Option<Json> {
    if str_at(body, "/output_config/format/type") == Some("json_schema") {
        return Some(Json::Schema(body.pointer("/output_config/format/schema")?.clone()));
    }
    let system = text_of(body.get("system").unwrap_or(&Value::Null)).to_lowercase();
    system.contains("json object").then_some(Json::Object)
}

fn images(body: &Value) -> usize {
    count_parts(array_at(body, "/messages"), "/content", |block| str_at(block, "/type") == Some("image"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_results_json_and_images() {
        let weather = json!({"type": "object", "properties": {"city": {"type": "string"}}});
        let asked = SimulatedAnthropic.asked(&json!({"tools": [{"name": "get_weather", "input_schema": weather}],
            "system": "Answer with one JSON object and nothing else",
            "messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "u"}},
                {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "18C"}]}]}]}));
        assert_eq!(asked.tool_results, vec!["18C".to_owned()]);
        assert_eq!((asked.json, asked.images), (Some(Json::Object), 1));
    }

    #[test]
    fn a_count_is_a_token_a_word() {
        let body = json!({"messages": [{"role": "user", "content": "one two three"},
            {"role": "user", "content": [{"type": "text", "text": "four five"}]}]});
        assert_eq!(token_count(&body), r#"{"input_tokens":5}"#);
    }
}
