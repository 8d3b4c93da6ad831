//! baton: a streaming-first SSE proxy for LLM APIs that fails over to the next
//! provider before the first token, so a provider's outage is not the client's.

pub mod access;
pub mod admission;
pub mod clock;
pub mod config;
pub mod core;
pub mod dialect;
pub mod egress;
pub mod event;
pub mod h1;
pub mod http;
pub mod limits;
pub mod mock;
pub mod observe;
pub mod ops;
pub mod providers;
pub mod random_id;
pub mod request;
pub mod resilience;
pub mod secret;
pub mod state;
pub mod store;

pub use http::{AppBuilder, AppState, app};

/// Serves the proxy on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, state: AppState) -> std::io::Result<()> {
    let limits = state.connection_limits();
    http::server::serve(listener, app(state), limits, std::future::pending()).await
}

/// Serves until `shutdown` resolves, then stops accepting and waits for the
/// requests in flight (which a drain ends after its grace period).
pub async fn serve_until(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = state.connection_limits();
    http::server::serve(listener, app(state), limits, shutdown).await
}

/// Serves from `workers` threads, each a single-threaded runtime accepting
/// from `listener`, until `stop` turns true; then each stops accepting and
/// waits for its requests in flight.
pub fn serve_threads(
    listener: std::net::TcpListener,
    state: AppState,
    workers: usize,
    stop: tokio::sync::watch::Receiver<bool>,
) -> std::io::Result<()> {
    let limits = state.connection_limits();
    http::server::serve_threads(listener, app(state), limits, workers, stop)
}
