//! A response body that reads its own connection: each poll hands out the
//! body data already read before reading again, so the events of one
//! upstream read reach the relay without waiting, and the connection goes
//! back to the pool once the body has been read to its end.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker, ready};

use bytes::Bytes;
use futures_util::Stream;

use super::connection::{Connection, Idle};
use super::pool::Pool;
use super::wire::Head;
use super::{ClientError, Origin};
use crate::h1::{BodyState, FramingError, Step};

/// A response body that drives its own connection, and hands the connection
/// back to the pool once the body has been read to its end.
pub struct ResponseBody {
    /// The connection, until the body ends or fails.
    conn: Option<Connection>,
    state: BodyState,
    /// Where the connection goes back to after the body's end; none when it
    /// may not carry another request.
    back: Option<(Arc<Pool>, Origin)>,
}

impl ResponseBody {
    /// The response `head` announced, its body read from `conn`, which goes
    /// back to `pool` as a connection to `origin` once the body has been
    /// read to its end, when the head lets it carry another request.
    pub(super) fn answer(conn: Connection, head: Head, pool: &Arc<Pool>, origin: &Origin) -> http::Response<Self> {
        let Head { status, version, headers, framing, keep_alive } = head;
        let back = keep_alive.then(|| (Arc::clone(pool), origin.clone()));
        let body = ResponseBody { conn: Some(conn), state: BodyState::new(framing), back };
        let mut response = http::Response::new(body);
        *response.status_mut() = status;
        *response.version_mut() = version;
        *response.headers_mut() = headers;
        response
    }

    /// The body ended: its connection goes back to the pool if it may carry
    /// another request and the provider sent nothing after the body.
    fn release(&mut self) {
        let (Some(mut conn), Some((pool, origin))) = (self.conn.take(), self.back.take()) else { return };
        match conn.idle_check() {
            Idle::Open => {
                conn.rest();
                pool.put(origin, conn);
            }
            Idle::Stray => pool.distrust(origin),
            Idle::Gone => {}
        }
    }

    /// Ends the body with `err`, closing the connection.
    fn fail(&mut self, err: ClientError) -> Poll<Option<Result<Bytes, ClientError>>> {
        self.conn = None;
        self.state = BodyState::Done;
        Poll::Ready(Some(Err(err)))
    }
}

/// How many already-read pieces a dropped body goes through looking for its end.
const DRAIN_FRAMES: usize = 8;

impl Drop for ResponseBody {
    /// A reader stops at the provider's end marker, and the body's own end
    /// usually came in the same read: finishing it here, without waiting for
    /// anything, keeps the connection for the next request.
    fn drop(&mut self) {
        if self.conn.is_none() {
            return;
        }
        let mut cx = Context::from_waker(Waker::noop());
        for _ in 0..DRAIN_FRAMES {
            match Pin::new(&mut *self).poll_next(&mut cx) {
                Poll::Ready(Some(Ok(_))) => {}
                Poll::Ready(_) | Poll::Pending => return,
            }
        }
    }
}

impl Stream for ResponseBody {
    type Item = Result<Bytes, ClientError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            let Some(conn) = &mut this.conn else { return Poll::Ready(None) };
            let step = match this.state.step(conn.buffer()) {
                Ok(step) => step,
                Err(err) => return this.fail(framing_error(err)),
            };
            match step {
                Step::Data(data) => return Poll::Ready(Some(Ok(data))),
                Step::End => {
                    this.release();
                    this.conn = None;
                    return Poll::Ready(None);
                }
                Step::More => {}
            }
            let read = ready!(conn.poll_fill(cx));
            let closed = match read {
                Ok(0) => this.state.at_close().map_err(framing_error),
                Ok(_) => continue,
                Err(err) => Err(ClientError::Http(format!("the provider's connection broke: {err}"))),
            };
            match closed {
                Ok(_) => {
                    this.conn = None;
                    return Poll::Ready(None);
                }
                Err(err) => return this.fail(err),
            }
        }
    }
}

/// A provider's broken framing, worded for the attempt's failure.
fn framing_error(err: FramingError) -> ClientError {
    ClientError::Http(err.describe("the response", "the provider"))
}
