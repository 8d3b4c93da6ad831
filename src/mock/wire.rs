//! How each provider writes its stream, event by event, as its official API
//! reference shows it: the simulated providers' side of the adapters.

use serde_json::json;

use super::responses_wire as responses;
use crate::providers::ProviderKind;

/// The words of token `i` of an answer written in `marker` words: `alpha0`,
/// ` alpha1`, … so a leaked fragment names the provider it came from.
pub fn token(marker: &str, i: usize) -> String {
    if i == 0 { format!("{marker}0") } else { format!(" {marker}{i}") }
}

/// The whole text of an answer of `tokens` marker words.
pub fn answer_text(marker: &str, tokens: usize) -> String {
    (0..tokens).map(|i| token(marker, i)).collect()
}

fn data(value: &serde_json::Value) -> String {
    format!("data: {value}\n\n")
}

fn named(name: &str, value: &serde_json::Value) -> String {
    format!("event: {name}\ndata: {value}\n\n")
}

/// Events before the first token: OpenAI's role-only chunk, Anthropic's
/// `message_start`, first block and a ping, Gemini's empty-text event.
pub fn preamble(kind: ProviderKind, model: &str) -> Vec<String> {
    opening(kind, model, false, 0)
}

/// [`preamble`] of an answer that may think first (Anthropic's first block
/// is then a `thinking` block) and reads `cached` of its prompt tokens from
/// a cache (Anthropic reports those in `message_start`).
pub fn opening(kind: ProviderKind, model: &str, thinking: bool, cached: usize) -> Vec<String> {
    match kind {
        ProviderKind::OpenAi => vec![data(&openai_chunk(model, json!({"role": "assistant", "content": ""}), None))],
        ProviderKind::OpenAiResponses => responses::opening(model, thinking),
        ProviderKind::Anthropic => {
            let mut usage = json!({"input_tokens": PROMPT_TOKENS.saturating_sub(cached), "output_tokens": 1});
            if cached > 0 {
                usage["cache_read_input_tokens"] = json!(cached);
            }
            let block = if thinking {
                json!({"type": "thinking", "thinking": ""})
            } else {
                json!({"type": "text", "text": ""})
            };
            vec![
                named(
                    "message_start",
                    &json!({"type": "message_start", "message": {
                    "id": "msg_mock", "type": "message", "role": "assistant", "model": model, "content": [],
                    "stop_reason": null, "stop_sequence": null, "usage": usage}}),
                ),
                named(
                    "content_block_start",
                    &json!({"type": "content_block_start", "index": 0, "content_block": block}),
                ),
                named("ping", &json!({"type": "ping"})),
            ]
        }
        ProviderKind::Gemini => {
            vec![data(&json!({"candidates": [{"content": {"parts": [{"text": ""}], "role": "model"}, "index": 0}],
            "modelVersion": model}))]
        }
    }
}

/// One delta of reasoning: OpenAI-compatible `reasoning_content`,
/// Anthropic's `thinking_delta` (in block 0), a Gemini part marked `thought`.
pub fn reasoning(kind: ProviderKind, model: &str, text: &str) -> String {
    match kind {
        ProviderKind::OpenAi => data(&openai_chunk(model, json!({"reasoning_content": text}), None)),
        ProviderKind::OpenAiResponses => responses::reasoning(text),
        ProviderKind::Anthropic => named(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "thinking_delta", "thinking": text}}),
        ),
        ProviderKind::Gemini => data(&json!({"candidates": [{"content": {"parts": [
            {"text": text, "thought": true}], "role": "model"}, "index": 0}], "modelVersion": model})),
    }
}

