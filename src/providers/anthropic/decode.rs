//! Anthropic's named stream events → events. Complete only at `message_stop`;
//! `ping` and unknown event types are ignored, `error` fails the stream.
//! A thinking block's signature is an event of its own, so a client of
//! Anthropic's dialect gets it back.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::event::{Event, FinishReason, ToolCallDelta, Usage};
use crate::providers::shape::TextShape;
use crate::providers::{Decoder, ProviderError, SseEvent};

#[derive(Default)]
pub(super) struct AnthropicDecoder {
    /// Content-block index → tool-call index, for blocks that are tool calls.
    tool_blocks: HashMap<u32, u32>,
    stop_reason: Option<FinishReason>,
    done: bool,
    /// The last text delta, so the next ones like it are read without
    /// parsing them whole (a text delta's meaning depends on nothing before it).
    shape: TextShape,
}

/// An event as far as its type: the fields that depend on the type are kept
/// as the event's own text until the type says what they hold. An
/// internally tagged enum would copy every event into a tree first.
#[derive(Deserialize)]
struct Wire<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    index: Option<&'a RawValue>,
    #[serde(borrow)]
    delta: Option<&'a RawValue>,
    #[serde(borrow)]
    content_block: Option<&'a RawValue>,
    #[serde(borrow)]
    message: Option<&'a RawValue>,
    #[serde(borrow)]
    usage: Option<&'a RawValue>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct StartMessage {
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    ToolUse {
        id: String,
        name: String,
    },
    #[serde(other)]
    Other,
}

