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
use tokio::io::AsyncWrite;

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

/// How much of a body may leave in one write when its pieces are ready together.
const COALESCE_BYTES: usize = 16 * 1024;

/// How many ready pieces one write takes at most, so its slices fit on the stack.
const COALESCE_PIECES: usize = 16;

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
    let mut body = Pieces { body: &mut body, out, sent: 0, head: Some(head), ready: Vec::new(), ready_bytes: 0 };
    // The body is asked again as soon as a piece comes, and the pieces
    // that are ready together leave in one write (the head with the first,
    // which a stream has ready at commit). Once the body has said it is
    // not ready it is not asked again until it wakes the task, so a paced
    // stream costs one poll that finds a piece and one that finds none.
    let mut asked = false;
    loop {
        if asked {
            Woken::default().await;
        }
        match body.next(side).await {
            Next::Piece(data) => {
                body.keep(data);
                asked = false;
                if body.full() {
                    body.write(writer).await?;
                }
            }
            Next::NotYet => {
                // Waiting on the socket lets the body's wake-up be taken
                // by the write, so the body is asked again after it.
                asked = !body.has_some() || body.write(writer).await? == Wait::None;
            }
            Next::End => {
                body.finish(writer).await?;
                return Ok(if close || !body.whole() { Written::Close } else { Written::Reusable });
            }
            Next::Failed(err) => {
                tracing::debug!(error = %err, "the answer's body failed; the connection closes");
                if !body.ready.is_empty() {
                    body.write(writer).await?;
                }
                return Ok(Written::Close);
            }
            Next::ClientGone => return Ok(Written::ClientGone),
        }
    }
}

/// What the body had when it was asked.
enum Next {
    /// A piece of data (maybe empty).
    Piece(Bytes),
    /// Nothing yet: the task is woken when there is.
    NotYet,
    /// The body's end.
    End,
    /// The body failed: the connection closes.
    Failed(axum::Error),
    /// The client went away first.
    ClientGone,
}

/// Whether a write had to wait for the socket.
#[derive(Debug, PartialEq, Eq)]
enum Wait {
    None,
    Waited,
}

/// Pending once, without arranging a wake-up: for a task whose body has
/// just said it is not ready, and so will wake it.
#[derive(Default)]
struct Woken {
    polled: bool,
}

impl std::future::Future for Woken {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _: &mut std::task::Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.polled, true) { Poll::Ready(()) } else { Poll::Pending }
    }
}

/// A body on its way out: how it is framed, how much of it left, the
/// head while it waits to leave with the first piece, and the pieces that
/// are ready and not yet written.
struct Pieces<'a> {
    body: &'a mut Body,
    out: Out,
    sent: u64,
    head: Option<Bytes>,
    ready: Vec<Bytes>,
    ready_bytes: usize,
}

impl Pieces<'_> {
    /// The body's next piece, its end, or that it has none yet, unless the
    /// client goes away first.
    async fn next(&mut self, side: &mut ReadSide) -> Next {
        // The client is watched while the body has nothing: a piece that is
        // ready goes out whatever, and a write to a client that went away fails.
        poll_fn(|cx| {
            Poll::Ready(match Pin::new(&mut *self.body).poll_frame(cx) {
                Poll::Pending if side.poll_gone(cx).is_ready() => Next::ClientGone,
                Poll::Pending => Next::NotYet,
                Poll::Ready(None) => Next::End,
                Poll::Ready(Some(Err(err))) => Next::Failed(err),
                Poll::Ready(Some(Ok(frame))) => Next::Piece(frame.into_data().unwrap_or_default()),
            })
        })
        .await
    }

    /// Keeps a piece for the next write, cut to what the head announced.
    fn keep(&mut self, mut data: Bytes) {
        if let Out::Length(length) = self.out {
            let room = usize::try_from(length.saturating_sub(self.sent)).unwrap_or(usize::MAX);
            data.truncate(room);
        }
        if data.is_empty() {
            return;
        }
        self.sent = self.sent.saturating_add(data.len() as u64);
        self.ready_bytes += data.len();
        self.ready.push(data);
    }

    /// Whether the next write should leave now rather than wait for more.
    fn full(&self) -> bool {
        self.ready_bytes >= COALESCE_BYTES || self.ready.len() >= COALESCE_PIECES
    }

    /// Whether there is anything to write: the head or a piece.
    fn has_some(&self) -> bool {
        self.head.is_some() || !self.ready.is_empty()
    }

    /// Writes the head if it has not left yet and the ready pieces, framed
    /// as one chunk, in one vectored write.
    async fn write<W: AsyncWrite + Unpin>(&mut self, writer: &mut W) -> io::Result<Wait> {
        self.write_with(writer, b"").await
    }

    /// Ends the body: what is left to write, then the end of the chunks.
    async fn finish<W: AsyncWrite + Unpin>(&mut self, writer: &mut W) -> io::Result<()> {
        let end = if self.out == Out::Chunked { LAST_CHUNK } else { b"" };
        self.write_with(writer, end).await.map(drop)
    }

    /// [`Pieces::write`], with `end` after the pieces.
    async fn write_with<W: AsyncWrite + Unpin>(&mut self, writer: &mut W, end: &[u8]) -> io::Result<Wait> {
        let head = self.head.take().unwrap_or_default();
        let mut line = [0u8; 18];
        let chunked = self.out == Out::Chunked && self.ready_bytes > 0;
        let size = if chunked { size_line(self.ready_bytes, &mut line) } else { &[] };
        let mut slices = [IoSlice::new(&[]); COALESCE_PIECES + 4];
        slices[0] = IoSlice::new(&head);
        slices[1] = IoSlice::new(size);
        for (slice, piece) in slices[2..].iter_mut().zip(&self.ready) {
            *slice = IoSlice::new(piece);
        }
        let after = 2 + self.ready.len();
        slices[after] = IoSlice::new(if chunked { b"\r\n" } else { b"" });
        slices[after + 1] = IoSlice::new(end);
        let waited = write_all_noting(writer, &mut slices[..after + 2]).await?;
        self.ready.clear();
        self.ready_bytes = 0;
        Ok(waited)
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
    write_all_noting(writer, slices).await.map(drop)
}

/// [`write_all`], saying whether the socket made it wait.
async fn write_all_noting<W: AsyncWrite + Unpin>(writer: &mut W, slices: &mut [IoSlice<'_>]) -> io::Result<Wait> {
    let mut slices = slices;
    IoSlice::advance_slices(&mut slices, 0);
    let mut wait = Wait::None;
    poll_fn(|cx| -> Poll<io::Result<()>> {
        while !slices.is_empty() {
            let Poll::Ready(written) = Pin::new(&mut *writer).poll_write_vectored(cx, slices) else {
                wait = Wait::Waited;
                return Poll::Pending;
            };
            match written? {
                0 => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                written => IoSlice::advance_slices(&mut slices, written),
            }
        }
        Poll::Ready(Ok(()))
    })
    .await?;
    Ok(wait)
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
