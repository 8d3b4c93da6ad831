//! HTTP/1.1 on the wire, without I/O: the request head as bytes, and the
//! response head read from bytes with `httparse`, with how its body is
//! framed and whether the connection may carry another request after it.
//! Every limit here bounds what a provider can make baton hold.

use bytes::{Buf, BufMut, BytesMut};
use http::header::{ACCEPT_ENCODING, CONTENT_LENGTH, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Version};

use super::ClientError;
use crate::h1::{Framing, HeaderError, content_length, keep_alive, last_token, put_field};

/// The largest response head read: far more than any provider sends, and
/// the bound on what a provider that never ends its head makes baton hold.
pub(super) const HEAD_LIMIT: usize = 64 * 1024;

/// The most headers a response head may have.
const MAX_HEADERS: usize = 100;

/// The most interim (1xx) responses skipped before the real one, counted
/// over the whole response however the provider spaces them out.
const MAX_INTERIM: usize = 8;

/// The request head for `parts` with a body of `body_len` bytes: the target
/// as `parts` holds it (origin form, or absolute form for a proxy), every
/// header but framing ones, `accept-encoding: identity` unless the request
/// names codings itself (baton reads no compressed answer), then the
/// body's `content-length`.
pub(super) fn request_head(parts: &http::request::Parts, body_len: usize) -> BytesMut {
    let target = parts.uri.path_and_query().map_or(0, |target| target.as_str().len());
    let mut head = BytesMut::with_capacity(64 + target + parts.headers.len() * 48);
    head.put_slice(parts.method.as_str().as_bytes());
    head.put_u8(b' ');
    match parts.uri.scheme() {
        // `http::Uri`'s display is the absolute form when there is a scheme.
        Some(_) => head.put_slice(parts.uri.to_string().as_bytes()),
        None => head.put_slice(parts.uri.path_and_query().map_or("/", |target| target.as_str()).as_bytes()),
    }
    head.put_slice(b" HTTP/1.1\r\n");
    for (name, value) in &parts.headers {
        if name == CONTENT_LENGTH || name == TRANSFER_ENCODING {
            continue;
        }
        put_field(&mut head, name.as_str().as_bytes(), value.as_bytes());
    }
    if !parts.headers.contains_key(ACCEPT_ENCODING) {
        put_field(&mut head, b"accept-encoding", b"identity");
    }
    if body_len > 0 || !matches!(parts.method, Method::GET | Method::HEAD | Method::DELETE | Method::OPTIONS) {
        put_field(&mut head, b"content-length", itoa::Buffer::new().format(body_len).as_bytes());
    }
    head.put_slice(b"\r\n");
    head
}

/// A response head, read. No `Debug`: its headers are the provider's.
pub(super) struct Head {
    pub(super) status: StatusCode,
    pub(super) version: Version,
    pub(super) headers: HeaderMap,
    pub(super) framing: Framing,
    /// Whether the connection may carry another request once the body has
    /// been read to its end.
    pub(super) keep_alive: bool,
}

/// Reads the final response head at the start of `buf`, taking it (and any
/// interim 1xx heads before it, counted in `interim` across calls for one
/// response) out of `buf`. `None` while more bytes are needed; an error for
/// a head that is not HTTP, too large, or frames its body in a way that
/// cannot be trusted, and for more interim heads than [`MAX_INTERIM`].
pub(super) fn take_head(buf: &mut BytesMut, method: &Method, interim: &mut usize) -> Result<Option<Head>, ClientError> {
    loop {
        let Some((head, len)) = parse_head(buf, method)? else { return Ok(None) };
        buf.advance(len);
        if !head.status.is_informational() {
            return Ok(Some(head));
        }
        if head.status == StatusCode::SWITCHING_PROTOCOLS {
            return Err(ClientError::Protocol("the provider switched protocols, which no request asked for".into()));
        }
        *interim += 1;
        if *interim > MAX_INTERIM {
            return Err(ClientError::Protocol(format!("the provider sent more than {MAX_INTERIM} interim responses")));
        }
    }
}

