//! OpenAI Responses, the dialect of `POST /v1/responses`: what the OpenAI
//! SDKs' `client.responses`, the Codex CLI and the Vercel AI SDK's default
//! OpenAI provider speak. Requests are parsed into the normalised request
//! ([`parse`]); events go back as the Responses stream, each event with its
//! `sequence_number` ([`ResponseEncoder`]), or as one `response` object;
//! errors in OpenAI's shape. A turn the client lets baton keep is handed,
//! once its answer is whole, to the door's [`Keeper`]; a turn chained with
//! `previous_response_id` is rebuilt from the kept ones ([`continue_from`]).

mod request;
mod stream;

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use http::request::Parts;
use serde_json::{Map, Value};

pub use request::{Referenced, StoredTurn, continue_from, parse, request_input};
pub use stream::{ResponseEncoder, response_of_item};

use super::{ApiError, Dialect, Encoder, Ingress, OPENAI_HEADERS};
use crate::event::Event;
use crate::request::Native;

/// The OpenAI Responses dialect.
pub struct OpenAiResponses;

/// What a Responses client asked that its answer repeats or needs.
#[derive(Default)]
pub struct Options {
    /// The request's fields a `response` object echoes (`instructions`,
    /// `tools`, `text`…), as the client sent them.
    pub echo: Map<String, Value>,
    /// The request as sent: a kept turn keeps its input from here, and a
    /// chained one is rebuilt from it.
    pub body: Bytes,
    /// The kept response this turn continues (`previous_response_id`).
    pub previous: Option<String>,
    /// The ids of earlier output items the input refers to
    /// (`item_reference`), to be found in the kept turns.
    pub references: Vec<String>,
    /// Whether the client lets this turn be kept (`store`; OpenAI's default is yes).
    pub store: bool,
    /// The freeform (`custom`) tools the client offered: a call of one is
    /// answered as a `custom_tool_call`, its input unwrapped.
    pub custom_tools: Vec<String>,
    /// Where the answer goes once it is whole, when it is kept; without
    /// one the answer says `store: false`.
    pub keeper: Option<Box<dyn Keeper>>,
    /// The provider that answered, once one has.
    pub maker: Option<Arc<str>>,
}

/// Keeps a Responses turn for a later `previous_response_id`: given the
/// whole `response` object (completed or incomplete, never failed) just
/// before the client gets its end, so the next turn finds it.
pub trait Keeper: Send {
    /// Keeps the turn whose answer is `response`, written by `maker`.
    fn keep(self: Box<Self>, response: &Value, maker: &str);
}

impl Dialect for OpenAiResponses {
    const NAME: &'static str = "openai_responses";

    type Options = Options;
    type Encoder = ResponseEncoder;

    fn parse(body: Bytes, head: &Parts) -> Result<Ingress<Options>, ApiError> {
        let native = Native::new(body.clone(), &head.headers, &OPENAI_HEADERS);
        let mut ingress = parse(body)?;
        ingress.request.native = Some(native);
        Ok(ingress)
    }

    fn answered_by(options: &mut Options, provider: &Arc<str>) {
        options.maker = Some(Arc::clone(provider));
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
