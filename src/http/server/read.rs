//! The read side of a client connection: the bytes read and not yet taken,
//! lent to a request's body while a handler reads it and given back at its
//! end, then watched while the answer is written, so a client that goes
//! away ends its request at once. The buffer exists only while it holds
//! something: a connection that waits, or streams an answer, keeps none.

use std::future::{Future, poll_fn};
use std::io;
use std::mem::MaybeUninit;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, ready};

use axum::body::HttpBody;
use bytes::{Bytes, BytesMut};
use http_body::{Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
use tokio::net::tcp::OwnedReadHalf;
use tokio::sync::oneshot;

use super::head::HEAD_LIMIT;
use crate::h1::{BodyState, Framing, Step};

/// How much is read at a time: a request head, or a piece of a body.
const READ_SIZE: usize = 4096;

/// A connection's read half and what was read from it and not yet taken.
pub(super) struct Reader {
    half: OwnedReadHalf,
    buf: BytesMut,
}

impl Reader {
    /// The read side of a new connection, with nothing read yet.
    pub(super) fn new(half: OwnedReadHalf) -> Self {
        Reader { half, buf: BytesMut::new() }
    }

    /// The bytes read and not yet taken.
    pub(super) fn buffer(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// Waits until the client sends something, holding no buffer meanwhile.
    pub(super) async fn readable(&self) -> io::Result<()> {
        if self.buf.is_empty() { self.half.readable().await } else { Ok(()) }
    }

    /// Reads once into the buffer: the number of bytes read, 0 at the close.
    pub(super) fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.buf.capacity() - self.buf.len() < READ_SIZE / 4 {
            self.buf.reserve(READ_SIZE);
        }
        pin!(self.half.read_buf(&mut self.buf)).poll(cx)
    }

    /// [`Reader::poll_fill`], awaited.
    pub(super) async fn fill(&mut self) -> io::Result<usize> {
        poll_fn(|cx| self.poll_fill(cx)).await
    }

    /// Reads and drops what the client sends until it closes. The bytes
    /// land on the heap, not in the future: this future is part of every
    /// connection's, which an array would make 4 KiB larger for good.
    pub(super) async fn discard(&mut self) -> io::Result<()> {
        loop {
            self.buf.clear();
            if self.fill().await? == 0 {
                return Ok(());
            }
        }
    }

    /// Gives the buffer's memory back when it holds nothing.
    pub(super) fn release(&mut self) {
        if self.buf.is_empty() {
            self.buf = BytesMut::new();
        }
    }
}

/// Where the read side is while a request is answered.
pub(super) enum ReadSide {
    /// With the connection, which may carry another request.
    Here(Reader),
    /// Lent to the request's body, which sends it back when it ends or is
    /// dropped, saying whether it was read to its end; with `asked`, it also
    /// says when it is first asked for, to a client waiting to be invited.
    Lent { back: oneshot::Receiver<(Reader, bool)>, asked: Option<oneshot::Receiver<()>> },
    /// Back from a body that was not read to its end: the connection cannot
    /// carry another request, and closes after the answer.
    Unread(Reader),
    /// Still held by a body that outlived its request.
    Gone,
}

impl ReadSide {
    /// Ready once, when the lent body is first asked for by a handler whose
    /// client waits for `100 Continue` before it sends it.
    pub(super) fn poll_asked_for_body(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let ReadSide::Lent { asked, .. } = self else { return Poll::Pending };
        let Some(waiting) = asked else { return Poll::Pending };
        let invited = ready!(Pin::new(waiting).poll(cx)).is_ok();
        *asked = None;
        if invited { Poll::Ready(()) } else { Poll::Pending }
    }

    /// Ready once the client has gone: its side closed or broke. Bytes it
    /// sends meanwhile (its next request) are kept, up to a head's worth.
    pub(super) fn poll_gone(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            let reader = match self {
                ReadSide::Lent { back, .. } => {
                    *self = match ready!(Pin::new(back).poll(cx)) {
                        Ok((reader, true)) => ReadSide::Here(reader),
                        Ok((reader, false)) => ReadSide::Unread(reader),
                        Err(_) => ReadSide::Gone,
                    };
                    continue;
                }
                ReadSide::Gone => return Poll::Pending,
                ReadSide::Here(reader) | ReadSide::Unread(reader) => reader,
            };
            if reader.buf.len() >= HEAD_LIMIT {
                return Poll::Pending;
            }
            // Not zeroed: this runs each time an answer waits for its next event.
            let mut probe = [MaybeUninit::<u8>::uninit(); 512];
            let mut read = ReadBuf::uninit(&mut probe);
            match ready!(Pin::new(&mut reader.half).poll_read(cx, &mut read)) {
                Ok(()) if read.filled().is_empty() => return Poll::Ready(()),
                Ok(()) => reader.buf.extend_from_slice(read.filled()),
                Err(_) => return Poll::Ready(()),
            }
        }
    }

    /// Takes the reader back if the body has ended since it was lent, and
    /// says whether the connection may carry another request.
    pub(super) fn settle(&mut self) -> bool {
        if let ReadSide::Lent { back, .. } = self {
            match back.try_recv() {
                Ok((reader, true)) => *self = ReadSide::Here(reader),
                Ok((reader, false)) => *self = ReadSide::Unread(reader),
                Err(oneshot::error::TryRecvError::Closed) => *self = ReadSide::Gone,
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
        }
        matches!(self, ReadSide::Here(_))
    }

    /// The reader, when it is back with the connection, and whether the
    /// connection may carry another request on it.
    pub(super) fn take(mut self) -> Option<(Reader, bool)> {
        let reusable = self.settle();
        match self {
            ReadSide::Here(reader) | ReadSide::Unread(reader) => Some((reader, reusable)),
            ReadSide::Lent { .. } | ReadSide::Gone => None,
        }
    }
}

/// Why a request's body could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BodyError(String);

/// A request's body, read from the connection as the handler asks for it.
/// The reader goes back to the connection at the body's end, or when the
/// body breaks or is dropped before it, and then the connection closes
/// after the answer.
pub(super) struct RequestBody {
    reader: Option<Reader>,
    state: BodyState,
    back: Option<oneshot::Sender<(Reader, bool)>>,
    /// Tells the connection to send `100 Continue` when the body is first
    /// asked for, to a client that waits for it: a request refused before
    /// its body is read (413, 415, 401) never invites the body.
    go_ahead: Option<oneshot::Sender<()>>,
    /// The declared length, for the size hint.
    length: Option<u64>,
}

impl RequestBody {
    /// The body framed by `framing`, read through `reader`, and the read
    /// side it is lent from, which takes the reader back at the body's end.
    /// When the client `expects_continue`, the body tells the read side
    /// when it is first asked for.
    pub(super) fn lend(reader: Reader, framing: Framing, expects_continue: bool) -> (Self, ReadSide) {
        let (back, returned) = oneshot::channel();
        let (go_ahead, asked) = if expects_continue {
            let (tell, asked) = oneshot::channel();
            (Some(tell), Some(asked))
        } else {
            (None, None)
        };
        let length = if let Framing::Length(length) = framing { Some(length) } else { None };
        let state = BodyState::new(framing);
        let body = RequestBody { reader: Some(reader), state, back: Some(back), go_ahead, length };
        (body, ReadSide::Lent { back: returned, asked })
    }

    /// Sends the reader back, saying whether the body was read to its end.
    fn give_back(&mut self, whole: bool) {
        if let (Some(mut reader), Some(back)) = (self.reader.take(), self.back.take()) {
            reader.release();
            let _ = back.send((reader, whole));
        }
    }

    /// The body cannot be read on: the reader goes back, unfit for reuse.
    fn broke(&mut self, message: String) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.give_back(false);
        Poll::Ready(Some(Err(BodyError(message))))
    }
}

