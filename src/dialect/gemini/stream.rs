//! The answer as Gemini's `GenerateContentResponse`s: streamed, each text or
//! thought fragment its own chunk (`data: {…}` and a blank line, nothing
//! else, as Google's clients require), and a last chunk with the function
//! calls (Gemini sends a call whole), the `finishReason` and the usage;
//! or all of it as one response. A text chunk is a fixed prefix, the
//! escaped text and a fixed suffix.

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Value, json};

use super::error_json;
use crate::dialect::sse::put_json_str;
use crate::dialect::{ApiError, Encoder};
use crate::event::{Event, FinishReason, ToolCallDelta, Usage};

/// What every text chunk starts with, up to the text.
const TEXT_HEAD: &[u8] = br#"data: {"candidates":[{"content":{"parts":[{"text":"#;

/// A function call being gathered from its fragments.
#[derive(Default)]
struct Call {
    index: u32,
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Encodes a committed stream as Gemini chunks.
pub struct GenerateEncoder {
    /// What follows a text part's text to the chunk's end.
    text_tail: Vec<u8>,
    /// The same after a thought's text, marked as one.
    thought_tail: Vec<u8>,
    model: String,
    id: String,
    answer: Gathered,
}

/// What an answer holds back for its last chunk (or its whole response).
#[derive(Default)]
struct Gathered {
    calls: Vec<Call>,
    usage: Usage,
    finish: Option<FinishReason>,
}

impl Gathered {
    /// Takes in one event, and gives back text and thoughts, which it does not hold.
    fn gather(&mut self, event: Event) -> Option<Event> {
        match event {
            Event::ToolCall(call) => self.call(call),
            Event::Usage(usage) => self.usage = usage,
            Event::Finish(reason) => self.finish = Some(reason),
            Event::Signature(_) | Event::Logprobs(_) => {}
            text @ (Event::Text(_) | Event::Reasoning(_)) => return Some(text),
        }
        None
    }

    fn call(&mut self, delta: ToolCallDelta) {
        match self.calls.iter_mut().find(|call| call.index == delta.index) {
            Some(call) => call.arguments.push_str(&delta.arguments),
            None => self.calls.push(Call {
                index: delta.index,
                id: delta.id,
                name: delta.name.unwrap_or_default(),
                arguments: delta.arguments,
            }),
        }
    }

    /// The function calls as parts, each whole.
    fn call_parts(&self) -> Vec<Value> {
        self.calls
            .iter()
            .map(|call| {
                let args = match serde_json::from_str::<Value>(&call.arguments) {
                    Ok(object @ Value::Object(_)) => object,
                    _ if call.arguments.trim().is_empty() => json!({}),
                    // Arguments that are not an object cannot be Gemini's
                    // `args`: they go as the one argument they are.
                    _ => json!({ "arguments": call.arguments }),
                };
                let mut function = json!({ "name": call.name, "args": args });
                if let Some(id) = &call.id {
                    function["id"] = json!(id);
                }
                json!({ "functionCall": function })
            })
            .collect()
    }