/// A content block's delta, read as [`Wire`] is: the field its type names
/// is the only one parsed.
#[derive(Deserialize)]
struct BlockDelta<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    text: Option<&'a RawValue>,
    #[serde(borrow)]
    partial_json: Option<&'a RawValue>,
    #[serde(borrow)]
    thinking: Option<&'a RawValue>,
    #[serde(borrow)]
    signature: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct MessageDelta {
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct WireError {
    #[serde(rename = "type")]
    kind: String,
    message: String,
}

/// Parses JSON text, a failure being the provider's malformed event.
fn parse<'a, T: Deserialize<'a>>(text: &'a str) -> Result<T, ProviderError> {
    serde_json::from_str(text).map_err(|err| ProviderError::Malformed(err.to_string()))
}

/// A field the event's type requires.
fn required<'a, T: Deserialize<'a>>(field: Option<&'a RawValue>, name: &str) -> Result<T, ProviderError> {
    let field = field.ok_or_else(|| ProviderError::Malformed(format!("missing field `{name}`")))?;
    parse(field.get())
}

/// A field the event's type may leave out.
fn optional<'a, T: Deserialize<'a>>(field: Option<&'a RawValue>) -> Result<Option<T>, ProviderError> {
    field.map(|field| parse(field.get())).transpose()
}

impl Decoder for AnthropicDecoder {
    fn on_event(&mut self, sse: &SseEvent, events: &mut Vec<Event>) -> Result<(), ProviderError> {
        if sse.event == "ping" {
            return Ok(());
        }
        if self.shape.read(&sse.data, events) {
            return Ok(());
        }
        let wire: Wire = parse(&sse.data)?;
        match wire.kind.as_ref() {
            "message_start" => {
                let message: StartMessage = required(wire.message, "message")?;
                events.extend(message.usage.map(usage));
            }
            "content_block_start" => {
                let index = required(wire.index, "index")?;
                if let Block::ToolUse { id, name } = required(wire.content_block, "content_block")? {
                    events.push(self.tool_began(index, id, name));
                }
            }
            "content_block_delta" => {
                let index = required(wire.index, "index")?;
                let delta: BlockDelta = required(wire.delta, "delta")?;
                let literal = delta.text.filter(|_| delta.kind == "text_delta").map(RawValue::get);
                let event = self.block_delta(index, delta)?;
                match (literal, &event) {
                    (Some(literal), Some(Event::Text(_))) => self.shape.keep(&sse.data, literal, None),
                    _ => self.shape.clear(),
                }
                events.extend(event);
            }
            "message_delta" => {
                let delta: MessageDelta = required(wire.delta, "delta")?;
                let wire_usage: Option<Option<WireUsage>> = optional(wire.usage)?;
                self.stop_reason = delta.stop_reason.as_deref().map(finish_reason);
                events.extend(wire_usage.flatten().map(usage));
            }
            "message_stop" => {
                self.done = true;
                events.push(Event::Finish(self.stop_reason.unwrap_or(FinishReason::Stop)));
            }
            "error" => {
                let error: WireError = required(wire.error, "error")?;
                return Err(ProviderError::ErrorEvent(format!("{}: {}", error.kind, error.message)));
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

impl AnthropicDecoder {
    /// A tool-use block's start: the call's id and name, under the next index.
    fn tool_began(&mut self, block: u32, id: String, name: String) -> Event {
        let call = u32::try_from(self.tool_blocks.len()).unwrap_or(u32::MAX);
        self.tool_blocks.insert(block, call);
        Event::ToolCall(ToolCallDelta { index: call, id: Some(id), name: Some(name), arguments: String::new() })
    }

    /// What the delta of content block `block` says, if anything: empty
    /// fragments and deltas of other types say nothing.
    fn block_delta(&self, block: u32, delta: BlockDelta<'_>) -> Result<Option<Event>, ProviderError> {
        let fragment = |field: Option<&RawValue>, name: &str| {
            required::<String>(field, name).map(|text| Some(text).filter(|text| !text.is_empty()))
        };
        Ok(match delta.kind.as_ref() {
            "text_delta" => fragment(delta.text, "text")?.map(Event::Text),
            "thinking_delta" => fragment(delta.thinking, "thinking")?.map(Event::Reasoning),
            "signature_delta" => fragment(delta.signature, "signature")?.map(Event::Signature),
            "input_json_delta" => match fragment(delta.partial_json, "partial_json")? {
                Some(arguments) => {
                    let call = self.tool_blocks.get(&block).copied().ok_or_else(|| {
                        ProviderError::Malformed(format!(
                            "input_json_delta for block {block}, which is not a tool_use block"
                        ))
                    })?;
                    Some(Event::ToolCall(ToolCallDelta { index: call, arguments, ..ToolCallDelta::default() }))
                }
                None => None,
            },
            _ => None,
        })
    }
}

/// Anthropic counts cache reads and writes apart from `input_tokens`; the
/// shared usage counts the whole prompt, as OpenAI does, with the cache
/// reads among it. Thinking is inside `output_tokens`, not reported apart.
fn usage(wire: WireUsage) -> Event {
    let cached = wire.cache_read_input_tokens;
    let input = match (wire.input_tokens, cached, wire.cache_creation_input_tokens) {
        (None, None, None) => None,
        (input, read, written) => {
            Some(input.unwrap_or(0).saturating_add(read.unwrap_or(0)).saturating_add(written.unwrap_or(0)))
        }
    };
    Event::Usage(Usage {
        input_tokens: input,
        output_tokens: wire.output_tokens,
        cached_input_tokens: cached,
        ..Usage::default()
    })
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "max_tokens" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::ContentFilter,
        _ => FinishReason::Stop,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::providers::shape::{TextShape, any_text, assert_texts_read_by_shape, chunks, decoded};

    /// Events of every type the decoder reads, `TEXT` where a string goes.
    const SHAPES: &[&str] = &[
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":TEXT}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":TEXT}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":TEXT}}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":TEXT}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":TEXT}}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":TEXT},"usage":{"output_tokens":3}}"#,
        r#"{"type":"error","error":{"type":"overloaded_error","message":TEXT}}"#,
        // Alike in length but for one field before or after the text, which
        // changes what the event says: only its bytes tell them apart.
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_deltx","text":TEXT}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":TEXT,"extra":"aaaa"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":TEXT,"type":"abcde"}}"#,
    ];

    fn shape(decoder: &mut AnthropicDecoder) -> &mut TextShape {
        &mut decoder.shape
    }

    #[test]
    fn text_deltas_alike_but_for_their_text_are_read_by_their_shape() {
        assert_texts_read_by_shape(SHAPES, shape);
    }

    proptest! {
        #[test]
        fn events_decode_as_they_do_parsed_whole(picks in proptest::collection::vec((any::<usize>(), any_text()), 1..24)) {
            let chunks = chunks(SHAPES, &picks);
            let read = decoded::<AnthropicDecoder>(None, &chunks);
            prop_assert_eq!(read, decoded(Some(shape), &chunks));
        }
    }
}
