//! The streamed answer as OpenAI `chat.completion.chunk` events. Chunks are
//! serialised from borrowed, typed structs straight into the output buffer;
//! a text chunk, nearly every event of an answer, is its answer's fixed
//! prefix (rendered once) and the escaped text.

use bytes::{BufMut, Bytes, BytesMut};
use serde::Serialize;
use serde_json::value::RawValue;

use super::{Answer, OpenAiUsage, error_json};
use crate::dialect::{ApiError, Encoder};
use crate::event::{Event, Logprobs, ToolCallDelta, Usage};

/// Room for a chunk's fixed fields; the content's length is added to it.
const CHUNK_OVERHEAD: usize = 192;

#[derive(Serialize)]
struct Chunk<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: &'a [Choice<'a>],
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<OpenAiUsage>,
}

#[derive(Serialize)]
struct Choice<'a> {
    index: u32,
    delta: Delta<'a>,
    logprobs: Option<ChunkLogprobs<'a>>,
    finish_reason: Option<&'static str>,
}

/// A chunk's `logprobs`: the entries of its tokens.
#[derive(Serialize)]
struct ChunkLogprobs<'a> {
    content: &'a RawValue,
    refusal: Option<()>,
}

#[derive(Serialize, Default)]
struct Delta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<[ToolCall<'a>; 1]>,
}

#[derive(Serialize)]
struct ToolCall<'a> {
    index: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    function: Function<'a>,
}

#[derive(Serialize)]
struct Function<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    arguments: &'a str,
}

/// What follows a text chunk's content: the same for every text chunk.
const TEXT_TAIL: &[u8] = br#"},"logprobs":null,"finish_reason":null}]}

"#;

/// What follows a text chunk's content up to its log probabilities, and after them.
const LOGPROBS_HEAD: &[u8] = br#"},"logprobs":{"content":"#;
const LOGPROBS_TAIL: &[u8] = br#","refusal":null},"finish_reason":null}]}

"#;

/// Encodes a committed stream as OpenAI chunks, one SSE event per event.
pub struct ChunkEncoder {
    answer: Answer,
    include_usage: bool,
    usage: Usage,
    role_sent: bool,
    /// Log probabilities for the next chunk's tokens.
    logprobs: Option<Logprobs>,
    /// `data: ` and a text chunk up to its delta's first field: the part that
    /// only changes between answers.
    text_head: Vec<u8>,
}

impl ChunkEncoder {
    /// An encoder for one answer; `include_usage` adds the final usage chunk.
    pub fn new(answer: Answer, include_usage: bool) -> Self {
        let text_head = text_head(&answer);
        ChunkEncoder { answer, include_usage, usage: Usage::default(), role_sent: false, logprobs: None, text_head }
    }

    /// The SSE bytes for one event; usage is held for the end.
    pub fn event(&mut self, event: Event) -> Option<Bytes> {
        let mut out = BytesMut::new();
        self.write_event(event, &mut out);
        (!out.is_empty()).then(|| out.freeze())
    }

