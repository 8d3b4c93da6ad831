//! The load benchmark: simulated providers on loopback, and the same
//! streamed requests through each path side by side — direct (the floor),
//! nginx as a plain SSE pass-through, LiteLLM's proxy, and baton (healthy, and
//! with a primary failing 30 % of requests). Three measurements, every figure
//! of a table from one run:
//!
//! - latency probes: pairs of requests (direct, then through the gateway)
//!   timed one after another while 0, 100 or 1,000 paced streams are held
//!   open through the gateway: the time to first token it adds at that load;
//! - throughput: N concurrent workers (1 to 9,000) sending 200-token streams
//!   as fast as they are answered: streams per second, success, and gateway
//!   CPU per 1,000 streams (the load generator's own CPU beside it);
//! - memory: resident memory per stream held open, on fresh processes.
//!
//! Run with:
//!
//! ```sh
//! cargo build --release && cargo bench --bench load
//! ```
//!
//! Arguments pick the concurrency levels (`-- 100 1000`); `BATON_BENCH_PARTS`
//! picks the measurements (`memory,latency,throughput`, every one by
//! default, and `paced`, only when named: see `load/paced.rs`); `BATON_BENCH_STORE=none`
//! runs baton without its request log; `BATON_BENCH_GATEWAY` names
//! another `baton` binary to run as the gateway, so two builds are compared
//! back to back against the same providers and load generator;
//! `BATON_BENCH_PIN=1` runs the gateway under test on a core of its own
//! (`load/pin.rs`); `BATON_BENCH_BATON_FIRST=1` runs baton before nginx.
//!
//! Every process is started here: `baton mock` for the providers, `baton serve`,
//! Debian's `nginx` (installed with apt when missing) and `litellm[proxy]`
//! (installed into `target/bench-venv` when missing).

#![allow(
    clippy::print_stdout,
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a benchmark reports on stdout and stops on setup errors"
)]

#[path = "load/gateways.rs"]
mod gateways;
#[path = "load/measure.rs"]
mod measure;
#[path = "load/paced.rs"]
mod paced;
#[path = "load/pin.rs"]
mod pin;
#[path = "load/process.rs"]
mod process;
mod support;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use gateways::{Gateway, baton_config, bench_key, litellm, mock, nginx, start_baton};
use measure::{Drive, drive, memory_per_stream, probe};
use process::{memory, open_fds, settle, with_children};

const TOKENS: usize = 200;
/// How long each worker keeps sending requests, per concurrency level.
const DRIVE: Duration = Duration::from_secs(4);
/// The gap between tokens of the long answers held open (memory, latency probes).
const SLOW_GAP_MS: u64 = 50;
/// Their length: at 20 tokens a second, a minute, longer than any run holds them.
const SLOW_TOKENS: usize = 1200;
const MARKER: &str = "tok";
/// Requests sent before measuring each run.
const WARMUP: usize = 5;
/// Streams held open before memory is measured, so what the first
/// requests cost once is not counted per stream.
const WARM_STREAMS: usize = 20;
/// Sequential requests timed for each latency probe.
const PROBES: usize = 200;
/// The most streams held open under a latency probe: past it the held
/// streams' own tokens saturate this machine and the probe measures queueing.
const PROBE_MAX_BACKGROUND: usize = 1000;
/// How long one latency probe may take; a gateway that queues stops early.
const PROBE_DEADLINE: Duration = Duration::from_secs(15);
/// How long held streams may take to open.
const OPEN_DEADLINE: Duration = Duration::from_secs(20);
/// A streamed request not finished by then counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// LiteLLM is driven up to this many streams: at 1,000 most of its requests
/// take longer than [`REQUEST_TIMEOUT`], and its runs would outlast the bench.
const LITELLM_MAX_CONCURRENCY: usize = 100;
/// The most streams held open through LiteLLM: it queues them for seconds,
/// and a probe behind that queue measures the queue.
const LITELLM_MAX_HELD: usize = 100;
/// Descriptors a run may leave open (a pool's few idle connections).
const SETTLED_FDS: usize = 64;
/// How long a gateway may take to go idle after a run before the next starts.
const SETTLE_LIMIT: Duration = Duration::from_secs(60);
/// The master key LiteLLM's proxy requires; it only ever listens on loopback here.
const LITELLM_KEY: &str = "sk-baton-load-benchmark-0123456789abcdef";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn baton_bin() -> PathBuf {
    root().join("target/release/baton")
}

