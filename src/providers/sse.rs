//! Bytes to SSE events, behind our own small type so the decoders and their
//! tests do not depend on the parser crate.

use std::fmt::Display;

use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};

use super::ProviderError;

/// One server-sent event: its name (`message` when none was given) and data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, `message` by default.
    pub event: String,
    /// The `data:` lines joined by newlines.
    pub data: String,
}

impl SseEvent {
    /// An unnamed event carrying `data`, as OpenAI and Gemini send them.
    pub fn data(data: impl Into<String>) -> Self {
        SseEvent { event: "message".to_owned(), data: data.into() }
    }
}

/// Parses a byte stream into SSE events. An unfinished last event is dropped by
/// the parser, which is why decoders detect truncation from end markers.
pub fn events<S, B, E>(bytes: S) -> impl Stream<Item = Result<SseEvent, ProviderError>> + Send
where
    S: Stream<Item = Result<B, E>> + Send,
    B: AsRef<[u8]> + Send,
    E: Display + Send,
{
    bytes.eventsource().map(|item| match item {
        Ok(event) => Ok(SseEvent { event: event.event, data: event.data }),
        Err(EventStreamError::Transport(err)) => Err(ProviderError::Io(err.to_string())),
        Err(EventStreamError::Utf8(err)) => Err(ProviderError::Malformed(format!("invalid utf-8: {err}"))),
        Err(EventStreamError::Parser(err)) => Err(ProviderError::Malformed(format!("invalid sse: {err}"))),
    })
}
