//! The real router served in-process on `127.0.0.1:0`.

use std::net::SocketAddr;
use std::sync::Arc;

use baton::config;
use baton::core::Engine;
use baton::providers::driver::HttpOpener;
use baton::{AppBuilder, AppState};

/// The app for `config`, reaching its providers (the simulated ones) over
/// HTTP, as `baton serve` wires it.
pub fn over_http(config: config::Config) -> AppBuilder {
    AppBuilder::new(config, Arc::new(HttpOpener::new().expect("an HTTP client")))
}

/// A running proxy; dropping it stops serving.
pub struct Proxy {
    pub addr: SocketAddr,
    /// The proxy's engine, to look at provider health.
    pub engine: Engine,
    task: super::Task,
}

impl Proxy {
    /// Starts a proxy on `127.0.0.1:0` from config text.
    pub async fn start(config_text: &str) -> Proxy {
        let config = config::parse(config_text, "test.toml", &|_| None).expect("test config is valid");
        Self::serve(over_http(config).build()).await
    }

    /// Starts a proxy from a config file it can reload.
    pub async fn start_from_file(path: &std::path::Path) -> Proxy {
        let config = config::load(path).expect("test config is valid");
        Self::serve(over_http(config).config_path(path.to_owned()).build()).await
    }

    /// Starts a proxy keeping the request log its config's `[store]` names.
    pub async fn start_recorded(config: config::Config) -> (Proxy, AppState) {
        let state = over_http(config).build().with_records().await;
        (Self::serve(state.clone()).await, state)
    }

    /// Starts a proxy from config text, keeping the request log its `[store]` names.
    pub async fn start_recorded_text(config_text: &str) -> (Proxy, AppState) {
        Self::start_recorded(config::parse(config_text, "test.toml", &|_| None).expect("valid config")).await
    }

    /// Serves `state` (built by the test) on `127.0.0.1:0`.
    pub async fn serve(state: AppState) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let engine = state.engine().clone();
        let task = tokio::spawn(async move {
            let _ = baton::serve(listener, state).await;
        });
        Proxy { addr, engine, task: task.into() }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Sends `wire` as it is on a new connection and reads until the proxy
    /// closes it: for the bytes no HTTP client library would send.
    pub async fn exchange(&self, wire: &[u8]) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut socket = tokio::net::TcpStream::connect(self.addr).await.expect("connect");
        socket.write_all(wire).await.expect("write");
        let mut answer = Vec::new();
        let _ = socket.read_to_end(&mut answer).await;
        String::from_utf8_lossy(&answer).into_owned()
    }
}
