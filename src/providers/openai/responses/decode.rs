//! Responses events → events. Text, reasoning summaries and function-call
//! arguments come as deltas of their output item; `response.completed` (or
//! `response.incomplete`) ends the answer with its usage, and
//! `response.failed` or an `error` event fails it. Events baton has no use
//! for (`.done`s, parts added, annotations, built-in tools' progress) give
//! nothing.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::event::{Event, FinishReason, Logprobs, ToolCallDelta, Usage};
use crate::providers::{Decoder, ProviderError, SseEvent};
use crate::request::FREEFORM_INPUT;

#[derive(Default)]
pub(super) struct ResponsesDecoder {
    /// The output index of each function call so far, in order: a call's
    /// place in this list is its index among the answer's calls.
    calls: Vec<u64>,
    done: bool,
}

/// An event as far as baton reads it, its type borrowed from the event's text.
#[derive(Deserialize)]
struct Wire<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    output_index: Option<u64>,
    delta: Option<String>,
    #[serde(borrow)]
    item: Option<Item<'a>>,
    response: Option<Response>,
    logprobs: Option<Box<RawValue>>,
    /// An `error` event's own fields.
    message: Option<String>,
    code: Option<serde_json::Value>,
}

/// Just an event's type.
#[derive(Deserialize)]
struct Kind<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
}

/// The events whose fields baton reads; any other may carry what it likes.
const READ: [&str; 11] = [
    "response.output_text.delta",
    "response.refusal.delta",
    "response.reasoning_summary_text.delta",
    "response.reasoning_text.delta",
    "response.output_item.added",
    "response.function_call_arguments.delta",
    "response.output_item.done",
    "response.completed",
    "response.incomplete",
    "response.failed",
    "error",
];

/// An event that did not read as [`Wire`]: nothing, if it is one baton
/// does not read and has a type; else malformed.
fn ignored_or(data: &str, err: serde_json::Error) -> Result<(), ProviderError> {
    match serde_json::from_str::<Kind>(data) {
        Ok(Kind { kind }) if !READ.contains(&kind.as_ref()) => Ok(()),
        _ => Err(ProviderError::Malformed(err.to_string())),
    }
}

#[derive(Deserialize)]
struct Item<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    call_id: Option<String>,
    name: Option<String>,
    encrypted_content: Option<String>,
    /// A freeform (`custom`) tool call's whole input.
    input: Option<String>,
}

#[derive(Deserialize)]
struct Response {
    usage: Option<WireUsage>,
    incomplete_details: Option<Incomplete>,
    error: Option<WireError>,
}

#[derive(Deserialize)]
struct Incomplete {
    reason: Option<String>,
}

#[derive(Deserialize)]
struct WireError {
    code: Option<serde_json::Value>,
    message: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    input_tokens_details: Option<InputDetails>,
    output_tokens_details: Option<OutputDetails>,
}

#[derive(Deserialize)]
struct InputDetails {
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct OutputDetails {
    reasoning_tokens: Option<u64>,
}

impl ResponsesDecoder {
    /// A function call's first event: its id and name, under the next index.
    fn call_began(&mut self, item: Item<'_>, output_index: Option<u64>) -> Event {
        let index = u32::try_from(self.calls.len()).unwrap_or(u32::MAX);
        self.calls.push(output_index.unwrap_or(u64::MAX));
        Event::ToolCall(ToolCallDelta { index, id: item.call_id, name: item.name, arguments: String::new() })
    }

    /// A fragment of the arguments of the call at `output_index`, which must have begun.
    fn arguments(&self, fragment: Option<String>, output_index: Option<u64>) -> Result<Option<Event>, ProviderError> {
        let index = self.calls.iter().position(|at| Some(*at) == output_index);
        match (index, fragment) {
            (Some(index), Some(arguments)) => Ok(Some(Event::ToolCall(ToolCallDelta {
                index: u32::try_from(index).unwrap_or(u32::MAX),
                id: None,
                name: None,
                arguments,
            }))),
            (None, Some(_)) => Err(ProviderError::Malformed("arguments for a function call that never began".into())),
            (_, None) => Ok(None),
        }
    }

