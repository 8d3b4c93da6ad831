//! The answer, built from what the engine returns: a streamed one as SSE
//! in the client's dialect, relayed and measured from inside the response;
//! a whole one as one body; and what the request's watch and the alerts
//! hear when there is none.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker, ready};

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;

use super::AppState;
use super::error::stream_failure;
use super::panic::GuardedStream;
use super::state::DrainBegun;
use crate::config::Route;
use crate::core::{AttemptRecord, Call, CommittedStream, Failure, ProxyError, Winner};
use crate::dialect::{ApiError, Dialect, Encoder};
use crate::event::Event;
use crate::observe::RequestWatch;

/// A streamed answer: headers and the first chunk at commit, then the relay.
pub(super) async fn stream<D: Dialect>(
    state: &AppState,
    route: &Arc<Route>,
    call: Call,
    mut watch: Box<RequestWatch>,
    mut options: D::Options,
) -> Result<Response, ApiError> {
    let engine = state.engine();
    let committed = tokio::select! {
        committed = engine.stream(route, call) => committed,
        () = state.drained() => Err(ProxyError::ShuttingDown),
    };
    let committed = committed.inspect_err(|err| failed(state, route, &mut watch, err))?;
    let price = route.targets.get(committed.winner.target).and_then(|target| target.price);
    watch.committed(&committed.winner, price, Some(engine.health().provider(&committed.winner.provider)));
    D::answered_by(&mut options, &committed.winner.provider);
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
pub(super) async fn complete<D: Dialect>(
    state: &AppState,
    route: &Route,
    call: &Call,
    mut watch: Box<RequestWatch>,
    mut options: D::Options,
) -> Result<Response, ApiError> {
    let completed = tokio::select! {
        completed = state.engine().complete(route, call) => completed,
        () = state.drained() => Err(ProxyError::ShuttingDown),
    };
    let completed = completed.inspect_err(|err| failed(state, route, &mut watch, err))?;
    let price = route.targets.get(completed.winner.target).and_then(|target| target.price);
    watch.committed(&completed.winner, price, None);
    for event in &completed.events {
        heard(&mut watch, event);
    }
    watch.end("ok");
    D::answered_by(&mut options, &completed.winner.provider);
    let body = D::completion(&completed.winner.model, options, completed.events);
    let json = [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))];
    let mut response = (json, body).into_response();
    winner_headers(response.headers_mut(), &completed.winner);
    Ok(response)
}

/// Relays a committed stream as SSE in the encoder's dialect: each event,
/// then the complete answer's end (OpenAI's `[DONE]`), or an error event and
/// no such end if the stream fails or the proxy shuts down. Generic over the
/// encoder, so no event goes through dynamic dispatch. Each event is its own
/// piece: the writer joins the pieces that are ready together into one write.
fn sse_body<E: Encoder>(events: CommittedStream, encoder: E, watch: Box<RequestWatch>, state: AppState) -> SseBody<E> {
    let drain_begun = state.drain_begun();
    let drained = Box::pin(async move { state.drained().await });
    let relay = Relay { events, encoder, watch, drained, drain_begun, drain_waker: None, out: BytesMut::new() };
    SseBody { relay: Some(relay) }
}

/// The room events are encoded into, made when less than
/// [`PIECE_ROOM_LOW`] is left. Once the writer has let go of every piece
/// the room is reused where it is; while it still holds one (events that
/// arrived together) a new room is made, and this size lets the next few
/// events share it, where a room of one event's size cost two allocations
/// an event (the room, and the count shared by its pieces).
const PIECE_ROOM: usize = 1024;
/// Less room than this left, and [`PIECE_ROOM`] is made before an event.
const PIECE_ROOM_LOW: usize = 256;

/// A streamed answer's body, until its last piece has been handed out.
struct SseBody<E> {
    relay: Option<Relay<E>>,
}

