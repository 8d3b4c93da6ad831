//! Bytes to SSE events, as the SSE grammar reads them, behind our own small
//! type so the decoders do not depend on how the bytes are cut. A
//! provider's bytes are untrusted: no line or event may grow past a cap, so
//! a stream that never sends a newline fails at once instead of growing
//! memory at wire speed.
//!
//! The parser is baton's own because it is on the path of every token: it
//! finds each line end once, keeps each data line a slice of the bytes read
//! (a line cut between two reads is the only copy), checks the cap as it
//! goes, and checks UTF-8 once an event, only in what a decoder reads (the
//! event's name and data). The `sseer` crate behind a separate count for
//! the cap scanned every byte twice and checked every line: this took the
//! SSE layer from about 1,770 instructions an event to 1,070
//! (docs/performance.md). The property test below holds it to `sseer`'s
//! events on every stream of fields, cut anywhere.

use std::fmt::Display;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use bytes_utils::Str;
use futures_util::Stream;

use super::ProviderError;

/// The largest SSE event accepted from a provider when the config does not
/// say: a chunk of an answer is a few hundred bytes, a whole Gemini response
/// with a long tool call a few KiB.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 1024 * 1024;

/// The byte order mark a stream may start with; it is not part of the first line.
const BOM: &[u8] = b"\xEF\xBB\xBF";

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
/// `max_event_bytes`. An unfinished last event is dropped, as the SSE
/// grammar says, which is why decoders detect truncation from end markers.
pub fn events<S, B, E>(
    bytes: S,
    max_event_bytes: usize,
) -> impl Stream<Item = Result<SseEvent, ProviderError>> + Send + Unpin
where
    S: Stream<Item = Result<B, E>> + Send,
    B: Into<Bytes> + Send,
    E: Display + Send,
{
    Events { bytes: Box::pin(bytes), parser: Parser::new(max_event_bytes), ended: false }
}

/// The byte stream through the parser: every event of what was read
/// before the next read, and nothing after the first error.
struct Events<S> {
    bytes: Pin<Box<S>>,
    parser: Parser,
    ended: bool,
}

impl<S, B, E> Stream for Events<S>
where
    S: Stream<Item = Result<B, E>>,
    B: Into<Bytes>,
    E: Display,
{
    type Item = Result<SseEvent, ProviderError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if this.ended {
                return Poll::Ready(None);
            }
            match this.parser.next_event() {
                Ok(Some(event)) => return Poll::Ready(Some(Ok(event))),
                Ok(None) => {}
                Err(err) => {
                    this.ended = true;
                    return Poll::Ready(Some(Err(err)));
                }
            }
            match ready!(this.bytes.as_mut().poll_next(cx)) {
                Some(Ok(chunk)) => this.parser.push(chunk.into()),
                Some(Err(err)) => {
                    this.ended = true;
                    return Poll::Ready(Some(Err(ProviderError::Io(err.to_string()))));
                }
                None => this.ended = true,
            }
        }
    }
}

/// The SSE grammar over bytes that come in pieces cut anywhere.
#[derive(Debug)]
struct Parser {
    limit: usize,
    /// Bytes read and not yet looked at.
    unread: Bytes,
    /// The start of a line whose end is still to be read.
    partial: BytesMut,
    /// The last line ended with CR, so a LF next is part of that line end.
    after_cr: bool,
    /// Whether the first line, which may start with a byte order mark, is still to come.
    first_line: bool,
    /// The current event's `event` field, when it has one.
    name: Option<Bytes>,
    data: Data,
    /// Bytes of the current event so far, line ends included.
    size: usize,
}

/// The current event's `data` lines.
#[derive(Debug)]
enum Data {
    None,
    /// One line, a slice of the bytes read.
    One(Bytes),
    /// Several, joined by LF.
    Joined(BytesMut),
}

impl Parser {
    fn new(limit: usize) -> Self {
        Parser {
            limit,
            unread: Bytes::new(),
            partial: BytesMut::new(),
            after_cr: false,
            first_line: true,
            name: None,
            data: Data::None,
            size: 0,
        }
    }

    /// Takes the next bytes read, once every event before them has been taken.
    fn push(&mut self, bytes: Bytes) {
        debug_assert!(self.unread.is_empty(), "bytes pushed before the last were read");
        self.unread = bytes;
    }

    /// The next complete event in what was pushed, if any.
    fn next_event(&mut self) -> Result<Option<SseEvent>, ProviderError> {
        while let Some(line) = self.next_line()? {
            if let Some(event) = self.take(line)? {
                return Ok(Some(event));
            }
        }
        Ok(None)
    }

