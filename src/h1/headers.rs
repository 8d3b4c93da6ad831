//! The header rules a head is read by on either side: the length a body
//! declares, a list header's last token, and whether the connection may
//! carry another message.

use bytes::{BufMut, BytesMut};
use http::header::{CONNECTION, CONTENT_LENGTH};
use http::{HeaderMap, HeaderName, Version};

/// What is wrong with a framing header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderError {
    /// A `content-length` that is not a number.
    InvalidLength,
    /// `content-length`s that name different numbers.
    LengthsDisagree,
    /// A list header with no token, or not text.
    InvalidList,
}

/// The last comma-separated token of every `name` header, if there is one.
pub fn last_token<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<Result<&'a str, HeaderError>> {
    let value = headers.get_all(name).iter().next_back()?;
    let Ok(text) = value.to_str() else { return Some(Err(HeaderError::InvalidList)) };
    Some(text.rsplit(',').map(str::trim).find(|token| !token.is_empty()).ok_or(HeaderError::InvalidList))
}

/// The `content-length`, when there is one: every value (and every item of
/// a list) must be the same number.
pub fn content_length(headers: &HeaderMap) -> Result<Option<u64>, HeaderError> {
    let mut length = None;
    for value in headers.get_all(CONTENT_LENGTH) {
        for item in value.to_str().map_err(|_| HeaderError::InvalidLength)?.split(',').map(str::trim) {
            if item.is_empty() || !item.bytes().all(|byte| byte.is_ascii_digit()) {
                return Err(HeaderError::InvalidLength);
            }
            let parsed = item.parse::<u64>().map_err(|_| HeaderError::InvalidLength)?;
            if length.is_some_and(|length| length != parsed) {
                return Err(HeaderError::LengthsDisagree);
            }
            length = Some(parsed);
        }
    }
    Ok(length)
}

/// Whether `version` and the `connection` header let the connection carry
/// another message: HTTP/1.1 unless it says `close`, HTTP/1.0 only when it
/// says `keep-alive`.
pub fn keep_alive(version: Version, headers: &HeaderMap) -> bool {
    let says = |token: &str| {
        headers
            .get_all(CONNECTION)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .any(|value| value.split(',').any(|item| item.trim().eq_ignore_ascii_case(token)))
    };
    if version == Version::HTTP_11 { !says("close") } else { says("keep-alive") }
}

/// Writes one header field line, `name: value` and CRLF, into a head.
pub fn put_field(head: &mut BytesMut, name: &[u8], value: &[u8]) {
    head.put_slice(name);
    head.put_slice(b": ");
    head.put_slice(value);
    head.put_slice(b"\r\n");
}