/// What ends the reasoning before the answer: Anthropic signs and closes its
/// thinking block and opens the text block (index 1); the others need nothing.
pub fn end_of_reasoning(kind: ProviderKind) -> Vec<String> {
    match kind {
        ProviderKind::Anthropic => vec![
            named(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "signature_delta", "signature": "c2lnbmF0dXJlLW1vY2s="}}),
            ),
            named("content_block_stop", &json!({"type": "content_block_stop", "index": 0})),
            named(
                "content_block_start",
                &json!({"type": "content_block_start", "index": 1,
                "content_block": {"type": "text", "text": ""}}),
            ),
        ],
        ProviderKind::OpenAiResponses => responses::end_of_reasoning(),
        ProviderKind::OpenAi | ProviderKind::Gemini => Vec::new(),
    }
}

/// One text token.
pub fn text(kind: ProviderKind, model: &str, text: &str) -> String {
    text_in(kind, model, 0, text)
}

/// One text token, in Anthropic's content block `block` (1 after thinking).
pub fn text_in(kind: ProviderKind, model: &str, block: usize, text: &str) -> String {
    match kind {
        ProviderKind::OpenAi => data(&openai_chunk(model, json!({"content": text}), None)),
        ProviderKind::OpenAiResponses => responses::text_in(block, text),
        ProviderKind::Anthropic => named(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": block,
            "delta": {"type": "text_delta", "text": text}}),
        ),
        ProviderKind::Gemini => {
            data(&json!({"candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}],
            "modelVersion": model}))
        }
    }
}

/// A whole tool call (`get_weather` for Paris) as the provider streams one.
pub fn tool_call(kind: ProviderKind, model: &str) -> Vec<String> {
    match kind {
        ProviderKind::OpenAi => vec![data(&openai_chunk(
            model,
            json!({"tool_calls": [{"index": 0, "id": "call_mock", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}),
            None,
        ))],
        ProviderKind::OpenAiResponses => responses::tool_call(),
        ProviderKind::Anthropic => vec![
            named(
                "content_block_start",
                &json!({"type": "content_block_start", "index": 1,
                "content_block": {"type": "tool_use", "id": "toolu_mock", "name": "get_weather", "input": {}}}),
            ),
            named(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": "{\"city\": \"Paris\"}"}}),
            ),
        ],
        ProviderKind::Gemini => vec![data(&json!({"candidates": [{"content": {"parts": [
            {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}], "role": "model"}, "index": 0}],
            "modelVersion": model}))],
    }
}

/// The events that end a complete answer of `tokens` tokens, end marker included.
pub fn finish(kind: ProviderKind, model: &str, tokens: usize) -> Vec<String> {
    ending(kind, model, &Ending { text_block: 0, call: None, counts: Counts { output: tokens, ..Counts::default() } })
}

/// The prompt tokens every simulated answer reports.
pub(super) const PROMPT_TOKENS: usize = 10;

/// What a complete answer's usage reports: its text tokens, the reasoning
/// tokens before them, and the prompt tokens read from a cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Tokens of the answer itself.
    pub output: usize,
    /// Tokens of reasoning (counted among the output, as OpenAI and Anthropic do).
    pub reasoning: usize,
    /// Prompt tokens read from a cache.
    pub cached: usize,
}

/// A call to one of the request's tools that an answer ends with.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The call's id, which the tool's result will refer to.
    pub id: &'a str,
    /// The function called.
    pub name: &'a str,
    /// The JSON arguments, in the fragments they are streamed in.
    pub arguments: &'a [String],
}

/// How a complete answer ends.
#[derive(Debug, Clone, Copy)]
pub struct Ending<'a> {
    /// Anthropic's index of the text block (1 after thinking).
    pub text_block: usize,
    /// The tool call after the text, if any.
    pub call: Option<Call<'a>>,
    /// What the usage reports.
    pub counts: Counts,
}

