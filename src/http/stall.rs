//! A client connection that stops reading must not hold its socket, the
//! provider's connection and the provider's generation forever: a write that
//! makes no progress for the stall timeout fails the connection, which drops
//! the response and with it the upstream request.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// Set once the connection's client stopped reading: the request on it
/// ended as `client_stalled`, not as an ordinary disconnect.
#[derive(Clone, Debug, Default)]
pub struct ClientStall(Arc<AtomicBool>);

impl ClientStall {
    /// Whether the client stopped reading for the stall timeout.
    pub fn happened(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A socket whose writes fail with [`io::ErrorKind::TimedOut`] after
/// `timeout` without progress. The timer exists only while a write waits,
/// so a client that keeps up costs nothing.
pub struct StallGuard<T> {
    inner: T,
    timeout: Duration,
    waiting: Option<Pin<Box<Sleep>>>,
    stall: ClientStall,
}

impl<T> StallGuard<T> {
    /// Guards `inner`; `stall` is set when the timeout fires.
    pub fn new(inner: T, timeout: Duration, stall: ClientStall) -> Self {
        StallGuard { inner, timeout, waiting: None, stall }
    }

    /// Maps a write's poll: progress clears the timer, waiting starts or checks it.
    fn guard<R>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        if poll.is_ready() {
            self.waiting = None;
            return poll;
        }
        let timeout = self.timeout;
        let timer = self.waiting.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match timer.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(()) => {
                self.stall.0.store(true, Ordering::Relaxed);
                Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "the client stopped reading")))
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for StallGuard<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for StallGuard<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.guard(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.guard(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.guard(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test(start_paused = true)]
    async fn a_write_without_progress_fails_after_the_timeout() {
        let (ours, _theirs) = tokio::io::duplex(64);
        let stall = ClientStall::default();
        let mut guarded = StallGuard::new(ours, Duration::from_secs(30), stall.clone());
        let started = tokio::time::Instant::now();
        let written = guarded.write_all(&[0u8; 1024]).await;
        assert_eq!(written.map_err(|err| err.kind()), Err(io::ErrorKind::TimedOut));
        assert_eq!(started.elapsed(), Duration::from_secs(30), "exactly the stall timeout");
        assert!(stall.happened());
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_that_keeps_up_is_never_timed_out() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let stall = ClientStall::default();
        let mut guarded = StallGuard::new(ours, Duration::from_secs(30), stall.clone());
        let reader = tokio::spawn(async move {
            let mut sink = [0u8; 64];
            for _ in 0..16 {
                tokio::time::sleep(Duration::from_secs(20)).await;
                let _ = tokio::io::AsyncReadExt::read(&mut theirs, &mut sink).await;
            }
        });
        let written = guarded.write_all(&[0u8; 512]).await;
        assert!(written.is_ok(), "a slow reader that reads every 20 s is not stalled: {written:?}");
        assert!(!stall.happened());
        reader.abort();
    }
}
