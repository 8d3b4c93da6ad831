//! A request's row in the request log, at the edge: started when a chat
//! request arrives (its id, dialect and the trace it belongs to), handed to
//! the request's watch once it has a route, and ended here for a request
//! refused before it had one (a key, a body or a model that is wrong).

use axum::http::HeaderMap;

use super::AppState;
use crate::dialect::Dialect;
use crate::store::Recording;

/// A row for a request in dialect `D` arriving now, when the store keeps rows.
pub(super) fn begin<D: Dialect>(state: &AppState, id: &str, headers: &HeaderMap) -> Option<Recording> {
    let mut recording = state.records()?.begin(id, D::NAME);
    recording.row().trace_id = trace_id(headers);
    Some(recording)
}

/// Ends the row of a request refused with the error `code` and HTTP
/// `status` before it had a route.
pub(super) fn refused(mut recording: Recording, code: &str, status: u16) {
    let row = recording.row();
    row.outcome = code.to_owned();
    row.status = status;
    row.duration_ms = u64::try_from(crate::store::now_ms().saturating_sub(row.time_ms)).unwrap_or(0);
    recording.finish();
}

/// The trace id of the client's W3C `traceparent`, when it sent a valid one
/// (a traced request's own span replaces it with the same or a new one).
fn trace_id(headers: &HeaderMap) -> Option<String> {
    let value = headers.get("traceparent")?.to_str().ok()?;
    let mut parts = value.trim().split('-');
    let (version, trace, span) = (parts.next()?, parts.next()?, parts.next()?);
    let hex =
        |text: &str, len: usize| text.len() == len && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let valid = hex(version, 2) && version != "ff" && hex(trace, 32) && hex(span, 16);
    (valid && trace.bytes().any(|b| b != b'0')).then(|| trace.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_valid_traceparent_gives_a_trace_id() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert("traceparent", value.parse().expect("header"));
            trace_id(&headers)
        };
        let id = "4bf92f3577b34da6a3ce929d0e0e4736";
        assert_eq!(with(&format!("00-{id}-00f067aa0ba902b7-01")).as_deref(), Some(id));
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6-00f067aa0ba902b7-01",
            "garbage",
        ] {
            assert_eq!(with(bad), None, "{bad}");
        }
        assert_eq!(trace_id(&HeaderMap::new()), None);
    }
}