/// The events that end a complete answer, its tool call and end marker included.
pub fn ending(kind: ProviderKind, model: &str, end: &Ending<'_>) -> Vec<String> {
    let Counts { output, reasoning, cached } = end.counts;
    match kind {
        ProviderKind::OpenAi => {
            let mut usage = json!({"prompt_tokens": PROMPT_TOKENS, "completion_tokens": output + reasoning,
                "total_tokens": PROMPT_TOKENS + output + reasoning});
            if cached > 0 {
                usage["prompt_tokens_details"] = json!({"cached_tokens": cached});
            }
            if reasoning > 0 {
                usage["completion_tokens_details"] = json!({"reasoning_tokens": reasoning});
            }
            let mut events = end.call.map(|call| openai_call(model, &call)).unwrap_or_default();
            let reason = if end.call.is_some() { "tool_calls" } else { "stop" };
            events.push(data(&openai_chunk(model, json!({}), Some(reason))));
            events.push(data(&json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0,
                "model": model, "choices": [], "usage": usage})));
            events.push("data: [DONE]\n\n".to_owned());
            events
        }
        ProviderKind::OpenAiResponses => responses::ending(model, end),
        ProviderKind::Anthropic => {
            let mut events =
                vec![named("content_block_stop", &json!({"type": "content_block_stop", "index": end.text_block}))];
            if let Some(call) = end.call {
                events.extend(anthropic_call(end.text_block + 1, &call));
            }
            let reason = if end.call.is_some() { "tool_use" } else { "end_turn" };
            events.push(named(
                "message_delta",
                &json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": null},
                "usage": {"output_tokens": output + reasoning}}),
            ));
            events.push(named("message_stop", &json!({"type": "message_stop"})));
            events
        }
        ProviderKind::Gemini => {
            let mut events = Vec::new();
            if let Some(call) = end.call {
                let args: serde_json::Value = serde_json::from_str(&call.arguments.concat()).unwrap_or_default();
                events.push(data(&json!({"candidates": [{"content": {"parts": [
                    {"functionCall": {"name": call.name, "args": args}}], "role": "model"}, "index": 0}],
                    "modelVersion": model})));
            }
            let mut usage = json!({"promptTokenCount": PROMPT_TOKENS, "candidatesTokenCount": output,
                "totalTokenCount": PROMPT_TOKENS + output + reasoning});
            if reasoning > 0 {
                usage["thoughtsTokenCount"] = json!(reasoning);
            }
            if cached > 0 {
                usage["cachedContentTokenCount"] = json!(cached);
            }
            events.push(data(&json!({
                "candidates": [{"content": {"parts": [{"text": ""}], "role": "model"}, "finishReason": "STOP", "index": 0}],
                "usageMetadata": usage, "modelVersion": model})));
            events
        }
    }
}

