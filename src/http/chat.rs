//! The chat endpoint, for any client dialect: the request is parsed by its
//! extractors, admitted on its route, and run by the engine, whose answer
//! goes out as SSE or one body. `POST /v1/chat/completions` is this handler
//! over OpenAI's dialect.

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::answer;
use super::edge::Arrival;
use super::extract::{Asked, Caller, Drilled, JsonContent, Refused};
use crate::access::{ClientKey, Denied};
use crate::config::{Config, Drills, Route};
use crate::core::Call;
use crate::dialect::{ApiError, Dialect};
use crate::event::ChatRequest;
use crate::observe::RequestWatch;

/// The header that names the route a budget moved a request off.
const DOWNGRADED: &str = "x-baton-downgraded";

/// The handler, in dialect `D`: parse (the extractors), admit, run. Every
/// error is answered in `D`'s shape.
pub(super) async fn chat<D: Dialect>(
    State(state): State<AppState>,
    arrival: Arrival,
    caller: Caller<D>,
    _: JsonContent<D>,
    Drilled { drills, .. }: Drilled<D>,
    asked: Asked<D>,
) -> Result<Response, Refused<D>> {
    let admission = admit(&state, &arrival, &caller, &asked.model, &asked.request).await?;
    Ok(run(&state, admission, asked, drills).await?)
}

/// A request let onto its route, with the watch that measures it.
struct Admission {
    route: Arc<Route>,
    downgraded_from: Option<String>,
    watch: Box<RequestWatch>,
}

/// Finds the request's route and lets it through admission, or refuses it.
/// From here on the request's watch holds its trace and row, and hears why
/// when admission refuses it.
async fn admit<D: Dialect>(
    state: &AppState,
    arrival: &Arrival,
    caller: &Caller<D>,
    model: &str,
    request: &ChatRequest,
) -> Result<Admission, ApiError> {
    let (config, key) = (caller.config(), caller.key());
    let route = route_for(config, key, model)?;
    let admitted = state.gate().admit_shared(config, key, route, request).await;
    let served = admitted.as_ref().map_or(route, |admitted| &admitted.route);
    let mut watch = watch(state, arrival, key, model, &served.model);
    let admitted = admitted.map_err(|refusal| {
        let kind = refusal.kind();
        let err = ApiError::from(refusal);
        watch.failed(kind, err.status().as_u16(), Vec::new());
        err
    })?;
    watch.settle_with(Box::new(admitted.ticket));
    if let Some(from) = &admitted.downgraded_from {
        watch.downgraded(from);
    }
    if let Some(stall) = arrival.stall() {
        watch.stalled_when(move || stall.happened());
    }
    Ok(Admission { route: admitted.route, downgraded_from: admitted.downgraded_from, watch })
}

/// The watch for a request for `model` served by the route `served`: it
/// takes the trace and row the request arrived with.
fn watch(state: &AppState, arrival: &Arrival, key: Option<&ClientKey>, model: &str, served: &str) -> Box<RequestWatch> {
    let metrics = Arc::clone(state.engine().metrics());
    let mut watch = Box::new(RequestWatch::new(metrics, Arc::clone(state.routes()), Arc::clone(arrival.id()), served));
    if let Some(key) = key {
        watch.key(&key.name);
    }
    let (trace, recording) = arrival.take();
    if let Some(trace) = trace {
        watch.traced(trace.request(model, served));
    }
    watch.recorded(recording);
    watch
}

/// Runs an admitted request through the engine and answers it.
async fn run<D: Dialect>(
    state: &AppState,
    admission: Admission,
    asked: Asked<D>,
    drills: Drills,
) -> Result<Response, ApiError> {
    let Admission { route, downgraded_from, watch } = admission;
    let Asked { stream, request, options, held, .. } = asked;
    let call = Call { id: Arc::clone(watch.id()), request, drills, trace: watch.trace().clone() };
    let mut response = if stream {
        answer::stream::<D>(state, &route, call, watch, options).await?
    } else {
        answer::complete::<D>(state, &route, &call, watch, options).await?
    };
    // The body's share of the budget is given back once the answer has committed.
    drop(held);
    if let Some(from) = downgraded_from.and_then(|from| HeaderValue::from_str(&from).ok()) {
        response.headers_mut().insert(DOWNGRADED, from);
    }
    Ok(response)
}

/// `countTokens` of any door: the tokens of `conversation` on route
/// `model`, as the route's first target that counts them counts them, else
/// as baton estimates them for its limits (four characters a token). The
/// body is the door's `shape` of the count; `x-baton-provider` says who
/// counted: a provider's name, or `estimate`.
pub(super) async fn counted_tokens<D>(
    state: &AppState,
    caller: &Caller<D>,
    model: &str,
    conversation: &ChatRequest,
    shape: impl FnOnce(u64) -> serde_json::Value,
) -> Result<Response, ApiError> {
    let route = route_for(caller.config(), caller.key(), model)?;
    let (counter, tokens) = match state.engine().count_tokens(route, conversation).await {
        Some((provider, tokens)) => (provider, tokens),
        None => (ESTIMATE.to_owned(), conversation.estimated_input_tokens()),
    };
    let mut response = axum::Json(shape(tokens)).into_response();
    if let Ok(counter) = HeaderValue::from_str(&counter) {
        response.headers_mut().insert("x-baton-provider", counter);
    }
    Ok(response)
}

/// Who counted a request's tokens when no provider did.
const ESTIMATE: &str = "estimate";

/// The route `model` names, when `key` may use it.
pub(super) fn route_for<'a>(
    config: &'a Config,
    key: Option<&ClientKey>,
    model: &str,
) -> Result<&'a Arc<Route>, ApiError> {
    let route = config.route(model).ok_or_else(|| {
        let names = config.routes.iter().flat_map(|r| std::iter::once(&r.model).chain(&r.aliases));
        let known: Vec<&str> = names.map(String::as_str).collect();
        ApiError::unknown_model(model, &known)
    })?;
    match key.filter(|key| !key.allows(&route.model)) {
        Some(key) => Err(ApiError::denied(Denied::Route { key: key.name.clone(), route: route.model.clone() })),
        None => Ok(route),
    }
}
