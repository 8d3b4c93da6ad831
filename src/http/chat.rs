//! The chat endpoint, for any client dialect: parse, route, run the engine,
//! and send the answer as SSE or one body, measuring it from inside the
//! response. `POST /v1/chat/completions` is this handler over OpenAI's dialect.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use futures_util::{FutureExt, StreamExt};

use super::error::{self, stream_failure};
use super::panic::{Guarded, GuardedStream};
use super::stall::ClientStall;
use super::{AppState, admin, recording};
use crate::access::{ClientKey, Denied};
use crate::config::{Config, Route};
use crate::core::{AttemptRecord, Call, CommittedStream, Failure, ProxyError, Winner};
use crate::dialect::{ApiError, Dialect, Encoder, Ingress};
use crate::event::Event;
use crate::observe::RequestWatch;
use crate::observe::traces::TraceStart;
use crate::store::Recording;

/// How much of the answer may leave in one write when events arrive together.
const COALESCE_BYTES: usize = 16 * 1024;

/// The header that carries the request id, both ways.
const REQUEST_ID: &str = "x-request-id";

/// The header that names the route a budget moved a request off.
const DOWNGRADED: &str = "x-baton-downgraded";

/// The handler, in dialect `D`: every error, a panic's included, is answered
/// in `D`'s shape.
pub(super) async fn chat<D: Dialect>(State(state): State<AppState>, request: Request) -> Response {
    let id = request_id(request.headers());
    let mut trace = state.tracer().map(|tracer| tracer.begin(request.headers()));
    let mut recording = recording::begin::<D>(&state, &id, request.headers());
    let serving = serve::<D>(&state, Arc::clone(&id), request, &mut trace, &mut recording);
    let served = Guarded::new(serving).await.unwrap_or_else(|panic| {
        tracing::error!(request_id = %id, panic = %panic, "request panicked");
        state.engine().metrics().client_fault("panic");
        Err(ApiError::internal())
    });
    let mut response = match served {
        Ok(response) => response,
        Err(err) => {
            // Refused before a route took the trace: the request still gets its span.
            if let Some(trace) = trace.take() {
                trace.refused(err.code(), err.status().as_u16());
            }
            if let Some(recording) = recording.take() {
                recording::refused(recording, &err);
            }
            error::respond::<D>(err)
        }
    };
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    response
}

/// The client's `x-request-id` when it is a sane token, or a new one.
fn request_id(headers: &HeaderMap) -> Arc<str> {
    let given = headers.get(REQUEST_ID).and_then(|value| value.to_str().ok());
    match given.filter(|id| !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_graphic())) {
        Some(id) => Arc::from(id),
        None => Arc::from(format!("req_{:016x}", fastrand::u64(..))),
    }
}

