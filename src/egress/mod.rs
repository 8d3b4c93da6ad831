//! The HTTP/1.1 client for provider requests, baton's own over `httparse`
//! (`wire` reads and writes heads, [`crate::h1`] takes bodies apart): one small
//! read buffer per connection and no write buffer or dispatch channel, which
//! hyper's client kept for every held stream. Each connection is driven by
//! whoever is using it (the request while it waits for the head, then the
//! body while the answer is read) instead of by a task of its own: a chunk
//! already read from the socket reaches the relay without a task switch, so
//! the events of one upstream read leave for the client in one write, and an
//! idle connection costs no task.
//!
//! Each provider's [`Egress`] says whom its TLS trusts and which proxy its
//! connections go through; both are part of the pool's key.

mod body;
mod connect;
mod connection;
mod environment;
#[cfg(test)]
mod fuzz;
mod pool;
mod proxy;
mod way_out;
mod wire;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::HOST;
use http::uri::{PathAndQuery, Scheme};
use thiserror::Error;

use connect::Connector;
use pool::Pool;

pub use body::ResponseBody;
pub use environment::{NoProxy, proxy_from_env};
pub use proxy::Proxy;
pub use way_out::{Egress, Trust};

/// Why a request to a provider got no response, or its body broke off. The
/// message never carries the URL or a header, so no key can leak through it.
#[derive(Debug, Error)]
pub enum ClientError {
    /// The URL cannot be requested (not absolute http(s), no host).
    #[error("cannot request this URL: {0}")]
    Url(&'static str),
    /// No TCP connection.
    #[error("{0}")]
    Connect(String),
    /// No TLS session, or no TLS settings at start.
    #[error("tls: {0}")]
    Tls(String),
    /// The proxy could not be reached, or refused the tunnel or the
    /// request; the message names the proxy, never its credentials.
    #[error("{0}")]
    Proxy(String),
    /// The exchange broke once the request had started to leave: the
    /// connection closed or broke before a response (the provider may have
    /// acted on the request), or while its body was read.
    #[error("{0}")]
    Http(String),
    /// The response is not HTTP/1.1 that can be trusted: a head that does
    /// not parse, is too large, or frames its body two ways.
    #[error("{0}")]
    Protocol(String),
    /// A pooled connection turned out closed before any byte of the
    /// request left on it, so sending it on another is safe.
    #[error("the idle connection was closed before the request was sent")]
    Stale,
}

impl ClientError {
    fn connect(err: std::io::Error) -> Self {
        ClientError::Connect(err.to_string())
    }
}

/// Where connections go, and how they get there: one pool of idle
/// connections per origin.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Origin {
    https: bool,
    host: String,
    port: u16,
    egress: Egress,
}

/// Sends provider requests over pooled keep-alive connections; clones share
/// the pool.
#[derive(Clone)]
pub struct Client {
    connector: Connector,
    pool: Arc<Pool>,
}

impl Client {
    /// A client keeping at most `max_idle_per_origin` idle connections per
    /// provider origin, each for at most `idle_timeout`.
    pub fn new(max_idle_per_origin: usize, idle_timeout: Duration) -> Result<Self, ClientError> {
        Ok(Client { connector: Connector::new()?, pool: Arc::new(Pool::new(max_idle_per_origin, idle_timeout)) })
    }

    /// Sends `request` (with an absolute URL) directly, trusting the
    /// system's roots, and returns the response head with a body that still
    /// drives its connection. Dropping the body before its end closes the
    /// connection.
    pub async fn send(&self, request: http::Request<Bytes>) -> Result<http::Response<ResponseBody>, ClientError> {
        self.send_via(request, &Egress::DIRECT).await
    }

    /// [`Client::send`] the way `egress` says: through its proxy, trusting
    /// its certificates beside the system's.
    pub async fn send_via(
        &self,
        request: http::Request<Bytes>,
        egress: &Egress,
    ) -> Result<http::Response<ResponseBody>, ClientError> {
        let (origin, parts, body) = request_form(request, egress)?;
        let answer = |(head, conn)| ResponseBody::answer(conn, head, &self.pool, &origin);
        if let Some(conn) = self.pool.take(&origin) {
            match conn.send(&parts, body.clone()).await {
                Err(ClientError::Stale) => {}
                sent => return refused_by_proxy(sent.map(answer), &origin),
            }
        }
        // Boxed: connecting (TCP, a proxy's tunnel, the TLS handshake) is the
        // largest state a request passes through, and an answer that is
        // streamed for seconds should not carry its room.
        let conn = Box::pin(self.connector.connect(&origin)).await?;
        let sent = conn.send(&parts, body).await.map_err(|err| match err {
            ClientError::Stale => ClientError::Http("the provider closed the connection before the request".into()),
            err => err,
        });
        refused_by_proxy(sent.map(answer), &origin)
    }
}

/// A plain `http` request sent to a proxy in absolute form gets the proxy's
/// own 407 when it wants credentials: a failure to connect, like a refused
/// tunnel, not the provider's answer.
fn refused_by_proxy(
    sent: Result<http::Response<ResponseBody>, ClientError>,
    origin: &Origin,
) -> Result<http::Response<ResponseBody>, ClientError> {
    match (sent, origin.egress.proxy()) {
        (Ok(response), Some(proxy))
            if !origin.https && response.status() == http::StatusCode::PROXY_AUTHENTICATION_REQUIRED =>
        {
            Err(ClientError::Proxy(format!(
                "the proxy {} answered 407 Proxy Authentication Required: it wants credentials, or refused those in the proxy URL",
                proxy.url()
            )))
        }
        (sent, _) => sent,
    }
}

/// Splits an absolute-URL request into its origin and the HTTP/1.1 request
/// that goes on the wire: in origin form (`/path?query` with a `Host`
/// header), or for plain `http` through a proxy in absolute form, with the
/// proxy's credentials.
fn request_form(
    request: http::Request<Bytes>,
    egress: &Egress,
) -> Result<(Origin, http::request::Parts, Bytes), ClientError> {
    let (mut parts, body) = request.into_parts();
    let uri = &parts.uri;
    let https = match uri.scheme() {
        Some(scheme) if *scheme == Scheme::HTTPS => true,
        Some(scheme) if *scheme == Scheme::HTTP => false,
        _ => return Err(ClientError::Url("the scheme is not http or https")),
    };
    let authority = uri.authority().ok_or(ClientError::Url("there is no host"))?;
    let host = authority.host().trim_start_matches('[').trim_end_matches(']').to_owned();
    let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
    let host_header =
        http::HeaderValue::from_str(authority.as_str()).map_err(|_| ClientError::Url("the host is not a header"))?;
    parts.headers.insert(HOST, host_header);
    match egress.proxy() {
        Some(proxy) if !https => {
            if let Some(authorization) = proxy.authorization() {
                parts.headers.insert(http::header::PROXY_AUTHORIZATION, authorization.clone());
            }
        }
        _ => parts.uri = uri.path_and_query().cloned().unwrap_or_else(|| PathAndQuery::from_static("/")).into(),
    }
    Ok((Origin { https, host, port, egress: egress.clone() }, parts, body))
}
