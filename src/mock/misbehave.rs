//! Misbehaving bytes: what a broken or hostile provider writes that no
//! fault class covers — a `data:` line that never ends, a
//! line of several MiB, JSON of the wrong types, counts that overflow, and a
//! response nobody asked for (the trailing one is written by the server).

use std::io::{ErrorKind, Write as _};
use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::net::tcp::WriteHalf;

use super::{responses_wire, wire};
use crate::providers::ProviderKind;

/// The length of the padding line of [`huge_line`].
pub(super) const HUGE_LINE_BYTES: usize = 4 * 1024 * 1024;
/// `Retry-After` of [`Fault::RetryAfterOverflow`](super::Fault::RetryAfterOverflow): `u64::MAX` seconds.
pub(super) const RETRY_AFTER_OVERFLOW: &str = "18446744073709551615";
/// How long after a complete answer the stray response follows.
const STRAY_AFTER: Duration = Duration::from_millis(20);
/// The most a flood goes on for, should its client never go away.
const FLOOD_LIMIT: Duration = Duration::from_secs(60);
/// Bytes of one flood write.
const FLOOD_CHUNK: usize = 64 * 1024;

/// Writes chunked `data: xxxx…` without a newline as fast as the client
/// reads it, until the client goes away (or [`FLOOD_LIMIT`]).
pub(super) async fn flood(writer: &mut WriteHalf<'_>) -> std::io::Result<()> {
    writer.write_all(b"6\r\ndata: \r\n").await?;
    let mut chunk = format!("{FLOOD_CHUNK:x}\r\n").into_bytes();
    chunk.resize(chunk.len() + FLOOD_CHUNK, b'x');
    chunk.extend_from_slice(b"\r\n");
    let endless = async {
        loop {
            writer.write_all(&chunk).await?;
        }
    };
    match tokio::time::timeout(FLOOD_LIMIT, endless).await {
        Ok(written) => written,
        Err(_) => Ok(()),
    }
}

/// An event of the provider's own shape carrying no content, with one
/// unknown field of [`HUGE_LINE_BYTES`] of padding on its single line.
pub(super) fn huge_line(kind: ProviderKind) -> String {
    let padding = "x".repeat(HUGE_LINE_BYTES);
    match kind {
        ProviderKind::OpenAi => format!("data: {}\n\n", json!({"choices": [], "padding": padding})),
        ProviderKind::OpenAiResponses => responses_wire::huge_line(&padding),
        ProviderKind::Anthropic => format!("event: ping\ndata: {}\n\n", json!({"type": "ping", "padding": padding})),
        ProviderKind::Gemini => format!(
            "data: {}\n\n",
            json!({"candidates": [{"content": {"parts": [{"text": ""}], "role": "model"}, "index": 0}],
                "padding": padding})
        ),
    }
}

/// A first event in the provider's shape whose fields have the wrong types.
pub(super) fn wrong_types(kind: ProviderKind) -> String {
    match kind {
        ProviderKind::OpenAi => {
            format!("data: {}\n\n", json!({"choices": [{"index": "0", "delta": {"content": 42}, "finish_reason": 7}]}))
        }
        ProviderKind::OpenAiResponses => responses_wire::wrong_types(),
        ProviderKind::Anthropic => format!(
            "event: content_block_delta\ndata: {}\n\n",
            json!({"type": "content_block_delta", "index": "0", "delta": {"type": "text_delta", "text": ["w"]}})
        ),
        ProviderKind::Gemini => format!(
            "data: {}\n\n",
            json!({"candidates": [{"content": {"parts": [{"text": 17}], "role": 3}, "index": "zero"}]})
        ),
    }
}

