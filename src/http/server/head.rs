//! A client's request head read from bytes with `httparse`, and the
//! response head written as bytes, without I/O. Every limit here bounds
//! what a client can make baton hold, and every refusal is an answer the
//! client can read.

use bytes::{BufMut, BytesMut};
use http::header::{CONTENT_LENGTH, DATE, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, Uri, Version};

use super::refusal::{INVALID, Refusal, invalid};
use super::target;
use crate::h1::{Framing, content_length, keep_alive, last_token, put_field};

/// The largest request head read: what a client that never ends its head
/// can make baton hold.
pub(super) const HEAD_LIMIT: usize = 8192;

/// The most headers a request may have.
const MAX_HEADERS: usize = 100;

/// A request head, read: the request without its body, how the body is
/// framed, and whether the client may send another request after it.
pub(super) struct Head {
    pub(super) request: Request<()>,
    pub(super) framing: Framing,
    pub(super) keep_alive: bool,
    /// The client waits for `100 Continue` before it sends the body.
    pub(super) expects_continue: bool,
}

/// A head larger than baton reads, saying how.
const fn too_large(message: &'static str) -> Refusal {
    Refusal::new(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, "headers_too_large", message)
}

const TOO_LARGE: Refusal = too_large("the request's head is larger than 8192 bytes");
const TOO_MANY: Refusal = too_large("the request has more than 100 headers");
const BAD_LENGTH: Refusal = invalid("the request's content-length is not one valid number");
const BOTH_FRAMINGS: Refusal = invalid("the request has both a transfer-encoding and a content-length");
const BAD_CODING: Refusal = invalid("the request's transfer-encoding is not chunked, so its length is unknown");
const OLD_CODING: Refusal =
    invalid("the request is HTTP/1.0, which has no transfer-encoding: its framing cannot be trusted");
const MANY_CODINGS: Refusal = Refusal::new(
    StatusCode::NOT_IMPLEMENTED,
    "transfer_coding_not_implemented",
    "the request's transfer-encoding names a coding besides chunked, which baton does not decode",
);

/// The request head at the start of `buf`, taken out of it; none while it
/// is incomplete and within [`HEAD_LIMIT`].
pub(super) fn take_head(buf: &mut BytesMut) -> Result<Option<Head>, Refusal> {
    match read_head(buf) {
        Err(refusal) if refusal == target::BAD_VERSION => match target::read_as_http_1_1(buf)? {
            true => read_head(buf),
            false => Ok(None),
        },
        read => read,
    }
}

/// [`take_head`], with any version but HTTP/1.0 and HTTP/1.1 refused as
/// not valid.
fn read_head(buf: &mut BytesMut) -> Result<Option<Head>, Refusal> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut fields);
    let len = match parsed.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() >= HEAD_LIMIT => return Err(TOO_LARGE),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(TOO_MANY),
        Err(httparse::Error::Version) => return Err(target::BAD_VERSION),
        Err(_) => return Err(INVALID),
    };
    if len > HEAD_LIMIT {
        return Err(TOO_LARGE);
    }
    target::lines_end_in_crlf(&buf[..len])?;
    let method = target::method(parsed.method.unwrap_or_default())?;
    let target = parsed.path.unwrap_or_default();
    let uri: Uri = target.parse().map_err(|_| INVALID)?;
    target::form(&method, target)?;
    let version = if parsed.version == Some(1) { Version::HTTP_11 } else { Version::HTTP_10 };
    let mut headers = HeaderMap::with_capacity(parsed.headers.len());
    for field in parsed.headers.iter() {
        let name = HeaderName::from_bytes(field.name.as_bytes()).map_err(|_| INVALID)?;
        let value = HeaderValue::from_bytes(field.value).map_err(|_| INVALID)?;
        headers.append(name, value);
    }
    target::host(&uri, version, &mut headers)?;
    let framing = framing(version, &headers)?;
    let expects_continue = version == Version::HTTP_11
        && headers
            .get(http::header::EXPECT)
            .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let keep_alive = keep_alive(version, &headers);
    let mut request = Request::new(());
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.version_mut() = version;
    *request.headers_mut() = headers;
    let _ = buf.split_to(len);
    Ok(Some(Head { request, framing, keep_alive, expects_continue }))
}

