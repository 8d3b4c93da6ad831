//! `baton serve`: the proxy on its listener, from a thread per core, until
//! a signal stops it, reloading its config on SIGHUP.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use baton::config::{self, Config};
use baton::providers::driver::HttpOpener;
use baton::{AppBuilder, AppState};
use tokio::signal::unix::{SignalKind, signal};

use super::AnyError;

/// How long stopping waits for the last spans to reach the collector.
const TRACES_FLUSH_LIMIT: Duration = Duration::from_secs(5);
/// How long stopping waits for the last request rows to reach the store.
const RECORDS_DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// Serves the config at `path`, on `listen` when given instead of its own.
pub(crate) async fn run(path: &std::path::Path, listen: Option<SocketAddr>) -> Result<(), AnyError> {
    let (mut config, warnings) = config::load_with_warnings(path)?;
    for warning in &warnings {
        tracing::warn!(warning = %warning, "config");
    }
    if let Some(listen) = listen {
        config.listen_on(listen);
    }
    if let Some(why) = config.access.open_relay(config.listen) {
        return Err(why.into());
    }
    let listener = bind(config.listen)?;
    serve_on(listener, config, Some(path.to_owned())).await
}

/// Binds `addr`, saying which address failed.
pub(crate) fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, AnyError> {
    Ok(baton::http::server::bind(addr).map_err(|err| format!("cannot listen on {addr}: {err}"))?)
}

/// Serves the proxy on a bound listener, from a thread per core, until
/// SIGTERM or SIGINT, reloading the config file (if there is one) on SIGHUP.
pub(crate) async fn serve_on(
    listener: tokio::net::TcpListener,
    config: Config,
    path: Option<PathBuf>,
) -> Result<(), AnyError> {
    let workers = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    tracing::info!(listen = %listener.local_addr()?, routes = config.routes.len(), workers, "baton is serving");
    let grace = config.shutdown_grace;
    let reloadable = path.is_some();
    let mut app = AppBuilder::new(config, Arc::new(HttpOpener::new()?));
    if let Some(path) = path {
        app = app.config_path(path);
    }
    let state = app.build().with_traces()?.with_records().await.with_drills();
    if reloadable {
        tokio::spawn(reload_on_hangup(state.clone()));
    }
    let draining = state.clone();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let listener = listener.into_std()?;
    let mut serving = tokio::task::spawn_blocking(move || baton::serve_threads(listener, state, workers, stopped));
    tokio::select! {
        served = &mut serving => {
            flush(&draining).await;
            return Ok(served??);
        }
        () = stop_requested() => {}
    }
    tracing::info!(
        grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
        "shutting down: no new connections; streams in flight may finish"
    );
    draining.drain(grace);
    let _ = stop.send(true);
    serving.await??;
    flush(&draining).await;
    tracing::info!("baton stopped");
    Ok(())
}

/// Writes the request rows and exports the spans still waiting before the process ends.
async fn flush(state: &AppState) {
    if let Some(records) = state.records()
        && !records.drain(RECORDS_DRAIN_LIMIT).await
    {
        tracing::warn!("request rows could not all be written before stopping");
    }
    if !state.flush_traces(TRACES_FLUSH_LIMIT).await {
        tracing::warn!("traces could not all be exported before stopping");
    }
}

/// Resolves at the first SIGTERM or SIGINT.
async fn stop_requested() {
    let mut terminate = match signal(SignalKind::terminate()) {
        Ok(terminate) => terminate,
        Err(err) => {
            tracing::warn!(error = %err, "cannot watch SIGTERM; only Ctrl-C stops baton");
            return tokio::signal::ctrl_c().await.unwrap_or_default();
        }
    };
    tokio::select! {
        _ = terminate.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// Reloads the config on every SIGHUP; a bad config is logged and ignored.
async fn reload_on_hangup(state: AppState) {
    let Ok(mut hangups) = signal(SignalKind::hangup()) else { return };
    while hangups.recv().await.is_some() {
        if let Err(err) = state.reload() {
            tracing::error!(error = %err, "config reload refused; the running config stays");
        }
    }
}
