//! Bytes to SSE events, behind our own small type so the decoders and their
//! tests do not depend on the parser crate.

use std::fmt::Display;

use bytes::Bytes;
use bytes_utils::Str;
use futures_util::{Stream, StreamExt};
use sseer::errors::EventStreamError;
use sseer::event_stream::EventStream;

use super::ProviderError;

/// One server-sent event: its name (`message` when none was given) and data,
/// both slices of the bytes read from the provider rather than copies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, `message` by default.
    pub event: Str,
    /// The `data:` lines joined by newlines.
    pub data: Str,
}

impl SseEvent {
    /// An event named `event` carrying `data`, for decoders' tests and benchmarks.
    pub fn new(event: &str, data: &str) -> Self {
        SseEvent { event: Str::from(event.to_owned()), data: Str::from(data.to_owned()) }
    }
}

/// Parses a byte stream into SSE events. An unfinished last event is dropped by
/// the parser, which is why decoders detect truncation from end markers.
pub fn events<S, B, E>(bytes: S) -> impl Stream<Item = Result<SseEvent, ProviderError>> + Send
where
    S: Stream<Item = Result<B, E>> + Send,
    B: Into<Bytes> + Send,
    E: Display + Send,
{
    EventStream::new(bytes).map(|item| match item {
        Ok(event) => Ok(SseEvent { event: event.event, data: event.data }),
        Err(EventStreamError::Transport(err)) => Err(ProviderError::Io(err.to_string())),
        Err(EventStreamError::Utf8Error(err)) => Err(ProviderError::Malformed(format!("invalid utf-8: {err}"))),
    })
}
