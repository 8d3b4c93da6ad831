//! Anthropic Messages, the dialect of `POST /v1/messages`: what the Anthropic
//! SDKs and coding agents such as Claude Code speak. Requests are parsed into
//! the normalised request with the body kept for an anthropic-kind target
//! ([`parse`]); events go back as Anthropic's named stream events
//! ([`MessageEncoder`]) or one `message` body ([`message`]); errors as
//! `{"type": "error", "error": {"type", "message"}}` with Anthropic's type
//! names. The `model` is the upstream model that answered.

mod message;
mod request;
mod stream;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

pub use message::message;
pub use request::{count_tokens_request, parse};
pub use stream::MessageEncoder;

use super::{ApiError, Dialect, ErrorKind, Ingress};
use crate::event::{Event, FinishReason, Usage};

/// The Anthropic Messages dialect.
pub struct AnthropicMessages;

impl Dialect for AnthropicMessages {
    const NAME: &'static str = "anthropic_messages";

    type Options = ();
    type Encoder = MessageEncoder;

    fn parse(body: Bytes, head: &http::request::Parts) -> Result<Ingress<()>, ApiError> {
        parse(body, &head.headers)
    }

    fn encoder(model: &str, (): ()) -> MessageEncoder {
        MessageEncoder::new(&message_id(), model)
    }

    fn completion(model: &str, (): (), events: Vec<Event>) -> Vec<u8> {
        to_json(&message(&message_id(), model, events))
    }

    fn error_body(error: &ApiError) -> Vec<u8> {
        to_json(&error_json(error))
    }
}

/// An error as the Anthropic SDKs parse it, in a body or an `error` event.
fn error_json(error: &ApiError) -> Value {
    json!({ "type": "error", "error": { "type": error_type(error), "message": error.message() } })
}

/// Anthropic's `error.type` for an error: chosen by status as Anthropic's
/// own errors are, so an SDK raises the exception it raises for Anthropic.
fn error_type(error: &ApiError) -> &'static str {
    match (error.status(), error.kind()) {
        (StatusCode::UNAUTHORIZED, _) => "authentication_error",
        (StatusCode::FORBIDDEN, _) => "permission_error",
        (StatusCode::NOT_FOUND, _) => "not_found_error",
        (StatusCode::PAYLOAD_TOO_LARGE, _) => "request_too_large",
        (StatusCode::TOO_MANY_REQUESTS, _) | (_, ErrorKind::RateLimit) => "rate_limit_error",
        (StatusCode::SERVICE_UNAVAILABLE, _) | (_, ErrorKind::Unavailable) => "overloaded_error",
        (StatusCode::GATEWAY_TIMEOUT, _) => "timeout_error",
        (status, _) if status.is_client_error() => "invalid_request_error",
        _ => "api_error",
    }
}

/// `value` as JSON bytes; a `Value` always serialises.
fn to_json(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

/// A fresh message id, in Anthropic's form.
fn message_id() -> String {
    crate::random_id::random_id("msg_", 24)
}

/// Anthropic's `stop_reason` for why an answer ended.
fn stop_reason(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop => "end_turn",
        FinishReason::Length => "max_tokens",
        FinishReason::ToolCalls => "tool_use",
        FinishReason::ContentFilter => "refusal",
    }
}

/// Token counts as Anthropic reports them: its `input_tokens` leave out the
/// prompt tokens read from the cache, which it counts apart.
fn usage_json(usage: Usage) -> Value {
    let cached = usage.cached_input_tokens.unwrap_or(0);
    let mut out = json!({
        "input_tokens": usage.input_tokens.unwrap_or(0).saturating_sub(cached),
        "output_tokens": usage.output_tokens.unwrap_or(0),
    });
    if let Some(cached) = usage.cached_input_tokens {
        out["cache_read_input_tokens"] = json!(cached);
    }
    out
}

/// The routes of this gateway as Anthropic's model list, for a client that
/// sends `anthropic-version` to `GET /v1/models`.
pub fn model_list(names: &[&str]) -> Value {
    let data: Vec<Value> = names.iter().map(|name| model_json(name)).collect();
    json!({ "data": data, "has_more": false, "first_id": names.first(), "last_id": names.last() })
}

/// One model by its id, as Anthropic's `GET /v1/models/{id}` answers.
pub fn model_json(name: &str) -> Value {
    json!({ "type": "model", "id": name, "display_name": name, "created_at": "1970-01-01T00:00:00Z" })
}

/// Whether a request speaks Anthropic's API: its SDKs send `anthropic-version`.
pub fn is_anthropic(headers: &HeaderMap) -> bool {
    headers.contains_key("anthropic-version")
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;

    use super::*;
    use crate::dialect::Encoder;

    fn parsed(bytes: &[u8]) -> Value {
        serde_json::from_slice(bytes).unwrap_or_default()
    }

    #[test]
    fn errors_take_anthropics_shape_and_type_names() {
        let cases = [
            (ApiError::too_large(10), "request_too_large"),
            (ApiError::bad_request("no"), "invalid_request_error"),
            (ApiError::not_found("/x"), "not_found_error"),
            (ApiError::forbidden("no"), "permission_error"),
            (ApiError::internal(), "api_error"),
        ];
        for (error, kind) in cases {
            let body = parsed(&AnthropicMessages::error_body(&error));
            assert_eq!(body, json!({ "type": "error", "error": { "type": kind, "message": error.message() } }));
        }
        let denied = ApiError::denied(crate::access::Denied::Missing);
        assert_eq!(parsed(&AnthropicMessages::error_body(&denied))["error"]["type"], "authentication_error");
    }

    #[test]
    fn a_failure_after_commit_is_an_error_event_without_message_stop() {
        let mut encoder = AnthropicMessages::encoder("m", ());
        let mut out = BytesMut::new();
        encoder.write_event(Event::Text("hi".into()), &mut out);
        let failed = ApiError::new(StatusCode::BAD_GATEWAY, ErrorKind::Upstream, "idle_timeout", "it broke");
        encoder.write_failure(&failed, &mut out);
        let text = std::str::from_utf8(&out).unwrap_or_default();
        assert!(!text.contains("message_stop"), "{text}");
        let last = text.trim_end().rsplit("\n\n").next().unwrap_or_default();
        assert_eq!(
            last,
            r#"event: error
data: {"error":{"message":"it broke","type":"api_error"},"type":"error"}"#
        );
    }
}
