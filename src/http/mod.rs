//! The only axum code: routes, the chat handler, and error responses. Handlers
//! never fail; every error becomes an OpenAI-shaped response here at the edge.

mod admin;
mod egress;
mod error;
mod ingress;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::json;

pub use error::ApiError;

use crate::config::Config;
use crate::core::{Engine, Winner};
use egress::{Answer, ChunkEncoder};

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    /// The validated configuration.
    pub config: Arc<Config>,
    /// The attempt loop and its connection pool.
    pub engine: Engine,
}

/// The proxy's router, shared by `main` and the tests.
pub fn app(state: AppState) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/models", get(models))
        .route("/healthz", get(|| async { "ok" }))
        .fallback(|request: Request| async move { ApiError::not_found(request.uri().path()) })
        .method_not_allowed_fallback(|request: Request| async move {
            ApiError::method_not_allowed(request.method().as_str(), request.uri().path())
        })
        .with_state(state)
}

async fn models(State(state): State<AppState>) -> Json<serde_json::Value> {
    let data: Vec<_> = state
        .config
        .routes
        .iter()
        .map(|route| json!({ "id": route.model, "object": "model", "created": 0, "owned_by": "baton" }))
        .collect();
    Json(json!({ "object": "list", "data": data }))
}

async fn chat(State(state): State<AppState>, request: Request) -> Response {
    match serve_chat(&state, request).await {
        Ok(response) => response,
        Err(err) => err.into_response(),
    }
}

async fn serve_chat(state: &AppState, request: Request) -> Result<Response, ApiError> {
    let drills = admin::drills(request.headers(), &state.config)?;
    let body = read_body(request.into_body(), state.config.max_body_bytes).await?;
    let ingress = ingress::parse(&body)?;
    let route = state.config.route(&ingress.model).ok_or_else(|| {
        let known: Vec<&str> = state.config.routes.iter().map(|r| r.model.as_str()).collect();
        ApiError::unknown_model(&ingress.model, &known)
    })?;
    let mut waiting = ClientGone::watch(&route.model, "before_commit");
    if ingress.stream {
        let committed = state.engine.stream(route, ingress.request, drills).await;
        waiting.disarm();
        let committed = committed?;
        let encoder = ChunkEncoder::new(Answer::new(&committed.winner.model), ingress.include_usage);
        let streaming = ClientGone::watch(&route.model, "streaming");
        let body = Body::from_stream(sse_body(committed.events, encoder, streaming));
        let mut response = (StatusCode::OK, body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        winner_headers(headers, &committed.winner);
        Ok(response)
    } else {
        let completed = state.engine.complete(route, &ingress.request, &drills).await;
        waiting.disarm();
        let completed = completed?;
        let body = egress::completion(Answer::new(&completed.winner.model), completed.events);
        let mut response = Json(body).into_response();
        winner_headers(response.headers_mut(), &completed.winner);
        Ok(response)
    }
}

/// Relays a committed stream as SSE: one chunk per event, then `[DONE]`, or an
/// error event and no `[DONE]` if the stream fails.
fn sse_body(
    events: crate::core::CommittedStream,
    encoder: ChunkEncoder,
    client: ClientGone,
) -> impl futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> + Send {
    futures_util::stream::unfold(Some((events, encoder, client)), |state| async move {
        let (mut events, mut encoder, mut client) = state?;
        loop {
            match events.next().await {
                Some(Ok(event)) => {
                    if let Some(bytes) = encoder.event(event) {
                        return Some((Ok(bytes), Some((events, encoder, client))));
                    }
                }
                Some(Err(failure)) => {
                    client.disarm();
                    tracing::warn!(failure_class = failure.kind(), error = %failure, "mid-stream failure");
                    return Some((Ok(encoder.failure(&failure)), None));
                }
                None => {
                    client.disarm();
                    return Some((Ok(encoder.done()), None));
                }
            }
        }
    })
}

/// Notices a client that went away before its answer ended: dropping the
/// handler or the body drops the upstream attempt with it, and this records
/// that it was the client's doing, not a provider failure.
struct ClientGone {
    route: String,
    stage: &'static str,
    armed: bool,
}

impl ClientGone {
    fn watch(route: &str, stage: &'static str) -> Self {
        ClientGone { route: route.to_owned(), stage, armed: true }
    }

    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for ClientGone {
    fn drop(&mut self) {
        if self.armed {
            tracing::info!(route = %self.route, stage = self.stage, outcome = "client_disconnect", "request");
        }
    }
}

fn winner_headers(headers: &mut HeaderMap, winner: &Winner) {
    let values = [
        ("x-baton-provider", winner.provider.name.clone()),
        ("x-baton-model", winner.model.clone()),
        ("x-baton-attempts", winner.attempts.to_string()),
    ];
    for (name, value) in values {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
}

/// Reads the body, refusing it as soon as it passes `limit`.
async fn read_body(body: Body, limit: usize) -> Result<Vec<u8>, ApiError> {
    let mut stream = body.into_data_stream();
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|err| ApiError::bad_request(format!("could not read request body: {err}")))?;
        if out.len() + chunk.len() > limit {
            return Err(ApiError::too_large(limit));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}
