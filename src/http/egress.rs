//! Events back into the client's dialect: OpenAI `chat.completion.chunk` SSE,
//! or one `chat.completion` body. The `model` is always the upstream model that
//! answered, so cost dashboards attribute a failover to the fallback.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::core::Failure;
use crate::event::{Event, FinishReason, ToolCallDelta, Usage};

/// The identity every chunk of one answer repeats.
pub struct Answer {
    id: String,
    created: u64,
    model: String,
}

impl Answer {
    /// A new answer from `model`, with a fresh id.
    pub fn new(model: &str) -> Self {
        let created = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        Answer { id: format!("chatcmpl-{:016x}", fastrand::u64(..)), created, model: model.to_owned() }
    }
}

/// Encodes a committed stream as OpenAI chunks, one SSE event per event.
pub struct ChunkEncoder {
    answer: Answer,
    include_usage: bool,
    usage: Usage,
    role_sent: bool,
}

impl ChunkEncoder {
    /// An encoder for one answer; `include_usage` adds the final usage chunk.
    pub fn new(answer: Answer, include_usage: bool) -> Self {
        ChunkEncoder { answer, include_usage, usage: Usage::default(), role_sent: false }
    }

    /// The SSE bytes for one event; usage is held for the end.
    pub fn event(&mut self, event: Event) -> Option<Bytes> {
        let (delta, finish) = match event {
            Event::Usage(usage) => {
                self.usage.merge(usage);
                return None;
            }
            Event::Text(text) => (json!({ "content": text }), None),
            Event::ToolCall(call) => (json!({ "tool_calls": [tool_call(&call)] }), None),
            Event::Finish(reason) => (json!({}), Some(reason)),
        };
        let mut delta = delta;
        if !self.role_sent {
            self.role_sent = true;
            if let Some(fields) = delta.as_object_mut() {
                fields.insert("role".into(), "assistant".into());
            }
        }
        let choice =
            json!({ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish.map(FinishReason::as_str) });
        Some(self.chunk(vec![choice], None))
    }

    /// The end of a complete answer: the usage chunk if asked for, then `[DONE]`.
    pub fn done(&self) -> Bytes {
        let mut out = Vec::new();
        if self.include_usage {
            out.extend_from_slice(&self.chunk(Vec::new(), Some(usage_json(self.usage))));
        }
        out.extend_from_slice(b"data: [DONE]\n\n");
        Bytes::from(out)
    }

    /// The end of a failed answer: an error event and no `[DONE]`, so no client
    /// takes a truncated answer for a complete one.
    pub fn failure(&self, failure: &Failure) -> Bytes {
        let error = json!({ "error": {
            "message": format!("the upstream stream failed after it started: {failure}"),
            "type": "upstream_error",
            "code": failure.kind(),
        }});
        sse(&error)
    }

    fn chunk(&self, choices: Vec<Value>, usage: Option<Value>) -> Bytes {
        let mut chunk = json!({
            "id": self.answer.id,
            "object": "chat.completion.chunk",
            "created": self.answer.created,
            "model": self.answer.model,
            "choices": choices,
        });
        if let (Some(usage), Some(fields)) = (usage, chunk.as_object_mut()) {
            fields.insert("usage".into(), usage);
        }
        sse(&chunk)
    }
}