/// What a streamed answer's body works with while it lasts.
struct Relay<E> {
    events: CommittedStream,
    encoder: E,
    watch: Box<RequestWatch>,
    /// The proxy's drain: asked only while no event is ready, since an
    /// event that is ready is sent whatever happens next.
    drained: Pin<Box<dyn Future<Output = ()> + Send>>,
    /// Whether the drain has begun, read between events instead of asking
    /// `drained` again: each asking takes a lock every stream shares.
    drain_begun: DrainBegun,
    /// The waker `drained` was last asked with, and so holds: the drain's
    /// start wakes it, so until that or another waker, asking again is moot.
    drain_waker: Option<Waker>,
    /// Where events are encoded: each piece is split off it, and once the
    /// writer has let go of the last one its room serves the next event.
    out: BytesMut,
}

impl<E: Encoder> futures_util::Stream for SseBody<E> {
    type Item = Result<Bytes, std::convert::Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let Some(relay) = self.relay.as_mut() else { return Poll::Ready(None) };
        loop {
            let next = match relay.events.poll_next_unpin(cx) {
                Poll::Ready(next) => next,
                Poll::Pending => {
                    if !relay.drain_to_ask(cx) {
                        return Poll::Pending;
                    }
                    ready!(relay.drained.as_mut().poll(cx));
                    Some(Err(Failure::ShuttingDown))
                }
            };
            match next {
                Some(Ok(event)) => {
                    heard(&mut relay.watch, &event);
                    if relay.out.capacity() < PIECE_ROOM_LOW {
                        relay.out.reserve(PIECE_ROOM);
                    }
                    relay.encoder.write_event(event, &mut relay.out);
                    // An event with nothing to send yet (usage kept for the end).
                    if relay.out.is_empty() {
                        continue;
                    }
                    return Poll::Ready(Some(Ok(relay.out.split().freeze())));
                }
                Some(Err(failure)) => {
                    relay.watch.end(failure.kind());
                    tracing::warn!(request_id = %relay.watch.id(), failure_class = failure.kind(), error = %failure.summary(), "stream failed after commit");
                    relay.encoder.write_failure(&stream_failure(&failure), &mut relay.out);
                }
                None => {
                    relay.watch.end("ok");
                    relay.encoder.write_done(&mut relay.out);
                }
            }
            let last = relay.out.split().freeze();
            self.relay = None;
            return Poll::Ready(Some(Ok(last)));
        }
    }
}

impl<E> Relay<E> {
    /// Whether `drained` must be asked now: once the drain has begun, or
    /// when it holds no waker of the task polling the body (the first time).
    fn drain_to_ask(&mut self, cx: &Context<'_>) -> bool {
        if self.drain_begun.get() {
            return true;
        }
        match &self.drain_waker {
            Some(waker) if waker.will_wake(cx.waker()) => false,
            _ => {
                self.drain_waker = Some(cx.waker().clone());
                true
            }
        }
    }
}

/// Tells the watch what it measures of an answer's event: its usage and its text.
fn heard(watch: &mut RequestWatch, event: &Event) {
    match event {
        Event::Usage(usage) => watch.usage(*usage),
        Event::Text(text) => watch.answer_text(text),
        _ => {}
    }
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

/// The headers that say who answered, named once: a name given as text is
/// parsed again for every response.
const PROVIDER: HeaderName = HeaderName::from_static("x-baton-provider");
const MODEL: HeaderName = HeaderName::from_static("x-baton-model");
const ATTEMPTS: HeaderName = HeaderName::from_static("x-baton-attempts");
const DROPPED_PARAMS: HeaderName = HeaderName::from_static("x-baton-dropped-params");

/// Says who answered: the provider, its model, the attempts it took, and
/// the fields of the request that were dropped on the way.
fn winner_headers(headers: &mut HeaderMap, winner: &Winner) {
    if let Ok(value) = HeaderValue::from_str(&winner.provider) {
        headers.insert(PROVIDER, value);
    }
    if let Ok(value) = HeaderValue::from_str(&winner.model) {
        headers.insert(MODEL, value);
    }
    headers.insert(ATTEMPTS, HeaderValue::from(winner.attempts));
    // Field names are the client's JSON keys: anything a header cannot carry becomes `?`.
    let dropped: String =
        winner.dropped.join(", ").chars().map(|c| if c == ' ' || c.is_ascii_graphic() { c } else { '?' }).collect();
    if !dropped.is_empty()
        && let Ok(value) = HeaderValue::from_str(&dropped)
    {
        headers.insert(DROPPED_PARAMS, value);
    }
}
