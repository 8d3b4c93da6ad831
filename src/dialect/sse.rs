//! Writing SSE for the dialects whose events are named (Anthropic's,
//! the Responses API's): `event: <name>`, one `data:` line of JSON, and a
//! blank line, appended to the relay's buffer.

use bytes::{BufMut, BytesMut};
use serde::Serialize;

/// Appends `event: <name>\ndata: <json>\n\n`; nothing when `value` cannot
/// be written (a `Value` always can).
pub(super) fn write_named(name: &str, value: &impl Serialize, out: &mut BytesMut) {
    let start = out.len();
    out.put_slice(b"event: ");
    out.put_slice(name.as_bytes());
    out.put_slice(b"\ndata: ");
    if serde_json::to_writer((&mut *out).writer(), value).is_err() {
        out.truncate(start);
        return;
    }
    out.put_slice(b"\n\n");
}

/// Appends `text` as a JSON string; inlined, since nearly every event of an
/// answer writes one.
#[inline]
pub(super) fn put_json_str(text: &str, out: &mut BytesMut) {
    // Writing into a `BytesMut` cannot fail, and a `str` always serialises.
    let _ = serde_json::to_writer(out.writer(), text);
}