    /// The next complete line, without its end; a line not yet ended is
    /// kept for the next bytes, as long as its event stays within the cap.
    fn next_line(&mut self) -> Result<Option<Bytes>, ProviderError> {
        if self.after_cr && !self.unread.is_empty() {
            if self.unread[0] == b'\n' {
                self.unread.advance(1);
            }
            self.after_cr = false;
        }
        let Some(end) = memchr::memchr2(b'\n', b'\r', &self.unread) else {
            self.partial.extend_from_slice(&self.unread);
            self.unread = Bytes::new();
            if self.size.saturating_add(self.partial.len()) > self.limit {
                return Err(ProviderError::EventTooLarge(self.limit));
            }
            return Ok(None);
        };
        let mut line = self.unread.split_to(end);
        self.after_cr = self.unread[0] == b'\r';
        self.unread.advance(1);
        if !self.partial.is_empty() {
            self.partial.extend_from_slice(&line);
            line = self.partial.split().freeze();
        }
        if std::mem::take(&mut self.first_line) && line.starts_with(BOM) {
            line.advance(BOM.len());
        }
        self.size = self.size.saturating_add(line.len() + 1);
        Ok(Some(line))
    }

    /// Reads one line into the current event; a blank line ends it.
    fn take(&mut self, mut line: Bytes) -> Result<Option<SseEvent>, ProviderError> {
        if line.is_empty() {
            self.size = 0;
            return self.dispatch();
        }
        if self.size > self.limit {
            return Err(ProviderError::EventTooLarge(self.limit));
        }
        let field_end = match memchr::memchr(b':', &line) {
            // A comment.
            Some(0) => return Ok(None),
            Some(colon) => colon,
            None => line.len(),
        };
        let (is_data, is_event) = (&line[..field_end] == b"data", &line[..field_end] == b"event");
        if !is_data && !is_event {
            return Ok(None);
        }
        // The value: after the colon and one space, if there is one.
        let skip = if line.get(field_end + 1) == Some(&b' ') { field_end + 2 } else { field_end + 1 };
        line.advance(skip.min(line.len()));
        if is_data {
            self.data.push(line);
        } else {
            self.name = Some(line);
        }
        Ok(None)
    }

    /// The event its blank line ends, unless it has no data.
    fn dispatch(&mut self) -> Result<Option<SseEvent>, ProviderError> {
        let name = self.name.take();
        let data = match std::mem::replace(&mut self.data, Data::None) {
            Data::None => return Ok(None),
            Data::One(data) => data,
            Data::Joined(data) => data.freeze(),
        };
        let event = match name {
            Some(name) if !name.is_empty() => text(name)?,
            _ => Str::from_static("message"),
        };
        Ok(Some(SseEvent { event, data: text(data)? }))
    }
}

impl Data {
    fn push(&mut self, line: Bytes) {
        *self = match std::mem::replace(self, Data::None) {
            Data::None => Data::One(line),
            Data::One(first) => {
                let mut joined = BytesMut::with_capacity(first.len() + 1 + line.len());
                joined.extend_from_slice(&first);
                joined.put_u8(b'\n');
                joined.extend_from_slice(&line);
                Data::Joined(joined)
            }
            Data::Joined(mut joined) => {
                joined.put_u8(b'\n');
                joined.extend_from_slice(&line);
                Data::Joined(joined)
            }
        }
    }
}

/// `bytes` as text, or why they are not.
fn text(bytes: Bytes) -> Result<Str, ProviderError> {
    Str::from_inner(bytes).map_err(|err| ProviderError::Malformed(format!("invalid utf-8: {}", err.utf8_error())))
}

#[cfg(test)]
mod tests {
    use std::task::Waker;

    use futures_util::StreamExt;
    use proptest::prelude::*;

    use super::*;

    /// Every event of `chunks`, and the error that ended them if one did.
    fn parse(limit: usize, chunks: &[&[u8]]) -> Vec<Result<(String, String), String>> {
        let chunks: Vec<Result<Bytes, String>> = chunks.iter().map(|c| Ok(Bytes::copy_from_slice(c))).collect();
        drain(
            events(futures_util::stream::iter(chunks), limit)
                .map(|item| item.map(|e| (e.event.to_string(), e.data.to_string())).map_err(|err| err.to_string())),
        )
    }

    /// What a stream that is always ready yields, read to its end.
    fn drain<T>(stream: impl Stream<Item = T>) -> Vec<T> {
        let mut stream = Box::pin(stream);
        let mut cx = Context::from_waker(Waker::noop());
        let mut out = Vec::new();
        while let Poll::Ready(Some(item)) = stream.as_mut().poll_next(&mut cx) {
            out.push(item);
        }
        out
    }

    fn accepts(limit: usize, chunks: &[&str]) -> bool {
        let chunks: Vec<&[u8]> = chunks.iter().map(|c| c.as_bytes()).collect();
        parse(limit, &chunks).iter().all(Result::is_ok)
    }

    #[test]
    fn every_line_ending_closes_an_event() {
        for sep in ["\n\n", "\r\n\r\n", "\r\r"] {
            let events = format!("data: 0123456789{sep}data: 0123456789{sep}");
            assert!(accepts(20, &[&events, &events]), "events of 17 bytes each fit 20 ({sep:?})");
        }
        assert!(accepts(20, &["data: 01234", "56789\r", "\n\r", "\ndata: x\n\n"]), "split CRLFs");
        let read = parse(20, &[b"data: 01234", b"56789\r", b"\n\r", b"\ndata: x\n\n"]);
        let expected = [("message", "0123456789"), ("message", "x")].map(|(e, d)| Ok((e.to_owned(), d.to_owned())));
        assert_eq!(read, expected);
    }

