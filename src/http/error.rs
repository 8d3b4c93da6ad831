//! Every error a client can get, in OpenAI's shape, so SDKs raise their usual
//! exceptions: `{"error": {"message", "type", "code"}}` with a fitting status.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::core::ProxyError;

/// An error response; the only error type that becomes HTTP.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    kind: &'static str,
    code: &'static str,
    message: String,
    retry_after_secs: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, kind, code, message: message.into(), retry_after_secs: None }
    }

    /// A body that is not a valid chat request.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request_error", "invalid_request", message)
    }

    /// A `model` that names no route.
    pub fn unknown_model(model: &str, known: &[&str]) -> Self {
        let message = format!("unknown model {model:?}; this gateway serves: {}", known.join(", "));
        Self::new(StatusCode::NOT_FOUND, "invalid_request_error", "model_not_found", message)
    }

    /// A body over the configured limit.
    pub fn too_large(limit: usize) -> Self {
        let message = format!("request body is larger than the limit of {limit} bytes");
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "invalid_request_error", "request_too_large", message)
    }

    /// A request without a valid client key (401), or with a key that may
    /// not use its route (403).
    pub fn denied(denied: crate::access::Denied) -> Self {
        let (status, kind, code) = match denied.status() {
            403 => (StatusCode::FORBIDDEN, "permission_error", "route_not_allowed"),
            _ => (StatusCode::UNAUTHORIZED, "authentication_error", "invalid_api_key"),
        };
        Self::new(status, kind, code, denied.message())
    }

    /// A request body that did not arrive in time.
    pub fn body_timeout(timeout: std::time::Duration) -> Self {
        let message = format!("the request body did not arrive within {} ms", timeout.as_millis());
        Self::new(StatusCode::REQUEST_TIMEOUT, "invalid_request_error", "body_timeout", message)
    }

    /// Whether this is [`ApiError::body_timeout`].
    pub fn is_timeout(&self) -> bool {
        self.code == "body_timeout"
    }

    /// Something inside baton failed; what is in the log, not here.
    pub fn internal() -> Self {
        let message = "the gateway failed to handle this request; the request id is in the x-request-id header";
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", "internal_error", message)
    }

    /// An admin action without the admin credential.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "permission_error", "forbidden", message)
    }

    /// A path baton does not serve.
    pub fn not_found(path: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, "invalid_request_error", "not_found", format!("no such endpoint: {path}"))
    }

    /// A known path with the wrong method.
    pub fn method_not_allowed(method: &str, path: &str) -> Self {
        let message = format!("method {method} is not allowed on {path}");
        Self::new(StatusCode::METHOD_NOT_ALLOWED, "invalid_request_error", "method_not_allowed", message)
    }
}

impl From<ProxyError> for ApiError {
    fn from(err: ProxyError) -> Self {
        let status = StatusCode::from_u16(err.status()).unwrap_or(StatusCode::BAD_GATEWAY);
        let kind = match &err {
            ProxyError::Rejected { .. } => "invalid_request_error",
            ProxyError::AllFailed(_) if status == StatusCode::TOO_MANY_REQUESTS => "rate_limit_error",
            ProxyError::AllFailed(_) => "upstream_error",
            ProxyError::ShuttingDown => "unavailable_error",
        };
        let retry_after_secs = err.retry_after().map(|wait| wait.as_secs_f64().ceil() as u64);
        ApiError { status, kind, code: err.kind(), message: err.to_string(), retry_after_secs }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({ "error": { "message": self.message, "type": self.kind, "code": self.code } });
        let mut response = (self.status, axum::Json(body)).into_response();
        if let Some(secs) = self.retry_after_secs {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}
