//! What a request head says about where it goes and how it is spoken, read
//! by RFC 9112 before anything is served: the version, the method, the
//! target's form, the host, and line endings. A head that says any of them
//! badly is refused, since a hop in front of baton may have read it
//! another way.

use bytes::BytesMut;
use http::header::HOST;
use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, Version};

use super::refusal::{INVALID, Refusal, invalid};

pub(super) const NO_HOST: Refusal = invalid("the request has no host header, which HTTP/1.1 requires");
pub(super) const TWO_HOSTS: Refusal = invalid("the request has more than one host header");
pub(super) const BAD_HOST: Refusal = invalid("the request's host is not a valid host and port");
pub(super) const BAD_TARGET: Refusal =
    invalid("the request's target is not in a form its method takes (a path, an absolute URL, * for OPTIONS)");
pub(super) const BARE_LF: Refusal = invalid("a line of the request's head ends in a bare LF, not CRLF");
/// What the head's parser says of a version it does not read (it reads
/// HTTP/1.0 and HTTP/1.1 only), before [`read_as_http_1_1`] looks closer.
pub(super) const BAD_VERSION: Refusal = invalid("the request's HTTP version is not valid");
pub(super) const OTHER_VERSION: Refusal = Refusal::new(
    StatusCode::HTTP_VERSION_NOT_SUPPORTED,
    "http_version_not_supported",
    "this server speaks HTTP/1.1 (and HTTP/1.0)",
);
pub(super) const UNKNOWN_METHOD: Refusal =
    Refusal::new(StatusCode::NOT_IMPLEMENTED, "method_not_implemented", "the request's method is not one HTTP defines");

/// Looks closer at a request line whose version the head's parser does not
/// read: one naming a later HTTP/1 minor version (`HTTP/1.2`) is made to
/// read as HTTP/1.1, which RFC 9110 §2.5 says to process it as (`true`);
/// another major version is refused with 505, and a line that is not
/// `method SP target SP HTTP/D.D` at all as not HTTP. A line not yet whole
/// whose version may still turn out to be one of these waits for more
/// (`false`), so the answer never depends on how the bytes were split.
pub(super) fn read_as_http_1_1(buf: &mut BytesMut) -> Result<bool, Refusal> {
    const SHAPE: &[u8] = b"HTTP/D.D";
    let whole = memchr::memchr(b'\n', buf);
    let line = whole.map_or(&buf[..], |end| &buf[..end]);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let parts: Vec<&[u8]> = line.split(|byte| *byte == b' ').collect();
    let [_, _, version] = parts[..] else { return Err(INVALID) };
    let fits = version.len() <= SHAPE.len()
        && version.iter().zip(SHAPE).all(|(byte, shape)| match shape {
            b'D' => byte.is_ascii_digit(),
            shape => byte == shape,
        });
    match (fits, whole, version) {
        (false, ..) => Err(INVALID),
        (true, None, _) => Ok(false),
        (true, Some(_), [.., b'1', b'.', minor]) if version.len() == SHAPE.len() && *minor > b'1' => {
            let at = line.len() - 1;
            buf[at] = b'1';
            Ok(true)
        }
        (true, Some(_), [.., b'1', b'.', _]) => Err(INVALID),
        (true, Some(_), _) if version.len() == SHAPE.len() => Err(OTHER_VERSION),
        (true, Some(_), _) => Err(INVALID),
    }
}

/// Refuses a head with a line ended by a bare LF (RFC 9112 §2.2 lets a
/// server accept one, but a hop in front that does not would read other
/// fields, or another request, out of the same bytes).
pub(super) fn lines_end_in_crlf(head: &[u8]) -> Result<(), Refusal> {
    match memchr::memchr_iter(b'\n', head).any(|at| at == 0 || head[at - 1] != b'\r') {
        true => Err(BARE_LF),
        false => Ok(()),
    }
}

/// The request's method, when it is one HTTP defines (RFC 9110 §9 and
/// PATCH): an unknown one is answered 501 (§9.1), not 405.
pub(super) fn method(name: &str) -> Result<Method, Refusal> {
    const KNOWN: [&str; 9] = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"];
    let method = Method::from_bytes(name.as_bytes()).map_err(|_| invalid("the request's method is not a token"))?;
    if KNOWN.contains(&name) { Ok(method) } else { Err(UNKNOWN_METHOD) }
}

/// Checks that `target` is in a form `method` takes (RFC 9112 §3.2): a path
/// (origin form) or an absolute URL for any method but CONNECT, which takes
/// an authority alone, and `*` for OPTIONS; never a fragment.
pub(super) fn form(method: &Method, target: &str) -> Result<(), Refusal> {
    let absolute = ["http://", "https://"]
        .iter()
        .any(|scheme| target.get(..scheme.len()).is_some_and(|start| start.eq_ignore_ascii_case(scheme)));
    let fits = match target.as_bytes().first() {
        _ if target.contains('#') => false,
        _ if *method == Method::CONNECT => !target.starts_with('/') && !absolute && target != "*",
        Some(b'/') => true,
        Some(b'*') => target == "*" && *method == Method::OPTIONS,
        _ => absolute,
    };
    if fits { Ok(()) } else { Err(BAD_TARGET) }
}

/// Checks whom the request is for (RFC 9112 §3.2): an HTTP/1.1 request
/// names exactly one host, and no request names two or an invalid one. A
/// target in absolute form names the host itself (§3.2.2), which then
/// stands in the `host` header, so every check of the host reads the one
/// the request is served for.
pub(super) fn host(uri: &Uri, version: Version, headers: &mut HeaderMap) -> Result<(), Refusal> {
    let mut hosts = headers.get_all(HOST).iter();
    match (hosts.next(), hosts.next()) {
        (_, Some(_)) => return Err(TWO_HOSTS),
        (None, None) if version == Version::HTTP_11 => return Err(NO_HOST),
        (Some(host), None) if !valid_host(host.as_bytes()) => return Err(BAD_HOST),
        _ => {}
    }
    if let Some(authority) = uri.authority() {
        if !valid_host(authority.as_str().as_bytes()) {
            return Err(BAD_HOST);
        }
        headers.insert(HOST, HeaderValue::from_str(authority.as_str()).map_err(|_| BAD_HOST)?);
    }
    Ok(())
}

/// Whether `value` is `uri-host [ ":" port ]` (RFC 9112 §3.2, RFC 3986
/// §3.2.2): a bracketed IP literal or a name of unreserved, percent and
/// sub-delimiter characters, with an optional port of digits; no user
/// information, no path, no white space. An empty host is valid (a target
/// without an authority).
fn valid_host(value: &[u8]) -> bool {
    let (host, port) = match value.strip_prefix(b"[") {
        Some(literal) => match memchr::memchr(b']', literal) {
            Some(end) if end > 0 => {
                let inside = &literal[..end];
                let ip = inside.iter().all(|byte| byte.is_ascii_hexdigit() || matches!(byte, b':' | b'.'));
                if !ip {
                    return false;
                }
                (&[][..], &literal[end + 1..])
            }
            _ => return false,
        },
        None => match memchr::memrchr(b':', value) {
            Some(colon) => (&value[..colon], &value[colon..]),
            None => (value, &[][..]),
        },
    };
    let name = host.iter().all(|byte| byte.is_ascii_alphanumeric() || b"-._~%!$&'()*+,;=".contains(byte));
    let port = port.is_empty() || (port[0] == b':' && port[1..].iter().all(u8::is_ascii_digit));
    name && port
}