    #[test]
    fn an_event_over_the_limit_is_refused() {
        assert!(!accepts(20, &["data: 0123456789", "0123456789"]), "one endless line");
        assert!(!accepts(20, &["data: 0123456789\n", "data: 0123456789\n"]), "many lines, no blank one");
        assert!(!accepts(20, &["data: 0123456789\r\n", "data: 0123456789\r\n"]), "CRLF lines, no blank one");
        let read = parse(20, &[b"data: a\n\n", b"data: 0123456789\ndata: 0123456789\n\ndata: b\n\n"]);
        let refused = ProviderError::EventTooLarge(20).to_string();
        assert_eq!(read, vec![Ok(("message".to_owned(), "a".to_owned())), Err(refused)], "nothing after the error");
    }

    #[tokio::test]
    async fn a_stream_without_newlines_fails_at_the_cap() {
        let flood = futures_util::stream::iter(
            std::iter::repeat_with(|| Ok::<_, std::io::Error>(Bytes::from(vec![b'x'; 4096]))).take(1000),
        );
        let first = Box::pin(events(flood, 64 * 1024)).next().await;
        assert!(matches!(first, Some(Err(ProviderError::EventTooLarge(65536)))), "got {first:?}");
    }

    #[test]
    fn fields_read_as_the_sse_grammar_says() {
        let stream: &[u8] =
            b"\xEF\xBB\xBFdata: a\n\n: a comment \xFF\nevent: first\nevent\ndata\nid: 7\nretry: 5\nfoo: \xFF\n\n\
            event:named\ndata:b\ndata:  c\n\nevent: lost\n\ndata: cut short";
        let read = parse(1024, &[stream]);
        let expected = [("message", "a"), ("message", ""), ("named", "b\n c")];
        assert_eq!(read, expected.map(|(e, d)| Ok((e.to_owned(), d.to_owned()))));
        for cut in 1..3 {
            assert_eq!(
                parse(1024, &[&stream[..cut], &stream[cut..]])[0],
                Ok(("message".into(), "a".into())),
                "BOM cut"
            );
        }
    }

    #[test]
    fn data_that_is_not_utf8_fails_the_stream() {
        let read = parse(1024, &[b"data: ok\n\ndata: \xF0\x9F\n\ndata: after\n\n"]);
        assert_eq!(read.len(), 2, "{read:?}");
        assert!(matches!(&read[1], Err(why) if why.contains("invalid utf-8")), "{read:?}");
        // A character cut between two reads is whole again in the event.
        let smile = "data: 😀\n\n".as_bytes();
        assert_eq!(parse(1024, &[&smile[..8], &smile[8..]]), vec![Ok(("message".to_owned(), "😀".to_owned()))]);
    }

    /// A line of a stream the property test writes: fields the decoders
    /// read, fields they do not, comments and blank lines, with any of the
    /// three line ends.
    fn line() -> impl Strategy<Value = String> {
        let value = "[a-z :é😀]{0,12}";
        let text = prop_oneof![
            value.prop_map(|v| format!("data: {v}")),
            value.prop_map(|v| format!("data:{v}")),
            Just("data".to_owned()),
            "[a-z_]{0,8}".prop_map(|v| format!("event: {v}")),
            "[a-z_]{0,8}".prop_map(|v| format!("event:{v}")),
            value.prop_map(|v| format!(":{v}")),
            value.prop_map(|v| format!("id: {v}")),
            Just("retry: 1000".to_owned()),
            value.prop_map(|v| format!("other: {v}")),
            Just(String::new()),
            Just(String::new()),
        ];
        (text, prop_oneof![Just("\n"), Just("\r\n"), Just("\r")]).prop_map(|(text, end)| text + end)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Every stream reads as `sseer` reads it, however its bytes are
        /// cut: at line ends, inside them and inside characters.
        #[test]
        fn reads_as_sseer_does(
            bom in any::<bool>(),
            lines in proptest::collection::vec(line(), 0..40),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
        ) {
            let mut stream = if bom { BOM.to_vec() } else { Vec::new() };
            stream.extend(lines.concat().into_bytes());
            // A last CR could still be the start of a CRLF, which sseer waits to see.
            stream.push(b'\n');
            let mut at: Vec<usize> = cuts.iter().map(|cut| cut.index(stream.len() + 1)).collect();
            at.sort_unstable();
            let mut chunks = Vec::new();
            let mut from = 0;
            for to in at.into_iter().chain([stream.len()]) {
                chunks.push(&stream[from..to]);
                from = to;
            }
            let ours = parse(usize::MAX, &chunks);
            let bytes: Vec<Result<Bytes, String>> = chunks.iter().map(|c| Ok(Bytes::copy_from_slice(c))).collect();
            let theirs = drain(sseer::event_stream::EventStream::new(futures_util::stream::iter(bytes)).map(|item| {
                item.map(|e| (e.event.to_string(), e.data.to_string())).map_err(|err| err.to_string())
            }));
            prop_assert_eq!(ours, theirs);
        }
    }
}
