//! Bedrock's answer, AWS's binary event stream
//! (`application/vnd.amazon.eventstream`: a prelude, headers, a payload and
//! two CRC32s a message), as the events its decoder reads. A `chunk`
//! carries one Anthropic Messages event, base64 in its `bytes`, and becomes
//! that event as Anthropic's SSE would have it, so Claude on Bedrock is
//! read by the Anthropic decoder; an exception message becomes the
//! failure it names. Frames are cut and their CRCs checked by
//! `aws-smithy-eventstream`: a bad CRC or frame fails the stream as
//! `malformed`.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use aws_smithy_eventstream::frame::{DecodedFrame, MessageFrameDecoder};
use aws_smithy_types::event_stream::{HeaderValue, Message};
use base64::Engine as _;
use bytes::{Bytes, BytesMut};
use bytes_utils::Str;
use futures_util::{Stream, StreamExt};
use serde::Deserialize;

use crate::providers::{Body, Frames, ProviderError, SseEvent};

/// A message's bytes beyond its payload that count towards the event cap:
/// the prelude, the CRCs and the three headers Bedrock sends.
const FRAME_OVERHEAD: usize = 1024;

/// A message's prelude: its length, its headers' length and their CRC.
const PRELUDE: usize = 12;

/// `body` as events, an event larger than `max_event_bytes` failing the stream.
pub(super) fn events(body: Body, max_event_bytes: usize) -> Frames {
    Box::pin(EventStream {
        body,
        buffer: BytesMut::new(),
        max_message_bytes: max_event_bytes.saturating_add(FRAME_OVERHEAD),
        max_event_bytes,
        ended: false,
    })
}

/// The body through the frame decoder, one message at a time.
struct EventStream {
    body: Body,
    /// Bytes read and not yet a whole message.
    buffer: BytesMut,
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
    /// more bytes come. A message is decoded only once all of it is here;
    /// its prelude is checked first, so a corrupt length is `malformed` and
    /// a message too large is refused before it is held.
    fn next_message(&mut self) -> Option<Result<SseEvent, ProviderError>> {
        let prelude = self.buffer.get(..PRELUDE)?;
        let word = |at: usize| u32::from_be_bytes([prelude[at], prelude[at + 1], prelude[at + 2], prelude[at + 3]]);
        if crc32fast::hash(&prelude[..8]) != word(8) {
            return Some(Err(ProviderError::Malformed("an event-stream prelude fails its CRC".to_owned())));
        }
        let length = word(0) as usize;
        if length > self.max_message_bytes {
            return Some(Err(ProviderError::EventTooLarge(self.max_event_bytes)));
        }
        if self.buffer.len() < length {
            return None;
        }
        let mut whole = self.buffer.split_to(length);
        match MessageFrameDecoder::new().decode_frame(&mut whole) {
            Ok(DecodedFrame::Complete(message)) => Some(event(&message)),
            Ok(DecodedFrame::Incomplete) => {
                Some(Err(ProviderError::Malformed("an event-stream message shorter than its prelude says".to_owned())))
            }
            Err(err) => Some(Err(ProviderError::Malformed(format!("an event-stream frame: {err}")))),
        }
    }
}

/// Header `name` of `message`, if it is a string.
fn header<'a>(message: &'a Message, name: &str) -> Option<&'a str> {
    message.headers().iter().find(|header| header.name().as_str() == name).and_then(|header| match header.value() {
        HeaderValue::String(value) => Some(value.as_str()),
        _ => None,
    })
}

/// A `chunk` event's payload.
#[derive(Deserialize)]
struct Chunk {
    bytes: String,
}

/// An Anthropic event's type, all of it that is read here.
#[derive(Deserialize)]
struct Typed<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
}

/// An exception's payload.
#[derive(Deserialize, Default)]
struct Exception {
    #[serde(default, alias = "Message")]
    message: String,
}

