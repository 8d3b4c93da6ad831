//! The `date` header every response carries (RFC 9110 §6.6.1), formatted
//! once a second per worker thread rather than once per response.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{BufMut, BytesMut};

thread_local! {
    /// The second last formatted, and its `date` field line.
    static CACHED: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

/// Writes the `date` field line for now into `head`.
pub(super) fn put(head: &mut BytesMut) {
    let now = SystemTime::now();
    let second = now.duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs());
    CACHED.with_borrow_mut(|(cached, line)| {
        if *cached != second {
            *cached = second;
            *line = format!("date: {}\r\n", httpdate::fmt_http_date(now));
        }
        head.put_slice(line.as_bytes());
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_date_is_an_http_date_line() {
        let mut head = BytesMut::new();
        put(&mut head);
        let line = String::from_utf8_lossy(&head).into_owned();
        let value = line.strip_prefix("date: ").and_then(|rest| rest.strip_suffix("\r\n")).unwrap_or_default();
        let parsed = httpdate::parse_http_date(value).map(|date| date.elapsed().unwrap_or_default().as_secs());
        assert!(parsed.is_ok_and(|age| age < 5), "{line:?}");
    }
}
