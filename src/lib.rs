//! baton: a streaming-first SSE proxy for LLM APIs that fails over to the next
//! provider before the first token, so a provider's outage is not the client's.

pub mod config;
pub mod core;
pub mod event;
pub mod http;
pub mod mock;
pub mod observe;
pub mod providers;
pub mod resilience;

pub use http::{AppState, app};

/// Serves the proxy on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, state: AppState) -> std::io::Result<()> {
    axum::serve(without_nagle(listener), app(state)).await
}

/// Serves until `shutdown` resolves, then stops accepting and waits for the
/// requests in flight (which a drain ends after its grace period).
pub async fn serve_until(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(without_nagle(listener), app(state)).with_graceful_shutdown(shutdown).await
}

/// Every token is a small write that must leave at once: with Nagle's
/// algorithm on, each waits for the client's delayed ACK (about 40 ms).
fn without_nagle(listener: tokio::net::TcpListener) -> impl axum::serve::Listener<Addr = std::net::SocketAddr> {
    use axum::serve::ListenerExt;
    listener.tap_io(|stream| {
        if let Err(err) = stream.set_nodelay(true) {
            tracing::warn!(error = %err, "cannot turn off Nagle's algorithm on a client connection");
        }
    })
}
