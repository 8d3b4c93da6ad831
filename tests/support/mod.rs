//! What the integration tests share: a proxy on a free loopback port in front
//! of simulated providers, configs built a target at a time, a client that
//! records exactly what it received, and the compiled binary, started and
//! stopped for a test.

#![allow(dead_code, reason = "each test file uses a different part of the support module")]

pub mod backend;
mod binary;
mod client;
mod config_text;
pub mod http_proxy;
pub mod matrix;
mod mock;
pub mod postgres;
mod proxy;
pub mod raw;
pub mod records;
mod redis;
pub mod tls;
mod webhook;

use std::future::Future;
use std::time::{Duration, Instant};

#[allow(unused_imports, reason = "each test file imports a different part")]
pub use binary::Baton;
#[allow(unused_imports, reason = "each test file imports a different part")]
pub use client::{
    CHAT, Received, Server, admin_get, chat_body, first_chunk, leave_after_first_chunk, metrics, open_chat, post_chat,
    post_raw, post_with, read_response, sample_with,
};
#[allow(unused_imports, reason = "each test file imports a different part")]
pub use config_text::{ChatConfig, config_file, mocks_toml, provider_toml, route_toml};
#[allow(unused_imports, reason = "each test file imports a different part")]
pub use mock::{Spawned, closes_early_within};
#[allow(unused_imports, reason = "each test file imports a different part")]
pub use proxy::{Proxy, over_http};
#[allow(unused_imports, reason = "each test file imports a different part")]
pub use redis::RedisServer;
#[allow(unused_imports, reason = "each test file imports a different part")]
pub use webhook::{Delivered, WebhookReceiver};

/// A test server's background task, stopped when its server is dropped.
pub struct Task(tokio::task::JoinHandle<()>);

impl From<tokio::task::JoinHandle<()>> for Task {
    fn from(handle: tokio::task::JoinHandle<()>) -> Self {
        Task(handle)
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs an async test as `#[tokio::test]` does, on a current-thread runtime
/// of its own, and fails it instead of hanging it once `limit` has passed.
pub fn run<T>(limit: Duration, test: impl Future<Output = T>) -> T {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a test runtime");
    runtime.block_on(within(limit, test))
}

/// Fails the test instead of hanging it.
pub async fn within<T>(limit: Duration, test: impl Future<Output = T>) -> T {
    match tokio::time::timeout(limit, test).await {
        Ok(value) => value,
        Err(_) => panic!("test did not finish within {limit:?}: something hung"),
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
