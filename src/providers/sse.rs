//! Bytes to SSE events, behind our own small type so the decoders and their
//! tests do not depend on the parser crate. A provider's bytes are untrusted:
//! no line or event may grow past a cap, so a stream that never sends a
//! newline fails at once instead of growing memory at wire speed.

use std::fmt::Display;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use bytes_utils::Str;
use futures_util::{Stream, StreamExt};
use sseer::errors::EventStreamError;
use sseer::event_stream::EventStream;

use super::ProviderError;

/// The largest SSE event accepted from a provider when the config does not
/// say: a chunk of an answer is a few hundred bytes, a whole Gemini response
/// with a long tool call a few KiB.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 1024 * 1024;

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

/// Parses a byte stream into SSE events, failing with
/// [`ProviderError::EventTooLarge`] as soon as one event passes
/// `max_event_bytes`. An unfinished last event is dropped by the parser,
/// which is why decoders detect truncation from end markers.
pub fn events<S, B, E>(bytes: S, max_event_bytes: usize) -> impl Stream<Item = Result<SseEvent, ProviderError>> + Send
where
    S: Stream<Item = Result<B, E>> + Send,
    B: Into<Bytes> + Send,
    E: Display + Send,
{
    let capped = Capped { bytes: Box::pin(bytes), meter: EventMeter::new(max_event_bytes), failed: false };
    EventStream::new(capped).map(|item| match item {
        Ok(event) => Ok(SseEvent { event: event.event, data: event.data }),
        Err(EventStreamError::Transport(CapError::Transport(err))) => Err(ProviderError::Io(err)),
        Err(EventStreamError::Transport(CapError::TooLarge(limit))) => Err(ProviderError::EventTooLarge(limit)),
        Err(EventStreamError::Utf8Error(err)) => Err(ProviderError::Malformed(format!("invalid utf-8: {err}"))),
    })
}

/// Why the capped byte stream stopped.
#[derive(Debug)]
enum CapError {
    Transport(String),
    TooLarge(usize),
}

impl Display for CapError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CapError::Transport(err) => f.write_str(err),
            CapError::TooLarge(limit) => write!(f, "an event is larger than {limit} bytes"),
        }
    }
}

/// The provider's bytes, measured on their way to the parser; the first
/// chunk that makes an event too large ends the stream with an error.
struct Capped<S> {
    bytes: Pin<Box<S>>,
    meter: EventMeter,
    failed: bool,
}

impl<S, B, E> Stream for Capped<S>
where
    S: Stream<Item = Result<B, E>>,
    B: Into<Bytes>,
    E: Display,
{
    type Item = Result<Bytes, CapError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.failed {
            return Poll::Ready(None);
        }
        let item = match std::task::ready!(self.bytes.as_mut().poll_next(cx)) {
            None => return Poll::Ready(None),
            Some(Err(err)) => Err(CapError::Transport(err.to_string())),
            Some(Ok(chunk)) => {
                let chunk: Bytes = chunk.into();
                if self.meter.feed(&chunk) { Ok(chunk) } else { Err(CapError::TooLarge(self.meter.limit)) }
            }
        };
        self.failed = item.is_err();
        Poll::Ready(Some(item))
    }
}

/// Counts the bytes of the event being received. An event ends at a blank
/// line; `\n`, `\r\n` and `\r` all end a line, as the SSE grammar says.
#[derive(Debug)]
struct EventMeter {
    limit: usize,
    /// Bytes of the current event so far, line ends included.
    event: usize,
    /// Whether the current line has any byte yet.
    line_started: bool,
    /// Whether the last byte was a `\r`, whose `\n` would not end another line.
    after_cr: bool,
}

impl EventMeter {
    fn new(limit: usize) -> Self {
        EventMeter { limit, event: 0, line_started: false, after_cr: false }
    }

    /// Takes the next chunk; false once the current event is over the limit.
    fn feed(&mut self, chunk: &[u8]) -> bool {
        let mut rest = chunk;
        while let Some(end) = memchr::memchr2(b'\n', b'\r', rest) {
            let (line, terminator) = (&rest[..end], rest[end]);
            if !line.is_empty() {
                self.line_started = true;
                self.after_cr = false;
            }
            self.event = self.event.saturating_add(end + 1);
            let crlf = terminator == b'\n' && self.after_cr && !self.line_started;
            if !crlf {
                if self.line_started {
                    self.line_started = false;
                } else {
                    // A blank line: the event is complete.
                    self.event = 0;
                }
            }
            self.after_cr = terminator == b'\r';
            if self.event > self.limit {
                return false;
            }
            rest = &rest[end + 1..];
        }
        if !rest.is_empty() {
            self.line_started = true;
            self.after_cr = false;
            self.event = self.event.saturating_add(rest.len());
        }
        self.event <= self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meter_accepts(limit: usize, chunks: &[&str]) -> bool {
        let mut meter = EventMeter::new(limit);
        chunks.iter().all(|chunk| meter.feed(chunk.as_bytes()))
    }

    #[test]
    fn every_line_ending_closes_an_event() {
        for sep in ["\n\n", "\r\n\r\n", "\r\r"] {
            let events = format!("data: 0123456789{sep}data: 0123456789{sep}");
            assert!(meter_accepts(20, &[&events, &events]), "events of 17 bytes each fit 20 ({sep:?})");
        }
        assert!(meter_accepts(20, &["data: 01234", "56789\r", "\n\r", "\ndata: x\n\n"]), "split CRLFs");
    }

    #[test]
    fn an_event_over_the_limit_is_refused() {
        assert!(!meter_accepts(20, &["data: 0123456789", "0123456789"]), "one endless line");
        assert!(!meter_accepts(20, &["data: 0123456789\n", "data: 0123456789\n"]), "many lines, no blank one");
        assert!(!meter_accepts(20, &["data: 0123456789\r\n", "data: 0123456789\r\n"]), "CRLF lines, no blank one");
    }

    #[tokio::test]
    async fn a_stream_without_newlines_fails_at_the_cap() {
        let flood = futures_util::stream::iter(
            std::iter::repeat_with(|| Ok::<_, std::io::Error>(Bytes::from(vec![b'x'; 4096]))).take(1000),
        );
        let first = Box::pin(events(flood, 64 * 1024)).next().await;
        assert!(matches!(first, Some(Err(ProviderError::EventTooLarge(65536)))), "got {first:?}");
    }
}
