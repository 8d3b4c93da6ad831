//! Gemini's whole-response events → events. There is no `[DONE]`: the answer is
//! complete once a candidate carries a `finishReason`. Thought parts are
//! reasoning, not answer text.

use std::borrow::Cow;

use serde::Deserialize;

use crate::event::{Event, FinishReason, ToolCallDelta, Usage};
use crate::providers::first::First;
use crate::providers::{Decoder, ProviderError, SseEvent};

#[derive(Default)]
pub(super) struct GeminiDecoder {
    tool_calls: u32,
    finished: bool,
}

/// A response as far as baton reads it: its first candidate only, and the
/// finish reason borrowed from the event's text.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Response<'a> {
    #[serde(default, borrow)]
    candidates: First<Candidate<'a>>,
    usage_metadata: Option<UsageMetadata>,
    prompt_feedback: Option<PromptFeedback>,
    error: Option<WireError>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate<'a> {
    content: Option<Content>,
    #[serde(borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Content {
    #[serde(default)]
    parts: Vec<Part>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part {
    text: Option<String>,
    #[serde(default)]
    thought: bool,
    function_call: Option<FunctionCall>,
}

#[derive(Deserialize)]
struct FunctionCall {
    id: Option<String>,
    name: String,
    #[serde(default)]
    args: serde_json::Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    prompt_token_count: Option<u64>,
    candidates_token_count: Option<u64>,
    thoughts_token_count: Option<u64>,
    cached_content_token_count: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    block_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireError {
    message: String,
}

impl Decoder for GeminiDecoder {
    fn on_event(&mut self, sse: &SseEvent, events: &mut Vec<Event>) -> Result<(), ProviderError> {
        let response: Response =
            serde_json::from_str(&sse.data).map_err(|err| ProviderError::Malformed(err.to_string()))?;
        if let Some(error) = response.error {
            return Err(ProviderError::ErrorEvent(error.message));
        }
        let mut finish = None;
        // Once the answer is over, a later event may bring only its usage.
        let candidate = response.candidates.0.filter(|_| !self.finished);
        if let Some(candidate) = candidate {
            for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
                match part.text.filter(|text| !text.is_empty()) {
                    Some(text) if part.thought => events.push(Event::Reasoning(text)),
                    Some(text) => events.push(Event::Text(text)),
                    None => {}
                }
                if let Some(call) = part.function_call {
                    events.push(self.tool_call(call));
                }
            }
            finish = candidate.finish_reason.map(|reason| self.finish_reason(&reason));
        } else if response.prompt_feedback.and_then(|f| f.block_reason).is_some() {
            finish = Some(FinishReason::ContentFilter);
        }
        if let Some(usage) = response.usage_metadata {
            // Gemini counts thoughts apart from the answer; the shared usage
            // counts them among the output, as OpenAI does.
            let output = match (usage.candidates_token_count, usage.thoughts_token_count) {
                (None, None) => None,
                (answer, thoughts) => Some(answer.unwrap_or(0).saturating_add(thoughts.unwrap_or(0))),
            };
            events.push(Event::Usage(Usage {
                input_tokens: usage.prompt_token_count,
                output_tokens: output,
                cached_input_tokens: usage.cached_content_token_count,
                reasoning_tokens: usage.thoughts_token_count,
            }));
        }
        if let Some(reason) = finish.filter(|_| !self.finished) {
            self.finished = true;
            events.push(Event::Finish(reason));
        }
        Ok(())
    }

    /// Gemini may send a usage-only event after the finish, so reading goes on
    /// to the end of the body.
    fn is_done(&self) -> bool {
        false
    }

    fn finish(&self) -> Result<(), ProviderError> {
        if self.finished { Ok(()) } else { Err(ProviderError::Truncated) }
    }
}

impl GeminiDecoder {
    /// Gemini sends each call whole; OpenAI clients expect an id, so one is made
    /// up when Gemini gives none.
    fn tool_call(&mut self, call: FunctionCall) -> Event {
        let index = self.tool_calls;
        self.tool_calls = self.tool_calls.saturating_add(1);
        Event::ToolCall(ToolCallDelta {
            index,
            id: Some(call.id.unwrap_or_else(|| format!("call_{index}"))),
            name: Some(call.name),
            arguments: call.args.to_string(),
        })
    }

    fn finish_reason(&self, reason: &str) -> FinishReason {
        match reason {
            "MAX_TOKENS" => FinishReason::Length,
            "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => {
                FinishReason::ContentFilter
            }
            _ if self.tool_calls > 0 => FinishReason::ToolCalls,
            _ => FinishReason::Stop,
        }
    }
}
