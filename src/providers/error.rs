//! What can go wrong with one upstream attempt, classified once so the core can
//! decide failover and label metrics without looking at message text.

use std::time::Duration;

use thiserror::Error;

/// A failure of one provider attempt. Every variant says where the fault came
/// from; [`ProviderError::is_failover`] says whether another provider may help.
#[derive(Debug, Error)]
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
        }
    }

    /// Whether the next candidate may be tried: everything but a request the
    /// client got wrong (a context-length error is the core's decision).
    pub fn is_failover(&self) -> bool {
        !matches!(self, ProviderError::BadRequest { .. })
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
