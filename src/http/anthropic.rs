//! The Anthropic door beyond `POST /v1/messages` (which is the generic chat
//! handler over [`AnthropicMessages`]): `POST /v1/messages/count_tokens`,
//! and every other answer a client of Anthropic's API gets here, errors
//! included, in Anthropic's shape.

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::response::Response;
use bytes::Bytes;
use serde_json::json;

use super::AppState;
use super::chat::counted_tokens;
use super::extract::{Caller, JsonContent, Refused};
use crate::dialect::ApiError;
use crate::dialect::anthropic::{self, AnthropicMessages};

/// `POST /v1/messages/count_tokens`: the conversation's input tokens, as
/// the route's first anthropic-kind target counts them, else as baton
/// estimates them for its limits (four characters a token). The
/// `x-baton-provider` header says who counted: a provider's name, or
/// `estimate`.
pub(super) async fn count_tokens(
    State(state): State<AppState>,
    caller: Caller<AnthropicMessages>,
    _: JsonContent<AnthropicMessages>,
    request: Request,
) -> Result<Response, Refused<AnthropicMessages>> {
    Ok(counted(&state, &caller, request).await?)
}

async fn counted(state: &AppState, caller: &Caller<AnthropicMessages>, request: Request) -> Result<Response, ApiError> {
    let config = caller.config();
    let (head, body) = request.into_parts();
    let (body, _held) = state.bodies().read(&head.headers, body, config).await?;
    let (model, conversation) = anthropic::count_tokens_request(Bytes::from(body), &head.headers)?;
    counted_tokens(state, caller, &model, &conversation, |tokens| json!({ "input_tokens": tokens })).await
}

/// Whether an error at the edge is for a client of Anthropic's API: its
/// path is Anthropic's, or it sends `anthropic-version` as its SDKs do.
pub(super) fn speaks_anthropic(path: &str, headers: &HeaderMap) -> bool {
    path.starts_with("/v1/messages") || anthropic::is_anthropic(headers)
}