/// One head at the start of `buf` and its length, if all of it is there.
fn parse_head(buf: &[u8], method: &Method) -> Result<Option<(Head, usize)>, ClientError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let len = match response.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() >= HEAD_LIMIT => {
            return Err(ClientError::Protocol(format!("the response head is larger than {} KiB", HEAD_LIMIT / 1024)));
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(ClientError::Protocol(format!("the response head has more than {MAX_HEADERS} headers")));
        }
        Err(err) => return Err(ClientError::Protocol(format!("the response is not HTTP/1.1: {err}"))),
    };
    if len > HEAD_LIMIT {
        return Err(ClientError::Protocol(format!("the response head is larger than {} KiB", HEAD_LIMIT / 1024)));
    }
    let status = response
        .code
        .and_then(|code| StatusCode::from_u16(code).ok())
        .ok_or_else(|| ClientError::Protocol("the response has no valid status code".into()))?;
    let version = if response.version == Some(0) { Version::HTTP_10 } else { Version::HTTP_11 };
    let mut map = HeaderMap::with_capacity(response.headers.len());
    for header in response.headers.iter() {
        let name = HeaderName::from_bytes(header.name.as_bytes());
        let value = HeaderValue::from_bytes(header.value);
        match (name, value) {
            (Ok(name), Ok(value)) => map.append(name, value),
            _ => return Err(ClientError::Protocol("the response has a header that is not valid".into())),
        };
    }
    let framing = framing(status, version, method, &map)?;
    let keep_alive = keep_alive(version, &map) && framing != Framing::Close;
    Ok(Some((Head { status, version, headers: map, framing, keep_alive }, len)))
}

