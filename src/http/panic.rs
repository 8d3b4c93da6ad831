//! A panic, should one ever happen, costs one request, not the connection's
//! silence: it is caught around the request's work, the client gets a 500
//! error body (or an error event after commit), and one log line with the
//! request id says what happened, instead of a backtrace on stderr.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

thread_local! {
    /// How many guarded polls are running on this thread.
    static GUARDED: Cell<usize> = const { Cell::new(0) };
    /// What the last panic on this thread said, for the guard to log.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Replaces the default hook: a panic inside a guarded request is kept for
/// the guard to log with the request id; any other is logged as one line.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let message = info.to_string().replace('\n', " ");
        if GUARDED.get() > 0 {
            LAST_PANIC.set(Some(message));
        } else {
            tracing::error!(panic = %message, "panic");
        }
    }));
}

/// Runs `work` to its end, or says what panicked in it.
pub(super) struct Guarded<F> {
    work: Pin<Box<F>>,
}

impl<F: Future> Guarded<F> {
    pub(super) fn new(work: F) -> Self {
        Guarded { work: Box::pin(work) }
    }
}

impl<F: Future> Future for Guarded<F> {
    type Output = Result<F::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        GUARDED.set(GUARDED.get() + 1);
        let polled = catch_unwind(AssertUnwindSafe(|| self.work.as_mut().poll(cx)));
        GUARDED.set(GUARDED.get().saturating_sub(1));
        match polled {
            Ok(poll) => poll.map(Ok),
            Err(_) => {
                let message = LAST_PANIC.take().unwrap_or_else(|| "a panic".to_owned());
                Poll::Ready(Err(message))
            }
        }
    }
}

/// A response body that ends with `last` (an error event) instead of
/// silence when producing it panics, logging one line with request `id`.
pub(super) struct GuardedStream<S> {
    inner: Option<Pin<Box<S>>>,
    id: std::sync::Arc<str>,
    last: fn() -> bytes::Bytes,
}

impl<S> GuardedStream<S> {
    pub(super) fn new(inner: S, id: std::sync::Arc<str>, last: fn() -> bytes::Bytes) -> Self {
        GuardedStream { inner: Some(Box::pin(inner)), id, last }
    }
}

impl<S, E> futures_util::Stream for GuardedStream<S>
where
    S: futures_util::Stream<Item = Result<bytes::Bytes, E>>,
{
    type Item = Result<bytes::Bytes, E>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let Some(inner) = self.inner.as_mut() else { return Poll::Ready(None) };
        GUARDED.set(GUARDED.get() + 1);
        let polled = catch_unwind(AssertUnwindSafe(|| inner.as_mut().poll_next(cx)));
        GUARDED.set(GUARDED.get().saturating_sub(1));
        match polled {
            Ok(poll) => poll,
            Err(_) => {
                self.inner = None;
                let message = LAST_PANIC.take().unwrap_or_else(|| "a panic".to_owned());
                tracing::error!(request_id = %self.id, panic = %message, "answer relay panicked");
                Poll::Ready(Some(Ok((self.last)())))
            }
        }
    }
}
