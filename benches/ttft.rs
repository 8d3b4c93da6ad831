//! Added time to first token: the same streamed request, direct to a healthy
//! simulated provider and through baton, alternated so both see the same
//! machine. Run with `cargo bench --bench ttft` (optionally `-- 500` requests).

#![allow(clippy::print_stdout, clippy::expect_used, reason = "a benchmark reports on stdout and stops on setup errors")]

mod support;

use std::time::Duration;

use baton::mock::{MockHandle, MockProvider};
use serde_json::json;

const WARMUP: usize = 30;
const MARKER: &str = "bench";

fn main() {
    let requests: usize = std::env::args().skip(1).find_map(|arg| arg.parse().ok()).unwrap_or(300);
    let servers = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let (_mock, direct_url, proxy_url) = servers.block_on(start_servers());
    let client_runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    client_runtime.block_on(async {
        let client = reqwest::Client::builder().tcp_nodelay(true).build().expect("client");
        let direct_body =
            json!({ "model": "gpt-sim", "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
        let proxy_body = json!({ "model": "chat", "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
        for _ in 0..WARMUP {
            first_token(&client, &direct_url, &direct_body).await;
            first_token(&client, &proxy_url, &proxy_body).await;
        }
        let mut direct = Vec::with_capacity(requests);
        let mut proxied = Vec::with_capacity(requests);
        for _ in 0..requests {
            direct.push(first_token(&client, &direct_url, &direct_body).await);
            proxied.push(first_token(&client, &proxy_url, &proxy_body).await);
        }
        let added: Vec<Duration> = proxied.iter().zip(&direct).map(|(p, d)| p.saturating_sub(*d)).collect();
        println!("time to first token over loopback, {requests} streamed requests each, alternated (ms)");
        println!("| path | p50 | p90 | p99 |");
        println!("|---|---|---|---|");
        report("direct to simulated provider", &direct);
        report("through baton", &proxied);
        report("added by baton (paired)", &added);
    });
    drop(servers);
}

/// The simulated provider (kept alive by its handle) and the two URLs to compare.
async fn start_servers() -> (MockHandle, String, String) {
    let mock = MockProvider::openai().marker(MARKER).tokens(20).spawn().await.expect("mock");
    let base_url = mock.base_url();
    let proxy_url = support::start_proxy(&format!(
        "[[providers]]\nname = \"sim\"\nkind = \"openai\"\nbase_url = \"{base_url}\"\n\n\
         [[routes]]\nmodel = \"chat\"\ntargets = [{{ provider = \"sim\", model = \"gpt-sim\" }}]\n"
    ))
    .await;
    (mock, format!("{base_url}/chat/completions"), proxy_url)
}

async fn first_token(client: &reqwest::Client, url: &str, body: &serde_json::Value) -> Duration {
    support::request(client, url, body, MARKER).await.first_token.expect("a first token")
}

fn report(name: &str, samples: &[Duration]) {
    let at = |q| format!("{:.3}", support::quantile(samples, q).as_secs_f64() * 1000.0);
    println!("| {name} | {} | {} | {} |", at(0.5), at(0.9), at(0.99));
}
