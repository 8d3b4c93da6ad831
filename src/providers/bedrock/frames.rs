//! Bedrock's answer, AWS's binary event stream
//! (`application/vnd.amazon.eventstream`: a prelude, headers, a payload and
//! two CRC32s a message), as the events its decoder reads. A `chunk`
//! carries one Anthropic Messages event, base64 in its `bytes`, and becomes
//! that event's JSON, so Claude on Bedrock is read by the Anthropic decoder;
//! an exception message becomes the failure it names. A bad CRC or frame
//! fails the stream as `malformed`.
//!
//! Messages are read in place: the reader checks both CRCs and walks the
//! headers over the frame's own bytes, so a chunk costs one allocation (its
//! decoded event). `aws-smithy-eventstream`, AWS's reader, copies every
//! header and payload; it stays the writer of the simulated Bedrock's
//! frames and, in a property test, the reference this reader must agree with.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use base64::Engine as _;
use bytes::{Buf, BytesMut};
use bytes_utils::Str;
use futures_util::{Stream, StreamExt};
use serde::Deserialize;

use crate::providers::{Body, Frames, ProviderError, SseEvent};

/// A message's bytes beyond its payload that count towards the event cap:
/// the prelude, the CRCs and the three headers Bedrock sends.
const FRAME_OVERHEAD: usize = 1024;

/// A message's prelude: its length, its headers' length and their CRC.
const PRELUDE: usize = 12;

/// The message CRC that ends every message.
const MESSAGE_CRC: usize = 4;

/// `body` as events, an event larger than `max_event_bytes` failing the stream.
pub(super) fn events(body: Body, max_event_bytes: usize) -> Frames {
    Box::pin(EventStream {
        body,
        buffer: BytesMut::new(),
        decoded: BytesMut::new(),
        max_message_bytes: max_event_bytes.saturating_add(FRAME_OVERHEAD),
        max_event_bytes,
        ended: false,
    })
}

/// The body cut into messages, one at a time.
struct EventStream {
    body: Body,
    /// Bytes read and not yet a whole message.
    buffer: BytesMut,
    /// Where chunks' events are base64-decoded, each split off as its own.
    decoded: BytesMut,
    max_message_bytes: usize,
    max_event_bytes: usize,
    ended: bool,
}

impl Stream for EventStream {
    type Item = Result<SseEvent, ProviderError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if this.ended {
                return Poll::Ready(None);
            }
            if let Some(step) = this.next_message() {
                this.ended |= step.is_err();
                return Poll::Ready(Some(step));
            }
            match ready!(this.body.poll_next_unpin(cx)) {
                Some(Ok(bytes)) => this.buffer.extend_from_slice(&bytes),
                Some(Err(err)) => {
                    this.ended = true;
                    return Poll::Ready(Some(Err(ProviderError::Io(err))));
                }
                // A message cut off by the end is no message: the decoder
                // reports the answer truncated.
                None => this.ended = true,
            }
        }
    }
}

impl EventStream {
    /// The next whole message in the buffer as an event, or `None` until
    /// more bytes come. A message is read only once all of it is here; its
    /// prelude is checked first, so a corrupt length is `malformed` and a
    /// message too large is refused before it is held.
    fn next_message(&mut self) -> Option<Result<SseEvent, ProviderError>> {
        let prelude = self.buffer.get(..PRELUDE)?;
        if crc32fast::hash(&prelude[..8]) != be32(prelude, 8) {
            return Some(Err(ProviderError::Malformed("an event-stream prelude fails its CRC".to_owned())));
        }
        let length = be32(prelude, 0) as usize;
        if length > self.max_message_bytes {
            return Some(Err(ProviderError::EventTooLarge(self.max_event_bytes)));
        }
        if self.buffer.len() < length {
            return None;
        }
        let event = Message::read(&self.buffer[..length])
            .map_err(|err| ProviderError::Malformed(format!("an event-stream frame: {err}")))
            .and_then(|message| message.event(&mut self.decoded));
        self.buffer.advance(length);
        Some(event)
    }
}

