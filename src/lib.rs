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
fn without_nagle(
    listener: tokio::net::TcpListener,
) -> axum::serve::TapIo<tokio::net::TcpListener, fn(&mut tokio::net::TcpStream)> {
    use axum::serve::ListenerExt;
    listener.tap_io(|stream| {
        if let Err(err) = stream.set_nodelay(true) {
            tracing::warn!(error = %err, "cannot turn off Nagle's algorithm on a client connection");
        }
    })
}

#[cfg(test)]
mod tests {
    use axum::serve::Listener;

    use super::*;

    #[tokio::test]
    async fn client_connections_have_nagle_off() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mut listener = without_nagle(listener);
        let _client = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (accepted, _) = listener.accept().await;
        assert!(accepted.nodelay().expect("readable option"), "the accepted connection has TCP_NODELAY");
    }
}
