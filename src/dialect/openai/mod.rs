//! OpenAI Chat Completions, the dialect of `POST /v1/chat/completions`:
//! requests parsed into the normalised request ([`parse`]), events back into
//! `chat.completion.chunk` SSE ([`ChunkEncoder`]) or one `chat.completion`
//! body ([`completion`]), and errors as `{"error": {"message", "type", "code"}}`.
//! The `model` is always the upstream model that answered, so cost dashboards
//! attribute a failover to the fallback.

mod chunks;
mod completion;
mod request;

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::{Value, json};

pub use chunks::ChunkEncoder;
pub use completion::completion;
pub use request::{Options, parse};

use super::{ApiError, Dialect, ErrorKind, Ingress, OPENAI_HEADERS};
use crate::event::{Event, Usage};
use crate::request::Native;

/// The OpenAI Chat Completions dialect: what the OpenAI SDKs, most chat UIs
/// and `curl` examples speak, and baton's first.
pub struct OpenAiChat;

impl Dialect for OpenAiChat {
    const NAME: &'static str = "openai_chat";

    type Options = Options;
    type Encoder = ChunkEncoder;

    /// A request with Anthropic-style cache hints, which OpenAI would
    /// refuse, is written out anew without them; any other goes to an
    /// openai-kind target as sent.
    fn parse(body: bytes::Bytes, head: &http::request::Parts) -> Result<Ingress<Options>, ApiError> {
        let mut ingress = parse(&body)?;
        if !ingress.request.has_cache_hints() {
            ingress.request.native = Some(Native::new(body, &head.headers, &OPENAI_HEADERS));
        }
        Ok(ingress)
    }

    fn encoder(model: &str, options: Options) -> ChunkEncoder {
        ChunkEncoder::new(Answer::new(model), options.include_usage)
    }

    fn completion(model: &str, _: Options, events: Vec<Event>) -> Vec<u8> {
        to_json(&completion(Answer::new(model), events))
    }

    fn error_body(error: &ApiError) -> Vec<u8> {
        to_json(&error_json(error))
    }
}

/// An error as OpenAI's SDKs parse it, in a body or in a stream's error event.
pub(in crate::dialect) fn error_json(error: &ApiError) -> Value {
    json!({ "error": { "message": error.message(), "type": error_type(error.kind()), "code": error.code() } })
}

/// OpenAI's `type` for each kind of error.
fn error_type(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidRequest => "invalid_request_error",
        ErrorKind::Permission => "permission_error",
        ErrorKind::RateLimit => "rate_limit_error",
        ErrorKind::Upstream => "upstream_error",
        ErrorKind::Unavailable => "unavailable_error",
        ErrorKind::Internal => "server_error",
    }
}

/// `value` as JSON bytes; a `Value` always serialises.
fn to_json(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

/// The identity every chunk of one answer repeats.
pub struct Answer {
    id: String,
    created: u64,
    model: String,
}

impl Answer {
    /// A new answer from `model`, with a fresh id.
    pub fn new(model: &str) -> Self {
        let created = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        Answer { id: crate::random_id::random_id("chatcmpl-", 16), created, model: model.to_owned() }
    }
}

/// Token counts as OpenAI reports them.
#[derive(Serialize)]
struct OpenAiUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_tokens_details: Option<PromptTokensDetails>,
    #[serde(skip_serializing_if = "Option::is_none")]
    completion_tokens_details: Option<CompletionTokensDetails>,
}

#[derive(Serialize)]
struct PromptTokensDetails {
    cached_tokens: u64,
}

#[derive(Serialize)]
struct CompletionTokensDetails {
    reasoning_tokens: u64,
}

impl From<Usage> for OpenAiUsage {
    fn from(usage: Usage) -> Self {
        let (prompt_tokens, completion_tokens) = (usage.input_tokens.unwrap_or(0), usage.output_tokens.unwrap_or(0));
        OpenAiUsage {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens.saturating_add(completion_tokens),
            prompt_tokens_details: usage.cached_input_tokens.map(|cached_tokens| PromptTokensDetails { cached_tokens }),
            completion_tokens_details: usage
                .reasoning_tokens
                .map(|reasoning_tokens| CompletionTokensDetails { reasoning_tokens }),
        }
    }
}

/// What the encoders' tests share: a fixed answer, and tool-call events.
#[cfg(test)]
mod test_support {
    use super::Answer;
    pub use crate::dialect::test_support::call;

    pub fn answer() -> Answer {
        Answer { id: "chatcmpl-1".into(), created: 7, model: "m".into() }
    }
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use http::StatusCode;

    use super::*;
    use crate::dialect::Encoder;

    fn parsed(bytes: &[u8]) -> Value {
        serde_json::from_slice(bytes).unwrap_or_default()
    }

    #[test]
    fn errors_keep_openais_shape_in_a_body_and_in_a_stream() {
        let body = OpenAiChat::error_body(&ApiError::too_large(10));
        let expected = json!({ "error": { "message": "request body is larger than the limit of 10 bytes",
            "type": "invalid_request_error", "code": "request_too_large" } });
        assert_eq!(parsed(&body), expected);
        let failed = ApiError::new(StatusCode::BAD_GATEWAY, ErrorKind::Upstream, "idle_timeout", "it broke");
        let mut out = BytesMut::new();
        OpenAiChat::encoder("m", Options { include_usage: true }).write_failure(&failed, &mut out);
        let text = std::str::from_utf8(&out).unwrap_or_default();
        assert!(text.starts_with("data: ") && text.ends_with("\n\n") && !text.contains("[DONE]"), "{text:?}");
        assert_eq!(
            parsed(text.trim_start_matches("data: ").as_bytes()),
            json!({ "error": { "message": "it broke", "type": "upstream_error", "code": "idle_timeout" } })
        );
        let panicked = <ChunkEncoder as Encoder>::panicked();
        assert_eq!(
            parsed(panicked.strip_prefix(b"data: ").unwrap_or_default()),
            json!({ "error": { "message": "the gateway failed while relaying this answer",
                "type": "server_error", "code": "internal_error" } })
        );
    }
}
