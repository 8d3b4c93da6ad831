//! The streamed answer as Anthropic's named events: `message_start`, then
//! per content block `content_block_start`, its deltas (`text_delta`,
//! `thinking_delta`, `signature_delta`, `input_json_delta`) and
//! `content_block_stop`, then `message_delta` with the stop reason and
//! the cumulative usage, and `message_stop`. A text delta, nearly every
//! event of an answer, is a fixed prefix and the escaped text.

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Value, json};

use super::{error_json, stop_reason, usage_json};
use crate::dialect::sse::{put_json_str, write_named};
use crate::dialect::{ApiError, Encoder};
use crate::event::{Event, FinishReason, ToolCallDelta, Usage};

/// The block being written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    None,
    Text,
    Thinking,
    /// A tool call, by its index among the answer's calls.
    Tool(u32),
}

/// Encodes a committed stream as Anthropic events.
pub struct MessageEncoder {
    id: String,
    model: String,
    usage: Usage,
    started: bool,
    open: Open,
    /// The index the next content block gets.
    next_block: u32,
    stop: Option<FinishReason>,
    /// `event: content_block_delta` and its data up to the delta's type,
    /// for the open block: what every delta of one block repeats.
    delta_head: Vec<u8>,
}

impl MessageEncoder {
    /// An encoder for message `id` from `model`.
    pub fn new(id: &str, model: &str) -> Self {
        MessageEncoder {
            id: id.to_owned(),
            model: model.to_owned(),
            usage: Usage::default(),
            started: false,
            open: Open::None,
            next_block: 0,
            stop: None,
            delta_head: Vec::new(),
        }
    }

    /// `message_start`, once, before the first block: with the input
    /// usage the provider has reported by then.
    fn start(&mut self, out: &mut BytesMut) {
        if self.started {
            return;
        }
        self.started = true;
        let mut usage = usage_json(self.usage);
        usage["output_tokens"] = json!(self.usage.output_tokens.unwrap_or(0));
        let message = json!({
            "id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": [],
            "stop_reason": null, "stop_sequence": null, "usage": usage,
        });
        write_named("message_start", &json!({ "type": "message_start", "message": message }), out);
        out.put_slice(b"event: ping\ndata: {\"type\":\"ping\"}\n\n");
    }

    /// Makes `block` the open block, closing another and starting it with
    /// `content_block` when it is not open yet.
    fn open(&mut self, block: Open, content_block: impl FnOnce() -> Value, out: &mut BytesMut) {
        self.start(out);
        if self.open == block {
            return;
        }
        self.close(out);
        let index = self.next_block;
        let start = json!({ "type": "content_block_start", "index": index, "content_block": content_block() });
        write_named("content_block_start", &start, out);
        self.open = block;
        self.delta_head.clear();
        self.delta_head
            .extend_from_slice(b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":");
        self.delta_head.extend_from_slice(itoa::Buffer::new().format(index).as_bytes());
        self.delta_head.extend_from_slice(b",\"delta\":{\"type\":\"");
    }

    /// `content_block_stop` for the open block, if any.
    fn close(&mut self, out: &mut BytesMut) {
        if self.open == Open::None {
            return;
        }
        write_named("content_block_stop", &json!({ "type": "content_block_stop", "index": self.next_block }), out);
        self.next_block = self.next_block.saturating_add(1);
        self.open = Open::None;
    }

    /// A delta of the open block: its fixed head, the delta's type, and one
    /// string field, escaped, without building a JSON tree.
    fn delta(&self, kind: &str, field: &str, text: &str, out: &mut BytesMut) {
        out.reserve(self.delta_head.len() + 32 + kind.len() + text.len());
        out.put_slice(&self.delta_head);
        out.put_slice(kind.as_bytes());
        out.put_slice(b"\",\"");
        out.put_slice(field.as_bytes());
        out.put_slice(b"\":");
        put_json_str(text, out);
        out.put_slice(b"}}\n\n");
    }

    fn tool_call(&mut self, call: ToolCallDelta, out: &mut BytesMut) {
        let block = Open::Tool(call.index);
        let (id, name) = (call.id.unwrap_or_default(), call.name.unwrap_or_default());
        // A new call's first delta carries its id: even a call of the same
        // index then is a block of its own.
        if !id.is_empty() && self.open == block {
            self.close(out);
        }
        self.open(block, || json!({ "type": "tool_use", "id": id, "name": name, "input": {} }), out);
        if !call.arguments.is_empty() {
            self.delta("input_json_delta", "partial_json", &call.arguments, out);
        }
    }
}

impl Encoder for MessageEncoder {
    fn write_event(&mut self, event: Event, out: &mut BytesMut) {
        match event {
            Event::Usage(usage) => self.usage.merge(usage),
            Event::Text(text) => {
                self.open(Open::Text, || json!({ "type": "text", "text": "" }), out);
                self.delta("text_delta", "text", &text, out);
            }
            Event::Reasoning(text) => {
                self.open(Open::Thinking, || json!({ "type": "thinking", "thinking": "", "signature": "" }), out);
                self.delta("thinking_delta", "thinking", &text, out);
            }
            // The signature ends its thinking block.
            Event::Signature(signature) => {
                self.open(Open::Thinking, || json!({ "type": "thinking", "thinking": "", "signature": "" }), out);
                self.delta("signature_delta", "signature", &signature, out);
                self.close(out);
            }
            Event::ToolCall(call) => self.tool_call(call, out),
            // The Messages API has no log probabilities.
            Event::Logprobs(_) => {}
            Event::Finish(reason) => {
                self.start(out);
                self.close(out);
                self.stop = Some(reason);
            }
        }
    }

    fn write_done(&mut self, out: &mut BytesMut) {
        self.start(out);
        self.close(out);
        let delta = json!({
            "type": "message_delta",
            "delta": { "stop_reason": stop_reason(self.stop.unwrap_or(FinishReason::Stop)), "stop_sequence": null },
            "usage": usage_json(self.usage),
        });
        write_named("message_delta", &delta, out);
        out.put_slice(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    }

    /// An `error` event, and no `message_stop`.
    fn write_failure(&mut self, error: &ApiError, out: &mut BytesMut) {
        write_named("error", &error_json(error), out);
    }

    fn panicked() -> Bytes {
        let mut out = BytesMut::new();
        write_named("error", &error_json(&ApiError::relay_panicked()), &mut out);
        out.freeze()
    }
}

#[cfg(test)]
mod tests;
