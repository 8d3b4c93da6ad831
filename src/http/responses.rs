//! The Responses door's state: a turn the client lets baton keep (`store`
//! true or absent) is kept under its response id and the caller's key; a
//! turn chained with `previous_response_id`, or naming earlier output items
//! by `item_reference`, is rebuilt from the kept ones and sent whole to
//! whichever target answers; `GET` and `DELETE
//! /v1/responses/{id}` read and forget a kept response. Without a store
//! (`[store] backend = "none"`) nothing is kept and a chained turn is
//! refused by name.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};

use super::AppState;
use super::chat::chat;
use super::edge::Arrival;
use super::extract::{Asked, Caller, Drilled, JsonContent, Refused};
use crate::access::ClientKey;
use crate::dialect::ApiError;
use crate::dialect::responses::{
    Keeper, OpenAiResponses, Referenced, StoredTurn, continue_from, request_input, response_of_item,
};
use crate::store::{ChainError, KeptTurn, Records, now_ms};

/// `POST /v1/responses`: the chat handler, with the conversation rebuilt
/// from the kept turns when the request continues one, and a keeper for
/// its answer when the client lets it be kept.
pub(super) async fn create(
    State(state): State<AppState>,
    arrival: Arrival,
    caller: Caller<OpenAiResponses>,
    content: JsonContent<OpenAiResponses>,
    drilled: Drilled<OpenAiResponses>,
    mut asked: Asked<OpenAiResponses>,
) -> Result<Response, Refused<OpenAiResponses>> {
    let owner = owner(caller.key());
    let records = state.records().cloned();
    let (previous, references) = (&asked.options.previous, &asked.options.references);
    if previous.is_some() || !references.is_empty() {
        let records = records.as_ref().ok_or_else(|| {
            let field = if previous.is_some() { "`previous_response_id`" } else { "`item_reference`" };
            ApiError::bad_request(format!(
                "{field} is not supported: this gateway keeps no responses ([store] backend = \"none\"); \
                 send the whole conversation in `input`"
            ))
        })?;
        let turns = match previous {
            Some(previous) => chain(records, previous, &owner, caller.config().max_body_bytes).await?,
            None => Vec::new(),
        };
        let referenced = referenced(records, references, &owner).await?;
        continue_from(&mut asked.request, &asked.options, turns, &referenced)?;
    }
    if asked.options.store
        && let Some(records) = records
    {
        let previous = asked.options.previous.clone();
        let body = asked.options.body.clone();
        asked.options.keeper = Some(Box::new(Keeping { records, owner, previous, body }));
    }
    chat(State(state), arrival, caller, content, drilled, asked).await
}

/// `GET /v1/responses/{id}`: the kept response, as the client got it.
pub(super) async fn get(
    State(state): State<AppState>,
    caller: Caller<OpenAiResponses>,
    Path(id): Path<String>,
) -> Result<Response, Refused<OpenAiResponses>> {
    let records = state.records().ok_or_else(|| ApiError::response_not_found(&id, false))?;
    let turn = records.kept_turn(&id, &owner(caller.key())).await.map_err(|_| ApiError::store_unavailable())?;
    let turn = turn.ok_or_else(|| ApiError::response_not_found(&id, false))?;
    let response: Value = serde_json::from_str(&turn.response).map_err(|_| ApiError::internal())?;
    Ok(Json(response).into_response())
}

/// `DELETE /v1/responses/{id}`: forgets a kept response, in memory and in
/// the database, before it answers.
pub(super) async fn delete(
    State(state): State<AppState>,
    caller: Caller<OpenAiResponses>,
    Path(id): Path<String>,
) -> Result<Response, Refused<OpenAiResponses>> {
    let records = state.records().ok_or_else(|| ApiError::response_not_found(&id, false))?;
    let deleted = records.forget_turn(&id, &owner(caller.key())).await.map_err(|_| ApiError::store_unavailable())?;
    if !deleted {
        return Err(ApiError::response_not_found(&id, false).into());
    }
    Ok(Json(json!({ "id": id, "object": "response", "deleted": true })).into_response())
}

