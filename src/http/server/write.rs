//! A response written to the client: the head, then the body as the
//! handler yields it, each piece written at once in one vectored write
//! with its framing. Nothing is buffered in between: what a piece costs is
//! its own bytes, and the head leaves with the first piece when both are
//! ready together.

use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::Poll;

use axum::body::{Body, HttpBody};
use axum::response::Response;
use bytes::Bytes;
use http::{Method, Version};
use http_body::Frame;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::head::{Out, out, response_head};
use super::read::ReadSide;

/// The end of a chunked body: the last, empty chunk and no trailers.
const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// How a response's writing ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Written {
    /// Whole, and the connection may carry another request.
    Reusable,
    /// Whole or not, the connection must close after it.
    Close,
    /// The client went away while it was written.
    ClientGone,
}

/// What the exchange is: the request's method and version, and whether
/// the connection closes after this answer whatever it is.
pub(super) struct Exchange {
    pub(super) method: Method,
    pub(super) version: Version,
    pub(super) close: bool,
}

/// Writes `response` for `exchange` to `writer`, watching `side` for the
/// client going away between pieces.
pub(super) async fn write_response<W: AsyncWrite + Unpin>(
    writer: &mut W,
    response: Response,
    exchange: &Exchange,
    side: &mut ReadSide,
) -> io::Result<Written> {
    let (parts, mut body) = response.into_parts();
    let exact = body.size_hint().exact();
    let out = out(&exchange.method, exchange.version, parts.status, exact);
    let close = exchange.close || out == Out::Close;
    let head = response_head(parts.status, &parts.headers, out, exact, close).freeze();
    if out == Out::Nothing {
        write_all(writer, &mut [IoSlice::new(&head)]).await?;
        return Ok(if close { Written::Close } else { Written::Reusable });
    }
    let mut body = Pieces { body: &mut body, out, sent: 0, head: Some(head) };
    // The first piece is often ready with the head (a stream commits on its
    // first token); after it, each piece is written as it comes and the
    // body asked again once, so a paced stream costs one poll a piece.
    let mut next = body.now().await;
    loop {
        let frame = match next.take() {
            Some(frame) => frame,
            None => {
                body.flush_head(writer).await?;
                match body.wait(side).await {
                    Some(frame) => frame,
                    None => return Ok(Written::ClientGone),
                }
            }
        };
        match frame {
            None => {
                body.finish(writer).await?;
                return Ok(if close || !body.whole() { Written::Close } else { Written::Reusable });
            }
            Some(Err(err)) => {
                tracing::debug!(error = %err, "the answer's body failed; the connection closes");
                return Ok(Written::Close);
            }
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data()
                    && !data.is_empty()
                {
                    body.write(writer, &data).await?;
                }
            }
        }
    }
}

/// A body on its way out: how it is framed, how much of it left, and the
/// head while it waits to leave with the first piece.
struct Pieces<'a> {
    body: &'a mut Body,
    out: Out,
    sent: u64,
    head: Option<Bytes>,
}