/// How the body is framed (RFC 9112 §6.3), refusing a head that frames it
/// two ways, with a length that is not one, or by a coding its version has
/// not.
fn framing(status: StatusCode, version: Version, method: &Method, headers: &HeaderMap) -> Result<Framing, ClientError> {
    if version == Version::HTTP_10 && headers.contains_key(TRANSFER_ENCODING) {
        // RFC 9112 §6.1: such framing cannot be trusted.
        return Err(ClientError::Protocol("the response is HTTP/1.0 and has a transfer-encoding".into()));
    }
    if status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
        || *method == Method::HEAD
    {
        return Ok(Framing::Empty);
    }
    let chunked = match last_token(headers, &TRANSFER_ENCODING) {
        None => None,
        Some(Ok(last)) => Some(last.eq_ignore_ascii_case("chunked")),
        Some(Err(_)) => return Err(ClientError::Protocol("the response's transfer-encoding is not valid".into())),
    };
    let length = content_length(headers).map_err(|err| {
        ClientError::Protocol(match err {
            HeaderError::LengthsDisagree => "the response has content-lengths that disagree".into(),
            HeaderError::InvalidLength | HeaderError::InvalidList => {
                "the response's content-length is not valid".into()
            }
        })
    })?;
    match (chunked, length) {
        (Some(_), Some(_)) => {
            Err(ClientError::Protocol("the response has both a transfer-encoding and a content-length".into()))
        }
        (Some(true), None) => Ok(Framing::Chunked),
        // A transfer coding other than chunked last: the body runs until the close.
        (Some(false), None) | (None, None) => Ok(Framing::Close),
        (None, Some(0)) => Ok(Framing::Empty),
        (None, Some(length)) => Ok(Framing::Length(length)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Result<Option<Head>, ClientError> {
        take_head(&mut BytesMut::from(text.as_bytes()), &Method::POST, &mut 0)
    }

    fn framing_of(text: &str) -> Result<Framing, String> {
        match head(text) {
            Ok(Some(head)) => Ok(head.framing),
            Ok(None) => Err("partial".into()),
            Err(err) => Err(err.to_string()),
        }
    }

    #[test]
    fn the_request_head_carries_the_target_headers_and_length() {
        let request = http::Request::post("/v1/chat?x=1").header("host", "api.example").body(()).expect("request");
        let (parts, ()) = request.into_parts();
        assert_eq!(
            &request_head(&parts, 12)[..],
            b"POST /v1/chat?x=1 HTTP/1.1\r\nhost: api.example\r\naccept-encoding: identity\r\ncontent-length: 12\r\n\r\n"
        );
        let request = http::Request::get("http://api.example:8080/v1/models").body(()).expect("request");
        let (parts, ()) = request.into_parts();
        assert_eq!(
            &request_head(&parts, 0)[..],
            b"GET http://api.example:8080/v1/models HTTP/1.1\r\naccept-encoding: identity\r\n\r\n"
        );
    }

    #[test]
    fn the_body_is_framed_by_chunks_length_or_close() {
        assert_eq!(framing_of("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), Ok(Framing::Chunked));
        assert_eq!(framing_of("HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n"), Ok(Framing::Length(5)));
        assert_eq!(framing_of("HTTP/1.1 200 OK\r\ncontent-length: 5, 5\r\n\r\n"), Ok(Framing::Length(5)));
        assert_eq!(framing_of("HTTP/1.1 200 OK\r\n\r\n"), Ok(Framing::Close));
        assert_eq!(framing_of("HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\n"), Ok(Framing::Empty));
        assert_eq!(framing_of("HTTP/1.1 304 Not Modified\r\n\r\n"), Ok(Framing::Empty));
    }

    #[test]
    fn conflicting_or_invalid_framing_is_refused_saying_why() {
        let both = framing_of("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 5\r\n\r\n");
        assert!(both.as_ref().is_err_and(|err| err.contains("both")), "{both:?}");
        for bad in ["-1", "5x", "", "99999999999999999999999", "+5"] {
            let got = framing_of(&format!("HTTP/1.1 200 OK\r\ncontent-length: {bad}\r\n\r\n"));
            assert!(got.as_ref().is_err_and(|err| err.contains("content-length")), "{bad:?}: {got:?}");
        }
        let disagree = framing_of("HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\n");
        assert!(disagree.as_ref().is_err_and(|err| err.contains("disagree")), "{disagree:?}");
    }

    #[test]
    fn an_http_1_0_response_with_a_transfer_coding_is_refused() {
        let old = framing_of("HTTP/1.0 200 OK\r\ntransfer-encoding: chunked\r\n\r\n");
        assert!(old.as_ref().is_err_and(|err| err.contains("HTTP/1.0")), "{old:?}");
    }

    #[test]
    fn keep_alive_follows_the_version_and_the_connection_header() {
        let alive = |text: &str| head(text).ok().flatten().map(|head| head.keep_alive);
        assert_eq!(alive("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"), Some(true));
        assert_eq!(alive("HTTP/1.1 200 OK\r\nconnection: Close\r\ncontent-length: 0\r\n\r\n"), Some(false));
        assert_eq!(alive("HTTP/1.0 200 OK\r\ncontent-length: 0\r\n\r\n"), Some(false));
        assert_eq!(alive("HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 0\r\n\r\n"), Some(true));
        assert_eq!(alive("HTTP/1.1 200 OK\r\n\r\n"), Some(false), "a body that runs to the close");
    }

    #[test]
    fn interim_responses_are_skipped_and_bounded() {
        let mut buf =
            BytesMut::from(&b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi"[..]);
        let last = take_head(&mut buf, &Method::POST, &mut 0).ok().flatten().expect("the final head");
        assert_eq!((last.status, &buf[..]), (StatusCode::OK, &b"hi"[..]));
        let many = "HTTP/1.1 103 Early Hints\r\n\r\n".repeat(MAX_INTERIM + 1) + "HTTP/1.1 200 OK\r\n\r\n";
        assert!(head(&many).is_err_and(|err| err.to_string().contains("interim")));
        // Spaced out, each in a read of its own, they count all the same.
        let mut interim = 0;
        for _ in 0..MAX_INTERIM {
            let mut one = BytesMut::from(&b"HTTP/1.1 100 Continue\r\n\r\n"[..]);
            assert!(matches!(take_head(&mut one, &Method::POST, &mut interim), Ok(None)), "{interim} so far");
        }
        let mut one_more = BytesMut::from(&b"HTTP/1.1 102 Processing\r\n\r\n"[..]);
        let refused = take_head(&mut one_more, &Method::POST, &mut interim);
        assert!(refused.is_err_and(|err| err.to_string().contains("interim")));
    }

    #[test]
    fn an_oversized_head_or_too_many_headers_is_refused_saying_so() {
        let huge = format!("HTTP/1.1 200 OK\r\nx-big: {}", "a".repeat(HEAD_LIMIT));
        assert!(head(&huge).is_err_and(|err| err.to_string().contains("larger than 64 KiB")));
        assert!(head("HTTP/1.1 200 OK\r\nx-big: aaaa").is_ok_and(|head| head.is_none()), "partial, not yet refused");
        let many = format!("HTTP/1.1 200 OK\r\n{}\r\n", "x-a: 1\r\n".repeat(MAX_HEADERS + 1));
        assert!(head(&many).is_err_and(|err| err.to_string().contains("more than 100 headers")));
        assert!(head("SSH-2.0-OpenSSH\r\n\r\n").is_err_and(|err| err.to_string().contains("not HTTP")));
    }
}
