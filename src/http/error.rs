//! Errors become responses here, at the edge: the core's outcomes turn into
//! [`ApiError`]s, and the endpoint's dialect writes the body. Endpoints that
//! belong to no dialect (admin, the fallbacks) answer in OpenAI's shape, as
//! every error did before there were dialects.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::admission::Refusal;
use crate::core::{Failure, ProxyError};
use crate::dialect::openai::OpenAiChat;
use crate::dialect::{ApiError, Dialect, ErrorKind};

impl From<ProxyError> for ApiError {
    fn from(err: ProxyError) -> Self {
        let status = StatusCode::from_u16(err.status()).unwrap_or(StatusCode::BAD_GATEWAY);
        let kind = match &err {
            ProxyError::Rejected { .. } | ProxyError::Unsupported { .. } | ProxyError::ContextLengthExceeded(_) => {
                ErrorKind::InvalidRequest
            }
            ProxyError::ShuttingDown => ErrorKind::Unavailable,
            ProxyError::AllFailed(_) if status == StatusCode::TOO_MANY_REQUESTS => ErrorKind::RateLimit,
            ProxyError::AllFailed(_) => ErrorKind::Upstream,
        };
        let retry_after_secs = err.retry_after().map(|wait| wait.as_secs_f64().ceil() as u64);
        ApiError::new(status, kind, err.kind(), err.to_string()).with_retry_after(retry_after_secs)
    }
}

impl From<Refusal> for ApiError {
    /// A key over its limits or a spent budget: 429 with the wait, as
    /// OpenAI answers a rate limit; a request no target can afford: 400,
    /// since asking again will not change its estimate.
    fn from(refusal: Refusal) -> Self {
        let (status, kind, code) = match &refusal {
            Refusal::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, ErrorKind::RateLimit, "rate_limit_exceeded"),
            Refusal::BudgetExceeded { .. } => (StatusCode::TOO_MANY_REQUESTS, ErrorKind::RateLimit, "budget_exceeded"),
            Refusal::OverCostCap { .. } => (StatusCode::BAD_REQUEST, ErrorKind::InvalidRequest, "over_cost_cap"),
        };
        let retry_after_secs = refusal.retry_after().map(|wait| wait.as_secs_f64().ceil().max(1.0) as u64);
        ApiError::new(status, kind, code, refusal.to_string()).with_retry_after(retry_after_secs)
    }
}

/// The error event that ends a stream which broke after commit.
pub(super) fn stream_failure(failure: &Failure) -> ApiError {
    let message = format!("the upstream stream failed after it started: {}", failure.summary());
    ApiError::new(StatusCode::BAD_GATEWAY, ErrorKind::Upstream, failure.kind(), message)
}

/// The code of the error a response answers with, kept beside it so the edge
/// can end the trace and row of a request refused before it had a route.
#[derive(Clone, Copy, Debug)]
pub(super) struct ErrorCode(pub(super) &'static str);

/// `error` as a response whose body is in dialect `D`.
pub(super) fn respond<D: Dialect>(error: ApiError) -> Response {
    let json = [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))];
    let mut response = (error.status(), json, D::error_body(&error)).into_response();
    if let Some(secs) = error.retry_after_secs() {
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    response.extensions_mut().insert(ErrorCode(error.code()));
    response
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        respond::<OpenAiChat>(self)
    }
}
