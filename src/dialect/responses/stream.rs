//! The streamed answer as the Responses API's events: `response.created`
//! and `response.in_progress`, then per output item `output_item.added`,
//! its parts and deltas and their `.done`s, and `output_item.done`, then
//! `response.completed` (or `response.incomplete` when a limit cut the
//! answer) with the whole output and usage. Every event carries its
//! `sequence_number`. A text delta, nearly every event of an answer, is a
//! fixed prefix, the escaped text and a fixed tail.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{BufMut, BytesMut};
use serde::Serialize;
use serde_json::{Value, json};

use super::Options;
use crate::dialect::sse::{put_json_str, write_named};
use crate::event::{Event, FinishReason, Logprobs, ToolCallDelta, Usage};
use crate::random_id::random_id;
use crate::request::FREEFORM_INPUT;
use fields::{ARGUMENTS_DELTA, DeltaKind, Done, ItemDone, PartAt, Tagged, Wrapped};

/// What a response id starts with, and how many hex digits follow.
const RESPONSE_PREFIX: &str = "resp_";
const RESPONSE_DIGITS: usize = 32;

/// The id of the response whose output holds item `item_id`, for an id
/// this encoder made (`msg_`, `rs_`, `fc_` or `ctc_`, the response's digits,
/// the item's place); none for any other id.
pub fn response_of_item(item_id: &str) -> Option<String> {
    let (_, rest) = item_id.split_once('_')?;
    let digits = rest.get(..RESPONSE_DIGITS).filter(|_| rest.len() == RESPONSE_DIGITS + 4)?;
    rest.bytes().all(|b| b.is_ascii_hexdigit()).then(|| format!("{RESPONSE_PREFIX}{digits}"))
}

/// The output item being written.
enum Open {
    /// An assistant message of one `output_text` part, and the log
    /// probabilities of its tokens when the client asked for them.
    Message { id: String, text: String, logprobs: Vec<Logprobs> },
    /// A reasoning summary, and the reasoning in encrypted form when the
    /// target (one that speaks Responses) gave it.
    Reasoning { id: String, text: String, encrypted: Option<String> },
    /// A function call, by its index among the answer's calls; `freeform`
    /// when it calls one of the client's `custom` tools, whose input is
    /// unwrapped from the arguments once they are whole.
    Call { id: String, index: u32, call_id: String, name: String, arguments: String, freeform: bool },
}

impl Open {
    fn id(&self) -> &str {
        match self {
            Open::Message { id, .. } | Open::Reasoning { id, .. } | Open::Call { id, .. } => id,
        }
    }
}

/// Encodes a committed stream as Responses events.
pub struct ResponseEncoder {
    id: String,
    created_at: u64,
    model: String,
    options: Options,
    sequence: u64,
    started: bool,
    /// The items already done, in order, as the final `response` lists them.
    output: Vec<Value>,
    open: Option<Open>,
    usage: Usage,
    finish: Option<FinishReason>,
    /// The `item_id` and `output_index` fields of the open item's deltas.
    delta_head: Vec<u8>,
    /// Log probabilities for the next text delta's tokens.
    logprobs: Option<Logprobs>,
}

impl ResponseEncoder {
    /// An encoder for one answer from `model`.
    pub fn new(model: &str, options: Options) -> Self {
        let created_at = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        ResponseEncoder {
            id: random_id(RESPONSE_PREFIX, RESPONSE_DIGITS),
            created_at,
            model: model.to_owned(),
            options,
            sequence: 0,
            started: false,
            output: Vec::new(),
            open: None,
            usage: Usage::default(),
            finish: None,
            delta_head: Vec::new(),
            logprobs: None,
        }
    }

    /// The `response` object as it stands: in progress until the answer
    /// ends, then completed, incomplete (a limit cut it) or failed.
    pub fn response(&self) -> Value {
        self.response_with(Value::Array(self.output.clone()))
    }

    /// The whole answer's `response` object, once it has ended: the open
    /// item closed, the output moved in rather than copied.
    pub fn into_response(mut self) -> Value {
        let mut ignored = BytesMut::new();
        self.close(&mut ignored);
        self.finish.get_or_insert(FinishReason::Stop);
        let output = Value::Array(std::mem::take(&mut self.output));
        let response = self.response_with(output);
        self.keep(&response);
        response
    }