/// The big-endian `u32` at `at`, or 0 past the end (the callers have
/// checked the length).
fn be32(bytes: &[u8], at: usize) -> u32 {
    bytes.get(at..at + 4).and_then(|word| word.try_into().ok()).map_or(0, u32::from_be_bytes)
}

/// One message, read in place: its header block and payload are slices of
/// the bytes it came in.
#[derive(Debug, PartialEq)]
struct Message<'a> {
    headers: &'a [u8],
    payload: &'a [u8],
    /// `:message-type` and `:event-type`, which every message is read by,
    /// found as the headers are checked.
    message_type: Option<&'a str>,
    event_type: Option<&'a str>,
}

/// A header's value type: a string (7) has a 16-bit length, as does a byte
/// array (6); the others have a fixed size.
fn value_size(kind: u8, rest: &[u8]) -> Result<(usize, usize), &'static str> {
    Ok(match kind {
        0 | 1 => (0, 0),
        2 => (0, 1),
        3 => (0, 2),
        4 => (0, 4),
        5 | 8 => (0, 8),
        9 => (0, 16),
        6 | 7 => match rest {
            [high, low, ..] => (2, usize::from(u16::from_be_bytes([*high, *low]))),
            _ => return Err("a header value's length is cut off"),
        },
        _ => return Err("a header of an unknown value type"),
    })
}

/// One header of a message, in place.
struct Header<'a> {
    name: &'a [u8],
    /// Its value type (7 a string).
    kind: u8,
    value: &'a [u8],
}

