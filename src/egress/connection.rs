//! One HTTP/1.1 connection to a provider, driven by whoever holds it: the
//! request writes its head and body in one vectored write and reads the
//! response head; the body then reads the rest (see
//! [`ResponseBody`](super::ResponseBody)). It keeps no write buffer and one
//! small read buffer, released while idle.

use std::future::Future;
use std::io::IoSlice;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, Waker, ready};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWrite};
use tokio::net::TcpStream;
// The runtime's clock, so idle timeouts can be tested on paused time.
use tokio::time::Instant;
use tokio_rustls::client::TlsStream;
use tokio_util::either::Either;

use super::ClientError;
use super::wire::{self, Head};

/// A plain or TLS socket.
pub(super) type Io = Either<TcpStream, TlsStream<TcpStream>>;

/// Bytes read from a provider at a time to begin with. Events are a few
/// hundred bytes, so this holds dozens; a paced stream, one event a read,
/// never needs more, and hyper's buffer, which started at 8 KiB, cost more
/// memory per open stream than it saved in reads.
const READ_BUFFER: usize = 4096;

/// The most read at a time: a provider writing faster than the stream is
/// read fills each read, and each fill doubles the next read up to this, so
/// its events leave in fewer, larger writes.
const READ_MAX: usize = 64 * 1024;

/// Free room below which the read buffer grows before a read, so a read
/// never asks for a handful of bytes.
const READ_MIN: usize = 1024;

/// One HTTP/1.1 connection: the socket and what has been read from it.
pub(super) struct Connection {
    io: Io,
    /// Bytes read and not yet taken; empty, without an allocation, while idle.
    read: BytesMut,
    /// How much the next growth of `read` makes room for: [`READ_BUFFER`],
    /// doubled by each read that fills its room, halved by one that uses
    /// under a quarter of it.
    read_size: usize,
    idle_since: Instant,
    /// Whether it carried a request before, so that a close before any answer
    /// means it went stale while idle.
    reused: bool,
}

/// What an idle connection turned out to be.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Idle {
    /// Open and quiet: ready for a request.
    Open,
    /// Closed by the provider, or broken.
    Gone,
    /// The provider sent bytes no request asked for: such a provider may
    /// send them again just after the next request is written, where they
    /// would pass for its answer, so its connections are not kept for a while.
    Stray,
}

impl Connection {
    /// A connection just opened, with nothing read yet.
    pub(super) fn new(io: Io) -> Self {
        Connection { io, read: BytesMut::new(), read_size: READ_BUFFER, idle_since: Instant::now(), reused: false }
    }

    pub(super) fn idle_for(&self) -> Duration {
        self.idle_since.elapsed()
    }

    /// Whether the connection is still open, reading whatever the provider
    /// sent while it sat idle: a close, most likely, or bytes no request
    /// asked for, after which the provider is [`Idle::Stray`].
    pub(super) fn idle_check(&mut self) -> Idle {
        if !self.read.is_empty() {
            return Idle::Stray;
        }
        let mut probe = [0u8; 1];
        let mut cx = Context::from_waker(Waker::noop());
        match pin!(self.io.read(&mut probe)).poll(&mut cx) {
            Poll::Pending => Idle::Open,
            Poll::Ready(Ok(0) | Err(_)) => Idle::Gone,
            Poll::Ready(Ok(_)) => Idle::Stray,
        }
    }

    /// Marks the connection idle from now, its read buffer given back.
    pub(super) fn rest(&mut self) {
        self.read = BytesMut::new();
        self.read_size = READ_BUFFER;
        self.idle_since = Instant::now();
        self.reused = true;
    }

    /// Reads once into the read buffer, growing it only when it is nearly
    /// full: the number of bytes read, 0 at the close.
    pub(super) fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<usize>> {
        if self.read.capacity() - self.read.len() < READ_MIN {
            self.read.reserve(self.read_size.max(self.read.len()));
        }
        let room = self.read.capacity() - self.read.len();
        let read = ready!(pin!(self.io.read_buf(&mut self.read)).poll(cx));
        if let Ok(bytes) = read {
            self.read_size = next_read_size(self.read_size, bytes, room);
        }
        Poll::Ready(read)
    }

    /// The bytes read and not yet taken.
    pub(super) fn buffer(&mut self) -> &mut BytesMut {
        &mut self.read
    }

    /// Sends `parts` with `body` and reads the response head: the head, and
    /// the connection, holding whatever of the body came with the head
    /// (`ResponseBody::answer` reads the rest). [`ClientError::Stale`] means
    /// a reused connection turned out closed before a byte of the request
    /// left on it, so the request may be sent again on another: once any
    /// byte has left, the provider may have read all of it and acted on it
    /// (RFC 9110 §9.2.2), and its failure is the attempt's.
    pub(super) async fn send(
        mut self,
        parts: &http::request::Parts,
        body: Bytes,
    ) -> Result<(Head, Connection), ClientError> {
        let mut request = wire::request_head(parts, body.len()).freeze().chain(body);
        let mut interim = 0;
        let head = match self.write_request(&mut request, &parts.method, &mut interim).await {
            Ok(None) => self.read_head(&parts.method, &mut interim).await?,
            // Answered before the whole request left: the rest is not sent,
            // and the connection cannot carry another request.
            Ok(Some(head)) => Head { keep_alive: false, ..head },
            Err(Unsent { started: false, .. }) if self.reused => return Err(ClientError::Stale),
            Err(Unsent { err, .. }) => return Err(err),
        };
        Ok((head, self))
    }