    /// Hands the whole answer's `response` to the keeper, if it is kept.
    fn keep(&mut self, response: &Value) {
        if let Some(keeper) = self.options.keeper.take() {
            keeper.keep(response, self.options.maker.as_deref().unwrap_or_default());
        }
    }

    /// The `response` object with `output`.
    fn response_with(&self, output: Value) -> Value {
        let (status, incomplete) = match self.finish {
            Some(FinishReason::Length) => ("incomplete", json!({ "reason": "max_output_tokens" })),
            Some(FinishReason::ContentFilter) => ("incomplete", json!({ "reason": "content_filter" })),
            Some(FinishReason::Stop | FinishReason::ToolCalls) => ("completed", Value::Null),
            None => ("in_progress", Value::Null),
        };
        let mut response = self.options.echo.clone();
        let defaults = [
            ("instructions", Value::Null),
            ("max_output_tokens", Value::Null),
            ("metadata", json!({})),
            ("parallel_tool_calls", json!(true)),
            ("previous_response_id", Value::Null),
            ("reasoning", json!({ "effort": null, "summary": null })),
            ("temperature", Value::Null),
            ("text", json!({ "format": { "type": "text" } })),
            ("tool_choice", json!("auto")),
            ("tools", json!([])),
            ("top_p", Value::Null),
            ("user", Value::Null),
        ];
        for (name, value) in defaults {
            response.entry(name).or_insert(value);
        }
        let fixed = [
            ("id", json!(self.id)),
            ("object", json!("response")),
            ("created_at", json!(self.created_at)),
            ("status", json!(status)),
            ("error", Value::Null),
            ("incomplete_details", incomplete),
            ("model", json!(self.model)),
            ("output", output),
            ("store", json!(self.options.keeper.is_some())),
            ("truncation", json!("disabled")),
            ("usage", if self.finish.is_some() { usage_json(self.usage) } else { Value::Null }),
        ];
        response.extend(fixed.into_iter().map(|(name, value)| (name.to_owned(), value)));
        Value::Object(response)
    }

    /// `response.created` and `response.in_progress`, once.
    fn start(&mut self, out: &mut BytesMut) {
        if self.started {
            return;
        }
        self.started = true;
        let response = Wrapped { response: self.response() };
        self.event("response.created", &response, out);
        self.event("response.in_progress", &response, out);
    }

    /// One event: its type and sequence number, then `fields`.
    fn event(&mut self, kind: &str, fields: &impl Serialize, out: &mut BytesMut) {
        write_named(kind, &Tagged { kind, sequence_number: self.sequence, fields }, out);
        self.sequence += 1;
    }

    fn output_index(&self) -> usize {
        self.output.len()
    }

    /// The id of the output item about to open: `prefix`, this response's
    /// own id digits, then the item's place, so an `item_reference` to it
    /// names the kept response it is in (see [`response_of_item`]).
    fn item_id(&self, prefix: &str) -> String {
        let digits = self.id.strip_prefix(RESPONSE_PREFIX).unwrap_or(&self.id);
        format!("{prefix}{digits}{:04x}", self.output_index())
    }