/// How a request's body is framed (RFC 9112 §6.3): chunked when its last
/// transfer coding says so, else its length, else none. A request framed
/// two ways, or by a coding whose end cannot be found, is refused, so no
/// request can be smuggled inside another; so is an HTTP/1.0 request with
/// a transfer coding (§6.1), whose framing a hop of that version reads
/// differently.
fn framing(version: Version, headers: &HeaderMap) -> Result<Framing, Refusal> {
    if version == Version::HTTP_10 && headers.contains_key(TRANSFER_ENCODING) {
        return Err(OLD_CODING);
    }
    let chunked = match last_token(headers, &TRANSFER_ENCODING) {
        None => false,
        Some(Ok(last)) if last.eq_ignore_ascii_case("chunked") => true,
        Some(_) => return Err(BAD_CODING),
    };
    if chunked && codings(headers) > 1 {
        return Err(MANY_CODINGS);
    }
    // One length, said once: a repeated one, even the same number, is a
    // list a hop before may have read another way (RFC 9110 §8.6 lets a
    // recipient refuse it).
    let mut lengths = headers.get_all(CONTENT_LENGTH).iter();
    if lengths.next().is_some_and(|one| one.as_bytes().contains(&b',')) || lengths.next().is_some() {
        return Err(BAD_LENGTH);
    }
    let length = content_length(headers).map_err(|_| BAD_LENGTH)?;
    match (chunked, length) {
        (true, Some(_)) => Err(BOTH_FRAMINGS),
        (true, None) => Ok(Framing::Chunked),
        (false, None | Some(0)) => Ok(Framing::Empty),
        (false, Some(length)) => Ok(Framing::Length(length)),
    }
}

/// How many transfer codings the request names, over every
/// `transfer-encoding` line.
fn codings(headers: &HeaderMap) -> usize {
    let lists = headers.get_all(TRANSFER_ENCODING).iter();
    lists
        .map(|list| list.as_bytes().split(|byte| *byte == b',').filter(|item| !item.trim_ascii().is_empty()).count())
        .sum()
}

/// How a response's body goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Out {
    /// No body is written (`HEAD`, 204, 304).
    Nothing,
    /// Exactly this many bytes.
    Length(u64),
    /// In chunks, ended by an empty one.
    Chunked,
    /// Until the close (an HTTP/1.0 client, which knows no chunks).
    Close,
}

/// How a response with `status` and a body of `exact` bytes (when known)
/// goes out to a request with `method` and `version`.
pub(super) fn out(method: &Method, version: Version, status: StatusCode, exact: Option<u64>) -> Out {
    if *method == Method::HEAD || status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED {
        Out::Nothing
    } else if let Some(length) = exact {
        Out::Length(length)
    } else if version == Version::HTTP_11 {
        Out::Chunked
    } else {
        Out::Close
    }
}

/// The response head: the status line, the handler's headers but framing
/// ones, the date, the body's framing and, when the connection ends after
/// it, `connection: close`.
pub(super) fn response_head(
    status: StatusCode,
    headers: &HeaderMap,
    out: Out,
    exact: Option<u64>,
    close: bool,
) -> BytesMut {
    let mut head = BytesMut::with_capacity(128 + headers.len() * 40);
    head.put_slice(b"HTTP/1.1 ");
    head.put_slice(status.as_str().as_bytes());
    head.put_u8(b' ');
    head.put_slice(status.canonical_reason().unwrap_or("").as_bytes());
    head.put_slice(b"\r\n");
    for (name, value) in headers {
        if name == CONTENT_LENGTH || name == TRANSFER_ENCODING || name == http::header::CONNECTION {
            continue;
        }
        put_field(&mut head, name.as_str().as_bytes(), value.as_bytes());
    }
    if !headers.contains_key(DATE) {
        super::date::put(&mut head);
    }
    match (out, exact) {
        (Out::Chunked, _) => put_field(&mut head, b"transfer-encoding", b"chunked"),
        (Out::Length(length), _) | (Out::Nothing, Some(length)) => {
            put_field(&mut head, b"content-length", itoa::Buffer::new().format(length).as_bytes());
        }
        (Out::Nothing | Out::Close, _) => {}
    }
    if close || out == Out::Close {
        put_field(&mut head, b"connection", b"close");
    }
    head.put_slice(b"\r\n");
    head
}

#[cfg(test)]
mod tests {
    use super::target::{BAD_HOST, NO_HOST, TWO_HOSTS};
    use super::*;
    use http::header::HOST;

