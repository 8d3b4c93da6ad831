//! The only axum code: routes, handlers, the SSE relay and error responses.
//! Handlers never fail; every error becomes a response here at the edge, in
//! the dialect of the endpoint it came from. A client dialect is served by
//! one route line naming the generic handler and the dialect.

mod admin;
mod answer;
mod anthropic;
mod body;
mod build;
mod chat;
mod cors;
mod edge;
mod error;
mod extract;
mod gemini;
mod history;
mod keys;
mod panic;
mod recording;
mod records;
mod responses;
pub mod server;
mod stall;
mod state;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use axum::{Json, Router};
use serde_json::json;

use crate::access::ClientKey;
use crate::dialect::anthropic::AnthropicMessages;
use crate::dialect::gemini::GeminiApi;
use crate::dialect::openai::OpenAiChat;
use crate::dialect::responses::OpenAiResponses;
use crate::dialect::{ApiError, Dialect};

pub use build::AppBuilder;
pub use panic::install_panic_hook;
pub use state::AppState;

/// The proxy's router, shared by `main` and the tests.
pub fn app(state: AppState) -> Router {
    // The Host check is a layer only when the config asks for one: the
    // layer costs about 1.5 KiB per open stream (measured at 9,000).
    let check_hosts = !state.config().access.allowed_hosts.is_empty();
    let cors = !state.config().access.cors_origins.is_empty();
    // Gemini's methods share a path with its models (`models/{model}:{method}`):
    // a POST there is dispatched by method, generating through this door.
    let gemini_chat = door::<GeminiApi>(&state).with_state(state.clone());
    let gemini_post =
        move |State(state): State<AppState>, request: Request| gemini::post(state, gemini_chat.clone(), request);
    let router = Router::new()
        .route("/v1/chat/completions", door::<OpenAiChat>(&state))
        .route("/v1/messages", door::<AnthropicMessages>(&state))
        .route("/v1/messages/count_tokens", post(anthropic::count_tokens))
        .route("/v1/responses", door_with::<OpenAiResponses, _, _>(&state, responses::create).get(websocket_refused))
        .route("/v1/responses/{id}", get(responses::get).delete(responses::delete))
        .route("/v1/models", get(models))
        .route("/v1/models/{*id}", get(model).post(gemini_post.clone()))
        .route("/v1beta/models", get(gemini::models))
        .route("/v1beta/models/{*id}", get(gemini::model).post(gemini_post))
        .route("/", get(page))
        .route("/page/{file}", get(page_script))
        .route("/healthz", get(|| async { "ok" }))
        .route("/metrics", get(metrics))
        .route("/admin/status", get(admin::status))
        .route("/admin/reload", post(admin::reload))
        .route("/admin/requests", get(records::requests))
        .route("/admin/spend", get(records::spend))
        .route("/admin/keys", post(keys::create).get(keys::list))
        .route("/admin/keys/{name}", axum::routing::delete(keys::revoke))
        .route("/admin/history", get(history::history))
        .fallback(|State(state): State<AppState>, request: Request| async move {
            knocked(&state, &request, ApiError::not_found(request.uri().path()))
        })
        .method_not_allowed_fallback(|State(state): State<AppState>, request: Request| async move {
            knocked(&state, &request, ApiError::method_not_allowed(request.method().as_str(), request.uri().path()))
        });
    let router =
        if cors { router.layer(axum::middleware::from_fn_with_state(state.clone(), cors::cors)) } else { router };
    let router = if check_hosts {
        router.layer(axum::middleware::from_fn_with_state(state.clone(), allowed_host))
    } else {
        router
    };
    router.with_state(state)
}

/// A chat endpoint in dialect `D`: the generic handler, behind the edge
/// that gives each request its id, trace and row (only for the method it
/// serves: a wrong method is not a chat request).
fn door<D: Dialect>(state: &AppState) -> MethodRouter<AppState> {
    door_with::<D, _, _>(state, chat::chat::<D>)
}

/// A chat endpoint in dialect `D` served by `handler`: one that does its
/// dialect's own work around the generic handler (Responses keeps turns).
fn door_with<D: Dialect, H, T>(state: &AppState, handler: H) -> MethodRouter<AppState>
where
    H: axum::handler::Handler<T, AppState>,
    T: 'static,
{
    post(handler).route_layer(axum::middleware::from_fn_with_state(state.clone(), edge::edge::<D>))
}

/// With `allowed_hosts` set (at start: a new list needs a restart), a
/// request for any other `Host` is refused: a page on another site that
/// points a DNS name at 127.0.0.1 gets nothing.
async fn allowed_host(State(state): State<AppState>, request: Request, next: axum::middleware::Next) -> Response {
    let config = state.config();
    let allowed = &config.access.allowed_hosts;
    if allowed.is_empty() {
        return next.run(request).await;
    }
    let host = request.headers().get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let name = host
        .rsplit_once(':')
        .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
        .map_or(host, |(name, _)| name);
    if allowed.iter().any(|allowed| allowed.eq_ignore_ascii_case(name)) {
        next.run(request).await
    } else {
        edge_error(&request, ApiError::foreign_host(host))
    }
}

/// A `GET` on the Responses path: a WebSocket upgrade (the Codex CLI's
/// transport when its provider enables it) gets 426, so the client falls
/// back to HTTP at once with the same request still answerable there; any
/// other `GET` is the wrong method, as before.
async fn websocket_refused(State(state): State<AppState>, request: Request) -> Response {
    let upgrade = request.headers().get(header::UPGRADE).and_then(|value| value.to_str().ok()).unwrap_or_default();
    let error = if upgrade.split(',').any(|protocol| protocol.trim().eq_ignore_ascii_case("websocket")) {
        ApiError::upgrade_refused(request.uri().path())
    } else {
        ApiError::method_not_allowed(request.method().as_str(), request.uri().path())
    };
    knocked(&state, &request, error)
}