fn sse(value: &Value) -> Bytes {
    let mut out = b"data: ".to_vec();
    out.extend_from_slice(value.to_string().as_bytes());
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

fn tool_call(call: &ToolCallDelta) -> Value {
    let mut function = Map::new();
    if let Some(name) = &call.name {
        function.insert("name".into(), name.clone().into());
    }
    function.insert("arguments".into(), call.arguments.clone().into());
    let mut value = json!({ "index": call.index, "function": function });
    if let (Some(id), Some(fields)) = (&call.id, value.as_object_mut()) {
        fields.insert("id".into(), id.clone().into());
        fields.insert("type".into(), "function".into());
    }
    value
}

fn usage_json(usage: Usage) -> Value {
    let input = usage.input_tokens.unwrap_or(0);
    let output = usage.output_tokens.unwrap_or(0);
    json!({ "prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output })
}

/// Assembles a whole answer into one `chat.completion` body.
pub fn completion(answer: Answer, events: Vec<Event>) -> Value {
    let mut text = String::new();
    let mut calls: Vec<(String, String, String)> = Vec::new();
    let mut usage = Usage::default();
    let mut finish = FinishReason::Stop;
    for event in events {
        match event {
            Event::Text(fragment) => text.push_str(&fragment),
            Event::ToolCall(delta) => {
                let index = usize::try_from(delta.index).unwrap_or(usize::MAX).min(calls.len());
                if index == calls.len() {
                    calls.push(Default::default());
                }
                let (id, name, arguments) = &mut calls[index];
                if let Some(new_id) = delta.id {
                    *id = new_id;
                }
                if let Some(new_name) = delta.name {
                    *name = new_name;
                }
                arguments.push_str(&delta.arguments);
            }
            Event::Usage(later) => usage.merge(later),
            Event::Finish(reason) => finish = reason,
        }
    }
    let mut message = json!({ "role": "assistant", "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { text.into() } });
    if !calls.is_empty() {
        let calls: Vec<Value> = calls
            .into_iter()
            .map(|(id, name, arguments)| json!({ "id": id, "type": "function", "function": { "name": name, "arguments": arguments } }))
            .collect();
        if let Some(fields) = message.as_object_mut() {
            fields.insert("tool_calls".into(), calls.into());
        }
    }
    json!({
        "id": answer.id,
        "object": "chat.completion",
        "created": answer.created,
        "model": answer.model,
        "choices": [{ "index": 0, "message": message, "logprobs": null, "finish_reason": finish.as_str() }],
        "usage": usage_json(usage),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer() -> Answer {
        Answer { id: "chatcmpl-1".into(), created: 7, model: "m".into() }
    }

    fn call(index: u32, id: Option<&str>, name: Option<&str>, arguments: &str) -> Event {
        Event::ToolCall(ToolCallDelta {
            index,
            id: id.map(str::to_owned),
            name: name.map(str::to_owned),
            arguments: arguments.to_owned(),
        })
    }

    fn data(bytes: &Bytes) -> Value {
        let text = std::str::from_utf8(bytes).unwrap_or_default();
        serde_json::from_str(text.trim_start_matches("data: ").trim_end()).unwrap_or_default()
    }

    #[test]
    fn tool_call_chunks_follow_openai() {
        let mut encoder = ChunkEncoder::new(answer(), true);
        let first = encoder.event(call(0, Some("call_1"), Some("get_weather"), "")).unwrap_or_default();
        assert_eq!(
            data(&first)["choices"][0]["delta"],
            json!({ "role": "assistant", "tool_calls": [{ "index": 0, "id": "call_1", "type": "function",
                "function": { "name": "get_weather", "arguments": "" } }] })
        );
        let more = encoder.event(call(0, None, None, "{\"city\":")).unwrap_or_default();
        assert_eq!(
            data(&more)["choices"][0]["delta"],
            json!({ "tool_calls": [{ "index": 0, "function": { "arguments": "{\"city\":" } }] })
        );
        assert_eq!(encoder.event(Event::Usage(Usage { input_tokens: Some(3), output_tokens: Some(4) })), None);
        let finish = encoder.event(Event::Finish(FinishReason::ToolCalls)).unwrap_or_default();
        assert_eq!(data(&finish)["choices"][0]["finish_reason"], "tool_calls");
        let done = encoder.done();
        let text = std::str::from_utf8(&done).unwrap_or_default();
        assert!(text.contains("\"total_tokens\":7") && text.ends_with("data: [DONE]\n\n"), "{text}");
    }

    #[test]
    fn a_whole_answer_assembles_text_calls_and_usage() {
        let events = vec![
            Event::Usage(Usage { input_tokens: Some(10), output_tokens: None }),
            Event::Text("Checking".into()),
            call(0, Some("call_a"), Some("get_weather"), "{\"city\":"),
            call(0, None, None, "\"Paris\"}"),
            call(1, Some("call_b"), Some("get_time"), "{}"),
            Event::Usage(Usage { input_tokens: None, output_tokens: Some(12) }),
            Event::Finish(FinishReason::ToolCalls),
        ];
        let body = completion(answer(), events);
        let message = &body["choices"][0]["message"];
        assert_eq!(message["content"], "Checking");
        assert_eq!(
            message["tool_calls"][0]["function"],
            json!({ "name": "get_weather", "arguments": "{\"city\":\"Paris\"}" })
        );
        assert_eq!(message["tool_calls"][1]["id"], "call_b");
        assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(body["usage"], json!({ "prompt_tokens": 10, "completion_tokens": 12, "total_tokens": 22 }));
        assert_eq!(body["model"], "m");
    }
}
