//! The HTTP/1.1 client for provider requests. Each connection is driven by
//! whoever is using it (the request while it waits for the head, then the
//! body while the answer is read) instead of by a task of its own: a chunk
//! already read from the socket reaches the relay without a task switch, so
//! the events of one upstream read leave for the client in one write, and an
//! idle connection costs no task.
//!
//! Each provider's [`Egress`] says whom its TLS trusts and which proxy its
//! connections go through; both are part of the pool's key.

mod connect;
mod egress;
mod environment;
mod pool;
mod proxy;

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::Stream;
use http::header::HOST;
use http::uri::{PathAndQuery, Scheme};
use http_body_util::Full;
use hyper::body::{Body as _, Incoming};
use hyper::client::conn::http1;
use thiserror::Error;

use connect::{Connector, Io};
use pool::Pool;

pub use egress::{Egress, Trust};
pub use environment::{NoProxy, proxy_from_env};
pub use proxy::Proxy;

type RequestBody = Full<Bytes>;

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
    /// The HTTP exchange failed: reset, closed early, or not HTTP.
    #[error("{0}")]
    Http(String),
    /// A pooled connection turned out closed before the request left on it.
    #[error("the idle connection was closed before the request was sent")]
    Stale,
}

impl ClientError {
    fn connect(err: std::io::Error) -> Self {
        ClientError::Connect(err.to_string())
    }

    fn http(err: &hyper::Error) -> Self {
        ClientError::Http(chain(err))
    }
}

