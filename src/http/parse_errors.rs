//! hyper answers a request it cannot parse (not HTTP, a head over the read
//! buffer, a URI too long) by itself, with an empty body, before any handler
//! runs. Clients and SDKs expect an error body they can read, so this
//! socket wrapper recognises exactly those automatic answers on their way
//! out and writes them with a JSON body instead. Every answer baton's own
//! handlers give has a body, so an empty 400, 414 or 431 can only be hyper's.
//!
//! Nothing of such a request can be trusted to say which API its client
//! speaks, so the one body reads as an error in both shapes: OpenAI's
//! (`error.message`, `.type`, `.code`) and Anthropic's (`type: "error"`,
//! `error.type`, `.message`), whose type name for a bad request is the same.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A client socket whose automatic parse-error answers carry a JSON body.
pub struct ParseErrorBodies<T> {
    inner: T,
    /// The replacement being written for the answer hyper is writing, and how much of it is out.
    rewriting: Option<(Vec<u8>, usize)>,
}

impl<T> ParseErrorBodies<T> {
    /// Wraps a client socket.
    pub fn new(inner: T) -> Self {
        ParseErrorBodies { inner, rewriting: None }
    }
}

/// The replacement for `head` when it is one of hyper's automatic answers.
fn replacement(head: &[u8]) -> Option<Vec<u8>> {
    let (status, code, message) = if head.starts_with(b"HTTP/1.1 400 ") {
        ("400 Bad Request", "invalid_http", "the request is not valid HTTP/1.1")
    } else if head.starts_with(b"HTTP/1.1 431 ") {
        ("431 Request Header Fields Too Large", "headers_too_large", "the request's head is larger than 8192 bytes")
    } else if head.starts_with(b"HTTP/1.1 414 ") {
        ("414 URI Too Long", "uri_too_long", "the request's URI is too long")
    } else {
        return None;
    };
    let empty = head.ends_with(b"\r\n\r\n") && memchr::memmem::find(head, b"\r\ncontent-length: 0\r\n").is_some();
    if !empty {
        return None;
    }
    let body = format!(
        r#"{{"type":"error","error":{{"message":"{message}","type":"invalid_request_error","code":"{code}"}}}}"#
    );
    let answer = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    Some(answer.into_bytes())
}

impl<T: AsyncWrite + Unpin> ParseErrorBodies<T> {
    /// Writes `buf`, or its replacement: hyper is told all of `buf` went out
    /// once the whole replacement has.
    fn write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if self.rewriting.is_none() {
            match replacement(buf) {
                Some(answer) => self.rewriting = Some((answer, 0)),
                None => return Pin::new(&mut self.inner).poll_write(cx, buf),
            }
        }
        while let Some((answer, sent)) = &mut self.rewriting {
            if *sent == answer.len() {
                self.rewriting = None;
                return Poll::Ready(Ok(buf.len()));
            }
            let n = std::task::ready!(Pin::new(&mut self.inner).poll_write(cx, &answer[*sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *sent += n;
        }
        Poll::Ready(Ok(buf.len()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for ParseErrorBodies<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for ParseErrorBodies<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // An automatic answer is a head alone, so it is always one slice.
        match bufs {
            [only] if self.rewriting.is_some() || replacement(only).is_some() => self.write(cx, only),
            _ => Pin::new(&mut self.inner).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_empty_automatic_answers_are_replaced() {
        let automatic = b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        let answer = String::from_utf8(replacement(automatic).unwrap_or_default()).unwrap_or_default();
        assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
        assert!(answer.ends_with(r#""code":"headers_too_large"}}"#), "{answer}");
        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 80\r\n\r\n";
        assert_eq!(replacement(ours), None, "an answer with a body is baton's own");
        assert_eq!(replacement(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"), None);
    }
}
