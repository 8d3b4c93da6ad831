//! What the benchmarks share: an in-process proxy and a client that times
//! the first token.

#![allow(dead_code, reason = "each benchmark uses a different part")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use baton::AppBuilder;
use baton::config;
use baton::providers::driver::HttpOpener;
use futures_util::StreamExt;

/// Starts the proxy from config text on a free loopback port; returns its chat URL.
pub async fn start_proxy(config_text: &str) -> String {
    let config = config::parse(config_text, "bench.toml", &|_| None).expect("config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let state = AppBuilder::new(config, Arc::new(HttpOpener::new().expect("an HTTP client"))).build();
    tokio::spawn(baton::serve(listener, state));
    format!("http://{addr}/v1/chat/completions")
}

/// One streamed request: its status, the time until `marker` first showed in
/// the body, the whole body (or, with status 0, why there is none), and the
/// `x-baton-provider` header.
pub struct Outcome {
    pub status: u16,
    pub first_token: Option<Duration>,
    pub body: String,
    pub provider: String,
}

pub async fn request(client: &reqwest::Client, url: &str, body: &serde_json::Value, marker: &str) -> Outcome {
    let started = Instant::now();
    let response = match client.post(url).json(body).send().await {
        Ok(response) => response,
        Err(err) => {
            let mut why = err.to_string();
            let mut source = std::error::Error::source(&err);
            while let Some(cause) = source {
                why = format!("{why}: {cause}");
                source = cause.source();
            }
            return Outcome { status: 0, first_token: None, body: why, provider: String::new() };
        }
    };
    let status = response.status().as_u16();
    let provider = response.headers().get("x-baton-provider").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let mut stream = response.bytes_stream();
    let mut seen = Vec::new();
    let mut first_token = None;
    while let Some(Ok(chunk)) = stream.next().await {
        seen.extend_from_slice(&chunk);
        if first_token.is_none() && seen.windows(marker.len()).any(|w| w == marker.as_bytes()) {
            first_token = Some(started.elapsed());
        }
    }
    Outcome { status, first_token, body: String::from_utf8_lossy(&seen).into_owned(), provider }
}

/// The value at quantile `q` of `samples`.
pub fn quantile(samples: &[Duration], q: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let index = ((sorted.len().saturating_sub(1)) as f64 * q).round() as usize;
    sorted.get(index).copied().unwrap_or_default()
}

pub fn ms(duration: Duration) -> String {
    format!("{:.1}", duration.as_secs_f64() * 1000.0)
}