/// The events that end a complete answer, every usage count `u64::MAX`.
pub(super) fn overflowing_finish(kind: ProviderKind, model: &str) -> Vec<String> {
    let max = u64::MAX;
    let data = |value: serde_json::Value| format!("data: {value}\n\n");
    match kind {
        ProviderKind::OpenAi => vec![
            data(json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})),
            data(json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": [], "usage": {"prompt_tokens": max, "completion_tokens": max, "total_tokens": max}})),
            "data: [DONE]\n\n".to_owned(),
        ],
        ProviderKind::OpenAiResponses => responses_wire::overflowing_finish(model),
        ProviderKind::Anthropic => vec![
            format!("event: content_block_stop\ndata: {}\n\n", json!({"type": "content_block_stop", "index": 0})),
            format!(
                "event: message_delta\ndata: {}\n\n",
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                    "usage": {"input_tokens": max, "output_tokens": max}})
            ),
            format!("event: message_stop\ndata: {}\n\n", json!({"type": "message_stop"})),
        ],
        ProviderKind::Gemini => vec![data(json!({
            "candidates": [{"content": {"parts": [{"text": ""}], "role": "model"}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": max, "candidatesTokenCount": max, "totalTokenCount": max},
            "modelVersion": model}))],
    }
}

/// A whole second response: 200, SSE headers and a complete answer of
/// `tokens` words made by `token`.
pub(super) fn stray_response(
    kind: ProviderKind,
    model: &str,
    tokens: usize,
    token: impl Fn(usize) -> String,
) -> String {
    let mut events = wire::preamble(kind, model);
    events.extend((0..tokens).map(|i| wire::text(kind, model, &token(i))));
    events.extend(wire::finish(kind, model, tokens));
    let mut response = String::from(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n",
    );
    for event in events {
        response.push_str(&format!("{:x}\r\n{event}\r\n", event.len()));
    }
    response.push_str("0\r\n\r\n");
    response
}

/// Writes `response` on `socket` [`STRAY_AFTER`] from now, unless the client
/// sent something (a next request) or closed meanwhile: a stray response on
/// an idle connection is the provider's fault, one that arrives just as a
/// request leaves could not be told from its answer by any client. The wait
/// is a blocking `peek` on a thread of its own, so it sees what the kernel
/// has received, not what the runtime's reactor has noticed yet (a busy
/// runtime notices late, and would write the stray after a request came).
pub(super) async fn write_stray(socket: TcpStream, response: String) -> std::io::Result<TcpStream> {
    let socket = socket.into_std()?;
    let socket = tokio::task::spawn_blocking(move || {
        socket.set_nonblocking(false)?;
        socket.set_read_timeout(Some(STRAY_AFTER))?;
        let mut peeked = [0u8; 1];
        match socket.peek(&mut peeked) {
            Ok(_) => {}
            Err(err) if matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                (&socket).write_all(response.as_bytes())?;
            }
            Err(err) => return Err(err),
        }
        socket.set_read_timeout(None)?;
        socket.set_nonblocking(true)?;
        Ok(socket)
    })
    .await
    .map_err(std::io::Error::other)??;
    TcpStream::from_std(socket)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data_of(event: &str) -> serde_json::Value {
        let data = event.lines().find_map(|line| line.strip_prefix("data: ")).unwrap_or_default();
        serde_json::from_str(data).expect("the event's data is JSON")
    }

    #[test]
    fn misbehaving_events_are_json_of_each_shape() {
        for kind in ProviderKind::ALL {
            let huge = huge_line(kind);
            assert!(huge.len() > HUGE_LINE_BYTES && huge.ends_with("\n\n"), "{kind}: one event");
            assert!(huge.lines().any(|line| line.len() > HUGE_LINE_BYTES), "{kind}: the padding is on one line");
            assert!(data_of(&huge)["padding"].as_str().is_some_and(|p| p.len() == HUGE_LINE_BYTES), "{kind}: padded");
            assert!(data_of(&wrong_types(kind)).is_object(), "{kind}: wrong types, still JSON");
            let finish = overflowing_finish(kind, "m").concat();
            assert!(finish.contains("18446744073709551615"), "{kind}: u64::MAX usage: {finish}");
        }
    }

    #[test]
    fn a_stray_response_is_a_whole_http_response() {
        let response = stray_response(ProviderKind::OpenAi, "m", 2, |i| format!(" w{i}"));
        let mut headers = [httparse::EMPTY_HEADER; 8];
        let mut parsed = httparse::Response::new(&mut headers);
        assert!(matches!(parsed.parse(response.as_bytes()), Ok(httparse::Status::Complete(_))));
        assert_eq!(parsed.code, Some(200));
        assert!(response.contains(" w1") && response.ends_with("0\r\n\r\n"), "{response}");
    }
}