/// Whose kept responses a caller sees: its key's, or on a gateway without
/// keys everyone's (the empty name).
fn owner(key: Option<&ClientKey>) -> String {
    key.map(|key| key.name.clone()).unwrap_or_default()
}

/// The kept turns the conversation ending at `previous` holds, oldest
/// first, within the largest body a client may send.
async fn chain(records: &Records, previous: &str, owner: &str, max_bytes: usize) -> Result<Vec<StoredTurn>, ApiError> {
    let kept = records.kept_chain(previous, owner, max_bytes).await.map_err(|err| match err {
        ChainError::Missing(id) if id == previous => ApiError::response_not_found(&id, true),
        ChainError::Missing(id) => ApiError::chain_broken(previous, &id),
        ChainError::TooLong(limit) => ApiError::bad_request(format!(
            "the conversation `previous_response_id` {previous} continues is longer than {limit}; \
             start a new one, or send what matters of it in `input`"
        )),
        ChainError::Unavailable(_) => ApiError::store_unavailable(),
    })?;
    Ok(kept.iter().map(|turn| stored_turn(turn)).collect())
}

/// A kept turn's output items, and the provider that wrote them.
type KeptOutput = (Vec<Value>, Arc<str>);

/// The earlier output items `ids` name (`item_reference`), each found in the
/// kept turn its id names, `owner`'s, each such turn read once; 404 for one
/// no kept turn holds.
async fn referenced(records: &Records, ids: &[String], owner: &str) -> Result<Referenced, ApiError> {
    let mut turns: HashMap<String, Option<KeptOutput>> = HashMap::new();
    let mut found = Referenced::new();
    for id in ids {
        let response = response_of_item(id).ok_or_else(|| ApiError::item_not_found(id))?;
        if !turns.contains_key(&response) {
            let turn = records.kept_turn(&response, owner).await.map_err(|_| ApiError::store_unavailable())?;
            turns.insert(response.clone(), turn.map(|turn| (output_of(&turn), turn.maker.as_str().into())));
        }
        let kept = turns.get(&response).and_then(Option::as_ref);
        let item = kept.and_then(|(output, maker)| {
            let item = output.iter().find(|item| item.get("id").and_then(Value::as_str) == Some(id.as_str()))?;
            Some((item.clone(), Arc::clone(maker)))
        });
        found.insert(id.clone(), item.ok_or_else(|| ApiError::item_not_found(id))?);
    }
    Ok(found)
}

/// A kept turn as the dialect rebuilds it: its input, and its response's output.
fn stored_turn(turn: &KeptTurn) -> StoredTurn {
    let input = serde_json::from_str(&turn.input).unwrap_or_default();
    StoredTurn { input, output: output_of(turn), maker: turn.maker.as_str().into() }
}

/// The output items of a kept turn's response.
fn output_of(turn: &KeptTurn) -> Vec<Value> {
    serde_json::from_str::<Value>(&turn.response)
        .ok()
        .and_then(|mut response| serde_json::from_value(response.get_mut("output")?.take()).ok())
        .unwrap_or_default()
}

/// Keeps one answered turn in the store.
struct Keeping {
    records: Records,
    owner: String,
    previous: Option<String>,
    /// The request as sent, whose input the turn keeps.
    body: Bytes,
}

impl Keeper for Keeping {
    fn keep(self: Box<Self>, response: &Value, maker: &str) {
        let Some(id) = response["id"].as_str() else { return };
        let input = Value::Array(request_input(&self.body)).to_string();
        self.records.keep_turn(KeptTurn {
            id: id.to_owned(),
            owner: self.owner,
            created_ms: now_ms(),
            previous_id: self.previous,
            maker: maker.to_owned(),
            input,
            response: response.to_string(),
        });
    }
}
