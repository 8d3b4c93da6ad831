//! One client connection, request after request: read a head, lend the
//! read side to the body, run the router, write the answer while watching
//! for the client going away, and go on while the connection may carry
//! another request. While it waits for a request, or streams an answer,
//! a connection holds no buffer: what an open stream costs is its task and
//! its socket.

use std::future::{Future, poll_fn};
use std::io::{self, IoSlice};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tower::ServiceExt as _;

use super::head::{Head, take_head};
use super::read::{ReadSide, Reader, RequestBody};
use super::refusal::Refusal;
use super::write::{Exchange, Written, write_all, write_response};
use crate::h1::Framing;
use crate::http::stall::{ClientStall, StallGuard};

/// How long a client may take to send a request head, counted from when
/// the connection starts waiting for it: an idle connection closes then.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a closing connection reads what its client still sends, so the
/// answer it was given is not reset away.
const LINGER: Duration = Duration::from_secs(1);

/// What a connection is served with.
pub(super) struct Serving {
    pub(super) router: Router,
    pub(super) stall_timeout: Duration,
    /// Turns true when the server stops: an idle connection closes, a busy
    /// one after its answer.
    pub(super) stopping: watch::Receiver<bool>,
}

/// The next request's head, or why there is none.
enum Next {
    Head(Box<Head>),
    /// The client closed, went quiet, or the server is stopping.
    End,
    /// The head cannot be served: this answer, then the close.
    Refused(Refusal),
}

/// Serves requests on `stream` until either side ends the connection. An
/// error is the connection's own; a stalled client is `TimedOut`, with
/// `stall` set.
pub(super) async fn serve(stream: TcpStream, mut serving: Serving, stall: ClientStall) -> io::Result<()> {
    let (read, write) = stream.into_split();
    let mut reader = Reader::new(read);
    let mut writer = StallGuard::new(write, serving.stall_timeout, stall.clone());
    loop {
        let head = match next_head(&mut reader, &mut serving.stopping).await? {
            Next::Head(head) => head,
            Next::End => return Ok(()),
            Next::Refused(refusal) => return refuse(&mut writer, reader, refusal).await,
        };
        let Head { request, framing, keep_alive, expects_continue } = *head;
        let (parts, ()) = request.into_parts();
        let mut exchange = Exchange { method: parts.method.clone(), version: parts.version, close: !keep_alive };
        let (body, mut side) = match framing {
            Framing::Empty => {
                reader.release();
                (Body::empty(), ReadSide::Here(reader))
            }
            framing => {
                let (body, side) = RequestBody::lend(reader, framing, expects_continue);
                (Body::new(body), side)
            }
        };
        let mut request = Request::from_parts(parts, body);
        request.extensions_mut().insert(stall.clone());
        let answering = serving.router.clone().oneshot(request);
        let Some(response) = answer(answering, &mut side, &mut writer).await? else {
            return Ok(());
        };
        exchange.close |= !side.settle() || *serving.stopping.borrow();
        let written = write_response(&mut writer, response, &exchange, &mut side).await?;
        reader = match (written, side.take()) {
            (Written::Reusable, Some((reader, true))) => reader,
            (Written::ClientGone, _) => return Ok(()),
            (_, back) => return close(&mut writer, back.map(|(reader, _)| reader)).await,
        };
        reader.release();
    }
}

/// The interim answer that invites a waiting client's body.
const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// What the connection does next while the router answers.
enum Answer {
    /// The router's answer.
    Response(axum::response::Response),
    /// The handler asked for a body its client waits to be invited to send.
    Continue,
    /// The client went away first.
    ClientGone,
}

/// The router's answer, or `None` if the client goes away first. A handler
/// that asks for a body its client waits to be invited to send gets the
/// `100 Continue` written meanwhile. The router's future lives in this
/// one's, which lives only until the answer: every open stream holds the
/// connection's future, so nothing of answering stays in it while it streams.
async fn answer<F, W>(response: F, side: &mut ReadSide, writer: &mut W) -> io::Result<Option<axum::response::Response>>
where
    F: Future<Output = Result<axum::response::Response, std::convert::Infallible>>,
    W: AsyncWrite + Unpin,
{
    let mut response = pin!(response);
    loop {
        let next = poll_fn(|cx| {
            if side.poll_asked_for_body(cx).is_ready() {
                return Poll::Ready(Answer::Continue);
            }
            if side.poll_gone(cx).is_ready() {
                return Poll::Ready(Answer::ClientGone);
            }
            response.as_mut().poll(cx).map(|answered| match answered {
                Ok(response) => Answer::Response(response),
                Err(never) => match never {},
            })
        })
        .await;
        match next {
            Answer::Response(response) => return Ok(Some(response)),
            Answer::Continue => write_all(writer, &mut [IoSlice::new(CONTINUE)]).await?,
            Answer::ClientGone => return Ok(None),
        }
    }
}

/// Reads the next request head within [`HEADER_READ_TIMEOUT`]. While
/// nothing of it has come, the connection holds no buffer and closes if
/// the server stops.
async fn next_head(reader: &mut Reader, stopping: &mut watch::Receiver<bool>) -> io::Result<Next> {
    let read = async {
        tokio::select! {
            readable = reader.readable() => readable?,
            _ = stopping.wait_for(|stopping| *stopping) => return Ok(Next::End),
        }
        loop {
            match take_head(reader.buffer()) {
                Ok(Some(head)) => return Ok(Next::Head(Box::new(head))),
                Ok(None) => {}
                Err(refusal) => return Ok(Next::Refused(refusal)),
            }
            if reader.fill().await? == 0 {
                // Closed between requests, or inside a head: nobody is left to answer.
                return Ok(Next::End);
            }
        }
    };
    match tokio::time::timeout(HEADER_READ_TIMEOUT, read).await {
        Ok(next) => next,
        Err(_) => Ok(Next::End),
    }
}

/// Answers a head that cannot be served, then closes.
async fn refuse<W: AsyncWrite + Unpin>(writer: &mut W, reader: Reader, refusal: Refusal) -> io::Result<()> {
    let answer = refusal.answer();
    write_all(writer, &mut [IoSlice::new(&answer)]).await?;
    close(writer, Some(reader)).await
}

/// Ends the connection after an answer: the client's side is read for a
/// moment first, so closing with its bytes unread does not reset the
/// answer away before the client reads it.
pub(super) async fn close<W: AsyncWrite + Unpin>(writer: &mut W, reader: Option<Reader>) -> io::Result<()> {
    writer.shutdown().await?;
    if let Some(mut reader) = reader {
        let _ = tokio::time::timeout(LINGER, reader.discard()).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every open stream holds one connection's future for as long as it
    /// lasts, so its size is part of what each stream costs: a buffer kept
    /// across an await inside it (a 4 KiB array once made it 5.4 KiB)
    /// would be paid by every stream. The bound is jemalloc's size class
    /// the task fits in: the router's future kept beside the answer's once
    /// made it 2,280 bytes, a class of 2,560, and every held stream 0.8 KiB
    /// larger (`benches/held_memory.sh`).
    #[tokio::test]
    async fn a_connection_s_future_stays_small() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let _client = TcpStream::connect(listener.local_addr().expect("addr")).await.expect("connect");
        let (stream, _) = listener.accept().await.expect("accept");
        let (_stop, stopping) = watch::channel(false);
        let serving = Serving { router: Router::new(), stall_timeout: Duration::from_secs(1), stopping };
        let connection = serve(stream, serving, ClientStall::default());
        let size = std::mem::size_of_val(&connection);
        assert!(size <= 1792, "a connection's future is {size} bytes");
    }
}