    /// Opens an item for `event` unless one of its kind is open; closes any other.
    fn open_for(&mut self, event: &Event, out: &mut BytesMut) {
        self.start(out);
        let fits = match (&self.open, event) {
            (Some(Open::Message { .. }), Event::Text(_))
            | (Some(Open::Reasoning { .. }), Event::Reasoning(_) | Event::Signature(_)) => true,
            (Some(Open::Call { index, .. }), Event::ToolCall(call)) => call.id.is_none() && call.index == *index,
            _ => false,
        };
        if fits {
            return;
        }
        self.close(out);
        let open = match event {
            Event::Text(_) => Open::Message { id: self.item_id("msg_"), text: String::new(), logprobs: Vec::new() },
            Event::Reasoning(_) | Event::Signature(_) => {
                Open::Reasoning { id: self.item_id("rs_"), text: String::new(), encrypted: None }
            }
            Event::ToolCall(call) => {
                let name = call.name.clone().unwrap_or_default();
                let freeform = self.options.custom_tools.contains(&name);
                Open::Call {
                    id: self.item_id(if freeform { "ctc_" } else { "fc_" }),
                    index: call.index,
                    call_id: call.id.clone().unwrap_or_default(),
                    name,
                    arguments: String::new(),
                    freeform,
                }
            }
            _ => return,
        };
        let index = self.output_index();
        let (item, part) = match &open {
            Open::Message { id, .. } => (
                json!({ "id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": [] }),
                Some((
                    "response.content_part.added",
                    json!({ "item_id": id, "output_index": index,
                    "content_index": 0, "part": text_part(String::new(), &[]) }),
                )),
            ),
            Open::Reasoning { id, .. } => (
                json!({ "id": id, "type": "reasoning", "summary": [] }),
                Some((
                    "response.reasoning_summary_part.added",
                    json!({ "item_id": id, "output_index": index,
                    "summary_index": 0, "part": { "type": "summary_text", "text": "" } }),
                )),
            ),
            Open::Call { id, call_id, name, freeform: true, .. } => (
                json!({ "id": id, "type": "custom_tool_call", "status": "in_progress", "input": "",
                    "call_id": call_id, "name": name }),
                None,
            ),
            Open::Call { id, call_id, name, .. } => (
                json!({ "id": id, "type": "function_call", "status": "in_progress", "arguments": "",
                    "call_id": call_id, "name": name }),
                None,
            ),
        };
        self.event("response.output_item.added", &ItemDone { output_index: index, item: &item }, out);
        if let Some((kind, fields)) = part {
            self.event(kind, &fields, out);
        }
        let part_index = match open {
            Open::Message { .. } => Some("content_index"),
            Open::Reasoning { .. } => Some("summary_index"),
            Open::Call { .. } => None,
        };
        self.delta_head = delta_head(open.id(), index, part_index);
        self.open = Some(open);
    }

    /// A delta of the open item, without building a JSON tree: the delta
    /// kind's fixed start, the sequence number, the item's fields, the text
    /// and the kind's fixed end.
    fn delta(&mut self, kind: &DeltaKind<'_>, text: &str, out: &mut BytesMut) {
        out.reserve(kind.head.len() + 24 + self.delta_head.len() + text.len() + kind.tail.len());
        out.put_slice(kind.head);
        out.put_slice(itoa::Buffer::new().format(self.sequence).as_bytes());
        self.sequence += 1;
        out.put_slice(&self.delta_head);
        out.put_slice(b",\"delta\":");
        put_json_str(text, out);
        out.put_slice(kind.tail);
    }

    /// Ends the open item: its `.done` events, and it joins the output.
    /// The item is built first and the events borrow from it, so the
    /// answer's text is copied once, not once per event.
    fn close(&mut self, out: &mut BytesMut) {
        let Some(open) = self.open.take() else { return };
        let output_index = self.output_index();
        let item = match open {
            Open::Message { id, text, logprobs } => {
                let mut item = json!({ "id": id, "type": "message", "status": "completed", "role": "assistant" });
                item["content"] = Value::Array(vec![text_part(text, &logprobs)]);
                let part = &item["content"][0];
                let at = PartAt { item_id: &id, output_index, content_index: Some(0), summary_index: None };
                let text = Done { at, text: Some(&part["text"]), logprobs: Some(&part["logprobs"]), ..Done::default() };
                self.event("response.output_text.done", &text, out);
                self.event("response.content_part.done", &Done { at, part: Some(part), ..Done::default() }, out);
                item
            }
            Open::Reasoning { id, text, encrypted } => {
                let mut summary = json!({ "type": "summary_text" });
                summary["text"] = Value::String(text);
                let mut item = json!({ "id": id, "type": "reasoning" });
                item["summary"] = Value::Array(vec![summary]);
                if let Some(encrypted) = encrypted {
                    item["encrypted_content"] = Value::String(encrypted);
                }
                let part = &item["summary"][0];
                let at = PartAt { item_id: &id, output_index, content_index: None, summary_index: Some(0) };
                let text = Done { at, text: Some(&part["text"]), ..Done::default() };
                self.event("response.reasoning_summary_text.done", &text, out);
                self.event(
                    "response.reasoning_summary_part.done",
                    &Done { at, part: Some(part), ..Done::default() },
                    out,
                );
                item
            }
            Open::Call { id, call_id, name, arguments, freeform: true, .. } => {
                let mut item = json!({ "id": id, "type": "custom_tool_call", "status": "completed", "call_id": call_id, "name": name });
                item["input"] = Value::String(freeform_input(arguments));
                let at = PartAt { item_id: &id, output_index, content_index: None, summary_index: None };
                let input = json!({ "item_id": id, "output_index": output_index, "delta": item["input"] });
                self.event("response.custom_tool_call_input.delta", &input, out);
                let done = Done { at, input: Some(&item["input"]), ..Done::default() };
                self.event("response.custom_tool_call_input.done", &done, out);
                item
            }
            Open::Call { id, call_id, name, arguments, .. } => {
                let mut item = json!({ "id": id, "type": "function_call", "status": "completed", "call_id": call_id, "name": name });
                item["arguments"] = Value::String(arguments);
                let at = PartAt { item_id: &id, output_index, content_index: None, summary_index: None };
                let done =
                    Done { at, name: Some(&item["name"]), arguments: Some(&item["arguments"]), ..Done::default() };
                self.event("response.function_call_arguments.done", &done, out);
                item
            }
        };
        self.event("response.output_item.done", &ItemDone { output_index, item: &item }, out);
        self.output.push(item);
    }