/// An error and its causes on one line.
fn chain(err: &dyn std::error::Error) -> String {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
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
        let build = || {
            let mut request = http::Request::new(Full::new(body.clone()));
            *request.method_mut() = parts.method.clone();
            *request.uri_mut() = parts.uri.clone();
            *request.headers_mut() = parts.headers.clone();
            request
        };
        if let Some(conn) = self.pool.take(&origin) {
            match conn.send(build(), &self.pool, &origin).await {
                Err(ClientError::Stale) => {}
                sent => return refused_by_proxy(sent, &origin),
            }
        }
        let conn = self.connector.connect(&origin).await?;
        let sent = conn.send(build(), &self.pool, &origin).await.map_err(|err| match err {
            ClientError::Stale => ClientError::Http("the provider closed the connection before the request".into()),
            err => err,
        });
        refused_by_proxy(sent, &origin)
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

/// One HTTP/1.1 connection: the handle to send on, and the state machine
/// that does its I/O whenever it is polled.
struct Connection {
    sender: http1::SendRequest<RequestBody>,
    driver: Driver,
    idle_since: Instant,
}

impl Connection {
    fn new(sender: http1::SendRequest<RequestBody>, driver: http1::Connection<Io, RequestBody>) -> Self {
        Connection { sender, driver: Driver(Some(driver)), idle_since: Instant::now() }
    }

    fn idle_for(&self) -> Duration {
        self.idle_since.elapsed()
    }

    /// Whether the connection is still open, reading whatever the provider
    /// sent while it sat idle: a close, most likely, or bytes no request
    /// asked for, after which the provider is [`Idle::Stray`].
    fn idle_check(&mut self) -> Idle {
        let mut cx = Context::from_waker(Waker::noop());
        if self.sender.is_closed() {
            return Idle::Gone;
        }
        match self.driver.poll_end(&mut cx) {
            Poll::Pending => Idle::Open,
            // hyper refuses bytes on an idle connection with an error of its own, not the socket's.
            Poll::Ready(Err(err)) if std::error::Error::source(&err).is_none_or(|s| !s.is::<std::io::Error>()) => {
                Idle::Stray
            }
            Poll::Ready(_) => Idle::Gone,
        }
    }

    /// Sends `request` and waits for the response head, driving the connection.
    /// [`ClientError::Stale`] means the request never left, so it may be sent
    /// again on another connection.
    async fn send(
        mut self,
        request: http::Request<RequestBody>,
        pool: &Arc<Pool>,
        origin: &Origin,
    ) -> Result<http::Response<ResponseBody>, ClientError> {
        let Connection { sender, driver, .. } = &mut self;
        driver.drive(poll_fn(|cx| sender.poll_ready(cx))).await.map_err(|_| ClientError::Stale)?;
        let response = driver.drive(sender.send_request(request)).await.map_err(|err| match err {
            Some(err) if err.is_canceled() => ClientError::Stale,
            Some(err) => ClientError::http(&err),
            None => ClientError::Http("the provider closed the connection before the response".into()),
        })?;
        let back = Some((self, Arc::clone(pool), origin.clone()));
        Ok(response.map(|incoming| ResponseBody { incoming, conn: back, ended: false }))
    }
}

/// What an idle connection turned out to be.
#[derive(Debug, PartialEq, Eq)]
enum Idle {
    /// Open and quiet: ready for a request.
    Open,
    /// Closed by the provider, or broken.
    Gone,
    /// The provider sent bytes no request asked for: such a provider may
    /// send them again just after the next request is written, where they
    /// would pass for its answer, so its connections are not kept for a while.
    Stray,
}

/// A connection's I/O, polled by its user; empty once the connection ended.
struct Driver(Option<http1::Connection<Io, RequestBody>>);

impl Driver {
    /// Ready once the connection has ended (with its error, the first time).
    fn poll_end(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), hyper::Error>> {
        let Some(conn) = &mut self.0 else { return Poll::Ready(Ok(())) };
        let end = std::task::ready!(Pin::new(conn).poll(cx));
        self.0 = None;
        Poll::Ready(end)
    }

    /// Polls `work` and the connection together until `work` is done. The
    /// error is `work`'s, or the connection's, or none when the connection
    /// ended cleanly first.
    async fn drive<T>(&mut self, work: impl Future<Output = hyper::Result<T>>) -> Result<T, Option<hyper::Error>> {
        let mut work = pin!(work);
        poll_fn(|cx| {
            let end = self.poll_end(cx);
            if let Poll::Ready(done) = work.as_mut().poll(cx) {
                return Poll::Ready(done.map_err(Some));
            }
            end.map(|end| Err(end.err()))
        })
        .await
    }
}

/// A response body that drives its own connection, and hands the connection
/// back to the pool once the body has been read to its end.
pub struct ResponseBody {
    incoming: Incoming,
    /// The connection, until it ends or goes back to the pool.
    conn: Option<(Connection, Arc<Pool>, Origin)>,
    ended: bool,
}

impl ResponseBody {
    fn release(&mut self) {
        if let Some((mut conn, pool, origin)) = self.conn.take() {
            match conn.idle_check() {
                Idle::Open => {
                    conn.idle_since = Instant::now();
                    pool.put(origin, conn);
                }
                Idle::Stray => pool.distrust(origin),
                Idle::Gone => {}
            }
        }
    }
}

/// How many already-read frames a dropped body goes through looking for its end.
const DRAIN_FRAMES: usize = 8;

impl Drop for ResponseBody {
    /// A reader stops at the provider's end marker, and the body's own end
    /// usually came in the same read: finishing it here, without waiting for
    /// anything, keeps the connection for the next request.
    fn drop(&mut self) {
        let mut cx = Context::from_waker(Waker::noop());
        for _ in 0..DRAIN_FRAMES {
            match Pin::new(&mut *self).poll_next(&mut cx) {
                Poll::Ready(Some(Ok(_))) => {}
                Poll::Ready(_) | Poll::Pending => return,
            }
        }
    }
}

impl Stream for ResponseBody {
    type Item = Result<Bytes, ClientError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        // Whether the connection has had its turn: what it read may have
        // completed the body, which is then polled once more.
        let mut driven = false;
        loop {
            let failure = match Pin::new(&mut this.incoming).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => return Poll::Ready(Some(Ok(data))),
                    Err(_trailers) => continue,
                },
                Poll::Ready(Some(Err(err))) => ClientError::http(&err),
                Poll::Ready(None) => {
                    this.ended = true;
                    this.release();
                    return Poll::Ready(None);
                }
                Poll::Pending if driven => return Poll::Pending,
                Poll::Pending => match &mut this.conn {
                    Some((conn, ..)) => match conn.driver.poll_end(cx) {
                        Poll::Pending => {
                            driven = true;
                            continue;
                        }
                        Poll::Ready(Err(err)) => ClientError::http(&err),
                        // The connection ended: the body holds its end or its error now.
                        Poll::Ready(Ok(())) => {
                            this.conn = None;
                            continue;
                        }
                    },
                    None => ClientError::Http("the provider closed the connection".into()),
                },
            };
            this.ended = true;
            this.conn = None;
            return Poll::Ready(Some(Err(failure)));
        }
    }
}