    /// The answer's last response (the last chunk, or the whole answer):
    /// `parts`, then why it ended and the usage.
    fn last_response(&self, parts: Vec<Value>, model: &str, id: &str) -> Value {
        let finish = finish_reason(self.finish.unwrap_or(FinishReason::Stop));
        json!({
            "candidates": [{ "content": { "parts": parts, "role": "model" }, "finishReason": finish, "index": 0 }],
            "usageMetadata": usage_json(self.usage),
            "modelVersion": model,
            "responseId": id,
        })
    }
}

impl GenerateEncoder {
    /// An encoder for response `id` from `model`.
    pub fn new(model: &str, id: &str) -> Self {
        let mut tail = br#"}],"role":"model"},"index":0}],"modelVersion":"#.to_vec();
        tail.extend_from_slice(Value::from(model).to_string().as_bytes());
        tail.extend_from_slice(br#","responseId":"#);
        tail.extend_from_slice(Value::from(id).to_string().as_bytes());
        tail.extend_from_slice(b"}\n\n");
        let mut thought_tail = br#","thought":true"#.to_vec();
        thought_tail.extend_from_slice(&tail);
        GenerateEncoder {
            text_tail: tail,
            thought_tail,
            model: model.to_owned(),
            id: id.to_owned(),
            answer: Gathered::default(),
        }
    }
}

impl Encoder for GenerateEncoder {
    fn write_event(&mut self, event: Event, out: &mut BytesMut) {
        let (text, tail) = match self.answer.gather(event) {
            Some(Event::Text(text)) => (text, &self.text_tail),
            Some(Event::Reasoning(text)) => (text, &self.thought_tail),
            _ => return,
        };
        out.put_slice(TEXT_HEAD);
        put_json_str(&text, out);
        out.put_slice(tail);
    }

    fn write_done(&mut self, out: &mut BytesMut) {
        let mut parts = self.answer.call_parts();
        if parts.is_empty() {
            parts.push(json!({ "text": "" }));
        }
        write_data(&self.answer.last_response(parts, &self.model, &self.id), out);
    }

    /// Google's error object alone, its `code` an integer, and never a
    /// `finishReason`: `google-genai` raises it as the status it names.
    fn write_failure(&mut self, error: &ApiError, out: &mut BytesMut) {
        write_data(&error_json(error), out);
    }

