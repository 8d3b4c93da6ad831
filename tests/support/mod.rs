//! What the integration tests share: a proxy on a free loopback port in front
//! of simulated providers, and a client that records exactly what it received.

#![allow(dead_code, reason = "each test file uses a different part of the support module")]

pub mod raw;

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use baton::AppState;
use baton::config;
use baton::core::Engine;
use baton::mock::MockHandle;
use baton::providers::ProviderKind;
use futures_util::StreamExt;
use serde_json::{Value, json};

/// Fails the test instead of hanging it.
pub async fn within<T>(limit: Duration, test: impl Future<Output = T>) -> T {
    match tokio::time::timeout(limit, test).await {
        Ok(value) => value,
        Err(_) => panic!("test did not finish within {limit:?}: something hung"),
    }
}

/// A running proxy.
pub struct Proxy {
    pub addr: SocketAddr,
    /// The proxy's engine, to look at provider health.
    pub engine: Engine,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    /// Starts a proxy on `127.0.0.1:0` from config text.
    pub async fn start(config_text: &str) -> Proxy {
        let config = config::parse(config_text, "test.toml", &|_| None).expect("test config is valid");
        Self::serve(AppState::new(config).expect("state")).await
    }

    /// Starts a proxy from a config file it can reload.
    pub async fn start_from_file(path: &std::path::Path) -> Proxy {
        let config = config::load(path).expect("test config is valid");
        Self::serve(AppState::new(config).expect("state").with_config_path(path.to_owned())).await
    }

    async fn serve(state: AppState) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let engine = state.engine().clone();
        let task = tokio::spawn(async move {
            let _ = baton::serve(listener, state).await;
        });
        Proxy { addr, engine, task }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// Writes config `text` to a fresh temporary directory named after the test
/// process and `name`, so parallel tests never share a file.
pub fn config_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("baton-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("baton.toml");
    std::fs::write(&path, text).expect("write config");
    path
}

/// One `[[providers]]` entry for a provider at `base_url`.
pub fn provider_toml(name: &str, kind: ProviderKind, base_url: &str) -> String {
    format!("[[providers]]\nname = \"{name}\"\nkind = \"{kind}\"\nbase_url = \"{base_url}\"\n\n")
}

/// A config with one provider per `(name, kind, base_url)` and one route
/// "chat" trying them in order.
pub fn route_toml(providers: &[(&str, ProviderKind, String)], first_token_ms: u64, idle_ms: u64) -> String {
    let mut text = String::new();
    for (name, kind, base_url) in providers {
        text.push_str(&provider_toml(name, *kind, base_url));
    }
    let targets: Vec<String> =
        providers.iter().map(|(name, _, _)| format!("{{ provider = \"{name}\", model = \"{name}-model\" }}")).collect();
    text.push_str(&format!(
        "[[routes]]\nmodel = \"chat\"\nfirst_token_timeout_ms = {first_token_ms}\nidle_timeout_ms = {idle_ms}\ntargets = [{}]\n",
        targets.join(", ")
    ));
    text
}

/// A config naming the simulated providers in order, each as `{name}`.
pub fn mocks_toml(mocks: &[(&str, &MockHandle)], first_token_ms: u64, idle_ms: u64) -> String {
    let providers: Vec<(&str, ProviderKind, String)> =
        mocks.iter().map(|(name, mock)| (*name, mock.provider_kind(), mock.base_url())).collect();
    route_toml(&providers, first_token_ms, idle_ms)
}

/// A chat request body for route "chat".
pub fn chat_body(stream: bool) -> Value {
    json!({ "model": "chat", "stream": stream, "messages": [{ "role": "user", "content": "say something" }] })
}

/// Everything a client got back from one request.
#[derive(Debug)]
pub struct Received {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    /// The body exactly as received.
    pub raw: String,
    /// From sending the request to the first byte of the body.
    pub first_byte: Duration,
    /// From sending the request to the end of the body.
    pub total: Duration,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
    }

    /// The `data:` payloads of an SSE body, in order.
    pub fn data_events(&self) -> Vec<String> {
        self.raw
            .split("\n\n")
            .filter_map(|event| event.lines().find_map(|line| line.strip_prefix("data: ")).map(str::to_owned))
            .collect()
    }

    /// The text a client assembles from the chunks' `delta.content`.
    pub fn streamed_text(&self) -> String {
        self.chunks()
            .iter()
            .filter_map(|chunk| chunk.pointer("/choices/0/delta/content").and_then(Value::as_str).map(str::to_owned))
            .collect()
    }

    /// Every JSON chunk of an SSE body (not `[DONE]`).
    pub fn chunks(&self) -> Vec<Value> {
        self.data_events()
            .iter()
            .filter(|data| *data != "[DONE]")
            .filter_map(|data| serde_json::from_str(data).ok())
            .collect()
    }

    pub fn saw_done(&self) -> bool {
        self.data_events().iter().any(|data| data == "[DONE]")
    }

    /// The error event of a failed stream, if one came.
    pub fn error_event(&self) -> Option<Value> {
        self.chunks().into_iter().find(|chunk| chunk.get("error").is_some())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.raw).unwrap_or(Value::Null)
    }
}

/// Posts `body` to the proxy's chat endpoint and reads the whole answer.
pub async fn post_chat(proxy: &Proxy, body: &Value) -> Received {
    post_raw(proxy, "/v1/chat/completions", body.to_string().into_bytes(), "application/json").await
}

/// Posts raw bytes to `path` and reads the whole answer.
pub async fn post_raw(proxy: &Proxy, path: &str, body: Vec<u8>, content_type: &str) -> Received {
    let client = reqwest::Client::new();
    let started = Instant::now();
    let response = client
        .post(proxy.url(path))
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .expect("the proxy answers");
    read_response(response, started).await
}

pub async fn read_response(response: reqwest::Response, started: Instant) -> Received {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let mut body = response.bytes_stream();
    let mut raw = Vec::new();
    let mut first_byte = None;
    while let Some(chunk) = body.next().await {
        let Ok(chunk) = chunk else { break };
        first_byte.get_or_insert_with(|| started.elapsed());
        raw.extend_from_slice(&chunk);
    }
    let total = started.elapsed();
    Received {
        status,
        headers,
        raw: String::from_utf8(raw).expect("the proxy sends utf-8"),
        first_byte: first_byte.unwrap_or(total),
        total,
    }
}

/// Polls `check` every 20 ms until it holds or `limit` passes; whether it held.
pub async fn eventually<F, Fut>(limit: Duration, check: F) -> bool
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    loop {
        if check().await {
            return true;
        }
        if started.elapsed() >= limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
