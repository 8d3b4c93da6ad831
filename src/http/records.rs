//! `GET /admin/requests` and `GET /admin/spend`: the request log and the
//! spend it holds, read from the store. Both always need the admin token
//! (without an `admin_token` they are off, on loopback too), and a
//! parameter they do not know, or cannot read, is a 400 that names it.

use std::time::Duration;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequestParts, Query, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde_json::{Value, json};

use super::AppState;
use super::admin::authorize;
use crate::dialect::{ApiError, ErrorKind};
use crate::store::query::{self, Bucket, Cursor, DEFAULT_LIMIT, Filter, GroupBy, MAX_LIMIT};
use crate::store::time::parse_instant;
use crate::store::{Db, now_ms};

/// How long one read of the store may take before the endpoint gives up.
const READ_LIMIT: Duration = Duration::from_secs(10);
/// How far back `/admin/spend` looks when `since` is not given, per bucket.
const SPEND_SINCE_HOURS: i64 = 24 * 3_600_000;
const SPEND_SINCE_DAYS: i64 = 30 * 86_400_000;

/// A query string as its pairs, or why it could not be read.
pub(super) type Params = Result<Query<Vec<(String, String)>>, QueryRejection>;

/// A caller the request log and spend may be shown to: one with the admin
/// token, which these endpoints always need.
pub(super) struct LogReader;

impl FromRequestParts<AppState> for LogReader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        authorize(&parts.headers, &state.config(), "the request log and spend endpoints", true)?;
        Ok(LogReader)
    }
}

/// `GET /admin/requests?key=&route=&provider=&outcome=&since=&until=&limit=&cursor=`:
/// rows newest first, `{"data": [...], "next_cursor"}`.
pub(super) async fn requests(
    State(state): State<AppState>,
    _: LogReader,
    params: Params,
) -> Result<Json<Value>, ApiError> {
    let filter = filter(&params_of(params)?)?;
    let db = database(&state)?;
    let page = read(query::requests(&db, &filter)).await?;
    Ok(Json(json!({ "data": page.data, "next_cursor": page.next_cursor })))
}

/// `GET /admin/spend?group_by=key|route|provider|model&bucket=hour|day&since=`:
/// requests, failovers, tokens and cost per group and bucket.
pub(super) async fn spend(
    State(state): State<AppState>,
    _: LogReader,
    params: Params,
) -> Result<Json<Value>, ApiError> {
    let (mut group, mut bucket, mut since) = (GroupBy::Key, Bucket::Day, None);
    for (name, value) in params_of(params)? {
        match name.as_str() {
            "group_by" => {
                group = GroupBy::from_name(&value).ok_or_else(|| bad(&name, "is key, route, provider or model"))?
            }
            "bucket" => bucket = Bucket::from_name(&value).ok_or_else(|| bad(&name, "is hour or day"))?,
            "since" => since = Some(instant(&name, &value)?),
            _ => return Err(unknown(&name, "group_by, bucket, since")),
        }
    }
    let since =
        since.unwrap_or_else(|| now_ms() - if bucket == Bucket::Hour { SPEND_SINCE_HOURS } else { SPEND_SINCE_DAYS });
    let db = database(&state)?;
    let data = read(query::spend(&db, group, bucket, since)).await?;
    Ok(Json(json!({ "data": data })))
}

/// The request log's filter from its parameters, each read once.
fn filter(params: &[(String, String)]) -> Result<Filter, ApiError> {
    let mut filter = Filter { limit: DEFAULT_LIMIT, ..Filter::default() };
    let mut seen: Vec<&str> = Vec::new();
    for (name, value) in params {
        if seen.contains(&name.as_str()) {
            return Err(bad(name, "is given twice"));
        }
        seen.push(name);
        let text = || Some(value.clone());
        match name.as_str() {
            "key" => filter.key = text(),
            "route" => filter.route = text(),
            "provider" => filter.provider = text(),
            "outcome" => filter.outcome = text(),
            "since" => filter.since = Some(instant(name, value)?),
            "until" => filter.until = Some(instant(name, value)?),
            "limit" => {
                let limit = value.parse().ok().filter(|n| (1..=MAX_LIMIT).contains(n));
                filter.limit = limit.ok_or_else(|| bad(name, &format!("is a number of rows from 1 to {MAX_LIMIT}")))?;
            }
            "cursor" => {
                filter.cursor =
                    Some(Cursor::decode(value).ok_or_else(|| bad(name, "is not one a page of this log gave"))?);
            }
            _ => return Err(unknown(name, "key, route, provider, outcome, since, until, limit, cursor")),
        }
    }
    Ok(filter)
}

/// The query string's pairs, in order, or a 400 saying why it cannot be read.
pub(super) fn params_of(params: Params) -> Result<Vec<(String, String)>, ApiError> {
    params
        .map(|Query(params)| params)
        .map_err(|err| ApiError::bad_request(format!("the query string cannot be read: {err}")))
}

fn instant(name: &str, value: &str) -> Result<i64, ApiError> {
    parse_instant(value, now_ms()).ok_or_else(|| {
        bad(
            name,
            "is a time: RFC 3339 (2026-12-01T09:30:00Z), Unix milliseconds, or a span back from now (30m, 24h, 7d)",
        )
    })
}

/// A 400 naming parameter `name` and what it should be.
pub(super) fn bad(name: &str, what: &str) -> ApiError {
    ApiError::bad_request(format!("parameter {name:?} {what}"))
}

/// A 400 naming an unknown parameter, with the ones the endpoint takes.
pub(super) fn unknown(name: &str, known: &str) -> ApiError {
    ApiError::bad_request(format!("unknown parameter {name:?}; this endpoint takes {known}"))
}

/// The store's database, or why there is none to read.
pub(super) fn database(state: &AppState) -> Result<std::sync::Arc<Db>, ApiError> {
    let Some(records) = state.records() else {
        let message = "the request log is off: [store] backend = \"none\", or this baton keeps no store";
        return Err(ApiError::new(StatusCode::NOT_FOUND, ErrorKind::InvalidRequest, "store_off", message));
    };
    records.db().ok_or_else(unavailable)
}

/// `reading`, bounded by [`READ_LIMIT`]: a failure or a timeout is a 503.
pub(super) async fn read<T>(reading: impl Future<Output = Result<T, crate::store::DbError>>) -> Result<T, ApiError> {
    match tokio::time::timeout(READ_LIMIT, reading).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => {
            tracing::warn!(error = %err, "store read failed");
            Err(unavailable())
        }
        Err(_) => Err(unavailable()),
    }
}

pub(super) fn unavailable() -> ApiError {
    let message =
        "the store is unavailable now; requests are served and their rows counted as dropped until it is back";
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, ErrorKind::Unavailable, "store_unavailable", message)
}
