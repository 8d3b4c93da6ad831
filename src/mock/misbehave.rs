//! Misbehaving bytes: what a broken or hostile provider writes that no
//! fault class covers — a `data:` line that never ends, a
//! line of several MiB, JSON of the wrong types, counts that overflow, and a
//! response nobody asked for (the trailing one is written by the server).

use std::io::{ErrorKind, Write as _};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::net::tcp::WriteHalf;

use super::wire;
use crate::providers::ProviderKind;
use crate::providers::simulate::Simulated;

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
pub(super) fn huge_line(sim: &dyn Simulated) -> Vec<u8> {
    sim.huge_line(&"x".repeat(HUGE_LINE_BYTES))
}

/// A whole response no request asked for, of `tokens` words made by `token`.
pub(super) fn stray_response(
    kind: ProviderKind,
    model: &str,
    tokens: usize,
    token: impl Fn(usize) -> String,
) -> Vec<u8> {
    let mut events = wire::preamble(kind, model);
    events.extend((0..tokens).map(|i| wire::text(kind, model, &token(i))));
    events.extend(wire::finish(kind, model, tokens));
    let mut response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: {}\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n",
        wire::of_model(kind, model).content_type()
    )
    .into_bytes();
    for event in events {
        response.extend(format!("{:x}\r\n", event.len()).into_bytes());
        response.extend(event);
        response.extend_from_slice(b"\r\n");
    }
    response.extend_from_slice(b"0\r\n\r\n");
    response
}

/// Writes `response` on `socket` [`STRAY_AFTER`] from now, unless the client
/// sent something (a next request) or closed meanwhile: a stray response on
/// an idle connection is the provider's fault, one that arrives just as a
/// request leaves could not be told from its answer by any client. The wait
/// is a blocking `peek` on a thread of its own, so it sees what the kernel
/// has received, not what the runtime's reactor has noticed yet (a busy
/// runtime notices late, and would write the stray after a request came).
pub(super) async fn write_stray(socket: TcpStream, response: Vec<u8>) -> std::io::Result<TcpStream> {
    let socket = socket.into_std()?;
    let socket = tokio::task::spawn_blocking(move || {
        socket.set_nonblocking(false)?;
        socket.set_read_timeout(Some(STRAY_AFTER))?;
        let mut peeked = [0u8; 1];
        match socket.peek(&mut peeked) {
            Ok(_) => {}
            Err(err) if matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                (&socket).write_all(&response)?;
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

    fn data_of(event: &[u8]) -> serde_json::Value {
        let event = String::from_utf8_lossy(event);
        let data = event.lines().find_map(|line| line.strip_prefix("data: ")).unwrap_or_default();
        serde_json::from_str(data).expect("the event's data is JSON")
    }

    #[test]
    fn misbehaving_events_are_json_of_each_shape() {
        for kind in ProviderKind::ALL {
            let sim = kind.simulated();
            let huge = huge_line(sim);
            if sim.content_type() != "text/event-stream" {
                // A binary frame: one message, the padding inside it.
                assert!(huge.len() > HUGE_LINE_BYTES, "{kind}: padded");
                continue;
            }
            assert!(huge.len() > HUGE_LINE_BYTES && huge.ends_with(b"\n\n"), "{kind}: one event");
            let text = String::from_utf8_lossy(&huge);
            assert!(text.lines().any(|line| line.len() > HUGE_LINE_BYTES), "{kind}: the padding is on one line");
            assert!(data_of(&huge)["padding"].as_str().is_some_and(|p| p.len() == HUGE_LINE_BYTES), "{kind}: padded");
            assert!(data_of(&sim.wrong_types()).is_object(), "{kind}: wrong types, still JSON");
            let finish = String::from_utf8_lossy(&sim.overflowing_finish("m").concat()).into_owned();
            assert!(finish.contains("18446744073709551615"), "{kind}: u64::MAX usage: {finish}");
        }
    }

    #[test]
    fn a_stray_response_is_a_whole_http_response() {
        let response = stray_response(ProviderKind::OpenAi, "m", 2, |i| format!(" w{i}"));
        let mut headers = [httparse::EMPTY_HEADER; 8];
        let mut parsed = httparse::Response::new(&mut headers);
        assert!(matches!(parsed.parse(&response), Ok(httparse::Status::Complete(_))));
        assert_eq!(parsed.code, Some(200));
        let text = String::from_utf8_lossy(&response);
        assert!(text.contains(" w1") && text.ends_with("0\r\n\r\n"), "{text}");
    }
}
