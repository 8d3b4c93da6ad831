//! OpenAI chunk stream → events. The answer is complete once a choice carries
//! a `finish_reason` (some compatible servers never send `[DONE]`) or `[DONE]`
//! arrives; `[DONE]` also ends reading.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::event::{Event, FinishReason, Logprobs, ToolCallDelta, Usage};
use crate::providers::first::First;
use crate::providers::{Decoder, ProviderError, SseEvent};

#[derive(Default)]
pub(super) struct OpenAiDecoder {
    finished: bool,
    done: bool,
}

/// A chunk as far as baton reads it: its first choice only, and the
/// finish reason borrowed from the event's text.
#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default, borrow)]
    choices: First<Choice<'a>>,
    usage: Option<WireUsage>,
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default)]
    delta: Delta,
    #[serde(borrow)]
    finish_reason: Option<Cow<'a, str>>,
    logprobs: Option<WireLogprobs>,
}

/// A choice's log probabilities, which a client that asked for them gets.
#[derive(Deserialize)]
struct WireLogprobs {
    content: Option<Box<RawValue>>,
}

#[derive(Deserialize, Default)]
struct Delta {
    content: Option<String>,
    /// What compatible servers (DeepSeek, vLLM, …) stream their reasoning as.
    #[serde(alias = "reasoning")]
    reasoning_content: Option<String>,
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
struct WireToolCall {
    index: u32,
    id: Option<String>,
    function: Option<WireFunction>,
}

#[derive(Deserialize)]
struct WireFunction {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptDetails>,
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    reasoning_tokens: Option<u64>,
}

impl Decoder for OpenAiDecoder {
    fn on_event(&mut self, sse: &SseEvent, events: &mut Vec<Event>) -> Result<(), ProviderError> {
        if sse.data.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Chunk = serde_json::from_str(&sse.data).map_err(|err| ProviderError::Malformed(err.to_string()))?;
        if sse.event == "error" || chunk.error.is_some() {
            let detail = chunk.error.as_ref().and_then(|e| e.get("message")).and_then(|m| m.as_str());
            return Err(ProviderError::ErrorEvent(detail.unwrap_or(&sse.data).to_owned()));
        }
        // Once the answer is over, a later chunk may bring only its usage.
        let choice = chunk.choices.0.filter(|_| !self.finished);
        if let Some(choice) = choice {
            if let Some(reasoning) = choice.delta.reasoning_content.filter(|text| !text.is_empty()) {
                events.push(Event::Reasoning(reasoning));
            }
            let logprobs = choice.logprobs.and_then(|logprobs| logprobs.content).and_then(Logprobs::from_list);
            events.extend(logprobs.map(Event::Logprobs));
            if let Some(text) = choice.delta.content.filter(|text| !text.is_empty()) {
                events.push(Event::Text(text));
            }
            for call in choice.delta.tool_calls.unwrap_or_default() {
                let (name, arguments) = call.function.map(|f| (f.name, f.arguments)).unwrap_or_default();
                events.push(Event::ToolCall(ToolCallDelta {
                    index: call.index,
                    id: call.id,
                    name,
                    arguments: arguments.unwrap_or_default(),
                }));
            }
            if let Some(reason) = choice.finish_reason {
                self.finished = true;
                events.push(Event::Finish(finish_reason(&reason)));
            }
        }
        if let Some(usage) = chunk.usage {
            events.push(Event::Usage(Usage {
                input_tokens: usage.prompt_tokens,
                output_tokens: usage.completion_tokens,
                cached_input_tokens: usage.prompt_tokens_details.and_then(|details| details.cached_tokens),
                reasoning_tokens: usage.completion_tokens_details.and_then(|details| details.reasoning_tokens),
            }));
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn finish(&self) -> Result<(), ProviderError> {
        if self.finished || self.done { Ok(()) } else { Err(ProviderError::Truncated) }
    }
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "length" => FinishReason::Length,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        _ => FinishReason::Stop,
    }
}
