//! OpenAI Responses, the dialect of `POST /v1/responses`: what the OpenAI
//! SDKs' `client.responses`, the Codex CLI and the Vercel AI SDK's default
//! OpenAI provider speak. Requests are parsed into the normalised request
//! ([`parse`]); events go back as the Responses stream, each event with its
//! `sequence_number` ([`ResponseEncoder`]), or as one `response` object;
//! errors in OpenAI's shape. baton keeps no conversation state: every answer
//! says `store: false`.

mod request;
mod stream;

use bytes::{Bytes, BytesMut};
use http::request::Parts;
use serde_json::{Map, Value};

pub use request::parse;
pub use stream::ResponseEncoder;

use super::{ApiError, Dialect, Encoder, Ingress, OPENAI_HEADERS};
use crate::event::Event;
use crate::request::Native;

/// The OpenAI Responses dialect.
pub struct OpenAiResponses;

/// What a Responses client asked that its answer repeats or needs.
pub struct Options {
    /// The request's fields a `response` object echoes (`instructions`,
    /// `tools`, `text`…), as the client sent them.
    pub echo: Map<String, Value>,
}

impl Dialect for OpenAiResponses {
    const NAME: &'static str = "openai_responses";

    type Options = Options;
    type Encoder = ResponseEncoder;

    fn parse(body: Bytes, head: &Parts) -> Result<Ingress<Options>, ApiError> {
        let mut ingress = parse(&body)?;
        ingress.request.native = Some(Native::new(body, &head.headers, &OPENAI_HEADERS));
        Ok(ingress)
    }

    fn encoder(model: &str, options: Options) -> ResponseEncoder {
        ResponseEncoder::new(model, options)
    }

    /// The same encoder's final `response` object: one path for both forms.
    fn completion(model: &str, options: Options, events: Vec<Event>) -> Vec<u8> {
        let mut encoder = ResponseEncoder::new(model, options);
        let mut ignored = BytesMut::new();
        for event in events {
            encoder.write_event(event, &mut ignored);
            ignored.clear();
        }
        serde_json::to_vec(&encoder.into_response()).unwrap_or_default()
    }

    fn error_body(error: &ApiError) -> Vec<u8> {
        serde_json::to_vec(&super::openai::error_json(error)).unwrap_or_default()
    }
}
