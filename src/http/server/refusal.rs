//! Why a request head was refused, and the answer that says so: every
//! refusal of the head's reading (`head`) and of what it says (`target`) is
//! one of these, so each is an answer the client can read.

use http::StatusCode;

/// Why a head was refused: the status and the error body's code and message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Refusal {
    pub(super) status: StatusCode,
    code: &'static str,
    message: &'static str,
}

impl Refusal {
    pub(super) const fn new(status: StatusCode, code: &'static str, message: &'static str) -> Self {
        Refusal { status, code, message }
    }

    /// The whole answer, closing the connection. Nothing of such a request
    /// can be trusted to say which API its client speaks, so the body reads
    /// as an error in both shapes: OpenAI's (`error.message`, `.type`,
    /// `.code`) and Anthropic's (`type: "error"`, `error.type`, `.message`),
    /// whose type name for a bad request is the same.
    pub(super) fn answer(&self) -> Vec<u8> {
        let body = format!(
            r#"{{"type":"error","error":{{"message":"{}","type":"invalid_request_error","code":"{}"}}}}"#,
            self.message, self.code
        );
        format!(
            "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
            self.status.as_str(),
            self.status.canonical_reason().unwrap_or(""),
            body.len()
        )
        .into_bytes()
    }
}

/// A head that is not valid HTTP/1.1, saying how.
pub(super) const fn invalid(message: &'static str) -> Refusal {
    Refusal::new(StatusCode::BAD_REQUEST, "invalid_http", message)
}

/// A head that is not valid HTTP/1.1, whatever else is wrong with it.
pub(super) const INVALID: Refusal = invalid("the request is not valid HTTP/1.1");