    fn panicked() -> Bytes {
        Bytes::from_static(
            b"data: {\"error\":{\"code\":500,\"message\":\"the relay failed inside the gateway\",\"status\":\"INTERNAL\"}}\n\n",
        )
    }
}

/// Appends `data: <json>` and a blank line.
fn write_data(value: &Value, out: &mut BytesMut) {
    out.put_slice(b"data: ");
    out.put_slice(value.to_string().as_bytes());
    out.put_slice(b"\n\n");
}

/// A whole answer as one `GenerateContentResponse`: the thoughts, the text
/// and the calls as parts, in that order.
pub(super) fn whole(model: &str, id: &str, events: Vec<Event>) -> Vec<u8> {
    let mut answer = Gathered::default();
    let (mut thoughts, mut text) = (String::new(), String::new());
    for event in events {
        match answer.gather(event) {
            Some(Event::Text(more)) => text.push_str(&more),
            Some(Event::Reasoning(more)) => thoughts.push_str(&more),
            _ => {}
        }
    }
    let mut parts = Vec::new();
    if !thoughts.is_empty() {
        parts.push(json!({ "text": thoughts, "thought": true }));
    }
    if !text.is_empty() || answer.calls.is_empty() {
        parts.push(json!({ "text": text }));
    }
    parts.extend(answer.call_parts());
    serde_json::to_vec(&answer.last_response(parts, model, id)).unwrap_or_default()
}

/// Gemini's `finishReason`: a tool call ends with `STOP`, as Gemini's own do.
fn finish_reason(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop | FinishReason::ToolCalls => "STOP",
        FinishReason::Length => "MAX_TOKENS",
        FinishReason::ContentFilter => "SAFETY",
    }
}

/// Token counts as Gemini reports them: `candidatesTokenCount` leaves out
/// the thoughts, which are counted apart, and the total is all of them.
fn usage_json(usage: Usage) -> Value {
    let input = usage.input_tokens.unwrap_or(0);
    let output = usage.output_tokens.unwrap_or(0);
    let thoughts = usage.reasoning_tokens.unwrap_or(0).min(output);
    let mut out = json!({
        "promptTokenCount": input,
        "candidatesTokenCount": output - thoughts,
        "totalTokenCount": input.saturating_add(output),
    });
    if thoughts > 0 {
        out["thoughtsTokenCount"] = json!(thoughts);
    }
    if let Some(cached) = usage.cached_input_tokens {
        out["cachedContentTokenCount"] = json!(cached);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::test_support::{call, encoded};

    /// Each `data:` payload of `bytes`, parsed; and that nothing else is there.
    fn chunks(bytes: &[u8]) -> Vec<Value> {
        let text = std::str::from_utf8(bytes).unwrap_or_default();
        assert!(text.ends_with("\n\n"), "{text}");
        text.split_terminator("\n\n")
            .map(|event| {
                let data = event.strip_prefix("data: ").unwrap_or_else(|| panic!("only data lines: {event:?}"));
                assert!(!data.contains('\n'), "one line an event: {event:?}");
                serde_json::from_str(data).unwrap_or_else(|err| panic!("{err}: {data}"))
            })
            .collect()
    }

    #[test]
    fn text_streams_as_chunks_and_the_calls_finish_and_usage_come_last() {
        let usage =
            Usage { input_tokens: Some(10), output_tokens: Some(7), reasoning_tokens: Some(2), ..Usage::default() };
        let answer = vec![
            Event::Reasoning("hmm".into()),
            Event::Text("Hel\"lo".into()),
            call(0, Some("c1"), Some("lookup"), "{\"q\":"),
            call(0, None, None, "\"x\"}"),
            Event::Usage(usage),
            Event::Finish(FinishReason::ToolCalls),
        ];
        let chunks = chunks(&encoded(GenerateEncoder::new("gem", "r1"), answer));
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks[0]["candidates"][0]["content"]["parts"][0], json!({ "text": "hmm", "thought": true }));
        assert_eq!(chunks[1]["candidates"][0]["content"], json!({ "parts": [{ "text": "Hel\"lo" }], "role": "model" }));
        assert_eq!(chunks[1]["modelVersion"], "gem");
        assert_eq!(chunks[1]["responseId"], "r1");
        let last = &chunks[2];
        assert_eq!(
            last["candidates"][0]["content"]["parts"],
            json!([{ "functionCall": { "name": "lookup", "args": { "q": "x" }, "id": "c1" } }])
        );
        assert_eq!(last["candidates"][0]["finishReason"], "STOP");
        assert_eq!(
            last["usageMetadata"],
            json!({ "promptTokenCount": 10, "candidatesTokenCount": 5, "thoughtsTokenCount": 2, "totalTokenCount": 17 })
        );
    }

    #[test]
    fn a_failure_is_google_s_error_alone_and_no_finish() {
        let mut encoder = GenerateEncoder::new("gem", "r1");
        let mut out = BytesMut::new();
        encoder.write_event(Event::Text("hi".into()), &mut out);
        let failed = ApiError::new(
            http::StatusCode::BAD_GATEWAY,
            crate::dialect::ErrorKind::Upstream,
            "idle_timeout",
            "it broke",
        );
        encoder.write_failure(&failed, &mut out);
        let chunks = chunks(&out);
        let last = chunks.last().cloned().unwrap_or_default();
        assert_eq!(last, json!({ "error": { "code": 502, "message": "it broke", "status": "UNAVAILABLE" } }));
        assert!(!String::from_utf8_lossy(&out).contains("finishReason"));
        let panicked = chunks_of_panic();
        assert_eq!(panicked["error"]["code"], 500);
    }

    fn chunks_of_panic() -> Value {
        chunks(&GenerateEncoder::panicked()).pop().unwrap_or_default()
    }

    #[test]
    fn a_whole_answer_is_one_response() {
        let answer = vec![Event::Text("a".into()), Event::Text("b".into()), Event::Finish(FinishReason::Length)];
        let body: Value = serde_json::from_slice(&whole("gem", "r2", answer)).unwrap_or_default();
        assert_eq!(body["candidates"][0]["content"]["parts"], json!([{ "text": "ab" }]));
        assert_eq!(body["candidates"][0]["finishReason"], "MAX_TOKENS");
        assert_eq!(body["responseId"], "r2");
    }
}
