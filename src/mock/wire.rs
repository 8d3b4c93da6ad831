//! How each provider writes its stream, event by event, as its official API
//! reference shows it: the simulated providers' side of the adapters.

use serde_json::json;

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
    match kind {
        ProviderKind::OpenAi => vec![data(&openai_chunk(model, json!({"role": "assistant", "content": ""}), None))],
        ProviderKind::Anthropic => vec![
            named(
                "message_start",
                &json!({"type": "message_start", "message": {
                "id": "msg_mock", "type": "message", "role": "assistant", "model": model, "content": [],
                "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 10, "output_tokens": 1}}}),
            ),
            named(
                "content_block_start",
                &json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
            ),
            named("ping", &json!({"type": "ping"})),
        ],
        ProviderKind::Gemini => {
            vec![data(&json!({"candidates": [{"content": {"parts": [{"text": ""}], "role": "model"}, "index": 0}],
            "modelVersion": model}))]
        }
    }
}

/// One text token.
pub fn text(kind: ProviderKind, model: &str, text: &str) -> String {
    match kind {
        ProviderKind::OpenAi => data(&openai_chunk(model, json!({"content": text}), None)),
        ProviderKind::Anthropic => named(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": 0,
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
    match kind {
        ProviderKind::OpenAi => vec![
            data(&openai_chunk(model, json!({}), Some("stop"))),
            data(&json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": tokens, "total_tokens": 10 + tokens}})),
            "data: [DONE]\n\n".to_owned(),
        ],
        ProviderKind::Anthropic => vec![
            named("content_block_stop", &json!({"type": "content_block_stop", "index": 0})),
            named(
                "message_delta",
                &json!({"type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": tokens}}),
            ),
            named("message_stop", &json!({"type": "message_stop"})),
        ],
        ProviderKind::Gemini => vec![data(&json!({
            "candidates": [{"content": {"parts": [{"text": ""}], "role": "model"}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": tokens, "totalTokenCount": 10 + tokens},
            "modelVersion": model}))],
    }
}

/// An error reported inside the stream, before or after tokens.
pub fn error_event(kind: ProviderKind) -> String {
    match kind {
        ProviderKind::OpenAi => {
            data(&json!({"error": {"message": "The server had an error while processing your request",
            "type": "server_error", "code": null}}))
        }
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
        ProviderKind::OpenAi | ProviderKind::Gemini => {
            "data: {\"choices\": [{\"delta\": {\"content\": tru\n\n".to_owned()
        }
    }
}

/// The JSON body of an HTTP error, in the provider's error shape.
pub fn error_body(kind: ProviderKind, status: u16, message: &str) -> String {
    let body = match kind {
        ProviderKind::OpenAi => {
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
        ProviderKind::Anthropic => path.split('?').next() == Some("/v1/messages"),
        ProviderKind::Gemini => {
            path.starts_with("/v1beta/models/") && path.contains(":streamGenerateContent") && path.contains("alt=sse")
        }
    }
}

/// The header that carries the key, and its expected value for `key`.
pub fn auth_header(kind: ProviderKind, key: &str) -> (&'static str, String) {
    match kind {
        ProviderKind::OpenAi => ("authorization", format!("Bearer {key}")),
        ProviderKind::Anthropic => ("x-api-key", key.to_owned()),
        ProviderKind::Gemini => ("x-goog-api-key", key.to_owned()),
    }
}
