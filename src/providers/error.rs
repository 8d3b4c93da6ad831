//! What can go wrong with one upstream attempt, classified once so the core can
//! decide failover and label metrics without looking at message text.

use std::time::Duration;

use thiserror::Error;

/// A failure of one provider attempt. Every variant says where the fault came
/// from; [`ProviderError::is_failover`] says whether another provider may help.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ProviderError {
    /// No connection: refused, DNS, TLS, a proxy; nothing of the request
    /// reached the provider.
    #[error("connection failed: {0}")]
    Connect(String),
    /// The request left, and the connection closed or broke before any
    /// response: the provider may have read it and acted on it.
    #[error("no response: {0}")]
    NoResponse(String),
    /// The response is not HTTP/1.1 that can be trusted: a head that does
    /// not parse, is too large, switches protocols, or frames its body two
    /// ways.
    #[error("not valid HTTP/1.1: {0}")]
    Protocol(String),
    /// A success answer in a content coding baton did not ask for (it
    /// asks for `identity`) and does not decode.
    #[error("the answer is encoded as {0:?}, which baton did not ask for")]
    ContentEncoding(String),
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
    /// The provider answered 404: a retired model or a wrong `base_url`, the
    /// gateway's configuration rather than the client's request, so the
    /// next target is tried (and the provider's breaker is not charged).
    #[error("not found (http 404): {message}")]
    NotFound {
        /// The provider's own explanation.
        message: String,
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
    #[error("not an event stream: the content type is {0:?}")]
    ContentType(String),
    /// baton could not get the credential that proves its request (a
    /// token exchange failed): the provider is unreachable as far as this
    /// attempt goes, and the client is not at fault.
    #[error("cannot get the provider's credential: {0}")]
    Credential(String),
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
    /// baton could not build or send the request (a URL or header it cannot
    /// carry): its own fault, so it never counts against the provider.
    #[error("cannot send the request: {0}")]
    Request(String),
    /// One event passed the size cap (a line that never ends, most likely).
    #[error("an event is larger than the limit of {0} bytes")]
    EventTooLarge(usize),
}

/// Where a fault came from, as Pingora's errors record it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The client's request itself is wrong.
    Client,
    /// The provider failed, or its bytes did.
    Upstream,
    /// baton itself: a deadline it enforced, a skip, its own fault.
    Baton,
}

/// Everything the core decides about one failure, in one place: each
/// failure is classified once and the decisions are read from here, so
/// they cannot disagree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Class {
    /// The bounded label for metrics, logs and attempt lists.
    pub label: &'static str,
    /// Where the fault came from.
    pub source: Source,
    /// Another candidate may be tried.
    pub failover: bool,
    /// The same target may be tried again (before any byte of an answer).
    pub retry: bool,
    /// It says the provider is unwell, for its circuit breaker.
    pub charge_breaker: bool,
    /// The candidate was passed over without a request.
    pub skip: bool,
    /// The provider, or a cooldown it asked for, limited the rate.
    pub rate_limited: bool,
    /// A deadline ran out.
    pub timed_out: bool,
}

impl Class {
    /// A provider's failure: fail over, charge the breaker, no retry.
    pub const fn upstream(label: &'static str) -> Self {
        Class {
            label,
            source: Source::Upstream,
            failover: true,
            retry: false,
            charge_breaker: true,
            skip: false,
            rate_limited: false,
            timed_out: false,
        }
    }

    /// baton's own decision or fault: fail over, never charge the provider.
    pub const fn baton(label: &'static str) -> Self {
        Class { source: Source::Baton, charge_breaker: false, ..Class::upstream(label) }
    }

    const fn retried(self) -> Self {
        Class { retry: true, ..self }
    }
}