    /// Writes all of `request` (the head, then the body) in as few writes as
    /// the socket takes, one most often, reading what the provider sends
    /// whenever a write has to wait: a provider may answer before it has
    /// read the whole body (RFC 9112 §9.5, a 413 or a 429 most likely), and
    /// then the rest is not sent. The final response head, when it came
    /// first.
    async fn write_request(
        &mut self,
        request: &mut impl Buf,
        method: &http::Method,
        interim: &mut usize,
    ) -> Result<Option<Head>, Unsent> {
        let total = request.remaining();
        let unsent = |err: ClientError, left: usize| Unsent { err, started: left < total };
        std::future::poll_fn(|cx| {
            while request.has_remaining() {
                let mut slices = [IoSlice::new(&[]); 2];
                let count = request.chunks_vectored(&mut slices);
                match Pin::new(&mut self.io).poll_write_vectored(cx, &slices[..count]) {
                    Poll::Ready(Ok(0)) => {
                        let err = ClientError::Http("cannot send the request: the connection took no more".into());
                        return Poll::Ready(Err(unsent(err, request.remaining())));
                    }
                    Poll::Ready(Ok(written)) => request.advance(written),
                    Poll::Ready(Err(err)) => {
                        let err = ClientError::Http(format!("cannot send the request: {err}"));
                        return Poll::Ready(Err(unsent(err, request.remaining())));
                    }
                    Poll::Pending => {
                        let early = self.poll_early_answer(cx, method, interim);
                        return early.map_ok(Some).map_err(|err| unsent(err, request.remaining()));
                    }
                }
            }
            Pin::new(&mut self.io).poll_flush(cx).map(|flushed| match flushed {
                Ok(()) => Ok(None),
                Err(err) => {
                    Err(Unsent { err: ClientError::Http(format!("cannot send the request: {err}")), started: true })
                }
            })
        })
        .await
    }

    /// While a write waits: the final response head if the provider has
    /// sent one, an error if it closed, else pending until it sends more or
    /// the write can go on.
    fn poll_early_answer(
        &mut self,
        cx: &mut Context<'_>,
        method: &http::Method,
        interim: &mut usize,
    ) -> Poll<Result<Head, ClientError>> {
        loop {
            if let Some(head) = wire::take_head(&mut self.read, method, interim)? {
                return Poll::Ready(Ok(head));
            }
            match ready!(self.poll_fill(cx)) {
                Ok(0) => return Poll::Ready(Err(closed_before_response())),
                Ok(_) => {}
                Err(err) => return Poll::Ready(Err(ClientError::Http(format!("cannot send the request: {err}")))),
            }
        }
    }

    /// Reads until the final response head is whole, and takes it, with
    /// `interim` 1xx heads already passed over for this request.
    async fn read_head(&mut self, method: &http::Method, interim: &mut usize) -> Result<Head, ClientError> {
        loop {
            if let Some(head) = wire::take_head(&mut self.read, method, interim)? {
                return Ok(head);
            }
            match std::future::poll_fn(|cx| self.poll_fill(cx)).await {
                Ok(0) => return Err(closed_before_response()),
                Ok(_) => {}
                Err(err) => return Err(ClientError::Http(format!("cannot read the response: {err}"))),
            }
        }
    }
}

/// A request that could not be written whole, and whether any of it left.
struct Unsent {
    err: ClientError,
    started: bool,
}

/// The provider closed the connection after the request left and before
/// any response: it may have read and acted on the request.
fn closed_before_response() -> ClientError {
    ClientError::Http("the provider closed the connection before the response".into())
}

/// How much to make room for next after reading `bytes` into `room` with
/// `size` asked for last: more when the read filled its room, less when it
/// used under a quarter of `size`, within [`READ_BUFFER`] and [`READ_MAX`].
fn next_read_size(size: usize, bytes: usize, room: usize) -> usize {
    if bytes == room {
        size.saturating_mul(2).min(READ_MAX)
    } else if bytes < size / 4 {
        (size / 2).max(READ_BUFFER)
    } else {
        size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_grow_while_they_fill_and_shrink_back_when_they_do_not() {
        let mut size = READ_BUFFER;
        let mut seen = Vec::new();
        for _ in 0..6 {
            size = next_read_size(size, size, size);
            seen.push(size);
        }
        assert_eq!(seen, [8192, 16384, 32768, 65536, 65536, 65536], "doubling to the cap while reads fill");
        assert_eq!(next_read_size(READ_MAX, READ_MAX / 2, READ_MAX), READ_MAX, "half full: kept");
        assert_eq!(next_read_size(READ_MAX, 200, READ_MAX), READ_MAX / 2, "a paced event: halved");
        assert_eq!(next_read_size(READ_BUFFER, 200, READ_BUFFER), READ_BUFFER, "never below the start");
        assert_eq!(next_read_size(READ_BUFFER, 3000, 3500), READ_BUFFER, "a read that did not fill its room");
    }
}