/// The first header of `block`, and the rest of the block.
fn split_header(block: &[u8]) -> Result<(Header<'_>, &[u8]), &'static str> {
    let (&name_length, rest) = block.split_first().ok_or("an empty header")?;
    let name =
        rest.get(..usize::from(name_length)).filter(|name| !name.is_empty()).ok_or("a header's name is cut off")?;
    let rest = &rest[name.len()..];
    let (&kind, rest) = rest.split_first().ok_or("a header without a value type")?;
    let (skip, size) = value_size(kind, rest)?;
    let value = rest.get(skip..skip + size).ok_or("a header's value is cut off")?;
    Ok((Header { name, kind, value }, &rest[skip + size..]))
}

/// A header's value as text, if it is a string (type 7).
fn string(kind: u8, value: &[u8]) -> Option<&str> {
    if kind == 7 { std::str::from_utf8(value).ok() } else { None }
}

impl<'a> Message<'a> {
    /// `whole`, exactly one message, with both its CRCs checked and every
    /// header well formed (names and string values UTF-8).
    fn read(whole: &'a [u8]) -> Result<Self, &'static str> {
        if whole.len() < PRELUDE + MESSAGE_CRC || be32(whole, 0) as usize != whole.len() {
            return Err("a message's length is not its prelude's");
        }
        if crc32fast::hash(&whole[..8]) != be32(whole, 8) {
            return Err("a prelude fails its CRC");
        }
        let end = whole.len() - MESSAGE_CRC;
        if crc32fast::hash(&whole[..end]) != be32(whole, end) {
            return Err("a message fails its CRC");
        }
        let headers_end = PRELUDE
            .checked_add(be32(whole, 4) as usize)
            .filter(|at| *at <= end)
            .ok_or("the headers overrun the message")?;
        let headers = &whole[PRELUDE..headers_end];
        let (mut message_type, mut event_type) = (None, None);
        let mut block = headers;
        // A block all ASCII (lengths and types included, as Bedrock's are)
        // has UTF-8 names and strings whatever they are; any other has each checked.
        let is_ascii = block.is_ascii();
        while !block.is_empty() {
            let (Header { name, kind, value }, rest) = split_header(block)?;
            let is_text = |bytes: &[u8]| is_ascii || std::str::from_utf8(bytes).is_ok();
            if !is_text(name) || (kind == 7 && !is_text(value)) {
                return Err("a header is not UTF-8");
            }
            let found = match name {
                b":message-type" => &mut message_type,
                b":event-type" => &mut event_type,
                _ => &mut None,
            };
            if found.is_none() {
                *found = Some(string(kind, value));
            }
            block = rest;
        }
        let payload = &whole[headers_end..end];
        Ok(Self { headers, payload, message_type: message_type.flatten(), event_type: event_type.flatten() })
    }

    /// Header `name`, if it is a string.
    fn header(&self, name: &str) -> Option<&'a str> {
        let mut block = self.headers;
        while let Ok((header, rest)) = split_header(block) {
            if header.name == name.as_bytes() {
                return string(header.kind, header.value);
            }
            block = rest;
        }
        None
    }

    /// The event this message is, or the failure it reports; a chunk's
    /// event is decoded into `decoded` and split off it.
    fn event(&self, decoded: &mut BytesMut) -> Result<SseEvent, ProviderError> {
        match self.message_type {
            Some("event") => {}
            Some("exception") => return Err(self.exception()),
            Some("error") => {
                let code = self.header(":error-code").unwrap_or("error");
                let text = self.header(":error-message").unwrap_or_default();
                return Err(ProviderError::ErrorEvent(format!("{code}: {text}")));
            }
            other => return Err(ProviderError::Malformed(format!("an event-stream message of type {other:?}"))),
        }
        match self.event_type {
            Some("chunk") => Ok(SseEvent { event: Str::from_static("chunk"), data: chunk(self.payload, decoded)? }),
            Some(name) => {
                let data = std::str::from_utf8(self.payload)
                    .map(Str::from)
                    .map_err(|_| ProviderError::Malformed(format!("a {name} event is not UTF-8")))?;
                Ok(SseEvent { event: event_name(name), data })
            }
            None => Err(ProviderError::Malformed("an event-stream event without :event-type".to_owned())),
        }
    }

    /// An exception message as the failure it names: a throttle is a rate
    /// limit, the service's own failures are 5xx, a refused request is the
    /// client's (or too long for the model), a model's failure is an error event.
    fn exception(&self) -> ProviderError {
        let name = self.header(":exception-type").unwrap_or("exception");
        let text = serde_json::from_slice::<Exception>(self.payload).unwrap_or_default().message;
        let text = if text.is_empty() { name.to_owned() } else { format!("{name}: {text}") };
        match name {
            "throttlingException" => ProviderError::RateLimited { retry_after: None, message: text },
            "serviceUnavailableException" => ProviderError::Server { status: 503, message: text },
            "internalServerException" => ProviderError::Server { status: 500, message: text },
            "modelTimeoutException" => ProviderError::Server { status: 504, message: text },
            "validationException" => {
                let context_length = super::is_too_long(&text);
                ProviderError::BadRequest { status: 400, message: text, context_length }
            }
            _ => ProviderError::ErrorEvent(text),
        }
    }
}

/// Converse's event names, shared rather than copied per event.
fn event_name(name: &str) -> Str {
    const NAMES: [&str; 6] =
        ["messageStart", "contentBlockStart", "contentBlockDelta", "contentBlockStop", "messageStop", "metadata"];
    NAMES
        .iter()
        .find(|known| **known == name)
        .map_or_else(|| Str::from(name.to_owned()), |known| Str::from_static(known))
}

/// A `chunk` event's payload: its `bytes` borrowed where the JSON has no
/// escape (base64 needs none).
#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow)]
    bytes: std::borrow::Cow<'a, str>,
}

