//! The Responses API's encoder, event by event: each text, reasoning or
//! tool-call delta in its item, the usage and finish held for the end, and
//! the end itself, `response.completed` or `response.failed`.

use bytes::{Bytes, BytesMut};
use serde_json::{Value, json};

use super::fields::{DeltaKind, SUMMARY_DELTA, TEXT_DELTA, Wrapped};
use super::{Open, ResponseEncoder};
use crate::dialect::sse::write_named;
use crate::dialect::{ApiError, Encoder};
use crate::event::{Event, FinishReason};

impl Encoder for ResponseEncoder {
    fn write_event(&mut self, event: Event, out: &mut BytesMut) {
        match &event {
            Event::Usage(usage) => return self.usage.merge(*usage),
            Event::Logprobs(_) => {
                if let Event::Logprobs(logprobs) = event {
                    self.logprobs = Some(logprobs);
                }
                return;
            }
            Event::Finish(reason) => {
                self.start(out);
                self.close(out);
                self.finish = Some(*reason);
                return;
            }
            Event::Text(_) | Event::Reasoning(_) | Event::ToolCall(_) | Event::Signature(_) => {}
        }
        self.open_for(&event, out);
        match event {
            Event::Text(text) => {
                let logprobs = self.logprobs.take();
                if let Some(Open::Message { text: all, logprobs: each, .. }) = &mut self.open {
                    all.push_str(&text);
                    each.extend(logprobs.clone());
                }
                match logprobs {
                    None => self.delta(&TEXT_DELTA, &text, out),
                    Some(logprobs) => {
                        let tail = [b",\"logprobs\":", logprobs.json().as_bytes(), b"}\n\n"].concat();
                        self.delta(&DeltaKind { head: TEXT_DELTA.head, tail: &tail }, &text, out);
                    }
                }
            }
            Event::Reasoning(text) => {
                if let Some(Open::Reasoning { text: all, .. }) = &mut self.open {
                    all.push_str(&text);
                }
                self.delta(&SUMMARY_DELTA, &text, out);
            }
            Event::ToolCall(call) => self.tool_call(&call, out),
            // The encrypted reasoning (only a Responses target's reaches here) ends its item.
            Event::Signature(encrypted) => {
                if let Some(Open::Reasoning { encrypted: slot, .. }) = &mut self.open {
                    *slot = Some(encrypted);
                }
                self.close(out);
            }
            Event::Usage(_) | Event::Logprobs(_) | Event::Finish(_) => {}
        }
    }

    fn write_done(&mut self, out: &mut BytesMut) {
        self.start(out);
        self.close(out);
        let finish = *self.finish.get_or_insert(FinishReason::Stop);
        let kind = match finish {
            FinishReason::Length | FinishReason::ContentFilter => "response.incomplete",
            FinishReason::Stop | FinishReason::ToolCalls => "response.completed",
        };
        let output = Value::Array(std::mem::take(&mut self.output));
        let response = self.response_with(output);
        self.keep(&response);
        self.event(kind, &Wrapped { response }, out);
    }

    /// `response.failed`, never `response.completed`.
    fn write_failure(&mut self, error: &ApiError, out: &mut BytesMut) {
        let mut response = self.response();
        response["status"] = json!("failed");
        response["error"] = json!({ "code": "server_error", "message": error.message() });
        self.event("response.failed", &Wrapped { response }, out);
    }

    fn panicked() -> Bytes {
        let mut out = BytesMut::new();
        let failed = json!({ "type": "response.failed", "response": { "object": "response", "status": "failed",
            "error": { "code": "server_error", "message": ApiError::relay_panicked().message() } } });
        write_named("response.failed", &failed, &mut out);
        out.freeze()
    }
}
