//! Anthropic's named stream events → events. Complete only at `message_stop`;
//! `ping` and unknown event types are ignored, `error` fails the stream.
//! A thinking block's signature is an event of its own, so a client of
//! Anthropic's dialect gets it back.

use std::collections::HashMap;

use serde::Deserialize;

use crate::event::{Event, FinishReason, ToolCallDelta, Usage};
use crate::providers::{Decoder, ProviderError, SseEvent};

#[derive(Default)]
pub(super) struct AnthropicDecoder {
    /// Content-block index → tool-call index, for blocks that are tool calls.
    tool_blocks: HashMap<u32, u32>,
    stop_reason: Option<FinishReason>,
    done: bool,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireEvent {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: u32,
        content_block: Block,
    },
    ContentBlockDelta {
        index: u32,
        delta: BlockDelta,
    },
    MessageDelta {
        delta: MessageDelta,
        usage: Option<WireUsage>,
    },
    MessageStop,
    Error {
        error: WireError,
    },
    #[serde(other)]
    Other,
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

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    #[serde(other)]
    Other,
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

impl Decoder for AnthropicDecoder {
    fn on_event(&mut self, sse: &SseEvent) -> Result<Vec<Event>, ProviderError> {
        if sse.event == "ping" {
            return Ok(Vec::new());
        }
        let event: WireEvent =
            serde_json::from_str(&sse.data).map_err(|err| ProviderError::Malformed(err.to_string()))?;
        Ok(match event {
            WireEvent::MessageStart { message } => message.usage.map(usage).into_iter().collect(),
            WireEvent::ContentBlockStart { index, content_block: Block::ToolUse { id, name } } => {
                let call = u32::try_from(self.tool_blocks.len()).unwrap_or(u32::MAX);
                self.tool_blocks.insert(index, call);
                vec![Event::ToolCall(ToolCallDelta {
                    index: call,
                    id: Some(id),
                    name: Some(name),
                    arguments: String::new(),
                })]
            }
            WireEvent::ContentBlockDelta { delta: BlockDelta::TextDelta { text }, .. } if !text.is_empty() => {
                vec![Event::Text(text)]
            }
            WireEvent::ContentBlockDelta { delta: BlockDelta::ThinkingDelta { thinking }, .. }
                if !thinking.is_empty() =>
            {
                vec![Event::Reasoning(thinking)]
            }
            WireEvent::ContentBlockDelta { delta: BlockDelta::SignatureDelta { signature }, .. }
                if !signature.is_empty() =>
            {
                vec![Event::Signature(signature)]
            }
            WireEvent::ContentBlockDelta { index, delta: BlockDelta::InputJsonDelta { partial_json } }
                if !partial_json.is_empty() =>
            {
                let call = self.tool_blocks.get(&index).copied().ok_or_else(|| {
                    ProviderError::Malformed(format!(
                        "input_json_delta for block {index}, which is not a tool_use block"
                    ))
                })?;
                vec![Event::ToolCall(ToolCallDelta {
                    index: call,
                    arguments: partial_json,
                    ..ToolCallDelta::default()
                })]
            }
            WireEvent::MessageDelta { delta, usage: wire_usage } => {
                self.stop_reason = delta.stop_reason.as_deref().map(finish_reason);
                wire_usage.map(usage).into_iter().collect()
            }
            WireEvent::MessageStop => {
                self.done = true;
                vec![Event::Finish(self.stop_reason.unwrap_or(FinishReason::Stop))]
            }
            WireEvent::Error { error } => {
                return Err(ProviderError::ErrorEvent(format!("{}: {}", error.kind, error.message)));
            }
            WireEvent::ContentBlockStart { .. } | WireEvent::ContentBlockDelta { .. } | WireEvent::Other => Vec::new(),
        })
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn finish(&self) -> Result<(), ProviderError> {
        if self.done { Ok(()) } else { Err(ProviderError::Truncated) }
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