    /// The end of the answer: its usage, then why it finished.
    fn ended(&mut self, response: Option<Response>, events: &mut Vec<Event>) -> Result<(), ProviderError> {
        self.done = true;
        let response = response.ok_or_else(|| ProviderError::Malformed("an end without its response".into()))?;
        events.extend(response.usage.map(usage).map(Event::Usage));
        let reason = response.incomplete_details.and_then(|details| details.reason);
        events.push(Event::Finish(match reason.as_deref() {
            Some("max_output_tokens") => FinishReason::Length,
            Some("content_filter") => FinishReason::ContentFilter,
            _ if !self.calls.is_empty() => FinishReason::ToolCalls,
            _ => FinishReason::Stop,
        }));
        Ok(())
    }
}

impl Decoder for ResponsesDecoder {
    fn on_event(&mut self, sse: &SseEvent, events: &mut Vec<Event>) -> Result<(), ProviderError> {
        let wire: Wire = match serde_json::from_str(&sse.data) {
            Ok(wire) => wire,
            Err(err) => return ignored_or(&sse.data, err),
        };
        let delta = wire.delta.filter(|text| !text.is_empty());
        match wire.kind.as_ref() {
            "response.output_text.delta" | "response.refusal.delta" => {
                events.extend(wire.logprobs.and_then(Logprobs::from_list).map(Event::Logprobs));
                events.extend(delta.map(Event::Text));
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                events.extend(delta.map(Event::Reasoning));
            }
            "response.output_item.added" => match wire.item {
                Some(item) if item.kind == "function_call" || item.kind == "custom_tool_call" => {
                    events.push(self.call_began(item, wire.output_index));
                }
                _ => {}
            },
            "response.function_call_arguments.delta" => events.extend(self.arguments(delta, wire.output_index)?),
            // Encrypted reasoning, which the client may send back on its next turn.
            "response.output_item.done" => match wire.item {
                Some(Item { kind, encrypted_content: Some(encrypted), .. }) if kind == "reasoning" => {
                    events.push(Event::Signature(encrypted));
                }
                // A freeform tool's input, whole, as the one string its function takes.
                Some(Item { kind, input: Some(input), .. }) if kind == "custom_tool_call" => {
                    let arguments = serde_json::json!({ FREEFORM_INPUT: input }).to_string();
                    events.extend(self.arguments(Some(arguments), wire.output_index)?);
                }
                _ => {}
            },
            "response.completed" | "response.incomplete" => self.ended(wire.response, events)?,
            "response.failed" => {
                let error = wire.response.and_then(|response| response.error);
                let detail = error.map(|error| described(error.code.as_ref(), error.message.as_deref()));
                return Err(ProviderError::ErrorEvent(detail.unwrap_or_else(|| "response.failed".to_owned())));
            }
            "error" => {
                return Err(ProviderError::ErrorEvent(described(wire.code.as_ref(), wire.message.as_deref())));
            }
            _ => {}
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn finish(&self) -> Result<(), ProviderError> {
        if self.done { Ok(()) } else { Err(ProviderError::Truncated) }
    }
}

/// An error's code and message, for the attempt's failure.
fn described(code: Option<&serde_json::Value>, message: Option<&str>) -> String {
    let code = match code {
        Some(serde_json::Value::String(code)) => code.clone(),
        Some(serde_json::Value::Null) | None => "error".to_owned(),
        Some(other) => other.to_string(),
    };
    format!("{code}: {}", message.unwrap_or("no message"))
}

fn usage(wire: WireUsage) -> Usage {
    Usage {
        input_tokens: wire.input_tokens,
        output_tokens: wire.output_tokens,
        cached_input_tokens: wire.input_tokens_details.and_then(|details| details.cached_tokens),
        reasoning_tokens: wire.output_tokens_details.and_then(|details| details.reasoning_tokens),
    }
}