/// A chunk's event: its payload's `bytes`, base64-decoded into `decoded`.
fn chunk(payload: &[u8], decoded: &mut BytesMut) -> Result<Str, ProviderError> {
    let parsed;
    let base64 = match chunk_bytes(payload) {
        Some(base64) => base64,
        None => {
            parsed = serde_json::from_slice::<Chunk>(payload)
                .map_err(|err| ProviderError::Malformed(format!("a chunk: {err}")))?;
            parsed.bytes.as_bytes()
        }
    };
    decoded.clear();
    decoded.resize(base64::decoded_len_estimate(base64.len()), 0);
    let length = base64::engine::general_purpose::STANDARD
        .decode_slice(base64, &mut decoded[..])
        .map_err(|err| ProviderError::Malformed(format!("a chunk's bytes: {err}")))?;
    decoded.truncate(length);
    Str::try_from(decoded.split().freeze())
        .map_err(|_| ProviderError::Malformed("a chunk's event is not UTF-8".to_owned()))
}

/// The `bytes` of a chunk's payload written as Bedrock writes it,
/// `{"bytes":"…"}` or `{"bytes":"…","p":"…"}` (its padding letters and
/// digits), without parsing JSON; `None` for any other form, which is parsed.
fn chunk_bytes(payload: &[u8]) -> Option<&[u8]> {
    let rest = payload.strip_prefix(br#"{"bytes":""#)?;
    let (base64, tail) = rest.split_at(memchr::memchr(b'"', rest)?);
    // An escape is JSON's to read; any other byte that is not base64 the
    // decoder refuses.
    if memchr::memchr(b'\\', base64).is_some() {
        return None;
    }
    let padding = match tail.strip_prefix(br#"","p":""#) {
        Some(padding) => padding.strip_suffix(br#""}"#)?,
        None => tail.strip_prefix(br#""}"#).filter(|after| after.is_empty())?,
    };
    padding.iter().all(u8::is_ascii_alphanumeric).then_some(base64)
}

/// An exception's payload.
#[derive(Deserialize, Default)]
struct Exception {
    #[serde(default, alias = "Message")]
    message: String,
}

#[cfg(test)]
mod tests {
    use aws_smithy_eventstream::frame::{read_message_from, write_message_to};
    use aws_smithy_types::event_stream::{Header, HeaderValue, Message as Reference};
    use bytes::Bytes;
    use futures_util::FutureExt as _;
    use proptest::prelude::*;

    use super::*;

    fn frame(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
        let mut message = Reference::new(Bytes::copy_from_slice(payload));
        for (name, value) in headers {
            message = message.add_header(Header::new(name.to_string(), HeaderValue::String(value.to_string().into())));
        }
        let mut out = Vec::new();
        write_message_to(&message, &mut out).expect("a frame");
        out
    }

    fn chunk(event: &str) -> Vec<u8> {
        let bytes = base64::engine::general_purpose::STANDARD.encode(event);
        let payload = serde_json::json!({ "bytes": bytes, "p": "abcdefgh" }).to_string();
        frame(
            &[(":event-type", "chunk"), (":content-type", "application/json"), (":message-type", "event")],
            payload.as_bytes(),
        )
    }

    /// Every event in `bytes`, cut as the stream cuts them.
    fn decoded(bytes: &[u8]) -> Result<Vec<SseEvent>, ProviderError> {
        let body: Body = Box::pin(futures_util::stream::iter([Ok(Bytes::copy_from_slice(bytes))]));
        let all = events(body, 1 << 20).collect::<Vec<_>>().now_or_never();
        all.unwrap_or_default().into_iter().collect()
    }

    #[test]
    fn a_captured_bedrock_frame_is_its_anthropic_event() {
        // A message_stop chunk as Bedrock writes it, CRCs and all.
        let hex = "000000960000004bda6a95c10b3a6576656e742d747970650700056368756e6b0d3a636f6e74656e742d747970650700106170706c69636174696f6e2f6a736f6e0d3a6d6573736167652d747970650700056576656e747b226279746573223a2265794a306558426c496a6f696257567a6332466e5a56397a64473977496e303d222c2270223a226162636465666768227df1c95632";
        let bytes: Vec<u8> =
            (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap_or(0)).collect();
        let events = decoded(&bytes).expect("decodes");
        assert_eq!(events, vec![SseEvent::new("chunk", r#"{"type":"message_stop"}"#)]);
        let mut corrupt = bytes.clone();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 1;
        assert!(matches!(decoded(&corrupt), Err(ProviderError::Malformed(_))), "a bad CRC is malformed");
    }

    #[test]
    fn chunks_are_anthropic_events_and_exceptions_their_failures() {
        let delta = r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#;
        assert_eq!(decoded(&chunk(delta)).ok(), Some(vec![SseEvent::new("chunk", delta)]));
        let exception = |name: &str, message: &str| {
            let payload = serde_json::json!({ "message": message }).to_string();
            let headers =
                [(":exception-type", name), (":content-type", "application/json"), (":message-type", "exception")];
            decoded(&frame(&headers, payload.as_bytes())).err().map(|err| err.kind())
        };
        assert_eq!(exception("throttlingException", "Too many requests"), Some("http_429"));
        assert_eq!(exception("serviceUnavailableException", "down"), Some("http_5xx"));
        assert_eq!(exception("internalServerException", "oops"), Some("http_5xx"));
        assert_eq!(exception("modelStreamErrorException", "the model failed"), Some("error_event"));
        assert_eq!(exception("validationException", "Input is too long for requested model."), Some("context_length"));
        assert_eq!(exception("validationException", "temperature: must be at most 1"), Some("client_error"));
        let not_base64 = frame(&[(":event-type", "chunk"), (":message-type", "event")], br#"{"bytes":"!!"}"#);
        assert!(matches!(decoded(&not_base64), Err(ProviderError::Malformed(_))));
    }

    #[test]
    fn a_chunk_s_bytes_are_read_without_json_only_in_bedrock_s_own_form() {
        assert_eq!(chunk_bytes(br#"{"bytes":"eyJ0In0=","p":"abc123"}"#), Some(&b"eyJ0In0="[..]));
        assert_eq!(chunk_bytes(br#"{"bytes":"eyJ0In0="}"#), Some(&b"eyJ0In0="[..]));
        for other in [
            &br#"{"bytes":"eyJ0\/In0="}"#[..],
            br#"{"bytes":"eyJ0In0=","p":"a b"}"#,
            br#"{"bytes":"eyJ0In0=","q":"abc"}"#,
            br#"{"bytes":"eyJ0In0="} "#,
            br#"{ "bytes":"eyJ0In0="}"#,
            br#"{"bytes":"eyJ0In0=""#,
        ] {
            assert_eq!(chunk_bytes(other), None, "{}", String::from_utf8_lossy(other));
        }
        // What the fast path leaves to JSON is still read, escapes and all.
        let mut decoded = BytesMut::new();
        let escaped = super::chunk(br#"{ "bytes" : "eyJ0IjoiYWI\/In0=" }"#, &mut decoded).ok();
        assert_eq!(escaped.as_deref(), Some(r#"{"t":"ab?"}"#));
    }

    /// A header value of any of the event stream's ten types.
    fn any_value() -> impl Strategy<Value = HeaderValue> {
        prop_oneof![
            any::<bool>().prop_map(HeaderValue::Bool),
            any::<i8>().prop_map(HeaderValue::Byte),
            any::<i16>().prop_map(HeaderValue::Int16),
            any::<i32>().prop_map(HeaderValue::Int32),
            any::<i64>().prop_map(HeaderValue::Int64),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(|bytes| HeaderValue::ByteArray(bytes.into())),
            "[a-z:é-]{0,40}".prop_map(|text| HeaderValue::String(text.into())),
            any::<i64>().prop_map(|millis| HeaderValue::Timestamp(aws_smithy_types::DateTime::from_millis(millis))),
            any::<u128>().prop_map(HeaderValue::Uuid),
        ]
    }

    /// A message as AWS's own writer frames it.
    fn any_message() -> impl Strategy<Value = (Vec<(String, HeaderValue)>, Vec<u8>, Vec<u8>)> {
        let headers = proptest::collection::vec(("[a-z:-]{1,12}", any_value()), 0..6);
        (headers, proptest::collection::vec(any::<u8>(), 0..200)).prop_map(|(headers, payload)| {
            let mut message = Reference::new(payload.clone());
            for (name, value) in &headers {
                message = message.add_header(Header::new(name.clone(), value.clone()));
            }
            let mut out = Vec::new();
            write_message_to(&message, &mut out).expect("a frame");
            (headers, payload, out)
        })
    }

    /// `block` and `payload` framed with a right prelude and right CRCs.
    fn framed(block: &[u8], payload: &[u8]) -> Vec<u8> {
        let length = u32::try_from(PRELUDE + block.len() + payload.len() + MESSAGE_CRC).expect("small");
        let mut out = Vec::new();
        out.extend_from_slice(&length.to_be_bytes());
        out.extend_from_slice(&u32::try_from(block.len()).expect("small").to_be_bytes());
        out.extend_from_slice(&crc32fast::hash(&out).to_be_bytes());
        out.extend_from_slice(block);
        out.extend_from_slice(payload);
        out.extend_from_slice(&crc32fast::hash(&out).to_be_bytes());
        out
    }

    proptest! {
        /// Whatever AWS's writer frames, this reader reads as AWS's reader
        /// does: the same payload, and each string header's value.
        #[test]
        fn reads_what_aws_writes_as_aws_reads_it((headers, payload, bytes) in any_message()) {
            let ours = Message::read(&bytes).expect("reads");
            let theirs = read_message_from(&bytes[..]).expect("AWS reads it");
            prop_assert_eq!(ours.payload, &payload[..]);
            prop_assert_eq!(&theirs.payload()[..], &payload[..]);
            for (name, _) in &headers {
                let first = theirs.headers().iter().find(|header| header.name().as_str() == name);
                let text = first.and_then(|header| match header.value() {
                    HeaderValue::String(text) => Some(text.as_str()),
                    _ => None,
                });
                prop_assert_eq!(ours.header(name), text);
            }
        }

        /// Every single-byte corruption and every truncation of a message is
        /// refused, by both readers.
        #[test]
        fn a_corrupt_message_is_refused((_headers, _payload, bytes) in any_message(), at in any::<usize>(), flip in 1..=255u8) {
            let mut corrupt = bytes.clone();
            let at = at % corrupt.len();
            corrupt[at] ^= flip;
            prop_assert!(Message::read(&corrupt).is_err());
            prop_assert!(read_message_from(&corrupt[..]).is_err());
            let cut = &bytes[..at];
            prop_assert!(Message::read(cut).is_err());
        }

        /// A header block of any bytes, framed with right CRCs: where this
        /// reader takes it, AWS's takes it too, with the same payload; where
        /// AWS's takes it, so does this one, but for a header with an empty
        /// name (which no event stream writes).
        #[test]
        fn any_header_block_is_judged_as_aws_judges_it(block in proptest::collection::vec(any::<u8>(), 0..60), payload in proptest::collection::vec(any::<u8>(), 0..20)) {
            let bytes = framed(&block, &payload);
            let ours = Message::read(&bytes);
            let theirs = read_message_from(&bytes[..]);
            match (&ours, &theirs) {
                (Ok(ours), Ok(theirs)) => prop_assert_eq!(ours.payload, &theirs.payload()[..]),
                (Ok(_), Err(err)) => prop_assert!(false, "only AWS refuses it: {err}"),
                (Err(_), Ok(theirs)) => prop_assert!(theirs.headers().iter().any(|header| header.name().as_str().is_empty())),
                (Err(_), Err(_)) => {}
            }
        }
    }
}