impl ProviderError {
    /// What this failure decides (see [`Class`]). A rate limit is the
    /// provider working as designed (its cooldown handles it); a rejected
    /// request is the client's and goes back to it, unless it is too long
    /// for this provider's context window, which another may have.
    pub fn class(&self) -> Class {
        match self {
            ProviderError::Connect(_) => Class::upstream("connect").retried(),
            // Whether it may be sent again is the route's retry rule, as after a 5xx.
            ProviderError::NoResponse(_) => Class::upstream("no_response").retried(),
            ProviderError::Protocol(_) => Class::upstream("protocol"),
            ProviderError::ContentEncoding(_) => Class::upstream("content_encoding"),
            ProviderError::RateLimited { .. } => {
                Class { charge_breaker: false, rate_limited: true, ..Class::upstream("http_429").retried() }
            }
            ProviderError::Server { .. } => Class::upstream("http_5xx").retried(),
            ProviderError::Auth { .. } => Class::upstream("http_auth"),
            // Another target's window may hold the prompt: it fails over, the breaker uncharged.
            ProviderError::BadRequest { context_length: true, .. } => {
                Class { source: Source::Client, charge_breaker: false, ..Class::upstream("context_length") }
            }
            ProviderError::BadRequest { .. } => Class {
                source: Source::Client,
                failover: false,
                charge_breaker: false,
                ..Class::upstream("client_error")
            },
            ProviderError::NotFound { .. } => Class { charge_breaker: false, ..Class::upstream("upstream_not_found") },
            ProviderError::Status { .. } => Class::upstream("http_status"),
            ProviderError::ContentType(_) => Class::upstream("content_type"),
            ProviderError::Credential(_) => Class::upstream("auth"),
            ProviderError::Malformed(_) => Class::upstream("malformed"),
            ProviderError::ErrorEvent(_) => Class::upstream("error_event"),
            ProviderError::Io(_) => Class::upstream("stream_broken"),
            ProviderError::Truncated => Class::upstream("truncated"),
            ProviderError::EventTooLarge(_) => Class::upstream("event_too_large"),
            ProviderError::Request(_) => Class::baton("request_build"),
        }
    }

    /// A short, bounded label for metrics, logs and attempt lists.
    pub fn kind(&self) -> &'static str {
        self.class().label
    }

    /// Whether the next candidate may be tried: everything but a request the
    /// client got wrong.
    pub fn is_failover(&self) -> bool {
        self.class().failover
    }

    /// What happened, without any text the provider wrote: safe for other
    /// clients and for logs at info.
    pub fn summary(&self) -> String {
        match self {
            // baton's own client wrote these, never the provider.
            ProviderError::Connect(_)
            | ProviderError::NoResponse(_)
            | ProviderError::Protocol(_)
            | ProviderError::Io(_) => self.to_string(),
            ProviderError::ContentEncoding(_) => "the answer is in a content coding baton did not ask for".to_owned(),
            ProviderError::RateLimited { .. } => "rate limited (http 429)".to_owned(),
            ProviderError::Server { status, .. } => format!("provider error (http {status})"),
            ProviderError::Auth { status, .. } => {
                format!("provider rejected the gateway's credentials (http {status})")
            }
            ProviderError::BadRequest { status, .. } => format!("provider rejected the request (http {status})"),
            ProviderError::NotFound { .. } => "the provider has no such model or path (http 404)".to_owned(),
            ProviderError::Status { status, .. } => format!("unexpected http {status}"),
            ProviderError::ContentType(_) => "the answer is not an event stream".to_owned(),
            ProviderError::Credential(_) => "cannot get the provider's credential".to_owned(),
            ProviderError::Malformed(_) => "undecodable event".to_owned(),
            ProviderError::ErrorEvent(_) => "error event from provider".to_owned(),
            ProviderError::Truncated | ProviderError::EventTooLarge(_) | ProviderError::Request(_) => self.to_string(),
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
            | ProviderError::NoResponse(text)
            | ProviderError::Protocol(text)
            | ProviderError::ContentEncoding(text)
            | ProviderError::ContentType(text)
            | ProviderError::Credential(text)
            | ProviderError::Malformed(text)
            | ProviderError::ErrorEvent(text)
            | ProviderError::Io(text)
            | ProviderError::RateLimited { message: text, .. }
            | ProviderError::Server { message: text, .. }
            | ProviderError::Auth { message: text, .. }
            | ProviderError::BadRequest { message: text, .. }
            | ProviderError::NotFound { message: text }
            | ProviderError::Status { message: text, .. } => text,
            ProviderError::Truncated | ProviderError::EventTooLarge(_) | ProviderError::Request(_) => return,
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
            404 => ProviderError::NotFound { message },
            400 | 413 | 422 => ProviderError::BadRequest { status, message, context_length },
            _ => ProviderError::Status { status, message },
        }
    }
}