    fn head(text: &str) -> Result<Option<Head>, Refusal> {
        take_head(&mut BytesMut::from(text.as_bytes()))
    }

    fn framing_of(text: &str) -> Result<Framing, Refusal> {
        head(text).map(|head| head.map_or(Framing::Close, |head| head.framing))
    }

    #[test]
    fn a_head_is_read_with_its_framing_and_what_follows_stays() {
        let mut buf = BytesMut::from(
            &b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: baton\r\nContent-Length: 2\r\n\r\n{}"[..],
        );
        let read = take_head(&mut buf).ok().flatten().expect("a head");
        assert_eq!(read.request.method(), Method::POST);
        assert_eq!(read.request.uri().path(), "/v1/chat/completions");
        assert_eq!(read.request.uri().query(), Some("x=1"));
        assert_eq!(read.request.headers()["host"], "baton");
        assert_eq!((read.framing, read.keep_alive, read.expects_continue), (Framing::Length(2), true, false));
        assert_eq!(&buf[..], b"{}", "the body stays in the buffer");
        assert!(head("GET / HTTP/1.1\r\nhost: baton\r\n").is_ok_and(|head| head.is_none()), "partial");
    }

    #[test]
    fn framing_follows_rfc_9112_and_refuses_what_could_smuggle() {
        assert_eq!(
            framing_of("POST / HTTP/1.1\r\nhost: b\r\ntransfer-encoding: chunked\r\n\r\n"),
            Ok(Framing::Chunked)
        );
        assert_eq!(framing_of("POST / HTTP/1.1\r\nhost: b\r\ncontent-length: 0\r\n\r\n"), Ok(Framing::Empty));
        assert_eq!(framing_of("GET / HTTP/1.1\r\nhost: b\r\n\r\n"), Ok(Framing::Empty));
        assert_eq!(
            framing_of("POST / HTTP/1.1\r\nhost: b\r\ntransfer-encoding: chunked\r\ncontent-length: 5\r\n\r\n"),
            Err(BOTH_FRAMINGS)
        );
        assert_eq!(framing_of("POST / HTTP/1.1\r\nhost: b\r\ntransfer-encoding: gzip\r\n\r\n"), Err(BAD_CODING));
        assert_eq!(
            framing_of("POST / HTTP/1.1\r\nhost: b\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\n"),
            Err(BAD_LENGTH)
        );
        assert_eq!(framing_of("POST / HTTP/1.1\r\nhost: b\r\ncontent-length: -1\r\n\r\n"), Err(BAD_LENGTH));
    }

    #[test]
    fn the_host_is_one_valid_host_and_an_absolute_target_names_it() {
        let host = |text: &str| head(text).map(|head| head.map(|head| head.request.headers()[HOST].clone()));
        assert_eq!(head("GET / HTTP/1.1\r\n\r\n").err(), Some(NO_HOST), "HTTP/1.1 needs a host");
        assert_eq!(head("GET / HTTP/1.1\r\nhost: a\r\nhost: a\r\n\r\n").err(), Some(TWO_HOSTS));
        assert_eq!(head("GET / HTTP/1.0\r\nhost: a\r\nhost: b\r\n\r\n").err(), Some(TWO_HOSTS));
        for bad in ["a b@c/d", "user@host", "host/path", "[::1", "[zz]", "host:80x", "h\"x"] {
            assert_eq!(head(&format!("GET / HTTP/1.1\r\nhost: {bad}\r\n\r\n")).err(), Some(BAD_HOST), "{bad}");
        }
        for good in ["baton", "localhost:8080", "127.0.0.1", "[::1]:80", "xn--bcher-kva.example", ""] {
            assert!(host(&format!("GET / HTTP/1.1\r\nhost: {good}\r\n\r\n")).is_ok(), "{good:?}");
        }
        assert!(head("GET / HTTP/1.0\r\n\r\n").is_ok_and(|head| head.is_some()), "HTTP/1.0 may name none");
        let absolute = host("GET http://evil.example/v1/models HTTP/1.1\r\nhost: localhost\r\n\r\n");
        assert_eq!(absolute, Ok(Some(HeaderValue::from_static("evil.example"))), "the target's authority is the host");
        let with_user = head("GET http://a@evil.example/ HTTP/1.1\r\nhost: localhost\r\n\r\n");
        assert_eq!(with_user.err(), Some(BAD_HOST));
    }

