//! Misbehaving bytes: what a broken or hostile provider writes that no
//! fault class of DESIGN.md §3 covers — a `data:` line that never ends, a
//! line of several MiB, JSON of the wrong types, counts that overflow, and a
//! response nobody asked for (the trailing one is written by the server).

use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::net::tcp::WriteHalf;

use super::wire;
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
/// request leaves could not be told from its answer by any client.
pub(super) async fn write_stray(socket: &mut TcpStream, response: &str) -> std::io::Result<()> {
    let mut peeked = [0u8; 1];
    tokio::select! {
        _ = socket.peek(&mut peeked) => Ok(()),
        () = tokio::time::sleep(STRAY_AFTER) => socket.write_all(response.as_bytes()).await,
    }
}
