//! What can go wrong with one upstream attempt, classified once so the core can
//! decide failover and label metrics without looking at message text.

use std::time::Duration;

use thiserror::Error;

/// A failure of one provider attempt. Every variant says where the fault came
/// from; [`ProviderError::is_failover`] says whether another provider may help.
#[derive(Debug, Clone, Error)]
pub enum ProviderError {
    /// No connection, or it broke before a response: refused, reset, DNS, TLS.
    #[error("connection failed: {0}")]
    Connect(String),
    /// The provider answered 429.
    #[error("rate limited (http 429): {message}")]
    RateLimited {
        /// How long the provider asked us to wait, if it said.
        retry_after: Option<Duration>,
        /// The provider's own explanation.
        message: String,
    },
    /// The provider answered 5xx.
    #[error("provider error (http {status}): {message}")]
    Server {
        /// The HTTP status.
        status: u16,
        /// The provider's own explanation.
        message: String,
    },
    /// The provider refused the gateway's credentials (401/403).
    #[error("provider rejected the gateway's credentials (http {status}): {message}")]
    Auth {
        /// The HTTP status.
        status: u16,
        /// The provider's own explanation.
        message: String,
    },
    /// The provider says the request itself is wrong; another provider would
    /// say the same, so the client gets it back.
    #[error("{message}")]
    BadRequest {
        /// The HTTP status, passed on to the client.
        status: u16,
        /// The provider's own explanation.
        message: String,
        /// Whether the prompt was too long for this model's context window.
        context_length: bool,
    },
    /// Any other unexpected status.
    #[error("unexpected http {status}: {message}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The provider's own explanation.
        message: String,
    },
    /// A success status without an event stream behind it.
    #[error("expected text/event-stream, got {0:?}")]
    ContentType(String),
    /// An event that cannot be decoded.
    #[error("undecodable event: {0}")]
    Malformed(String),
    /// The provider reported an error inside the stream.
    #[error("error event from provider: {0}")]
    ErrorEvent(String),
    /// The body broke off while it was being read.
    #[error("stream broke: {0}")]
    Io(String),
    /// The stream ended without the provider's end marker.
    #[error("stream ended without the provider's end marker")]
    Truncated,
    /// One event passed the size cap (a line that never ends, most likely).
    #[error("an event is larger than the limit of {0} bytes")]
    EventTooLarge(usize),
}

impl ProviderError {
    /// A short, bounded label for metrics, logs and attempt lists.
    pub fn kind(&self) -> &'static str {
        match self {
            ProviderError::Connect(_) => "connect",
            ProviderError::RateLimited { .. } => "http_429",
            ProviderError::Server { .. } => "http_5xx",
            ProviderError::Auth { .. } => "http_auth",
            ProviderError::BadRequest { context_length: true, .. } => "context_length",
            ProviderError::BadRequest { .. } => "client_error",
            ProviderError::Status { .. } => "http_status",
            ProviderError::ContentType(_) => "content_type",
            ProviderError::Malformed(_) => "malformed",
            ProviderError::ErrorEvent(_) => "error_event",
            ProviderError::Io(_) => "stream_broken",
            ProviderError::Truncated => "truncated",
            ProviderError::EventTooLarge(_) => "event_too_large",
        }
    }

    /// Whether the next candidate may be tried: everything but a request the
    /// client got wrong (a context-length error is the core's decision).
    pub fn is_failover(&self) -> bool {
        !matches!(self, ProviderError::BadRequest { .. })
    }

    /// What happened, without any text the provider wrote: safe for other
    /// clients and for logs at info.
    pub fn summary(&self) -> String {
        match self {
            // baton's own client wrote these two, never the provider.
            ProviderError::Connect(_) | ProviderError::Io(_) => self.to_string(),
            ProviderError::RateLimited { .. } => "rate limited (http 429)".to_owned(),
            ProviderError::Server { status, .. } => format!("provider error (http {status})"),
            ProviderError::Auth { status, .. } => {
                format!("provider rejected the gateway's credentials (http {status})")
            }
            ProviderError::BadRequest { status, .. } => format!("provider rejected the request (http {status})"),
            ProviderError::Status { status, .. } => format!("unexpected http {status}"),
            ProviderError::ContentType(_) => "the answer is not an event stream".to_owned(),
            ProviderError::Malformed(_) => "undecodable event".to_owned(),
            ProviderError::ErrorEvent(_) => "error event from provider".to_owned(),
            ProviderError::Truncated | ProviderError::EventTooLarge(_) => self.to_string(),
        }
    }

    /// Removes `secret` (the key sent to this provider, which a provider may
    /// echo) from every text the provider wrote.
    pub fn redact(&mut self, secret: &str) {
        if secret.is_empty() {
            return;
        }
        let text = match self {
            ProviderError::Connect(text)
            | ProviderError::ContentType(text)
            | ProviderError::Malformed(text)
            | ProviderError::ErrorEvent(text)
            | ProviderError::Io(text)
            | ProviderError::RateLimited { message: text, .. }
            | ProviderError::Server { message: text, .. }
            | ProviderError::Auth { message: text, .. }
            | ProviderError::BadRequest { message: text, .. }
            | ProviderError::Status { message: text, .. } => text,
            ProviderError::Truncated | ProviderError::EventTooLarge(_) => return,
        };
        if text.contains(secret) {
            *text = text.replace(secret, "[redacted]");
        }
    }

    /// Builds the error for a non-success status from the provider's body text.
    pub fn from_status(status: u16, message: String, retry_after: Option<Duration>, context_length: bool) -> Self {
        match status {
            429 => ProviderError::RateLimited { retry_after, message },
            500..=599 => ProviderError::Server { status, message },
            401 | 403 => ProviderError::Auth { status, message },
            400 | 404 | 413 | 422 => ProviderError::BadRequest { status, message, context_length },
            _ => ProviderError::Status { status, message },
        }
    }
}
