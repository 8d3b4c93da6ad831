//! OpenAI chunk stream → events. The answer is complete once a choice carries
//! a `finish_reason` (some compatible servers never send `[DONE]`) or `[DONE]`
//! arrives; `[DONE]` also ends reading.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::event::{Event, FinishReason, Logprobs, ToolCallDelta, Usage};
use crate::providers::first::First;
use crate::providers::shape::{Text, TextShape};
use crate::providers::{Decoder, ProviderError, SseEvent};

#[derive(Default)]
pub(super) struct OpenAiDecoder {
    finished: bool,
    done: bool,
    /// The last chunk that said only text, so the next ones like it are
    /// read without parsing them whole.
    shape: TextShape,
}

/// A chunk as far as baton reads it: its first choice only, and the
/// finish reason borrowed from the event's text.
#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default, borrow)]
    choices: First<Choice<'a>>,
    usage: Option<WireUsage>,
    error: Option<serde_json::Value>,
    /// OpenAI's random padding, of another length in every chunk: read
    /// only for where it is, so chunks alike but for it and their text are
    /// read by their shape.
    #[serde(borrow)]
    obfuscation: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    delta: Delta<'a>,
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
struct Delta<'a> {
    #[serde(borrow)]
    content: Option<Text<'a>>,
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
        // An error event, or a chunk after the answer's end, reads otherwise.
        if sse.event != "error" && !self.finished && self.shape.read(&sse.data, events) {
            return Ok(());
        }
        let chunk: Chunk = serde_json::from_str(&sse.data).map_err(|err| ProviderError::Malformed(err.to_string()))?;
        if sse.event == "error" || chunk.error.is_some() {
            let detail = chunk.error.as_ref().and_then(|e| e.get("message")).and_then(|m| m.as_str());
            return Err(ProviderError::ErrorEvent(detail.unwrap_or(&sse.data).to_owned()));
        }
        let before = events.len();
        let mut only_text = None;
        let padding = chunk.obfuscation.map(RawValue::get).filter(|padding| padding.starts_with('"'));
        // Once the answer is over, a later chunk may bring only its usage.
        let choice = chunk.choices.0.filter(|_| !self.finished);
        if let Some(choice) = choice {
            if let Some(reasoning) = choice.delta.reasoning_content.filter(|text| !text.is_empty()) {
                events.push(Event::Reasoning(reasoning));
            }
            let logprobs = choice.logprobs.and_then(|logprobs| logprobs.content).and_then(Logprobs::from_list);
            events.extend(logprobs.map(Event::Logprobs));
            if let Some(text) = choice.delta.content.filter(|text| !text.0.is_empty()) {
                only_text = text.quoted(&sse.data);
                events.push(Event::Text(text.0.into_owned()));
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
        match only_text.filter(|_| events.len() == before + 1) {
            Some(literal) => self.shape.keep(&sse.data, literal, padding),
            None => self.shape.clear(),
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::providers::shape::{TextShape, any_text, assert_texts_read_by_shape, chunks, decoded};

    /// Chunks of every kind the decoder reads, `TEXT` where a string goes.
    const SHAPES: &[&str] = &[
        r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":TEXT},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":TEXT},"finish_reason":null}]}"#,
        r#"{"id":"c","choices":[{"index":0,"delta":{"content":TEXT},"finish_reason":"stop"}]}"#,
        r#"{"id":"c","choices":[{"index":0,"delta":{"content":TEXT},"finish_reason":null}],"usage":null}"#,
        r#"{"id":"c","choices":[{"index":0,"delta":{"reasoning_content":TEXT},"finish_reason":null}]}"#,
        r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":TEXT}}]}}]}"#,
        r#"{"id":"c","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":TEXT}}"#,
        r#"{"error":{"message":TEXT}}"#,
        r#"{"id":"c","choices":[{"index":0,"delta":{"content":TEXT},"finish_reason":null}],"obfuscation":PAD}"#,
        r#"{"id":"c","choices":[{"index":0,"delta":{"content":TEXT},"finish_reason":"stop"}],"obfuscation":PAD}"#,
        // Alike in length but for one field before or after the text, which
        // changes what the chunk says: only its bytes tell them apart.
        r#"{"id":"cc","choices":[{"index":0,"delta":{"content":TEXT},"finish_reason":null}]}"#,
        r#"{"error":0,"choices":[{"index":0,"delta":{"content":TEXT},"finish_reason":null}]}"#,
        r#"{"id":"cc","choices":[{"index":0,"delta":{"content":TEXT},"finish_reason":"ab"}]}"#,
    ];

    fn shape(decoder: &mut OpenAiDecoder) -> &mut TextShape {
        &mut decoder.shape
    }

    #[test]
    fn text_chunks_alike_but_for_their_text_are_read_by_their_shape() {
        assert_texts_read_by_shape(SHAPES, shape);
    }

    #[test]
    fn openai_s_chunks_are_read_by_their_shape_whatever_their_padding() {
        let padded = SHAPES.iter().position(|shape| shape.contains("PAD")).unwrap_or_default();
        let picks: Vec<_> = (0..5).map(|pad| (padded + pad * SHAPES.len(), Ok(format!("word{pad} ")))).collect();
        let chunks = chunks(SHAPES, &picks);
        let mut decoder = OpenAiDecoder::default();
        let mut events = Vec::new();
        decoder.on_event(&chunks[0], &mut events).expect("a text chunk");
        for (pad, chunk) in chunks.iter().enumerate().skip(1) {
            let expected = format!("word{pad} ");
            assert_eq!(decoder.shape.text(&chunk.data).as_deref(), Some(expected.as_str()), "{}", chunk.data);
        }
        assert_eq!(decoded::<OpenAiDecoder>(None, &chunks), decoded(Some(shape), &chunks));
    }

    proptest! {
        #[test]
        fn chunks_decode_as_they_do_parsed_whole(picks in proptest::collection::vec((any::<usize>(), any_text()), 1..24)) {
            let chunks = chunks(SHAPES, &picks);
            let read = decoded::<OpenAiDecoder>(None, &chunks);
            prop_assert_eq!(read, decoded(Some(shape), &chunks));
        }
    }
}