/// Serves one request; `trace` and `recording` are taken once the request
/// has a route, and the row is told who asked for what until then.
async fn serve<D: Dialect>(
    state: &AppState,
    id: Arc<str>,
    request: Request,
    trace: &mut Option<TraceStart>,
    recording: &mut Option<Recording>,
) -> Result<Response, ApiError> {
    let config = state.config();
    let key = config.access.keys.identify(request.headers()).map_err(ApiError::denied)?;
    if let (Some(recording), Some(key)) = (recording.as_mut(), key) {
        recording.row().key = Some(key.name.clone());
    }
    json_body(request.headers())?;
    let drills = admin::drills(request.headers(), &config)?;
    let stall = request.extensions().get::<ClientStall>().cloned();
    let (head, body) = request.into_parts();
    // Held until the answer commits, or is sent whole: what a request holds longest.
    let (body, _held) = state.bodies().read(&head.headers, body, &config).await.inspect_err(|err| {
        if err.is_timeout() {
            state.engine().metrics().client_fault("body_timeout");
        }
    })?;
    if let Some(recording) = recording.as_mut() {
        recording.request_body(&body);
    }
    // What a request holds while it waits for its first token is boxed or
    // freed: every request in flight holds it, and each nested future would
    // hold its own copy. The body is freed once parsed, unless the dialect
    // keeps it to send as it came.
    let Ingress { model, stream: streamed, request: parsed, options } = D::parse(body.into(), &head.headers)?;
    if let Some(recording) = recording.as_mut() {
        recording.row().model_asked = Some(model.clone());
    }
    drop(head);
    let request = Box::new(parsed);
    let route = route_for(&config, key, &model)?;
    let engine = state.engine();
    let admitted = state.gate().admit_shared(&config, key, route, &request).await;
    let served = admitted.as_ref().map_or(route, |admitted| &admitted.route);
    let mut watch =
        Box::new(RequestWatch::new(Arc::clone(engine.metrics()), Arc::clone(state.routes()), id, &served.model));
    if let Some(key) = key {
        watch.key(&key.name);
    }
    if let Some(trace) = trace.take() {
        watch.traced(trace.request(&model, &served.model));
    }
    watch.recorded(recording.take());
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
    if let Some(stall) = stall {
        watch.stalled_when(move || stall.happened());
    }
    let route = &admitted.route;
    let call = Call { id: Arc::clone(watch.id()), request, drills, trace: watch.trace().clone() };
    let mut response = if streamed {
        stream::<D>(state, route, call, watch, options).await?
    } else {
        complete::<D>(state, route, &call, watch, options).await?
    };
    if let Some(from) = admitted.downgraded_from.and_then(|from| HeaderValue::from_str(&from).ok()) {
        response.headers_mut().insert(DOWNGRADED, from);
    }
    Ok(response)
}

/// Refuses a body that is not JSON: a cross-site form could post one
/// without a CORS preflight.
pub(super) fn json_body(headers: &HeaderMap) -> Result<(), ApiError> {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let json = content_type.trim_start().get(..16).is_some_and(|start| start.eq_ignore_ascii_case("application/json"));
    if json { Ok(()) } else { Err(ApiError::unsupported_media_type(content_type)) }
}

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

/// A streamed answer: headers and the first chunk at commit, then the relay.
async fn stream<D: Dialect>(
    state: &AppState,
    route: &Arc<Route>,
    call: Call,
    mut watch: Box<RequestWatch>,
    options: D::Options,
) -> Result<Response, ApiError> {
    let engine = state.engine();
    let committed = tokio::select! {
        committed = engine.stream(route, call) => committed,
        () = state.drained() => Err(ProxyError::ShuttingDown),
    };
    let committed = committed.inspect_err(|err| failed(state, route, &mut watch, err))?;
    let price = route.targets.get(committed.winner.target).and_then(|target| target.price);
    watch.committed(&committed.winner, price, Some(engine.health().provider(&committed.winner.provider)));
    let encoder = D::encoder(&committed.winner.model, options);
    let id = Arc::clone(watch.id());
    let sse = sse_body(committed.events, encoder, watch, state.clone());
    let body = Body::from_stream(GuardedStream::new(sse, id, D::Encoder::panicked));
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    winner_headers(headers, &committed.winner);
    Ok(response)
}

/// A whole answer as one body, sent only once it has all arrived.
async fn complete<D: Dialect>(
    state: &AppState,
    route: &Route,
    call: &Call,
    mut watch: Box<RequestWatch>,
    options: D::Options,
) -> Result<Response, ApiError> {
    let completed = tokio::select! {
        completed = state.engine().complete(route, call) => completed,
        () = state.drained() => Err(ProxyError::ShuttingDown),
    };
    let completed = completed.inspect_err(|err| failed(state, route, &mut watch, err))?;
    let price = route.targets.get(completed.winner.target).and_then(|target| target.price);
    watch.committed(&completed.winner, price, None);
    for event in &completed.events {
        match event {
            Event::Usage(usage) => watch.usage(*usage),
            Event::Text(text) => watch.answer_text(text),
            _ => {}
        }
    }
    watch.end("ok");
    let body = D::completion(&completed.winner.model, options, completed.events);
    let json = [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))];
    let mut response = (json, body).into_response();
    winner_headers(response.headers_mut(), &completed.winner);
    Ok(response)
}

