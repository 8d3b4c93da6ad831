//! The Anthropic door beyond `POST /v1/messages` (which is the generic chat
//! handler over [`AnthropicMessages`]): `POST /v1/messages/count_tokens`,
//! and every other answer a client of Anthropic's API gets here, errors
//! included, in Anthropic's shape.

use axum::Json;
use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::AppState;
use super::chat::{json_body, route_for};
use super::error::respond;
use crate::dialect::ApiError;
use crate::dialect::anthropic::{self, AnthropicMessages};

/// `POST /v1/messages/count_tokens`: the conversation's input tokens, as
/// baton estimates them for its limits (four characters a token).
pub(super) async fn count_tokens(State(state): State<AppState>, request: Request) -> Response {
    counted(&state, request).await.unwrap_or_else(respond::<AnthropicMessages>)
}

async fn counted(state: &AppState, request: Request) -> Result<Response, ApiError> {
    let config = state.config();
    let key = config.access.keys.identify(request.headers()).map_err(ApiError::denied)?;
    json_body(request.headers())?;
    let (head, body) = request.into_parts();
    let (body, _held) = state.bodies().read(&head.headers, body, &config).await?;
    let (model, conversation) = anthropic::count_tokens_request(&body)?;
    route_for(&config, key, &model)?;
    Ok(Json(json!({ "input_tokens": conversation.estimated_input_tokens() })).into_response())
}

/// Whether an error at the edge is for a client of Anthropic's API: its
/// path is Anthropic's, or it sends `anthropic-version` as its SDKs do.
pub(super) fn speaks_anthropic(path: &str, headers: &HeaderMap) -> bool {
    path.starts_with("/v1/messages") || anthropic::is_anthropic(headers)
}