/// OpenAI's tool call: the id and name first, then the arguments a fragment a chunk.
fn openai_call(model: &str, call: &Call<'_>) -> Vec<String> {
    let head = json!({"tool_calls": [{"index": 0, "id": call.id, "type": "function",
        "function": {"name": call.name, "arguments": ""}}]});
    let mut events = vec![data(&openai_chunk(model, head, None))];
    events.extend(call.arguments.iter().map(|fragment| {
        data(&openai_chunk(model, json!({"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]}), None))
    }));
    events
}

/// Anthropic's tool call: a `tool_use` block in `block`, its input as `input_json_delta`s.
fn anthropic_call(block: usize, call: &Call<'_>) -> Vec<String> {
    let mut events = vec![named(
        "content_block_start",
        &json!({"type": "content_block_start", "index": block,
        "content_block": {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}}),
    )];
    events.extend(call.arguments.iter().map(|fragment| {
        named(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": block,
            "delta": {"type": "input_json_delta", "partial_json": fragment}}),
        )
    }));
    events.push(named("content_block_stop", &json!({"type": "content_block_stop", "index": block})));
    events
}

/// An error reported inside the stream, before or after tokens.
pub fn error_event(kind: ProviderKind) -> String {
    match kind {
        ProviderKind::OpenAi => {
            data(&json!({"error": {"message": "The server had an error while processing your request",
            "type": "server_error", "code": null}}))
        }
        ProviderKind::OpenAiResponses => responses::error_event(),
        ProviderKind::Anthropic => named(
            "error",
            &json!({"type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
        ProviderKind::Gemini => {
            data(&json!({"error": {"code": 503, "message": "The model is overloaded. Please try again later.",
            "status": "UNAVAILABLE"}}))
        }
    }
}

/// An event no decoder can read.
pub fn malformed(kind: ProviderKind) -> String {
    match kind {
        ProviderKind::Anthropic => {
            "event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"te\n\n"
                .to_owned()
        }
        ProviderKind::OpenAiResponses => responses::malformed(),
        ProviderKind::OpenAi | ProviderKind::Gemini => {
            "data: {\"choices\": [{\"delta\": {\"content\": tru\n\n".to_owned()
        }
    }
}

/// The JSON body of an HTTP error, in the provider's error shape.
pub fn error_body(kind: ProviderKind, status: u16, message: &str) -> String {
    let body = match kind {
        ProviderKind::OpenAi | ProviderKind::OpenAiResponses => {
            json!({"error": {"message": message, "type": "server_error", "param": null, "code": null}})
        }
        ProviderKind::Anthropic => json!({"type": "error", "error": {"type": "api_error", "message": message}}),
        ProviderKind::Gemini => json!({"error": {"code": status, "message": message, "status": "UNAVAILABLE"}}),
    };
    body.to_string()
}

/// How the provider words a prompt that does not fit the model's context window.
pub fn context_length_message(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenAiResponses => {
            "Your input exceeds the context window of this model. Please adjust your input and try again."
        }
        ProviderKind::OpenAi => {
            "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."
        }
        ProviderKind::Anthropic => "prompt is too long: 210000 tokens > 200000 maximum",
        ProviderKind::Gemini => {
            "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
        }
    }
}

fn openai_chunk(model: &str, delta: serde_json::Value, finish: Option<&str>) -> serde_json::Value {
    json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": model,
        "system_fingerprint": null,
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
}

/// Whether `path` is where the provider's official SDK would send a chat request.
pub fn is_chat_path(kind: ProviderKind, path: &str) -> bool {
    match kind {
        ProviderKind::OpenAi => path.ends_with("/chat/completions"),
        ProviderKind::OpenAiResponses => path.ends_with("/responses"),
        ProviderKind::Anthropic => path.split('?').next() == Some("/v1/messages"),
        ProviderKind::Gemini => {
            path.starts_with("/v1beta/models/") && path.contains(":streamGenerateContent") && path.contains("alt=sse")
        }
    }
}

/// Whether `path` is where the provider counts a request's tokens
/// (Anthropic's `count_tokens`; no other kind has one).
pub fn is_count_path(kind: ProviderKind, path: &str) -> bool {
    kind == ProviderKind::Anthropic && path.split('?').next() == Some("/v1/messages/count_tokens")
}

/// The answer to a count request: one token a word of the messages' text,
/// so a test can tell the provider's count from baton's estimate.
pub fn token_count(body: &serde_json::Value) -> String {
    let messages = body.get("messages").and_then(serde_json::Value::as_array).map_or(&[][..], Vec::as_slice);
    let words: usize = messages
        .iter()
        .map(|message| match &message["content"] {
            serde_json::Value::String(text) => text.split_whitespace().count(),
            serde_json::Value::Array(blocks) => blocks
                .iter()
                .filter_map(|block| block["text"].as_str())
                .map(|text| text.split_whitespace().count())
                .sum(),
            _ => 0,
        })
        .sum();
    json!({ "input_tokens": words }).to_string()
}

/// The header that carries the key, and its expected value for `key`.
pub fn auth_header(kind: ProviderKind, key: &str) -> (&'static str, String) {
    match kind {
        ProviderKind::OpenAi | ProviderKind::OpenAiResponses => ("authorization", format!("Bearer {key}")),
        ProviderKind::Anthropic => ("x-api-key", key.to_owned()),
        ProviderKind::Gemini => ("x-goog-api-key", key.to_owned()),
    }
}
