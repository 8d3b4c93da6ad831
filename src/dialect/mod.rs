//! Client wire formats. A dialect is to clients what an adapter is to
//! providers: pure translation from its request body into the normalised
//! [`ChatRequest`], and from the [`Event`] stream back into its wire format,
//! errors included. Routing, deadlines, commit, failover and resume are shared,
//! so every dialect gets all of them; the HTTP layer serves each one through
//! the same generic handler. Nothing here knows axum or the core.

pub mod anthropic;
mod error;
mod fields;
pub mod gemini;
pub mod openai;
pub mod responses;
mod sse;

use bytes::{Bytes, BytesMut};
use http::request::Parts;

pub use error::{ApiError, ErrorKind};

use crate::event::{ChatRequest, Event};

/// The headers that belong to OpenAI's APIs and go with the body to a
/// target that speaks the client's OpenAI dialect.
const OPENAI_HEADERS: [&str; 3] = ["openai-beta", "openai-organization", "openai-project"];

/// A client wire format, served by the HTTP layer's generic handlers: adding
/// one is a folder implementing this and one route line. Its functions take
/// no `self`, so a dialect is a type parameter, resolved at compile time.
pub trait Dialect: Send + Sync + 'static {
    /// What the client asked of the answer's form beyond its events (OpenAI's
    /// `stream_options.include_usage`), carried from the request to the encoder.
    type Options: Send + 'static;
    /// Writes one streamed answer in this dialect.
    type Encoder: Encoder;

    /// The dialect's name in the request log (`openai_chat`, …).
    const NAME: &'static str;

    /// Checks a request body and turns it into the normalised request; a body
    /// the dialect cannot take is a 400 saying why. The request's head
    /// carries what belongs to the dialect's API beside the body: headers
    /// (`anthropic-beta`), and for some the model and the form of the
    /// answer in the path (Gemini's `models/{model}:streamGenerateContent`).
    fn parse(body: Bytes, head: &Parts) -> Result<Ingress<Self::Options>, ApiError>;

    /// The client key the request presents, where this dialect's clients
    /// put it: `Authorization: Bearer` or `x-api-key` unless a dialect
    /// names its own places.
    fn presented_key(head: &Parts) -> Option<&str> {
        crate::access::presented_key(&head.headers)
    }

    /// The encoder for one streamed answer from the upstream `model` that
    /// committed (reported as the answer's model, so cost dashboards
    /// attribute a failover to the fallback).
    fn encoder(model: &str, options: Self::Options) -> Self::Encoder;

    /// Tells the options which provider answered, before the encoder is
    /// made: a dialect that keeps answers (Responses) keeps who wrote them.
    fn answered_by(_options: &mut Self::Options, _provider: &std::sync::Arc<str>) {}

    /// A whole answer as one JSON body, for a client that did not stream.
    fn completion(model: &str, options: Self::Options, events: Vec<Event>) -> Vec<u8>;

    /// The JSON body of an error response, in the shape this dialect's SDKs
    /// parse into their usual exceptions (the status and `Retry-After` are
    /// the HTTP layer's).
    fn error_body(error: &ApiError) -> Vec<u8>;
}

/// Writes a committed stream as SSE, appending each event's bytes to a
/// buffer the relay owns (`Unpin`, so the relay holds it in place).
pub trait Encoder: Send + Unpin + 'static {
    /// Appends the bytes for one event (possibly none: usage may be held for
    /// the end).
    fn write_event(&mut self, event: Event, out: &mut BytesMut);

    /// Appends the end of a complete answer (OpenAI: the usage chunk if asked
    /// for, then `[DONE]`).
    fn write_done(&mut self, out: &mut BytesMut);

    /// Appends the end of an answer that failed after commit: an error event,
    /// and never the complete answer's end marker, so no client takes a
    /// truncated answer for a complete one.
    fn write_failure(&mut self, error: &ApiError, out: &mut BytesMut);

    /// The error event that ends a stream whose relay panicked: the encoder
    /// itself is gone with the panic, so this takes nothing.
    fn panicked() -> Bytes;
}

/// A parsed request: the normalised request and what the answer needs.
pub struct Ingress<O> {
    /// The route name the client sent as its model.
    pub model: String,
    /// Whether the answer is streamed as SSE.
    pub stream: bool,
    /// The request every adapter translates.
    pub request: ChatRequest,
    /// What the dialect's encoder needs from the request.
    pub options: O,
}

/// What the encoders' tests of every dialect share, in the crate and in
/// the integration tests that read an encoder's output back.
#[cfg(any(test, feature = "test-support"))]
pub mod test_support {
    use serde_json::Value;

    /// The head of a `POST` to `path` with `headers`, for a dialect's parse.
    pub fn head(path: &str, headers: http::HeaderMap) -> http::request::Parts {
        let mut request = http::Request::new(());
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = path.parse().unwrap_or_default();
        *request.headers_mut() = headers;
        request.into_parts().0
    }

    use crate::event::{Event, ToolCallDelta};

    /// A tool-call event: the first of a call carries its id and name.
    pub fn call(index: u32, id: Option<&str>, name: Option<&str>, arguments: &str) -> Event {
        Event::ToolCall(ToolCallDelta {
            index,
            id: id.map(str::to_owned),
            name: name.map(str::to_owned),
            arguments: arguments.to_owned(),
        })
    }

    /// What `encoder` writes for `answer`, ended as a complete answer.
    pub fn encoded(mut encoder: impl super::Encoder, answer: Vec<Event>) -> bytes::BytesMut {
        let mut out = bytes::BytesMut::new();
        for event in answer {
            encoder.write_event(event, &mut out);
        }
        encoder.write_done(&mut out);
        out
    }

    /// Each named SSE event of `bytes`, as (name, data); whole events only.
    pub fn named_events(bytes: &[u8]) -> Vec<(String, Value)> {
        let text = std::str::from_utf8(bytes).unwrap_or_default();
        assert!(text.ends_with("\n\n"), "whole events only: {text:?}");
        text.split_terminator("\n\n")
            .map(|event| {
                let (name, data) = event.split_once('\n').unwrap_or_default();
                let name = name.strip_prefix("event: ").unwrap_or_default().to_owned();
                let data = serde_json::from_str(data.strip_prefix("data: ").unwrap_or_default()).unwrap_or_default();
                (name, data)
            })
            .collect()
    }
}
