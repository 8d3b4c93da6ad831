//! Every error a client can get, in no dialect yet: a status, a kind, a
//! bounded code, a message and maybe a `Retry-After`. Each dialect spells the
//! body its own way (OpenAI's `{"error": {"message", "type", "code"}}`,
//! Anthropic's `{"type": "error", "error": {"type", "message"}}`).

use http::StatusCode;

/// What sort of error it is, for the dialect to name (OpenAI's `type`,
/// Anthropic's `error.type`): few enough that every dialect has a word for each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request itself is wrong: malformed, unknown model, too large, too slow.
    InvalidRequest,
    /// The caller may not do this.
    Permission,
    /// Every candidate was rate-limited; `Retry-After` says how long to wait.
    RateLimit,
    /// The providers failed, before or after commit.
    Upstream,
    /// The proxy is not taking requests (shutting down).
    Unavailable,
    /// Something inside baton failed.
    Internal,
}

/// An error response; the only error type that becomes HTTP, rendered by the
/// dialect of the endpoint that failed.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    kind: ErrorKind,
    code: &'static str,
    message: String,
    retry_after_secs: Option<u64>,
}

impl ApiError {
    /// Any error; the named constructors below are the usual ones.
    pub fn new(status: StatusCode, kind: ErrorKind, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, kind, code, message: message.into(), retry_after_secs: None }
    }

    /// The same error, telling the client to wait `secs` before retrying.
    pub fn with_retry_after(self, secs: Option<u64>) -> Self {
        ApiError { retry_after_secs: secs, ..self }
    }

    /// A body that is not a valid chat request.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, ErrorKind::InvalidRequest, "invalid_request", message)
    }

    /// A `model` that names no route.
    pub fn unknown_model(model: &str, known: &[&str]) -> Self {
        let message = format!("unknown model {model:?}; this gateway serves: {}", known.join(", "));
        Self::new(StatusCode::NOT_FOUND, ErrorKind::InvalidRequest, "model_not_found", message)
    }

    /// A body that is not JSON: a cross-site form could post one without a CORS preflight.
    pub fn unsupported_media_type(given: &str) -> Self {
        let message = format!("the request body must be application/json, not {given:?}");
        Self::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, ErrorKind::InvalidRequest, "unsupported_media_type", message)
    }

    /// A `Host` the config's `allowed_hosts` does not list (DNS rebinding).
    pub fn foreign_host(host: &str) -> Self {
        let message = format!("this gateway does not answer for host {host:?}");
        Self::new(StatusCode::FORBIDDEN, ErrorKind::Permission, "host_not_allowed", message)
    }

    /// A body over the configured limit.
    pub fn too_large(limit: usize) -> Self {
        let message = format!("request body is larger than the limit of {limit} bytes");
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, ErrorKind::InvalidRequest, "request_too_large", message)
    }

    /// A body the requests in flight have no room for (`max_body_bytes_in_flight`).
    pub fn bodies_in_flight() -> Self {
        let message =
            "too many request bytes in flight: this gateway is at its max_body_bytes_in_flight; retry shortly";
        Self::new(StatusCode::SERVICE_UNAVAILABLE, ErrorKind::Unavailable, "too_many_body_bytes", message)
            .with_retry_after(Some(1))
    }

    /// A request body that did not arrive in time.
    pub fn body_timeout(timeout: std::time::Duration) -> Self {
        let message = format!("the request body did not arrive within {} ms", timeout.as_millis());
        Self::new(StatusCode::REQUEST_TIMEOUT, ErrorKind::InvalidRequest, "body_timeout", message)
    }

    /// Whether this is [`ApiError::body_timeout`].
    pub fn is_timeout(&self) -> bool {
        self.code == "body_timeout"
    }

    /// Something inside baton failed; what is in the log, not here.
    pub fn internal() -> Self {
        let message = "the gateway failed to handle this request; the request id is in the x-request-id header";
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, ErrorKind::Internal, "internal_error", message)
    }

    /// The error event ending a stream whose relay panicked (what panicked is
    /// in the log, with the request id).
    pub fn relay_panicked() -> Self {
        let message = "the gateway failed while relaying this answer";
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, ErrorKind::Internal, "internal_error", message)
    }

    /// A request without a valid client key (401), or with a key that may
    /// not use its route (403).
    pub fn denied(denied: crate::access::Denied) -> Self {
        match denied.status() {
            403 => Self::new(StatusCode::FORBIDDEN, ErrorKind::Permission, "route_not_allowed", denied.message()),
            // As OpenAI answers a bad key: 401, invalid_request_error, invalid_api_key.
            _ => Self::new(StatusCode::UNAUTHORIZED, ErrorKind::InvalidRequest, "invalid_api_key", denied.message()),
        }
    }

    /// An admin action without the admin credential.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, ErrorKind::Permission, "forbidden", message)
    }

    /// A path baton does not serve.
    pub fn not_found(path: &str) -> Self {
        // An SDK whose base URL lacks the `/v1` baton's doors sit under.
        const DOORS: [&str; 5] = ["/chat/completions", "/messages", "/messages/count_tokens", "/responses", "/models"];
        let message = match DOORS.iter().find(|door| path.trim_end_matches('/') == **door) {
            Some(door) => format!(
                "no such endpoint: {path}; did you mean /v1{door}? (an OpenAI SDK's base_url ends in /v1, an Anthropic SDK's does not)"
            ),
            None => format!("no such endpoint: {path}"),
        };
        Self::new(StatusCode::NOT_FOUND, ErrorKind::InvalidRequest, "not_found", message)
    }

    /// A response id not kept for this caller (never kept, deleted,
    /// expired, or another key's): asked for itself, or as the turn a
    /// request continues (`previous_response_id`). The words are OpenAI's.
    pub fn response_not_found(id: &str, continued: bool) -> Self {
        let (message, code) = if continued {
            (format!("Previous response with id '{id}' not found."), "previous_response_not_found")
        } else {
            (format!("Response with id '{id}' not found."), "response_not_found")
        };
        Self::new(StatusCode::NOT_FOUND, ErrorKind::InvalidRequest, code, message)
    }

    /// A chained conversation whose earlier turn `missing` is no longer
    /// kept: refused rather than sent shortened.
    pub fn chain_broken(previous: &str, missing: &str) -> Self {
        let message = format!(
            "the conversation `previous_response_id` {previous} continues reaches response {missing}, \
             which is no longer kept (deleted, or older than the store's retention)"
        );
        Self::new(StatusCode::NOT_FOUND, ErrorKind::InvalidRequest, "previous_response_not_found", message)
    }

    /// An `item_reference` to an item no kept response of the caller holds.
    pub fn item_not_found(id: &str) -> Self {
        let message = format!("Item with id '{id}' not found. Items are kept only when `store` is not false.");
        Self::new(StatusCode::NOT_FOUND, ErrorKind::InvalidRequest, "item_not_found", message)
    }

    /// The store that keeps responses did not answer in time.
    pub fn store_unavailable() -> Self {
        let message = "the response store did not answer; try again shortly";
        Self::new(StatusCode::SERVICE_UNAVAILABLE, ErrorKind::Unavailable, "store_unavailable", message)
    }

    /// A known path with the wrong method.
    pub fn method_not_allowed(method: &str, path: &str) -> Self {
        let message = format!("method {method} is not allowed on {path}");
        Self::new(StatusCode::METHOD_NOT_ALLOWED, ErrorKind::InvalidRequest, "method_not_allowed", message)
    }

    /// A WebSocket upgrade on a path baton serves over HTTP only: 426, which
    /// the Codex CLI takes as "fall back to HTTP" at once, where it retries a
    /// 405 seven times first.
    pub fn upgrade_refused(path: &str) -> Self {
        let message = format!("this gateway does not speak WebSocket on {path}: send the same request as an HTTP POST");
        Self::new(StatusCode::UPGRADE_REQUIRED, ErrorKind::InvalidRequest, "websocket_not_supported", message)
    }

    /// The HTTP status the response carries.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// What sort of error it is, for the dialect to name.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// A short, bounded label (OpenAI's `code`).
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// What went wrong, for a person to read.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// How many seconds the client should wait, for the `Retry-After` header.
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.retry_after_secs
    }
}
