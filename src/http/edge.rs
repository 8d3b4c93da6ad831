//! Where a chat request arrives and leaves: it gets its id, its trace and its
//! request-log row here, before any check runs, and its `x-request-id` on the
//! way out. A panic anywhere inside becomes a 500 in the endpoint's dialect.
//! A request refused before it had a route ends its trace and row here, with
//! the error its response carries.

use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

use super::error::{self, ErrorCode};
use super::panic::Guarded;
use super::stall::ClientStall;
use super::{AppState, recording};
use crate::dialect::{ApiError, Dialect};
use crate::observe::traces::TraceStart;
use crate::store::Recording;

/// The header that carries the request id, both ways.
const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// What the edge knows of a request before it has a route, shared with the
/// checks and the handler inside: its id, its connection's stall signal,
/// and the trace and row that the handler takes once there is a route.
#[derive(Clone)]
pub(super) struct Arrival(Arc<Arrived>);

struct Arrived {
    id: Arc<str>,
    stall: Option<ClientStall>,
    pending: Mutex<Pending>,
}

/// What is handed on to the request's watch once it has a route.
struct Pending {
    trace: Option<TraceStart>,
    recording: Option<Recording>,
}

impl Arrival {
    fn new(id: Arc<str>, stall: Option<ClientStall>, trace: Option<TraceStart>, recording: Option<Recording>) -> Self {
        Arrival(Arc::new(Arrived { id, stall, pending: Mutex::new(Pending { trace, recording }) }))
    }

    /// The request's id.
    pub(super) fn id(&self) -> &Arc<str> {
        &self.0.id
    }

    /// The signal that the client stopped reading, when the connection has one.
    pub(super) fn stall(&self) -> Option<ClientStall> {
        self.0.stall.clone()
    }

    /// Tells the request's row something learned before the request has a
    /// route (its key, its body, the model it asked for), when it is recorded.
    pub(super) fn note(&self, note: impl FnOnce(&mut Recording)) {
        if let Some(recording) = self.pending().recording.as_mut() {
            note(recording);
        }
    }

    /// The trace and the row, taken once the request has a route.
    pub(super) fn take(&self) -> (Option<TraceStart>, Option<Recording>) {
        let mut pending = self.pending();
        (pending.trace.take(), pending.recording.take())
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.0.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Every chat request passes through here, in dialect `D`.
pub(super) async fn edge<D: Dialect>(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let id = request_id(request.headers());
    let trace = state.tracer().map(|tracer| tracer.begin(request.headers()));
    let recording = recording::begin::<D>(&state, &id, request.headers());
    let stall = request.extensions().get::<ClientStall>().cloned();
    let arrival = Arrival::new(Arc::clone(&id), stall, trace, recording);
    request.extensions_mut().insert(arrival.clone());
    let mut response = Guarded::new(next.run(request)).await.unwrap_or_else(|panic| {
        tracing::error!(request_id = %id, panic = %panic, "request panicked");
        state.engine().metrics().client_fault("panic");
        error::respond::<D>(ApiError::internal())
    });
    // Refused before a route took the trace: the request still gets its span and its row.
    let (trace, recording) = arrival.take();
    if let Some(ErrorCode(code)) = response.extensions().get::<ErrorCode>() {
        let status = response.status().as_u16();
        if let Some(trace) = trace {
            trace.refused(code, status);
        }
        if let Some(recording) = recording {
            recording::refused(recording, code, status);
        }
    }
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    response
}

/// The client's `x-request-id` when it is a sane token, or a new one.
fn request_id(headers: &HeaderMap) -> Arc<str> {
    let given = headers.get(&REQUEST_ID).and_then(|value| value.to_str().ok());
    match given.filter(|id| !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_graphic())) {
        Some(id) => Arc::from(id),
        None => Arc::from(crate::random_id::random_id("req_", 16)),
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Arrival {
    type Rejection = std::convert::Infallible;

    /// The edge's record of the request; a handler served without the edge
    /// gets one of its own, with no trace and no row.
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let arrival = parts.extensions.get::<Arrival>().cloned();
        Ok(arrival.unwrap_or_else(|| Arrival::new(request_id(&parts.headers), None, None, None)))
    }
}