    /// A text chunk: the same bytes the typed structs give, without walking them.
    fn write_text(&mut self, text: &str, out: &mut BytesMut) {
        out.reserve(self.text_head.len() + 32 + text.len() + TEXT_TAIL.len());
        out.put_slice(&self.text_head);
        if !self.role_sent {
            out.put_slice(br#""role":"assistant","#);
            self.role_sent = true;
        }
        out.put_slice(br#""content":"#);
        put_json_str(text, out);
        match self.logprobs.take() {
            None => out.put_slice(TEXT_TAIL),
            Some(logprobs) => {
                out.put_slice(LOGPROBS_HEAD);
                out.put_slice(logprobs.json().as_bytes());
                out.put_slice(LOGPROBS_TAIL);
            }
        }
    }

    /// The end of a complete answer: the usage chunk if asked for, then `[DONE]`.
    pub fn done(&mut self) -> Bytes {
        let mut out = BytesMut::new();
        self.write_done(&mut out);
        out.freeze()
    }

    fn write_chunk(&self, choices: &[Choice<'_>], usage: Option<OpenAiUsage>, size: usize, out: &mut BytesMut) {
        let chunk = Chunk {
            id: &self.answer.id,
            object: "chat.completion.chunk",
            created: self.answer.created,
            model: &self.answer.model,
            choices,
            usage,
        };
        write_sse(&chunk, CHUNK_OVERHEAD + self.answer.model.len() + size, out);
    }
}

impl Encoder for ChunkEncoder {
    fn write_event(&mut self, event: Event, out: &mut BytesMut) {
        let role = (!self.role_sent).then_some("assistant");
        let (delta, finish, size) = match &event {
            Event::Usage(usage) => {
                self.usage.merge(*usage);
                return;
            }
            // Chat Completions has no place for a reasoning signature.
            Event::Signature(_) => return,
            Event::Logprobs(_) => {
                if let Event::Logprobs(logprobs) = event {
                    self.logprobs = Some(logprobs);
                }
                return;
            }
            Event::Text(text) => {
                self.write_text(text, out);
                return;
            }
            Event::ToolCall(call) => {
                let size = call.arguments.len() + call.name.as_ref().map_or(0, String::len);
                (Delta { role, tool_calls: Some([tool_call(call)]), ..Delta::default() }, None, size)
            }
            Event::Reasoning(text) => {
                (Delta { role, reasoning_content: Some(text), ..Delta::default() }, None, text.len())
            }
            Event::Finish(reason) => (Delta { role, ..Delta::default() }, Some(reason.as_str()), 0),
        };
        self.role_sent = true;
        let pending = self.logprobs.take();
        let logprobs = pending.as_ref().map(|logprobs| ChunkLogprobs { content: logprobs.raw(), refusal: None });
        let size = size + pending.as_ref().map_or(0, |logprobs| logprobs.json().len());
        let choices = [Choice { index: 0, delta, logprobs, finish_reason: finish }];
        self.write_chunk(&choices, None, size, out);
    }

    fn write_done(&mut self, out: &mut BytesMut) {
        if self.include_usage {
            self.write_chunk(&[], Some(OpenAiUsage::from(self.usage)), 0, out);
        }
        out.extend_from_slice(b"data: [DONE]\n\n");
    }

    /// An error event, `data: {"error": {...}}`, and no `[DONE]`.
    fn write_failure(&mut self, error: &ApiError, out: &mut BytesMut) {
        write_sse(&error_json(error), 256, out);
    }

    fn panicked() -> Bytes {
        let mut out = BytesMut::new();
        write_sse(&error_json(&ApiError::relay_panicked()), 128, &mut out);
        out.freeze()
    }
}

/// Appends `data: <json>\n\n` to `out`, reserving about `size` bytes first.
fn write_sse(value: &impl Serialize, size: usize, out: &mut BytesMut) {
    let start = out.len();
    out.reserve(size);
    out.put_slice(b"data: ");
    if serde_json::to_writer((&mut *out).writer(), value).is_err() {
        out.truncate(start);
        return;
    }
    out.put_slice(b"\n\n");
}

/// The start of every text chunk of `answer`, as [`Chunk`] serialises it.
fn text_head(answer: &Answer) -> Vec<u8> {
    let mut head = BytesMut::with_capacity(CHUNK_OVERHEAD + answer.id.len() + answer.model.len());
    head.put_slice(br#"data: {"id":"#);
    put_json_str(&answer.id, &mut head);
    head.put_slice(br#","object":"chat.completion.chunk","created":"#);
    head.put_slice(answer.created.to_string().as_bytes());
    head.put_slice(br#","model":"#);
    put_json_str(&answer.model, &mut head);
    head.put_slice(br#","choices":[{"index":0,"delta":{"#);
    head.to_vec()
}

/// Appends `text` as a JSON string. Inlined as it was before the dialect
/// moved out of `http/`: the move put it in another codegen unit, where it
/// became a call of its own on every text chunk.
#[inline]
fn put_json_str(text: &str, out: &mut BytesMut) {
    // Writing into a `BytesMut` cannot fail, and a `str` always serialises.
    let _ = serde_json::to_writer(out.writer(), text);
}

fn tool_call(call: &ToolCallDelta) -> ToolCall<'_> {
    ToolCall {
        index: call.index,
        id: call.id.as_deref(),
        kind: call.id.as_ref().map(|_| "function"),
        function: Function { name: call.name.as_deref(), arguments: &call.arguments },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::event::FinishReason;

    use super::*;

    use crate::dialect::openai::test_support::{answer, call};

    fn data(bytes: &Bytes) -> Value {
        let text = std::str::from_utf8(bytes).unwrap_or_default();
        assert!(text.starts_with("data: ") && text.ends_with("\n\n"), "one SSE event: {text:?}");
        serde_json::from_str(text.trim_start_matches("data: ").trim_end()).unwrap_or_default()
    }

    #[test]
    fn text_chunks_follow_openai() {
        let mut encoder = ChunkEncoder::new(answer(), false);
        let first = data(&encoder.event(Event::Text("Hel\"lo".into())).unwrap_or_default());
        assert_eq!(
            first,
            json!({ "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 7, "model": "m",
                "choices": [{ "index": 0, "delta": { "role": "assistant", "content": "Hel\"lo" }, "logprobs": null, "finish_reason": null }] })
        );
        let next = data(&encoder.event(Event::Text(" you".into())).unwrap_or_default());
        assert_eq!(next["choices"][0]["delta"], json!({ "content": " you" }), "the role comes once");
        let finish = data(&encoder.event(Event::Finish(FinishReason::Length)).unwrap_or_default());
        assert_eq!(finish["choices"][0]["delta"], json!({}));
        assert_eq!(finish["choices"][0]["finish_reason"], "length");
        assert_eq!(&encoder.done()[..], b"data: [DONE]\n\n", "no usage chunk unless asked for");
    }

    #[test]
    fn text_chunks_are_the_bytes_the_typed_chunk_gives() {
        let answer = Answer { id: "chatcmpl-\"x\"".into(), created: 1_700_000_000, model: "m/é\\1".into() };
        let mut encoder = ChunkEncoder::new(answer, false);
        for (i, text) in ["Hel\"lo", " wörld\n", "\u{1}\t</script>", "😀 \\ done"].into_iter().enumerate() {
            let role = (i == 0).then_some("assistant");
            let choices = [Choice {
                index: 0,
                delta: Delta { role, content: Some(text), ..Delta::default() },
                logprobs: None,
                finish_reason: None,
            }];
            let mut typed = BytesMut::new();
            encoder.write_chunk(&choices, None, text.len(), &mut typed);
            let fast = encoder.event(Event::Text(text.into())).unwrap_or_default();
            assert_eq!(fast, typed.freeze(), "text {text:?}");
        }
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
        assert_eq!(
            encoder.event(Event::Usage(Usage { input_tokens: Some(3), output_tokens: Some(4), ..Usage::default() })),
            None
        );
        let finish = encoder.event(Event::Finish(FinishReason::ToolCalls)).unwrap_or_default();
        assert_eq!(data(&finish)["choices"][0]["finish_reason"], "tool_calls");
        let done = encoder.done();
        let text = std::str::from_utf8(&done).unwrap_or_default();
        assert!(text.contains("\"total_tokens\":7") && text.ends_with("data: [DONE]\n\n"), "{text}");
        assert!(text.contains("\"choices\":[]"), "the usage chunk has no choices: {text}");
    }
}