    fn tool_call(&mut self, call: &ToolCallDelta, out: &mut BytesMut) {
        if call.arguments.is_empty() {
            return;
        }
        if let Some(Open::Call { arguments, freeform, .. }) = &mut self.open {
            arguments.push_str(&call.arguments);
            // A freeform input is unwrapped from its arguments once they are whole.
            if *freeform {
                return;
            }
        }
        self.delta(&ARGUMENTS_DELTA, &call.arguments, out);
    }
}

/// A freeform tool's input: the one string its function took, or the
/// arguments as the model wrote them when they are not that.
fn freeform_input(arguments: String) -> String {
    match serde_json::from_str::<Value>(&arguments) {
        Ok(Value::Object(mut fields)) if fields.len() == 1 => match fields.remove(FREEFORM_INPUT) {
            Some(Value::String(input)) => input,
            _ => arguments,
        },
        _ => arguments,
    }
}

/// Token counts as the Responses API reports them, details included.
fn usage_json(usage: Usage) -> Value {
    let (input, output) = (usage.input_tokens.unwrap_or(0), usage.output_tokens.unwrap_or(0));
    json!({
        "input_tokens": input,
        "input_tokens_details": { "cached_tokens": usage.cached_input_tokens.unwrap_or(0) },
        "output_tokens": output,
        "output_tokens_details": { "reasoning_tokens": usage.reasoning_tokens.unwrap_or(0) },
        "total_tokens": input.saturating_add(output),
    })
}

/// An `output_text` part; the text is moved in (`json!` would copy it).
fn text_part(text: String, logprobs: &[Logprobs]) -> Value {
    let entries = logprobs.iter().flat_map(|list| serde_json::from_str::<Vec<Value>>(list.json()).unwrap_or_default());
    let mut part = json!({ "type": "output_text", "annotations": [] });
    part["logprobs"] = Value::Array(entries.collect());
    part["text"] = Value::String(text);
    part
}

/// The fields after `sequence_number` that every delta of one item repeats:
/// its id, its place, and the index of its one part, if it has parts.
fn delta_head(id: &str, output_index: usize, part_index: Option<&str>) -> Vec<u8> {
    let mut head = BytesMut::new();
    head.put_slice(b",\"item_id\":");
    put_json_str(id, &mut head);
    head.put_slice(b",\"output_index\":");
    head.put_slice(itoa::Buffer::new().format(output_index).as_bytes());
    if let Some(name) = part_index {
        head.put_slice(b",\"");
        head.put_slice(name.as_bytes());
        head.put_slice(b"\":0");
    }
    head.to_vec()
}

mod encode;
mod fields;
#[cfg(test)]
mod tests;
