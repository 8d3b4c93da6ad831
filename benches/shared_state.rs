//! What sharing state through Redis costs a request: the same streamed
//! request through a baton on the memory backend and one on the Redis
//! backend (a `redis-server` of the benchmark's own, on loopback),
//! alternated, with a key whose `rpm` and `tpm` each request takes from;
//! and how many Redis commands each request costs. Run with
//! `cargo bench --bench shared_state` (optionally `-- 2000` requests).

#![allow(
    clippy::print_stdout,
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a benchmark reports on stdout and stops on setup errors"
)]

mod support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use baton::mock::{MockHandle, MockProvider};
use serde_json::json;

const WARMUP: usize = 50;
const MARKER: &str = "bench";
const SECRET: &str = "sk-bench-0123456789abcdef";

fn main() {
    let requests: usize = std::env::args().skip(1).find_map(|arg| arg.parse().ok()).unwrap_or(1000);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut redis = redis_server(port);
    let servers = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let (_mock, memory_url, redis_url) = servers.block_on(start_servers(port));
    let client_runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    client_runtime.block_on(async {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("authorization", format!("Bearer {SECRET}").parse().unwrap());
        let client = reqwest::Client::builder().tcp_nodelay(true).default_headers(headers).build().expect("client");
        let body = json!({ "model": "chat", "stream": true, "max_tokens": 50, "messages": [{ "role": "user", "content": "hi" }] });
        for _ in 0..WARMUP {
            first_token(&client, &memory_url, &body).await;
            first_token(&client, &redis_url, &body).await;
        }
        let (commands_before, started) = (commands(port).await, Instant::now());
        let mut memory = Vec::with_capacity(requests);
        let mut shared = Vec::with_capacity(requests);
        for _ in 0..requests {
            memory.push(first_token(&client, &memory_url, &body).await);
            shared.push(first_token(&client, &redis_url, &body).await);
        }
        let elapsed = started.elapsed();
        // Let the last settlements land before counting.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let commands = commands(port).await - commands_before;
        let syncs = (elapsed + Duration::from_millis(200)).as_millis() as f64 / baton::state::BREAKER_SYNC_EVERY.as_millis() as f64;
        let added: Vec<Duration> = shared.iter().zip(&memory).map(|(r, m)| r.saturating_sub(*m)).collect();
        println!("time to first token over loopback, {requests} streamed requests each, a key with rpm and tpm (ms)");
        println!("| backend | p50 | p90 | p99 |");
        println!("|---|---|---|---|");
        report("memory", &memory);
        report("redis", &shared);
        report("added by redis (paired)", &added);
        println!();
        println!(
            "Redis round trips (script calls): {commands} over {:.1} s, with ~{syncs:.0} sync periods (one per {} ms): {:.2} per request",
            elapsed.as_secs_f64(),
            baton::state::BREAKER_SYNC_EVERY.as_millis(),
            (commands as f64 - syncs) / requests as f64
        );
    });
    drop(servers);
    let _ = redis.kill();
    let _ = redis.wait();
}

fn redis_server(port: u16) -> Child {
    let child = Command::new("/usr/bin/redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server (apt-get install redis-server)");
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < Duration::from_secs(10), "redis-server listens");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// The round trips baton has made to Redis since it started: its scripts'
/// calls (`EVALSHA`, and `EVAL` where a script was not loaded yet). The
/// commands a script runs inside Redis are counted apart, and are not
/// round trips.
async fn commands(port: u16) -> u64 {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(&mut connection).await.unwrap();
    let calls = |name: &str| {
        let line = info.lines().find_map(|line| line.strip_prefix(&format!("cmdstat_{name}:calls=")));
        line.and_then(|rest| rest.split(',').next()).map_or(0, |calls| calls.parse::<u64>().unwrap())
    };
    calls("evalsha") + calls("eval")
}

/// The simulated provider (kept alive by its handle) and the two proxies' URLs.
async fn start_servers(port: u16) -> (MockHandle, String, String) {
    let mock = MockProvider::openai().marker(MARKER).tokens(20).spawn().await.expect("mock");
    let base_url = mock.base_url();
    let config = format!(
        "[[providers]]\nname = \"sim\"\nkind = \"openai\"\nbase_url = \"{base_url}\"\n\n\
         [[routes]]\nmodel = \"chat\"\ntargets = [{{ provider = \"sim\", model = \"gpt-sim\" }}]\n\n\
         [[keys]]\nname = \"bench\"\nkey = \"{SECRET}\"\nrpm = 100000000\ntpm = 1000000000\n"
    );
    let memory = support::start_proxy(&config).await;
    let state =
        format!("[state]\nbackend = \"redis\"\nredis_url = \"redis://127.0.0.1:{port}\"\nkey_prefix = \"bench:\"\n");
    let shared = support::start_proxy(&format!("{state}\n{config}")).await;
    // The Redis backend starts down, until its first ping (within one sync period).
    tokio::time::sleep(baton::state::BREAKER_SYNC_EVERY * 3).await;
    (mock, memory, shared)
}

async fn first_token(client: &reqwest::Client, url: &str, body: &serde_json::Value) -> Duration {
    let outcome = support::request(client, url, body, MARKER).await;
    assert_eq!(outcome.status, 200, "{}", outcome.body);
    outcome.first_token.expect("a first token")
}

fn report(name: &str, samples: &[Duration]) {
    let at = |q| format!("{:.3}", support::quantile(samples, q).as_secs_f64() * 1000.0);
    println!("| {name} | {} | {} | {} |", at(0.5), at(0.9), at(0.99));
}