impl Pieces<'_> {
    /// The next frame if it is ready now: `None` when it is not.
    async fn now(&mut self) -> Option<Option<Result<Frame<Bytes>, axum::Error>>> {
        poll_fn(|cx| {
            Poll::Ready(match Pin::new(&mut *self.body).poll_frame(cx) {
                Poll::Ready(frame) => Some(frame),
                Poll::Pending => None,
            })
        })
        .await
    }

    /// The next frame, or `None` if the client goes away first.
    async fn wait(&mut self, side: &mut ReadSide) -> Option<Option<Result<Frame<Bytes>, axum::Error>>> {
        poll_fn(|cx| {
            if side.poll_gone(cx).is_ready() {
                return Poll::Ready(None);
            }
            Pin::new(&mut *self.body).poll_frame(cx).map(Some)
        })
        .await
    }

    /// Writes the head if it has not left yet.
    async fn flush_head<W: AsyncWrite + Unpin>(&mut self, writer: &mut W) -> io::Result<()> {
        match self.head.take() {
            Some(head) => write_all(writer, &mut [IoSlice::new(&head)]).await,
            None => Ok(()),
        }
    }

    /// Writes one piece, framed, with the head if it is still here.
    async fn write<W: AsyncWrite + Unpin>(&mut self, writer: &mut W, data: &[u8]) -> io::Result<()> {
        let data = match self.out {
            Out::Length(length) => {
                let room = usize::try_from(length.saturating_sub(self.sent)).unwrap_or(usize::MAX);
                &data[..data.len().min(room)]
            }
            _ => data,
        };
        self.sent = self.sent.saturating_add(data.len() as u64);
        let head = self.head.take().unwrap_or_default();
        let mut line = [0u8; 18];
        let chunked = self.out == Out::Chunked;
        let size = if chunked { size_line(data.len(), &mut line) } else { &[] };
        let end: &[u8] = if chunked { b"\r\n" } else { b"" };
        write_all(writer, &mut [IoSlice::new(&head), IoSlice::new(size), IoSlice::new(data), IoSlice::new(end)]).await
    }

    /// Ends the body: the head if nothing was sent, the end of the chunks.
    async fn finish<W: AsyncWrite + Unpin>(&mut self, writer: &mut W) -> io::Result<()> {
        let head = self.head.take().unwrap_or_default();
        let end = if self.out == Out::Chunked { LAST_CHUNK } else { b"" };
        write_all(writer, &mut [IoSlice::new(&head), IoSlice::new(end)]).await
    }

    /// Whether the body was as long as its head said.
    fn whole(&self) -> bool {
        match self.out {
            Out::Length(length) => self.sent == length,
            Out::Chunked | Out::Nothing => true,
            Out::Close => false,
        }
    }
}

/// The chunk-size line for `len` bytes, in hexadecimal, written into `line`.
fn size_line(len: usize, line: &mut [u8; 18]) -> &[u8] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut at = line.len() - 2;
    line[at..].copy_from_slice(b"\r\n");
    let mut left = len;
    loop {
        at -= 1;
        line[at] = DIGITS[left & 0xf];
        left >>= 4;
        if left == 0 {
            break;
        }
    }
    &line[at..]
}

/// Writes every byte of `slices`, as few writes as the socket allows.
pub(super) async fn write_all<W: AsyncWrite + Unpin>(writer: &mut W, slices: &mut [IoSlice<'_>]) -> io::Result<()> {
    let mut slices = slices;
    IoSlice::advance_slices(&mut slices, 0);
    while !slices.is_empty() {
        let written = writer.write_vectored(slices).await?;
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut slices, written);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_sizes_are_hexadecimal_lines() {
        let mut line = [0u8; 18];
        assert_eq!(size_line(0, &mut line), b"0\r\n");
        assert_eq!(size_line(10, &mut line), b"a\r\n");
        assert_eq!(size_line(0x1f40, &mut line), b"1f40\r\n");
        assert_eq!(size_line(usize::MAX, &mut line), b"ffffffffffffffff\r\n");
    }

    /// A writer that takes at most `step` bytes a write.
    struct Trickle {
        taken: Vec<u8>,
        step: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(mut self: Pin<&mut Self>, _: &mut std::task::Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            let n = buf.len().min(self.step);
            self.taken.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut std::task::Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut std::task::Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn every_byte_leaves_however_little_each_write_takes() {
        let mut writer = Trickle { taken: Vec::new(), step: 3 };
        let mut slices = [IoSlice::new(b"head\r\n"), IoSlice::new(b""), IoSlice::new(b"5\r\nhello\r\n")];
        write_all(&mut writer, &mut slices).await.expect("written");
        assert_eq!(writer.taken, b"head\r\n5\r\nhello\r\n");
    }
}