/// The binary `baton serve` runs as the gateway: `BATON_BENCH_GATEWAY`, when
/// set, so another build (an earlier commit's) is measured against the same
/// simulated providers and load generator; this build's otherwise.
fn gateway_bin() -> PathBuf {
    std::env::var_os("BATON_BENCH_GATEWAY").map_or_else(baton_bin, PathBuf::from)
}

/// Whether `part` (`memory`, `latency` or `throughput`) is measured:
/// `BATON_BENCH_PARTS`, a comma-separated list, picks some; every part by default.
fn measures(part: &str) -> bool {
    std::env::var("BATON_BENCH_PARTS").map_or(true, |_| parts_named(part))
}

/// Whether `BATON_BENCH_PARTS` names `part`: the paced workload runs only then.
fn parts_named(part: &str) -> bool {
    std::env::var("BATON_BENCH_PARTS").is_ok_and(|parts| parts.split(',').any(|p| p.trim() == part))
}

fn scratch() -> PathBuf {
    let dir = root().join("target/bench-load");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn quantile_ms(samples: &[Duration], q: f64) -> f64 {
    support::quantile(samples, q).as_secs_f64() * 1000.0
}

/// Says on stderr what starts now, when since the bench started, and how
/// many descriptors the bench has open then.
fn progress(started: Instant, what: std::fmt::Arguments<'_>) {
    eprintln!("[{:>5.0} s, {:>5} fds] {what}", started.elapsed().as_secs_f64(), open_fds());
}

fn main() {
    let started = Instant::now();
    let levels: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let levels = if levels.is_empty() { vec![1, 100, 1000, 9000] } else { levels };
    pin::pin_self();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let (_fast_mock, fast) = mock(TOKENS, &["--first-token-ms", "0", "--gap-ms", "0"]).await;
        let (_slow_mock, slow) = mock(SLOW_TOKENS, &["--first-token-ms", "0", "--gap-ms", &SLOW_GAP_MS.to_string()]).await;
        let (_flaky_mock, flaky) = mock(TOKENS, &[
            "--first-token-ms", "0", "--gap-ms", "0", "--seed", "5", "--fault-rate", "0.3",
            "--fault", "http_5xx,http_429,close_before_token,malformed,error_event,refuse,stall_first_token",
        ])
        .await;
        let shape = paced::Shape::from_env();
        let (_paced_mock, paced) = mock(shape.tokens, &shape.mock_args().iter().map(String::as_str).collect::<Vec<_>>()).await;
        let front = if parts_named("paced") { paced::tls_front(paced).await } else { None };
        if parts_named("paced") && front.is_none() {
            println!("the TLS front (openssl, nginx) could not be started; the paced rows over TLS are missing");
        }
        let config = baton_config(fast, slow, flaky, paced, front.as_ref());
        let (baton, baton_addr) = start_baton(&["serve", "--config", config.to_str().expect("path")]).await;
        let baton_url = format!("http://{baton_addr}/v1/chat/completions");
        let mut gateways = vec![Gateway {
            name: "direct",
            fast: (format!("http://{fast}/v1/chat/completions"), "m"),
            slow: (format!("http://{slow}/v1/chat/completions"), "m"),
            paced: (format!("http://{paced}/v1/chat/completions"), "m"),
            paced_tls: front.as_ref().map(|front| (format!("https://{}/v1/chat/completions", front.addr), "m")),
            process: None,
            token: None,
        }];
        match nginx(fast, slow, paced, front.as_ref()).await {
            Some((process, addr)) => gateways.push(Gateway {
                name: "nginx",
                fast: (format!("http://{addr}/fast/v1/chat/completions"), "m"),
                slow: (format!("http://{addr}/slow/v1/chat/completions"), "m"),
                paced: (format!("http://{addr}/paced/v1/chat/completions"), "m"),
                paced_tls: front.as_ref().map(|_| (format!("http://{addr}/paced-tls/v1/chat/completions"), "m")),
                process: Some(process),
                token: None,
            }),
            None => println!("nginx could not be started; its rows are missing"),
        }
        let baton_pid = baton.id();
        gateways.push(Gateway {
            name: "baton",
            fast: (baton_url.clone(), "fast"),
            slow: (baton_url.clone(), "slow"),
            paced: (baton_url.clone(), "paced"),
            paced_tls: front.as_ref().map(|_| (baton_url.clone(), "paced-tls")),
            process: Some(baton),
            token: bench_key(),
        });
        // nginx runs before baton at each level, unless `BATON_BENCH_BATON_FIRST=1`
        // asks for the other order, to see what running after the other costs.
        if std::env::var("BATON_BENCH_BATON_FIRST").as_deref() == Ok("1") {
            let at = |name: &str| gateways.iter().position(|g| g.name == name);
            if let (Some(nginx), Some(baton)) = (at("nginx"), at("baton")) {
                gateways.swap(nginx, baton);
            }
        }
        // LiteLLM last: it works off its backlog long after a run ends.
        if std::env::var("BATON_BENCH_LITELLM").as_deref() != Ok("0") {
            match litellm(fast, slow, flaky).await {
                Some((process, addr)) => gateways.push(Gateway {
                    name: "litellm",
                    fast: (format!("http://{addr}/v1/chat/completions"), "fast"),
                    slow: (format!("http://{addr}/v1/chat/completions"), "slow"),
                    paced: (format!("http://{addr}/v1/chat/completions"), "paced"),
                    paced_tls: None,
                    process: Some(process),
                    token: Some(LITELLM_KEY.to_owned()),
                }),
                None => println!("LiteLLM could not be installed or started; its rows are missing"),
            }
        }

        // A fresh client (and connection pool) per run: idle connections left
        // from one path must not eat the file descriptors of the next.
        let client_for = |gateway: &Gateway| {
            let mut headers = reqwest::header::HeaderMap::new();
            if let Some(token) = &gateway.token {
                headers.insert("authorization", format!("Bearer {token}").parse().expect("header"));
            }
            reqwest::Client::builder()
                .tcp_nodelay(true)
                .default_headers(headers)
                .build()
                .expect("client")
        };
        // The paced workload first, when asked for (`BATON_BENCH_PARTS=paced`),
        // on fresh processes, its levels lowest first: `-- 10 100 1000`.
        let paced_report = if parts_named("paced") {
            progress(started, format_args!("paced workload"));
            let plain = paced::run(shape, &gateways, &levels, None).await;
            let tls = match &front {
                Some(front) => paced::run(shape, &gateways, &levels, Some(front)).await,
                None => String::new(),
            };
            format!("{plain}\n{tls}")
        } else {
            String::new()
        };
        // Memory first, on fresh processes: after heavy load an allocator keeps
        // what it took, and a difference against that says nothing.
        let mut memory_report = String::new();
        let _ = writeln!(memory_report, "| path | streams held open | gateway RSS per stream (KiB) | gateway RSS with them open (MiB) |");
        let _ = writeln!(memory_report, "|---|---|---|---|");
        for gateway in gateways.iter().filter(|g| g.process.is_some() && measures("memory")) {
            let pids = gateway.pids();
            let most = *levels.iter().max().unwrap_or(&1000);
            let count = if gateway.name == "litellm" { most.min(LITELLM_MAX_HELD) } else { most };
            let (url, model) = &gateway.slow;
            progress(started, format_args!("memory: {} with {count} streams held", gateway.name));
            let fds = open_fds();
            let per = memory_per_stream(&client_for(gateway), url, model, count, &pids).await;
            settle(&pids, fds).await;
            let per = per.map_or("not all opened".to_owned(), |bytes| format!("{:.1}", bytes / 1024.0));
            let _ = writeln!(memory_report, "| {} | {count} | {per} | {:.1} |", gateway.name, memory(&pids, "VmHWM:") as f64 / 1048576.0);
        }
        let mut latency = String::new();
        let _ = writeln!(latency, "| path | streams held open | pairs answered | direct TTFT p50 / p99 (ms) | TTFT p50 / p99 (ms) | added p50 / p99 (ms) |");
        let _ = writeln!(latency, "|---|---|---|---|---|---|");
        let backgrounds: Vec<usize> =
            std::iter::once(0).chain(levels.iter().copied().filter(|&n| n > 1 && n <= PROBE_MAX_BACKGROUND)).collect();
        for gateway in gateways.iter().filter(|g| g.process.is_some() && measures("latency")) {
            for &background in &backgrounds {
                if gateway.name == "litellm" && background > LITELLM_MAX_HELD {
                    continue;
                }
                progress(started, format_args!("latency probes: {} with {background} streams held", gateway.name));
                let fds = open_fds();
                let run = probe(&client_for(gateway), &client_for(&gateways[0]), gateway, &gateways[0], background).await;
                settle(&gateway.pids(), fds).await;
                let held = if run.held == background { background.to_string() } else { format!("{} of {background}", run.held) };
                let mut added = run.added.clone();
                added.sort_by(f64::total_cmp);
                let at = |q: f64| added.get(((added.len().saturating_sub(1)) as f64 * q).round() as usize).copied().unwrap_or(f64::NAN);
                let _ = writeln!(
                    latency,
                    "| {} | {held} | {} of {PROBES} | {:.3} / {:.3} | {:.3} / {:.3} | {:.3} / {:.3} |",
                    gateway.name,
                    run.added.len(),
                    quantile_ms(&run.direct, 0.5),
                    quantile_ms(&run.direct, 0.99),
                    quantile_ms(&run.through, 0.5),
                    quantile_ms(&run.through, 0.99),
                    at(0.5),
                    at(0.99)
                );
            }
        }
        let mut report = String::new();
        let _ = writeln!(report, "| path | concurrent streams | TTFT p50 (ms) | TTFT p99 (ms) | streams/s | success | gateway CPU s per 1,000 streams | load generator CPU s |");
        let _ = writeln!(report, "|---|---|---|---|---|---|---|---|");
        for &n in levels.iter().filter(|_| measures("throughput")) {
            let mut rows: Vec<(&str, Drive)> = Vec::new();
            for gateway in &gateways {
                if gateway.name == "litellm" && n > LITELLM_MAX_CONCURRENCY {
                    continue;
                }
                let pids = gateway.pids();
                let (url, model) = &gateway.fast;
                progress(started, format_args!("throughput: {} at {n} streams", gateway.name));
                let fds = open_fds();
                rows.push((gateway.name, drive(&client_for(gateway), url, model, n, &pids).await));
                settle(&pids, fds).await;
                if gateway.name == "baton" {
                    let pids = baton_pid.map(with_children).unwrap_or_default();
                    rows.push(("baton, primary failing 30 %", drive(&client_for(gateway), &baton_url, "flaky", n, &pids).await));
                    settle(&pids, fds).await;
                }
                if gateway.name == "litellm" {
                    let (url, _) = &gateway.fast;
                    rows.push(("litellm, primary failing 30 %", drive(&client_for(gateway), url, "flaky", n, &pids).await));
                    settle(&pids, fds).await;
                }
            }
            for (name, run) in &rows {
                for (why, count) in &run.failures {
                    progress(started, format_args!("{name} at {n}: {count} failed: {why}"));
                }
                let (p50, p99) = (quantile_ms(&run.ttft, 0.5), quantile_ms(&run.ttft, 0.99));
                let cpu = if *name == "direct" { "—".to_owned() } else { format!("{:.2}", run.cpu / run.ok.max(1) as f64 * 1000.0) };
                let _ = writeln!(
                    report,
                    "| {name} | {n} | {p50:.2} | {p99:.2} | {:.0} | {:.1} % | {cpu} | {:.1} |",
                    run.ok as f64 / run.elapsed.as_secs_f64(),
                    100.0 * run.ok as f64 / (run.ok + run.failures.values().sum::<usize>()).max(1) as f64,
                    run.client_cpu
                );
            }
        }
        progress(started, format_args!("done"));
        println!("{paced_report}\n{latency}\n{report}\n{memory_report}");
    });
}