impl Drop for RequestBody {
    /// The reader goes back however the body ends: read to its end (even
    /// when whoever read it stopped asking at the last piece), or not.
    fn drop(&mut self) {
        self.give_back(self.state == BodyState::Done);
    }
}

impl HttpBody for RequestBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        if let (Some(go_ahead), Some(reader)) = (this.go_ahead.take(), &this.reader)
            && reader.buf.is_empty()
        {
            let _ = go_ahead.send(());
        }
        loop {
            let Some(reader) = &mut this.reader else { return Poll::Ready(None) };
            match this.state.step(&mut reader.buf) {
                Ok(Step::Data(data)) => {
                    if this.state == BodyState::Done {
                        this.give_back(true);
                    }
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Ok(Step::End) => {
                    this.give_back(true);
                    return Poll::Ready(None);
                }
                Ok(Step::More) => {}
                Err(err) => return this.broke(err.describe("the request", "the client")),
            }
            match ready!(reader.poll_fill(cx)) {
                Ok(0) => {
                    let cut = this.state.at_close().err().map(|err| err.describe("the request", "the client"));
                    return this.broke(cut.unwrap_or_else(|| "the client closed the connection".to_owned()));
                }
                Ok(_) => {}
                Err(err) => return this.broke(format!("the client's connection broke: {err}")),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.state == BodyState::Done || self.reader.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        self.length.map_or_else(SizeHint::default, SizeHint::with_exact)
    }
}
