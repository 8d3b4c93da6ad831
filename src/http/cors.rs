//! CORS for pages on other origins (`cors_origins`): preflights answered
//! with 204 and what the browser needs, and the `x-baton-*` headers and the
//! request id exposed to the page's script. Without `cors_origins` this
//! layer is not installed and no CORS header is ever sent.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use crate::dialect::ApiError;

/// The response headers a page's script may read.
const EXPOSED: &str = "x-request-id, x-baton-provider, x-baton-model, x-baton-attempts, x-baton-dropped-params, x-baton-downgraded, retry-after";

/// The request headers allowed when a preflight names none.
const ALLOWED_HEADERS: &str = "authorization, content-type, x-api-key, x-request-id";

/// How long a browser may keep a preflight's answer, in seconds.
const MAX_AGE: &str = "600";

/// The layer: a preflight from an allowed origin gets 204, one from another
/// origin 403; any other request goes on, and its answer carries the CORS
/// headers when its origin is allowed.
pub(super) async fn cors(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let origin = request.headers().get(header::ORIGIN).cloned();
    let allowed = origin.as_ref().and_then(|origin| allow_origin(&state.config().access.cors_origins, origin));
    let preflight =
        request.method() == Method::OPTIONS && request.headers().contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    if preflight {
        let Some(allowed) = allowed else {
            let origin = origin.as_ref().and_then(|o| o.to_str().ok()).unwrap_or_default();
            return super::edge_error(
                &request,
                ApiError::forbidden(format!("the origin {origin:?} is not in cors_origins")),
            );
        };
        let mut response = StatusCode::NO_CONTENT.into_response();
        let asked = request.headers().get(header::ACCESS_CONTROL_REQUEST_HEADERS).cloned();
        let headers = response.headers_mut();
        headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET, POST, OPTIONS"));
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            asked.unwrap_or_else(|| HeaderValue::from_static(ALLOWED_HEADERS)),
        );
        headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static(MAX_AGE));
        allow(headers, allowed);
        return response;
    }
    let mut response = next.run(request).await;
    if let Some(allowed) = allowed {
        let headers = response.headers_mut();
        headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static(EXPOSED));
        allow(headers, allowed);
    }
    response
}

/// The `Access-Control-Allow-Origin` value for `origin`, when it may call.
fn allow_origin(allowed: &[String], origin: &HeaderValue) -> Option<HeaderValue> {
    if allowed.iter().any(|o| o == "*") {
        return Some(HeaderValue::from_static("*"));
    }
    let given = origin.to_str().ok()?;
    allowed.iter().any(|o| o.eq_ignore_ascii_case(given)).then(|| origin.clone())
}

fn allow(headers: &mut HeaderMap, origin: HeaderValue) {
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.append(header::VARY, HeaderValue::from_static("origin"));
}