/// The answer to a request for an endpoint baton does not have, counted
/// and logged (once per path and minute) so an operator sees the client
/// knocking on the wrong door.
fn knocked(state: &AppState, request: &Request, error: ApiError) -> Response {
    let status = error.status().as_u16();
    state.engine().metrics().unknown_endpoint(request.method(), request.uri().path(), status);
    edge_error(request, error)
}

/// An error raised before a request reaches its endpoint, in the dialect of
/// the client that sent it: Anthropic's or Google's for their paths and
/// SDKs, else OpenAI's.
pub(super) fn edge_error(request: &Request, error: ApiError) -> Response {
    let (path, headers) = (request.uri().path(), request.headers());
    if anthropic::speaks_anthropic(path, headers) {
        error::respond::<AnthropicMessages>(error)
    } else if crate::dialect::gemini::speaks_gemini(request.method(), path, headers) {
        error::respond::<GeminiApi>(error)
    } else {
        error::respond::<OpenAiChat>(error)
    }
}

/// The routes as models, in OpenAI's list shape, or in Anthropic's for a
/// client that sends `anthropic-version`, or Google's for one that sends
/// its key in `x-goog-api-key` (`google-genai` asks `/v1/models` too).
async fn models(State(state): State<AppState>, request: Request) -> Response {
    if crate::dialect::gemini::speaks_gemini(request.method(), request.uri().path(), request.headers()) {
        return gemini::models(State(state), request).await;
    }
    let headers = request.headers();
    let anthropic = crate::dialect::anthropic::is_anthropic(headers);
    let config = state.config();
    let listed = config.access.keys.identify(headers).map_err(ApiError::denied).map(|key| {
        let names = model_names(&config, key);
        if anthropic {
            return crate::dialect::anthropic::model_list(&names);
        }
        let data: Vec<_> = names.iter().map(|name| openai_model(name)).collect();
        json!({ "object": "list", "data": data })
    });
    json_or_error(anthropic, listed)
}

/// One model by its id: a route's name or one of its aliases, when the key
/// may use it; in Anthropic's shape for a client that sends
/// `anthropic-version`, in Google's for one that sends `x-goog-api-key`.
async fn model(
    State(state): State<AppState>,
    axum::extract::Path(id): axum::extract::Path<String>,
    request: Request,
) -> Response {
    if crate::dialect::gemini::speaks_gemini(request.method(), request.uri().path(), request.headers()) {
        return gemini::model(State(state), axum::extract::Path(id), request).await;
    }
    let headers = request.headers();
    let anthropic = crate::dialect::anthropic::is_anthropic(headers);
    let config = state.config();
    let found = config.access.keys.identify(headers).map_err(ApiError::denied).and_then(|key| {
        visible_model(&config, key, &id)?;
        Ok(if anthropic { crate::dialect::anthropic::model_json(&id) } else { openai_model(&id) })
    });
    json_or_error(anthropic, found)
}

/// What a key sees as models: each route it may use, under its name and its aliases.
fn model_names<'a>(config: &'a crate::config::Config, key: Option<&ClientKey>) -> Vec<&'a str> {
    config
        .routes
        .iter()
        .filter(|route| key.is_none_or(|key| key.allows(&route.model)))
        .flat_map(|route| std::iter::once(&route.model).chain(&route.aliases))
        .map(String::as_str)
        .collect()
}

/// Whether model `id` is a route (or alias) `key` may use; else the error
/// that lists those it may.
fn visible_model(config: &crate::config::Config, key: Option<&ClientKey>, id: &str) -> Result<(), ApiError> {
    let visible = |route: &&std::sync::Arc<crate::config::Route>| key.is_none_or(|key| key.allows(&route.model));
    if config.route(id).filter(visible).is_none() {
        let known: Vec<&str> = config.routes.iter().filter(visible).map(|route| route.model.as_str()).collect();
        return Err(ApiError::unknown_model(id, &known));
    }
    Ok(())
}

/// A route as OpenAI's model object.
fn openai_model(name: &str) -> serde_json::Value {
    json!({ "id": name, "object": "model", "created": 0, "owned_by": "baton" })
}

/// `result` as a JSON response, an error in Anthropic's shape or OpenAI's.
fn json_or_error(anthropic: bool, result: Result<serde_json::Value, ApiError>) -> Response {
    match result {
        Ok(body) => Json(body).into_response(),
        Err(error) if anthropic => error::respond::<AnthropicMessages>(error),
        Err(error) => error::respond::<OpenAiChat>(error),
    }
}

/// The playground and live status page, built into the binary: no CDN, no build step.
async fn page() -> axum::response::Html<&'static str> {
    axum::response::Html(include_str!("page/index.html"))
}

/// The page's scripts, built in beside it: the history charts and what draws them.
async fn page_script(axum::extract::Path(file): axum::extract::Path<String>) -> Response {
    let script = match file.as_str() {
        "history.js" => include_str!("page/history.js"),
        "charts.js" => include_str!("page/charts.js"),
        _ => return error::respond::<OpenAiChat>(ApiError::not_found(&format!("/page/{file}"))),
    };
    ([(header::CONTENT_TYPE, HeaderValue::from_static("text/javascript; charset=utf-8"))], script).into_response()
}

async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let engine = state.engine();
    for quota in engine.quota_used(&state.config().providers).await {
        engine.metrics().ops().quota_used(&quota.provider, quota.unit, quota.ratio);
    }
    let text = engine.metrics().render(engine.health());
    ([(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"))], text)
}