/// One message as the event its decoder reads, or the failure it reports.
fn event(message: &Message) -> Result<SseEvent, ProviderError> {
    match header(message, ":message-type") {
        Some("event") => {}
        Some("exception") => return Err(exception(message)),
        Some("error") => {
            let code = header(message, ":error-code").unwrap_or("error");
            let text = header(message, ":error-message").unwrap_or_default();
            return Err(ProviderError::ErrorEvent(format!("{code}: {text}")));
        }
        other => return Err(ProviderError::Malformed(format!("an event-stream message of type {other:?}"))),
    }
    let payload = message.payload();
    match header(message, ":event-type") {
        Some("chunk") => {
            let chunk: Chunk =
                serde_json::from_slice(payload).map_err(|err| ProviderError::Malformed(format!("a chunk: {err}")))?;
            let inner = base64::engine::general_purpose::STANDARD
                .decode(chunk.bytes.as_bytes())
                .map_err(|err| ProviderError::Malformed(format!("a chunk's bytes: {err}")))?;
            let typed: Typed = serde_json::from_slice(&inner)
                .map_err(|err| ProviderError::Malformed(format!("a chunk's event: {err}")))?;
            let name = Str::from(typed.kind.into_owned());
            let data = Str::try_from(Bytes::from(inner))
                .map_err(|_| ProviderError::Malformed("a chunk's event is not UTF-8".to_owned()))?;
            Ok(SseEvent { event: name, data })
        }
        Some(name) => {
            let data = Str::try_from(payload.clone())
                .map_err(|_| ProviderError::Malformed(format!("a {name} event is not UTF-8")))?;
            Ok(SseEvent { event: Str::from(name.to_owned()), data })
        }
        None => Err(ProviderError::Malformed("an event-stream event without :event-type".to_owned())),
    }
}

/// An exception message as the failure it names: a throttle is a rate
/// limit, the service's own failures are 5xx, a refused request is the
/// client's (or too long for the model), a model's failure is an error event.
fn exception(message: &Message) -> ProviderError {
    let name = header(message, ":exception-type").unwrap_or("exception");
    let text = serde_json::from_slice::<Exception>(message.payload()).unwrap_or_default().message;
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

#[cfg(test)]
mod tests {
    use aws_smithy_eventstream::frame::write_message_to;
    use aws_smithy_types::event_stream::Header;

    use super::*;

    fn frame(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
        let mut message = Message::new(Bytes::copy_from_slice(payload));
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

    fn decoded(bytes: &[u8]) -> Result<Vec<SseEvent>, ProviderError> {
        let mut buffer = BytesMut::from(bytes);
        let mut decoder = MessageFrameDecoder::new();
        let mut out = Vec::new();
        loop {
            match decoder.decode_frame(&mut buffer) {
                Ok(DecodedFrame::Complete(message)) => out.push(event(&message)?),
                Ok(DecodedFrame::Incomplete) => return Ok(out),
                Err(err) => return Err(ProviderError::Malformed(err.to_string())),
            }
        }
    }

    #[test]
    fn a_captured_bedrock_frame_is_its_anthropic_event() {
        // A message_stop chunk as Bedrock writes it, CRCs and all.
        let hex = "000000960000004bda6a95c10b3a6576656e742d747970650700056368756e6b0d3a636f6e74656e742d747970650700106170706c69636174696f6e2f6a736f6e0d3a6d6573736167652d747970650700056576656e747b226279746573223a2265794a306558426c496a6f696257567a6332466e5a56397a64473977496e303d222c2270223a226162636465666768227df1c95632";
        let bytes: Vec<u8> =
            (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap_or(0)).collect();
        let events = decoded(&bytes).expect("decodes");
        assert_eq!(events, vec![SseEvent::new("message_stop", r#"{"type":"message_stop"}"#)]);
        let mut corrupt = bytes.clone();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 1;
        assert!(matches!(decoded(&corrupt), Err(ProviderError::Malformed(_))), "a bad CRC is malformed");
    }

    #[test]
    fn chunks_are_anthropic_events_and_exceptions_their_failures() {
        let delta = r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#;
        assert_eq!(decoded(&chunk(delta)).ok(), Some(vec![SseEvent::new("content_block_delta", delta)]));
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
}
