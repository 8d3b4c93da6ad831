//! The Gemini door: `POST /{v1beta,v1}/models/{model}:{method}` (the
//! generic chat handler over [`GeminiApi`] for `generateContent` and
//! `streamGenerateContent`, and `countTokens` here), the routes as Google's
//! model list, and every other answer a client of Google's API gets here,
//! errors included, in Google's shape.

use axum::Json;
use axum::extract::{Request, State};
use axum::handler::Handler;
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use serde_json::json;
use tower::ServiceExt;

use super::chat::counted_tokens;
use super::extract::{Caller, JsonContent, Refused};
use super::{AppState, error, knocked, model_names, visible_model};
use crate::dialect::ApiError;
use crate::dialect::gemini::{self, GeminiApi};

/// A `POST` to a Gemini method: generating goes to the chat door (`chat`,
/// the generic handler behind its edge), counting is answered here, and
/// any other method is a door baton does not have.
pub(super) async fn post(state: AppState, chat: MethodRouter, request: Request) -> Response {
    match gemini::method_of(request.uri().path()).map(|(_, method)| method) {
        Some("generateContent" | "streamGenerateContent") => match chat.oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        },
        Some("countTokens") => count_tokens.call(request, state).await,
        _ => knocked(&state, &request, ApiError::not_found(request.uri().path())),
    }
}

/// `countTokens`: the conversation's tokens, as the route's first target
/// that counts them counts them, else as baton estimates them for its
/// limits (four characters a token); `x-baton-provider` says who counted.
async fn count_tokens(
    State(state): State<AppState>,
    caller: Caller<GeminiApi>,
    _: JsonContent<GeminiApi>,
    request: Request,
) -> Result<Response, Refused<GeminiApi>> {
    let config = caller.config();
    let (head, body) = request.into_parts();
    let model = gemini::method_of(head.uri.path()).map(|(model, _)| gemini::route_name(model).to_owned());
    let model = model.ok_or_else(|| ApiError::not_found(head.uri.path()))?;
    let (body, _held) = state.bodies().read(&head.headers, body, config).await?;
    let conversation = gemini::count_tokens_request(&body)?;
    Ok(counted_tokens(&state, &caller, &model, &conversation, |tokens| json!({ "totalTokens": tokens })).await?)
}

/// The routes a Google client's key may use, as Google's model list.
pub(super) async fn models(State(state): State<AppState>, request: Request) -> Response {
    let (head, _) = request.into_parts();
    let config = state.config();
    let listed = config
        .access
        .keys
        .identify_presented(gemini::presented_key(&head))
        .map(|key| gemini::model_list(&model_names(&config, key)));
    match listed {
        Ok(list) => Json(list).into_response(),
        Err(denied) => error::respond::<GeminiApi>(ApiError::denied(denied)),
    }
}

/// One route by its resource name, `models/{route}`, in Google's shape.
pub(super) async fn model(
    State(state): State<AppState>,
    axum::extract::Path(id): axum::extract::Path<String>,
    request: Request,
) -> Response {
    let (head, _) = request.into_parts();
    let config = state.config();
    let id = gemini::route_name(&id);
    let key = config.access.keys.identify_presented(gemini::presented_key(&head)).map_err(ApiError::denied);
    let found = key.and_then(|key| visible_model(&config, key, id)).map(|()| gemini::model_json(id));
    match found {
        Ok(model) => Json(model).into_response(),
        Err(error) => error::respond::<GeminiApi>(error),
    }
}
