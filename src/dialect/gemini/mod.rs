//! Google's Gemini API, the dialect of `POST /{v1beta,v1}/models/{model}:generateContent`
//! and `:streamGenerateContent?alt=sse`: what the Gemini CLI and Google's
//! SDKs (`google-genai`) speak. The route is the `{model}` of the path, and
//! the key comes in `x-goog-api-key` (or `?key=`). Requests are parsed into
//! the normalised request with the body kept for a target that speaks
//! Gemini ([`parse`]); events go back as `GenerateContentResponse` chunks,
//! each a `data:` line alone ([`GenerateEncoder`]), or as one response;
//! errors as Google's `{"error": {"code", "message", "status"}}`, which is
//! also the one last event of a stream that fails after it began.

mod request;
mod stream;

use bytes::Bytes;
use http::StatusCode;
use http::request::Parts;
use serde_json::{Value, json};

pub use request::{count_tokens_request, parse};
pub use stream::GenerateEncoder;

use super::{ApiError, Dialect, Ingress};
use crate::event::Event;

/// The Gemini API dialect.
pub struct GeminiApi;

impl Dialect for GeminiApi {
    const NAME: &'static str = "gemini";

    type Options = ();
    type Encoder = GenerateEncoder;

    fn parse(body: Bytes, head: &Parts) -> Result<Ingress<()>, ApiError> {
        parse(body, head)
    }

    /// `x-goog-api-key`, then `?key=`, as Google's clients send it; then
    /// the usual places (the Gemini CLI can send `Authorization: Bearer`).
    fn presented_key(head: &Parts) -> Option<&str> {
        presented_key(head)
    }

    fn encoder(model: &str, (): ()) -> GenerateEncoder {
        GenerateEncoder::new(model, &response_id())
    }

    fn completion(model: &str, (): (), events: Vec<Event>) -> Vec<u8> {
        stream::whole(model, &response_id(), events)
    }

    fn error_body(error: &ApiError) -> Vec<u8> {
        serde_json::to_vec(&error_json(error)).unwrap_or_default()
    }
}

/// Where Google's clients put the key: `x-goog-api-key`, or the `key`
/// query parameter; else where the other dialects' clients put it.
pub fn presented_key(head: &Parts) -> Option<&str> {
    let header = head.headers.get("x-goog-api-key").and_then(|value| value.to_str().ok());
    let query =
        || head.uri.query()?.split('&').find_map(|pair| pair.strip_prefix("key=")).filter(|key| !key.contains('%'));
    header.filter(|key| !key.trim().is_empty()).or_else(query).or_else(|| crate::access::presented_key(&head.headers))
}

/// Whether a request is for Google's API: it is under `/v1beta/`, a POST
/// to one of Gemini's methods, or sends Google's key header. (A GET of
/// `/v1/models/a:b` is OpenAI's model `a:b`.)
pub fn speaks_gemini(method: &http::Method, path: &str, headers: &http::HeaderMap) -> bool {
    path.starts_with("/v1beta/")
        || (method == http::Method::POST && method_of(path).is_some())
        || headers.contains_key("x-goog-api-key")
}

/// A Gemini method's path, `/{v1beta,v1}/models/{model}:{method}`, as its
/// model and method; `None` for any other path.
pub fn method_of(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/v1beta/models/").or_else(|| path.strip_prefix("/v1/models/"))?;
    rest.rsplit_once(':').filter(|(model, method)| !model.is_empty() && !method.is_empty())
}

/// An error as Google's SDKs read it, in a body or as a stream's last event:
/// `error` alone, its `code` an integer, so `google-genai` raises the
/// exception of that status.
fn error_json(error: &ApiError) -> Value {
    json!({ "error": { "code": error.status().as_u16(), "message": error.message(), "status": status_name(error.status()) } })
}

/// Google's name for an HTTP status (google.rpc.Code's mapping).
fn status_name(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        405 | 501 => "UNIMPLEMENTED",
        409 => "ABORTED",
        426 => "FAILED_PRECONDITION",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        502 | 503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        code if code >= 500 => "INTERNAL",
        _ => "INVALID_ARGUMENT",
    }
}

/// A fresh response id.
fn response_id() -> String {
    crate::random_id::random_id("", 24)
}

/// The routes of this gateway as Google's model list: one page, no
/// `nextPageToken`, so a paging client stops.
pub fn model_list(names: &[&str]) -> Value {
    let models: Vec<Value> = names.iter().map(|name| model_json(name)).collect();
    json!({ "models": models })
}

/// One route as Google's `Model`.
pub fn model_json(name: &str) -> Value {
    json!({
        "name": format!("models/{name}"),
        "baseModelId": name,
        "version": "baton",
        "displayName": name,
        "description": "a route of this gateway",
        "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"],
    })
}

/// A route named in a model's path or resource name (`models/x` or `x`).
pub fn route_name(model: &str) -> &str {
    model.strip_prefix("models/").unwrap_or(model)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::test_support::head;

    #[test]
    fn errors_take_google_s_shape_and_status_names() {
        let cases = [
            (ApiError::bad_request("no"), 400, "INVALID_ARGUMENT"),
            (ApiError::not_found("/x"), 404, "NOT_FOUND"),
            (ApiError::denied(crate::access::Denied::Missing), 401, "UNAUTHENTICATED"),
            (ApiError::internal(), 500, "INTERNAL"),
        ];
        for (error, code, status) in cases {
            let body: Value = serde_json::from_slice(&GeminiApi::error_body(&error)).unwrap_or_default();
            assert_eq!(body, json!({ "error": { "code": code, "message": error.message(), "status": status } }));
        }
    }

    #[test]
    fn the_key_is_read_where_google_s_clients_put_it() {
        let mut headers = http::HeaderMap::new();
        headers.insert("x-goog-api-key", http::HeaderValue::from_static("sk-header"));
        assert_eq!(GeminiApi::presented_key(&head("/v1beta/models/m:generateContent", headers)), Some("sk-header"));
        let query = head("/v1beta/models/m:generateContent?alt=sse&key=sk-query", http::HeaderMap::new());
        assert_eq!(GeminiApi::presented_key(&query), Some("sk-query"));
        let mut bearer = http::HeaderMap::new();
        bearer.insert("authorization", http::HeaderValue::from_static("Bearer sk-bearer"));
        assert_eq!(GeminiApi::presented_key(&head("/v1/models/m:generateContent", bearer)), Some("sk-bearer"));
        assert_eq!(GeminiApi::presented_key(&head("/v1/models/m:generateContent", http::HeaderMap::new())), None);
    }

    #[test]
    fn a_method_s_path_names_its_model() {
        assert_eq!(
            method_of("/v1beta/models/gemini-x:streamGenerateContent"),
            Some(("gemini-x", "streamGenerateContent"))
        );
        assert_eq!(method_of("/v1/models/team/chat:generateContent"), Some(("team/chat", "generateContent")));
        assert_eq!(method_of("/v1/models/gemini-x"), None);
        assert_eq!(method_of("/v1/chat/completions"), None);
    }
}
