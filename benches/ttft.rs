//! Added time to first token: the same streamed request, direct to a healthy
//! simulated provider and through baton, alternated so both see the same
//! machine. Run with `cargo bench --bench ttft` (optionally `-- 500` requests).

#![allow(clippy::print_stdout, clippy::expect_used, reason = "a benchmark reports on stdout and stops on setup errors")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use baton::AppState;
use baton::config;
use baton::core::Engine;
use baton::mock::{MockHandle, MockProvider};
use futures_util::StreamExt;
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
        println!("time to first token over loopback, {requests} streamed requests each, alternated");
        println!("{:<28} {:>10} {:>10} {:>10}", "path", "p50", "p90", "p99");
        report("direct to simulated provider", &mut direct);
        report("through baton", &mut proxied);
        report("added by baton (paired)", &mut added.clone());
    });
    drop(servers);
}

/// The simulated provider (kept alive by its handle) and the two URLs to compare.
async fn start_servers() -> (MockHandle, String, String) {
    let mock = MockProvider::openai().marker(MARKER).tokens(20).spawn().await.expect("mock");
    let base_url = mock.base_url();
    let text = format!(
        "[[providers]]\nname = \"sim\"\nkind = \"openai\"\nbase_url = \"{base_url}\"\n\n\
         [[routes]]\nmodel = \"chat\"\ntargets = [{{ provider = \"sim\", model = \"gpt-sim\" }}]\n"
    );
    let config = config::parse(&text, "bench.toml", &|_| None).expect("config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let engine = Engine::new(&config).expect("engine");
    let state = AppState { config: Arc::new(config), engine };
    tokio::spawn(baton::serve(listener, state));
    (mock, format!("{base_url}/chat/completions"), format!("http://{addr}/v1/chat/completions"))
}

/// From sending the request to holding the first token's text.
async fn first_token(client: &reqwest::Client, url: &str, body: &serde_json::Value) -> Duration {
    let started = Instant::now();
    let response = client.post(url).json(body).send().await.expect("answer");
    let mut stream = response.bytes_stream();
    let mut seen = Vec::new();
    let mut ttft = None;
    while let Some(chunk) = stream.next().await {
        seen.extend_from_slice(&chunk.expect("chunk"));
        if ttft.is_none() && seen.windows(MARKER.len()).any(|w| w == MARKER.as_bytes()) {
            ttft = Some(started.elapsed());
        }
    }
    ttft.expect("a first token")
}

fn report(name: &str, samples: &mut [Duration]) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1000.0);
    println!("{name:<28} {:>10} {:>10} {:>10}", ms(at(0.5)), ms(at(0.9)), ms(at(0.99)));
}
