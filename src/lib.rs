//! baton: a streaming-first SSE proxy for LLM APIs that fails over to the next
//! provider before the first token, so a provider's outage is not the client's.

pub mod config;
pub mod core;
pub mod event;
pub mod http;
pub mod mock;
pub mod providers;
pub mod resilience;

pub use http::{AppState, app};

/// Serves the proxy on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, state: AppState) -> std::io::Result<()> {
    axum::serve(listener, app(state)).await
}
