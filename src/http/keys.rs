//! `POST /admin/keys`, `GET /admin/keys` and `DELETE /admin/keys/{name}`:
//! client keys kept in the store, made and withdrawn by a script. They
//! always need the admin token (without an `admin_token` they are off, on
//! loopback too: a web page must not mint a key through a developer's
//! local baton), and a body must be `application/json`. A change holds on
//! this replica at once and on every other within a second.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use super::AppState;
use super::admin::authorize;
use super::extract::json_body;
use super::records::{database, read};
use crate::dialect::{ApiError, ErrorKind};
use crate::store::keys::{self, KeyError, KeyRequest};
use crate::store::{keyring, now_ms};

const WHAT: &str = "the keys endpoints";

/// `POST /admin/keys` `{"name", "routes"?, "rpm"?, "tpm"?, "budget"?}`:
/// 201 with the key and its secret, shown this once.
pub(super) async fn create(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    authorize(&headers, &state.config(), WHAT, true)?;
    json_body(&headers)?;
    let request: KeyRequest = serde_json::from_slice(&body)
        .map_err(|err| ApiError::bad_request(format!("the key request cannot be read: {err}")))?;
    let request = request.check(&state.config()).map_err(key_error)?;
    let db = database(&state)?;
    let minted = write(keys::create(&db, request, now_ms())).await?;
    apply(&state).await;
    let mut shown = minted.key.json();
    shown["key"] = json!(minted.secret.expose());
    Ok((StatusCode::CREATED, Json(shown)))
}

/// `GET /admin/keys`: the config's keys and the store's, revoked ones
/// included, without secrets.
pub(super) async fn list(State(state): State<AppState>, headers: HeaderMap) -> Result<Json<Value>, ApiError> {
    authorize(&headers, &state.config(), WHAT, true)?;
    let file = state.keyring().file_config();
    let from_file = file.access.keys.keys().iter().map(
        |key| json!({ "name": key.name, "source": "config", "routes": key.routes, "rpm": key.rpm, "tpm": key.tpm }),
    );
    let db = database(&state)?;
    let stored = read(keys::list(&db)).await?;
    let data: Vec<Value> = from_file.chain(stored.iter().map(keys::StoredKey::json)).collect();
    Ok(Json(json!({ "data": data })))
}

/// `DELETE /admin/keys/{name}`: the key stops working at once here, and
/// within a second on every replica.
pub(super) async fn revoke(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let config = state.config();
    authorize(&headers, &config, WHAT, true)?;
    if state.keyring().file_config().access.keys.keys().iter().any(|key| key.name == name) {
        return Err(key_error(KeyError::InConfig(name)));
    }
    let db = database(&state)?;
    let revoked = write(keys::revoke(&db, &name, now_ms())).await?;
    apply(&state).await;
    Ok(Json(revoked.json()))
}

/// Reads the store's keys into this replica now, rather than at the next refresh.
async fn apply(state: &AppState) {
    if let Some(records) = state.records() {
        keyring::refresh(state.keyring(), records).await;
    }
}

/// Runs a change to the keys within the store's bound.
async fn write<T>(writing: impl Future<Output = Result<T, KeyError>>) -> Result<T, ApiError> {
    match read(async { Ok(writing.await) }).await? {
        Ok(done) => Ok(done),
        Err(err) => Err(key_error(err)),
    }
}

fn key_error(err: KeyError) -> ApiError {
    match err {
        KeyError::Invalid(_) => ApiError::bad_request(err.to_string()),
        KeyError::Exists(_) | KeyError::InConfig(_) => {
            ApiError::new(StatusCode::CONFLICT, ErrorKind::InvalidRequest, "key_conflict", err.to_string())
        }
        KeyError::NotFound(_) => {
            ApiError::new(StatusCode::NOT_FOUND, ErrorKind::InvalidRequest, "key_not_found", err.to_string())
        }
        KeyError::Db(err) => {
            tracing::warn!(error = %err, "store write of a key failed");
            super::records::unavailable()
        }
    }
}