    #[test]
    fn a_later_http_1_version_reads_as_1_1_another_gets_505_and_a_broken_line_400() {
        use super::target::OTHER_VERSION;
        let later = head("GET / HTTP/1.2\r\nhost: b\r\n\r\n").ok().flatten().expect("served");
        assert_eq!(later.request.version(), Version::HTTP_11);
        assert_eq!(head("GET / HTTP/2.0\r\nhost: b\r\n\r\n").err(), Some(OTHER_VERSION));
        assert!(head("GET / HTTP/2").is_ok_and(|head| head.is_none()), "a line not yet whole waits");
        // The long fuzz run's find: four parts are no request line, whether
        // the bytes come whole or the line is cut after its third byte.
        let broken = "GET / healthz HTTP/1.1\r\nhost: baton\r\n\r\n";
        assert_eq!(head(broken).err(), Some(INVALID));
        assert_eq!(head(&broken[..8]).err(), Some(INVALID));
        assert_eq!(head("GET / HTTP/1.x\r\n\r\n").err(), Some(INVALID));
    }

    #[test]
    fn an_http_1_0_request_with_a_transfer_coding_is_refused() {
        let old = "POST / HTTP/1.0\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n";
        assert_eq!(head(old).err(), Some(OLD_CODING));
        assert_eq!(
            head("POST / HTTP/1.0\r\ntransfer-encoding: chunked\r\ncontent-length: 5\r\n\r\n").err(),
            Some(OLD_CODING)
        );
    }

    #[test]
    fn keep_alive_and_continue_follow_the_version_and_headers() {
        let of = |text: &str| head(text).ok().flatten().map(|head| (head.keep_alive, head.expects_continue));
        assert_eq!(of("GET / HTTP/1.1\r\nhost: b\r\n\r\n"), Some((true, false)));
        assert_eq!(of("GET / HTTP/1.1\r\nhost: b\r\nconnection: close\r\n\r\n"), Some((false, false)));
        assert_eq!(of("GET / HTTP/1.0\r\n\r\n"), Some((false, false)));
        assert_eq!(
            of("POST / HTTP/1.1\r\nhost: b\r\nexpect: 100-Continue\r\ncontent-length: 3\r\n\r\n"),
            Some((true, true))
        );
    }

    #[test]
    fn garbage_oversized_or_crowded_heads_are_refused_saying_so() {
        assert_eq!(head("NOT A REQUEST\r\n\r\n").err(), Some(INVALID));
        assert_eq!(head("SSH-2.0-OpenSSH\r\n\r\n").err(), Some(INVALID));
        let huge = format!("GET / HTTP/1.1\r\nhost: b\r\nx-big: {}", "a".repeat(HEAD_LIMIT));
        assert_eq!(head(&huge).err(), Some(TOO_LARGE));
        let many = format!("GET / HTTP/1.1\r\nhost: b\r\n{}\r\n", "x-a: 1\r\n".repeat(MAX_HEADERS + 1));
        assert_eq!(head(&many).err(), Some(TOO_MANY));
        let answer = String::from_utf8(TOO_LARGE.answer()).unwrap_or_default();
        assert!(answer.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"), "{answer}");
        assert!(answer.ends_with(r#""type":"invalid_request_error","code":"headers_too_large"}}"#), "{answer}");
    }

    #[test]
    fn the_response_head_frames_the_body_for_the_request() {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("text/event-stream"));
        headers.insert("content-length", HeaderValue::from_static("999"));
        headers.insert("date", HeaderValue::from_static("Wed, 02 Dec 2026 19:00:00 GMT"));
        let chunked = out(&Method::POST, Version::HTTP_11, StatusCode::OK, None);
        let text = response_head(StatusCode::OK, &headers, chunked, None, false);
        assert_eq!(
            &text[..],
            &b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ndate: Wed, 02 Dec 2026 19:00:00 GMT\r\ntransfer-encoding: chunked\r\n\r\n"[..]
        );
        assert_eq!(out(&Method::GET, Version::HTTP_10, StatusCode::OK, None), Out::Close);
        assert_eq!(out(&Method::HEAD, Version::HTTP_11, StatusCode::OK, Some(2)), Out::Nothing);
        let head_answer = response_head(StatusCode::OK, &HeaderMap::new(), Out::Nothing, Some(2), true);
        let text = String::from_utf8_lossy(&head_answer);
        assert!(text.contains("\r\ncontent-length: 2\r\n") && text.ends_with("connection: close\r\n\r\n"), "{text}");
    }
}
