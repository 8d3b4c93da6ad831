//! What a chat request must show before it is served, as axum extractors, in
//! the order the handler names them: its client key, a JSON content type,
//! the drills it asks for, and its body, read within budget and parsed. Each
//! refusal is a response in the endpoint's dialect, so a missing key is
//! refused before a byte of the body is read.

use std::marker::PhantomData;
use std::sync::Arc;

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{Extensions, HeaderMap, header};
use axum::response::{IntoResponse, Response};

use super::body::Held;
use super::edge::Arrival;
use super::{AppState, admin, error};
use crate::access::ClientKey;
use crate::config::Config;
use crate::config::Drills;
use crate::dialect::{ApiError, Dialect, Ingress};
use crate::event::ChatRequest;

/// A request refused at the door, answered in dialect `D`'s shape.
pub(super) struct Refused<D>(ApiError, PhantomData<fn() -> D>);

impl<D> From<ApiError> for Refused<D> {
    fn from(error: ApiError) -> Self {
        Refused(error, PhantomData)
    }
}

impl<D: Dialect> IntoResponse for Refused<D> {
    fn into_response(self) -> Response {
        error::respond::<D>(self.0)
    }
}

/// The config a request is served under: the one in force when its first
/// check read it, so a reload halfway through changes nothing for it.
#[derive(Clone)]
struct Pinned(Arc<Config>);

fn pinned(extensions: &mut Extensions, state: &AppState) -> Arc<Config> {
    if let Some(Pinned(config)) = extensions.get::<Pinned>() {
        return Arc::clone(config);
    }
    let config = state.config();
    extensions.insert(Pinned(Arc::clone(&config)));
    config
}

/// Who is asking: the client key the request presented, when the config
/// has keys, checked before anything else about the request.
pub(super) struct Caller<D> {
    config: Arc<Config>,
    /// The key's place among the config's keys.
    key: Option<usize>,
    dialect: PhantomData<fn() -> D>,
}

impl<D> Caller<D> {
    /// The config the request is served under.
    pub(super) fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// The key the request presented, when the config has keys.
    pub(super) fn key(&self) -> Option<&ClientKey> {
        self.key.and_then(|index| self.config.access.keys.keys().get(index))
    }
}

impl<D: Dialect> FromRequestParts<AppState> for Caller<D> {
    type Rejection = Refused<D>;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let config = pinned(&mut parts.extensions, state);
        let key = config.access.keys.identify_presented(D::presented_key(parts)).map_err(ApiError::denied)?;
        if let (Some(arrival), Some(key)) = (parts.extensions.get::<Arrival>(), key) {
            arrival.note(|recording| recording.row().key = Some(key.name.clone()));
        }
        let keys = config.access.keys.keys();
        let key = key.and_then(|key| keys.iter().position(|known| std::ptr::eq(known, key)));
        Ok(Caller { config, key, dialect: PhantomData })
    }
}

/// A request whose body says it is JSON: a cross-site form could post any
/// other without a CORS preflight.
pub(super) struct JsonContent<D>(PhantomData<fn() -> D>);

impl<D: Dialect> FromRequestParts<AppState> for JsonContent<D> {
    type Rejection = Refused<D>;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, Self::Rejection> {
        json_body(&parts.headers)?;
        Ok(JsonContent(PhantomData))
    }
}

/// Refuses a body that is not JSON: a cross-site form could post one
/// without a CORS preflight.
pub(super) fn json_body(headers: &HeaderMap) -> Result<(), ApiError> {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let json = content_type.trim_start().get(..16).is_some_and(|start| start.eq_ignore_ascii_case("application/json"));
    if json { Ok(()) } else { Err(ApiError::unsupported_media_type(content_type)) }
}

/// The drills the request asks for in its drill header, refused without the
/// admin token.
pub(super) struct Drilled<D> {
    /// The drills, none when the request has no drill header.
    pub(super) drills: Drills,
    dialect: PhantomData<fn() -> D>,
}

impl<D: Dialect> FromRequestParts<AppState> for Drilled<D> {
    type Rejection = Refused<D>;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let config = pinned(&mut parts.extensions, state);
        Ok(Drilled { drills: admin::drills(&parts.headers, &config)?, dialect: PhantomData })
    }
}

/// The request as dialect `D` parsed it from its body, which was read
/// within the body budget and is freed once parsed (unless the dialect
/// keeps it to send as it came). What a request holds while it waits for
/// its first token is boxed or freed: every request in flight holds it.
pub(super) struct Asked<D: Dialect> {
    /// The route name the client sent as its model.
    pub(super) model: String,
    /// Whether the answer is streamed as SSE.
    pub(super) stream: bool,
    /// The normalised request.
    pub(super) request: Box<ChatRequest>,
    /// What the dialect's encoder needs from the request.
    pub(super) options: D::Options,
    /// The body's share of the budget: held until the answer commits, or is
    /// sent whole, which is what a request holds longest.
    pub(super) held: Held,
}

impl<D: Dialect> FromRequest<AppState> for Asked<D> {
    type Rejection = Refused<D>;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let (mut head, body) = request.into_parts();
        let config = pinned(&mut head.extensions, state);
        let (body, held) = state.bodies().read(&head.headers, body, &config).await.inspect_err(|err| {
            if err.is_timeout() {
                state.engine().metrics().client_fault("body_timeout");
            }
        })?;
        let arrival = head.extensions.get::<Arrival>();
        if let Some(arrival) = arrival {
            arrival.note(|recording| recording.request_body(&body));
        }
        let Ingress { model, stream, request, options } = D::parse(body.into(), &head)?;
        if let Some(arrival) = arrival {
            arrival.note(|recording| recording.row().model_asked = Some(model.clone()));
        }
        Ok(Asked { model, stream, request: Box::new(request), options, held })
    }
}