/// Relays a committed stream as SSE in the encoder's dialect: each event,
/// then the complete answer's end (OpenAI's `[DONE]`), or an error event and
/// no such end if the stream fails or the proxy shuts down. Generic over the
/// encoder, so no event goes through dynamic dispatch. Events that are
/// already waiting leave together in one write; nothing waits for more.
fn sse_body<E: Encoder>(
    events: CommittedStream,
    encoder: E,
    watch: Box<RequestWatch>,
    state: AppState,
) -> impl futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> + Send {
    let drained: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(async move { state.drained().await });
    futures_util::stream::unfold(Some((events, encoder, watch, drained)), |relay| async move {
        let (mut events, mut encoder, mut watch, mut drained) = relay?;
        let mut out = BytesMut::new();
        let mut next = tokio::select! {
            next = events.next() => next,
            () = &mut drained => Some(Err(Failure::ShuttingDown)),
        };
        loop {
            match next {
                Some(Ok(event)) => {
                    match &event {
                        Event::Usage(usage) => watch.usage(*usage),
                        Event::Text(text) => watch.answer_text(text),
                        _ => {}
                    }
                    encoder.write_event(event, &mut out);
                }
                Some(Err(failure)) => {
                    watch.end(failure.kind());
                    tracing::warn!(request_id = %watch.id(), failure_class = failure.kind(), error = %failure.summary(), "stream failed after commit");
                    encoder.write_failure(&stream_failure(&failure), &mut out);
                    return Some((Ok(out.freeze()), None));
                }
                None => {
                    watch.end("ok");
                    encoder.write_done(&mut out);
                    return Some((Ok(out.freeze()), None));
                }
            }
            if out.len() >= COALESCE_BYTES {
                break;
            }
            match events.next().now_or_never() {
                Some(ready) => next = ready,
                None if out.is_empty() => {
                    next = tokio::select! {
                        next = events.next() => next,
                        () = &mut drained => Some(Err(Failure::ShuttingDown)),
                    };
                }
                None => break,
            }
        }
        Some((Ok(out.freeze()), Some((events, encoder, watch, drained))))
    })
}

/// The request got no answer: its watch hears why, with each attempt for
/// the request log when it keeps one; when every target failed (not the
/// client's request, not only drills), so do the alerts.
fn failed(state: &AppState, route: &Route, watch: &mut RequestWatch, err: &ProxyError) {
    if let ProxyError::AllFailed(attempts) = err
        && !attempts.iter().all(|attempt| matches!(attempt.failure, Failure::Drill(_)))
    {
        state.ops().alerts().raise(crate::ops::alerts::Alert::route_exhausted(&route.model, err));
    }
    let tried =
        if watch.is_recording() { err.attempts().iter().map(AttemptRecord::tried).collect() } else { Vec::new() };
    watch.failed(err.kind(), err.status(), tried);
}

fn winner_headers(headers: &mut HeaderMap, winner: &Winner) {
    let values = [
        ("x-baton-provider", winner.provider.to_string()),
        ("x-baton-model", winner.model.clone()),
        ("x-baton-attempts", winner.attempts.to_string()),
    ];
    for (name, value) in values {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    // Field names are the client's JSON keys: anything a header cannot carry becomes `?`.
    let dropped: String =
        winner.dropped.join(", ").chars().map(|c| if c == ' ' || c.is_ascii_graphic() { c } else { '?' }).collect();
    if !dropped.is_empty()
        && let Ok(value) = HeaderValue::from_str(&dropped)
    {
        headers.insert("x-baton-dropped-params", value);
    }
}
