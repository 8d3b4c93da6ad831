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
//! back to back against the same providers and load generator.
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

#[path = "load/paced.rs"]
mod paced;
mod support;

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

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

/// Starts `baton args…` and returns it with the address its log reports.
async fn start_baton(args: &[&str]) -> (Child, SocketAddr) {
    let binary = if args[0] == "serve" { gateway_bin() } else { baton_bin() };
    let mut child = Command::new(binary)
        .args(args)
        .env("RUST_LOG", "warn,baton=info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the release binary exists: run `cargo build --release` first");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let addr: SocketAddr = loop {
        let line = lines.next_line().await.expect("log").expect("baton exited early");
        if let Some(rest) = line.split("listen=").nth(1).filter(|_| line.contains("is serving")) {
            break rest.split_whitespace().next().expect("addr").parse().expect("addr");
        }
    };
    let log = scratch().join(format!("{}-{}.log", args[0], addr.port()));
    tokio::spawn(async move {
        let Ok(mut file) = tokio::fs::File::create(&log).await else { return };
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = tokio::io::AsyncWriteExt::write_all(&mut file, format!("{line}\n").as_bytes()).await;
        }
    });
    (child, addr)
}

async fn mock(tokens: usize, extra: &[&str]) -> (Child, SocketAddr) {
    let tokens = tokens.to_string();
    let mut args = vec!["mock", "--kind", "openai", "--listen", "127.0.0.1:0", "--marker", MARKER, "--tokens", &tokens];
    args.extend_from_slice(extra);
    start_baton(&args).await
}

/// CPU seconds (user + system) of `pids`, from /proc.
fn cpu_seconds(pids: &[u32]) -> f64 {
    let ticks = 100.0;
    pids.iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
        .map(|stat| {
            let fields: Vec<&str> =
                stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("").split_whitespace().collect();
            let num = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
            (num(11) + num(12)) / ticks
        })
        .sum()
}

/// Resident memory of `pids` in bytes: now (`VmRSS`) or at its peak (`VmHWM`).
fn memory(pids: &[u32], field: &str) -> u64 {
    pids.iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .filter_map(|status| {
            status
                .lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .sum::<u64>()
        * 1024
}

/// `pid` and every process whose parent it is (nginx's workers).
fn with_children(pid: u32) -> Vec<u32> {
    let mut pids = vec![pid];
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            let parent = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            if parent == Some(pid) {
                pids.push(child);
            }
        }
    }
    pids
}

/// One way to reach the providers.
struct Gateway {
    name: &'static str,
    /// The chat URL and the model to send, for the fast answers.
    fast: (String, &'static str),
    /// The same for the slow answers that are held open.
    slow: (String, &'static str),
    /// The same for the paced answers.
    paced: (String, &'static str),
    /// The same for the paced answers from the provider behind TLS, when it could be started.
    paced_tls: Option<(String, &'static str)>,
    /// The gateway's processes, to measure; none for direct.
    process: Option<Child>,
    /// A bearer token the gateway demands.
    token: Option<String>,
}

impl Drop for Gateway {
    /// A polite stop: nginx's master takes its workers down on SIGTERM, and
    /// is given a moment to, where the SIGKILL of `kill_on_drop` right away
    /// would orphan them.
    fn drop(&mut self) {
        let Some(process) = self.process.as_mut() else { return };
        let Some(pid) = process.id() else { return };
        let _ = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status();
        for _ in 0..50 {
            if !matches!(process.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Gateway {
    fn pids(&self) -> Vec<u32> {
        self.process.as_ref().and_then(Child::id).map(with_children).unwrap_or_default()
    }
}

async fn nginx(
    fast: SocketAddr,
    slow: SocketAddr,
    paced: SocketAddr,
    tls: Option<&paced::TlsFront>,
) -> Option<(Child, SocketAddr)> {
    if which("nginx").is_none() {
        let status =
            std::process::Command::new("apt-get").args(["install", "-y", "-q", "nginx-light"]).status().ok()?;
        if !status.success() {
            return None;
        }
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
    let dir = scratch().join("nginx");
    std::fs::create_dir_all(dir.join("logs")).ok()?;
    let conf = format!(
        "worker_processes auto;\npid {dir}/nginx.pid;\nerror_log {dir}/logs/error.log warn;\nworker_rlimit_nofile 20000;\n\
         events {{ worker_connections 20000; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {dir}/body;\n  proxy_temp_path {dir}/proxy;\n\
         upstream fast {{ server {fast}; keepalive 1024; }}\n  upstream slow {{ server {slow}; keepalive 1024; }}\n\
         upstream paced {{ server {paced}; keepalive 1024; }}\n\
         server {{\n    listen 127.0.0.1:{port} backlog=4096;\n\
         location /fast/ {{ proxy_pass http://fast/; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering off; proxy_cache off; }}\n\
         location /slow/ {{ proxy_pass http://slow/; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering off; proxy_cache off; }}\n\
         location /paced/ {{ proxy_pass http://paced/; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering off; proxy_cache off; }}\n\
         {tls}\
         }}\n}}\n",
        dir = dir.display(),
        tls = tls.map(|front| format!(
            "location /paced-tls/ {{ proxy_pass https://paced_tls/; proxy_http_version 1.1; proxy_set_header Connection \"\"; \
             proxy_buffering off; proxy_cache off; proxy_ssl_verify on; proxy_ssl_trusted_certificate {ca}; \
             proxy_ssl_name localhost; proxy_ssl_session_reuse on; }}\n",
            ca = front.ca.display()
        )).unwrap_or_default()
    );
    let conf = match tls {
        Some(front) => conf.replacen(
            "server {\n",
            &format!("upstream paced_tls {{ server {}; keepalive 1024; }}\n  server {{\n", front.addr),
            1,
        ),
        None => conf,
    };
    std::fs::write(dir.join("nginx.conf"), conf).ok()?;
    let mut command = Command::new(which("nginx")?);
    command.args(["-g", "daemon off;", "-c"]).arg(dir.join("nginx.conf"));
    let child = spawn_quiet(&mut command)?;
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().ok()?;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return Some((child, addr));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// LiteLLM's proxy from PyPI, in a virtual environment of the bench's own,
/// with the same providers and a fallback from the flaky one to the fast one.
async fn litellm(fast: SocketAddr, slow: SocketAddr, flaky: SocketAddr) -> Option<(Child, SocketAddr)> {
    let venv = root().join("target/bench-venv");
    let bin = venv.join("bin/litellm");
    if !bin.exists() {
        println!("installing LiteLLM into {} (once)", venv.display());
        let made = std::process::Command::new("python3").args(["-m", "venv"]).arg(&venv).status().ok()?;
        let pip = venv.join("bin/pip");
        let installed = std::process::Command::new(pip)
            .args(["install", "-q", "--disable-pip-version-check", "litellm[proxy]"])
            .status()
            .ok()?;
        if !made.success() || !installed.success() {
            return None;
        }
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
    let deployment = |name: &str, addr: SocketAddr| {
        format!(
            "  - model_name: {name}\n    litellm_params:\n      model: openai/m\n      api_base: http://{addr}/v1\n      api_key: unused\n"
        )
    };
    let config = format!(
        "model_list:\n{}{}{}router_settings:\n  num_retries: 0\n  fallbacks: [{{\"flaky\": [\"fast\"]}}]\nlitellm_settings:\n  num_retries: 0\n",
        deployment("fast", fast),
        deployment("slow", slow),
        deployment("flaky", flaky)
    );
    let path = scratch().join("litellm.yaml");
    std::fs::write(&path, config).ok()?;
    let mut command = Command::new(bin);
    command
        .args(["--config"])
        .arg(&path)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .env("LITELLM_LOG", "ERROR")
        .env("LITELLM_MASTER_KEY", LITELLM_KEY);
    let child = spawn_quiet(&mut command)?;
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().ok()?;
    let client = reqwest::Client::new();
    for _ in 0..240 {
        let probe = client.get(format!("http://{addr}/health/liveliness")).bearer_auth(LITELLM_KEY).send().await;
        if probe.is_ok_and(|r| r.status().is_success()) {
            return Some((child, addr));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    None
}

/// Starts a peer gateway with its output discarded, killed with the bench.
fn spawn_quiet(command: &mut Command) -> Option<Child> {
    command.stdout(Stdio::null()).stderr(Stdio::null()).kill_on_drop(true).spawn().ok()
}

fn which(program: &str) -> Option<PathBuf> {
    ["/usr/sbin", "/usr/bin", "/usr/local/bin", "/sbin", "/bin"]
        .iter()
        .map(|dir| Path::new(dir).join(program))
        .find(|p| p.exists())
}

/// Breakers off and deadlines long: this benchmark measures what the relay
/// costs, so overload must show as latency, not as failovers or open breakers.
fn baton_config(
    fast: SocketAddr,
    slow: SocketAddr,
    flaky: SocketAddr,
    paced: SocketAddr,
    tls: Option<&paced::TlsFront>,
) -> PathBuf {
    let no_breaker = "breaker = { failure_threshold = 1000000, window = 1000000 }";
    let text = format!(
        "listen = \"127.0.0.1:0\"\n\n\
         [[providers]]\nname = \"fast\"\nkind = \"openai\"\nbase_url = \"http://{fast}/v1\"\n{no_breaker}\n\n\
         [[providers]]\nname = \"slow\"\nkind = \"openai\"\nbase_url = \"http://{slow}/v1\"\n{no_breaker}\n\n\
         [[providers]]\nname = \"flaky\"\nkind = \"openai\"\nbase_url = \"http://{flaky}/v1\"\n{no_breaker}\n\n\
         [[providers]]\nname = \"paced\"\nkind = \"openai\"\nbase_url = \"http://{paced}/v1\"\n{no_breaker}\n\n\
         [[routes]]\nmodel = \"paced\"\nfirst_token_timeout_ms = 60000\nidle_timeout_ms = 60000\ntargets = [{{ provider = \"paced\", model = \"m\" }}]\n\n\
         [[routes]]\nmodel = \"fast\"\nfirst_token_timeout_ms = 60000\nidle_timeout_ms = 60000\ntargets = [{{ provider = \"fast\", model = \"m\" }}]\n\n\
         [[routes]]\nmodel = \"slow\"\nfirst_token_timeout_ms = 60000\nidle_timeout_ms = 60000\ntargets = [{{ provider = \"slow\", model = \"m\" }}]\n\n\
         [[routes]]\nmodel = \"flaky\"\nfirst_token_timeout_ms = 60000\nidle_timeout_ms = 60000\n\
         targets = [{{ provider = \"flaky\", model = \"m\", first_token_timeout_ms = 1000 }}, {{ provider = \"fast\", model = \"m\" }}]\n"
    );
    let tls = tls.map(|front| format!(
        "[[providers]]\nname = \"paced-tls\"\nkind = \"openai\"\nbase_url = \"https://{}/v1\"\nca_file = \"{}\"\n{no_breaker}\n\n\
         [[routes]]\nmodel = \"paced-tls\"\nfirst_token_timeout_ms = 60000\nidle_timeout_ms = 60000\ntargets = [{{ provider = \"paced-tls\", model = \"m\" }}]\n\n",
        front.addr,
        front.ca.display()
    )).unwrap_or_default();
    let path = scratch().join("baton.toml");
    std::fs::write(&path, format!("{text}\n{tls}{}{}", bench_keys(), bench_store())).expect("config");
    path
}

/// `BATON_BENCH_STORE=none` keeps no records, to measure what keeping
/// them costs; by default the request log is the default one, SQLite
/// beside the config.
fn bench_store() -> String {
    match std::env::var("BATON_BENCH_STORE").as_deref() {
        Ok("none") => "[store]\nbackend = \"none\"\n".to_owned(),
        _ => String::new(),
    }
}

/// With `BATON_BENCH_KEYS=N`, N client keys, each with limits and a budget
/// too high to refuse anything, so a run measures what checking them costs;
/// baton's requests then carry [`bench_key`]'s secret.
fn bench_keys() -> String {
    let count = key_count();
    let mut text = String::new();
    for i in 0..count {
        text.push_str(&format!(
            "[[keys]]\nname = \"app{i}\"\nkey = \"bench-client-key-{i:06}\"\nrpm = 100000000\ntpm = 100000000000\nbudget = {{ usd_per_hour = 1000000.0 }}\n\n"
        ));
    }
    text
}

fn key_count() -> usize {
    std::env::var("BATON_BENCH_KEYS").ok().and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// The secret baton's requests present when keys are configured: the last one's.
fn bench_key() -> Option<String> {
    key_count().checked_sub(1).map(|last| format!("bench-client-key-{last:06}"))
}

#[derive(Default)]
struct Drive {
    ttft: Vec<Duration>,
    ok: usize,
    /// Why requests failed, and how many for each reason.
    failures: std::collections::BTreeMap<String, usize>,
    cpu: f64,
    client_cpu: f64,
    elapsed: Duration,
}

/// `concurrency` workers send streamed requests to `url` for [`DRIVE`].
async fn drive(client: &reqwest::Client, url: &str, model: &str, concurrency: usize, pids: &[u32]) -> Drive {
    let body = json!({ "model": model, "stream": true, "max_tokens": TOKENS, "messages": [{ "role": "user", "content": "hi" }] });
    // A few requests first, so a gateway that warms up on its first requests
    // (LiteLLM takes seconds) is measured warm, like the others.
    for _ in 0..WARMUP {
        timed(client, url, &body).await;
    }
    let (cpu_before, client_before) = (cpu_seconds(pids), cpu_seconds(&[std::process::id()]));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (client, url, body) = (client.clone(), url.to_owned(), body.clone());
            tokio::spawn(async move {
                let mut mine = Drive::default();
                while started.elapsed() < DRIVE {
                    let outcome =
                        tokio::time::timeout(REQUEST_TIMEOUT, support::request(&client, &url, &body, MARKER)).await;
                    let failure = match outcome {
                        Err(_) => Some("timed out".to_owned()),
                        Ok(outcome) if outcome.status == 0 => Some(outcome.body),
                        Ok(outcome) if outcome.status != 200 => Some(format!("status {}", outcome.status)),
                        Ok(outcome) => match outcome.first_token {
                            Some(ttft) if outcome.body.trim_end().ends_with("data: [DONE]") => {
                                mine.ttft.push(ttft);
                                None
                            }
                            _ => Some("incomplete stream".to_owned()),
                        },
                    };
                    match failure {
                        None => mine.ok += 1,
                        Some(why) => {
                            *mine.failures.entry(why).or_default() += 1;
                        }
                    }
                }
                mine
            })
        })
        .collect();
    let mut total = Drive::default();
    for worker in workers {
        let mine = worker.await.expect("worker");
        total.ttft.extend(mine.ttft);
        total.ok += mine.ok;
        for (why, count) in mine.failures {
            *total.failures.entry(why).or_default() += count;
        }
    }
    total.elapsed = started.elapsed();
    total.cpu = cpu_seconds(pids) - cpu_before;
    total.client_cpu = cpu_seconds(&[std::process::id()]) - client_before;
    total
}

/// Slow streams held open through a gateway until this is dropped.
struct Held {
    opened: usize,
    holders: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Held {
    fn drop(&mut self) {
        for holder in &self.holders {
            holder.abort();
        }
    }
}

/// Opens `count` slow streams (a token every [`SLOW_GAP_MS`]) and returns once
/// each has sent its first bytes, or after [`OPEN_DEADLINE`].
async fn hold(client: &reqwest::Client, url: &str, model: &str, count: usize) -> Held {
    let body = json!({ "model": model, "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
    let (opened_tx, mut opened_rx) = tokio::sync::mpsc::channel::<()>(count.max(1));
    let holders = (0..count)
        .map(|_| {
            let (client, url, body, opened) = (client.clone(), url.to_owned(), body.clone(), opened_tx.clone());
            tokio::spawn(async move {
                let Ok(response) = client.post(&url).json(&body).send().await else { return };
                let mut stream = response.bytes_stream();
                if stream.next().await.is_some() {
                    let _ = opened.send(()).await;
                }
                while stream.next().await.is_some() {}
            })
        })
        .collect();
    let mut opened = 0;
    let deadline = Instant::now() + OPEN_DEADLINE;
    while opened < count && Instant::now() < deadline {
        if tokio::time::timeout(Duration::from_secs(1), opened_rx.recv()).await.ok().flatten().is_some() {
            opened += 1;
        }
    }
    Held { opened, holders }
}

/// Holds `count` slow streams open at once and reports the gateway's memory
/// per stream: resident memory with them open, less with [`WARM_STREAMS`]
/// open before them, which already paid what the first requests cost once
/// (code paged in, pools and caches made) and would otherwise be spread
/// over the streams.
async fn memory_per_stream(
    client: &reqwest::Client,
    url: &str,
    model: &str,
    count: usize,
    pids: &[u32],
) -> Option<f64> {
    if pids.is_empty() {
        return None;
    }
    let warm = hold(client, url, model, WARM_STREAMS).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = memory(pids, "VmRSS:");
    let held = hold(client, url, model, count).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let during = memory(pids, "VmRSS:");
    drop(warm);
    (held.opened == count).then(|| during.saturating_sub(before) as f64 / count as f64)
}

/// First-token times of [`PROBES`] pairs of requests, one direct to the
/// provider and one through `gateway`, alternated, sent while `background`
/// slow streams are held open through the gateway: the latency the gateway
/// adds at that load, measured without saturating the machine.
struct Probe {
    direct: Vec<Duration>,
    through: Vec<Duration>,
    /// Per pair: through the gateway less direct.
    added: Vec<f64>,
    held: usize,
}

/// One request's time to first token, if it came within [`REQUEST_TIMEOUT`].
async fn timed(client: &reqwest::Client, url: &str, body: &serde_json::Value) -> Option<Duration> {
    let request = support::request(client, url, body, MARKER);
    tokio::time::timeout(REQUEST_TIMEOUT, request).await.ok().and_then(|outcome| outcome.first_token)
}

async fn probe(
    client: &reqwest::Client,
    direct: &reqwest::Client,
    gateway: &Gateway,
    floor: &Gateway,
    background: usize,
) -> Probe {
    let (slow_url, slow_model) = &gateway.slow;
    let held = hold(client, slow_url, slow_model, background).await;
    let request = |(url, model): &(String, &'static str)| {
        (
            url.clone(),
            json!({ "model": model, "stream": true, "max_tokens": TOKENS, "messages": [{ "role": "user", "content": "hi" }] }),
        )
    };
    let (url, body) = request(&gateway.fast);
    let (direct_url, direct_body) = request(&floor.fast);
    for _ in 0..WARMUP {
        timed(client, &url, &body).await;
        timed(direct, &direct_url, &direct_body).await;
    }
    let mut result = Probe { direct: Vec::new(), through: Vec::new(), added: Vec::new(), held: held.opened };
    let deadline = Instant::now() + PROBE_DEADLINE;
    for _ in 0..PROBES {
        if Instant::now() > deadline {
            break;
        }
        let floor_ttft = timed(direct, &direct_url, &direct_body).await;
        let ttft = timed(client, &url, &body).await;
        if let (Some(floor_ttft), Some(ttft)) = (floor_ttft, ttft) {
            result.direct.push(floor_ttft);
            result.through.push(ttft);
            result.added.push((ttft.as_secs_f64() - floor_ttft.as_secs_f64()) * 1000.0);
        }
    }
    result
}

/// Waits until `pids` use (almost) no CPU, so work a gateway still does for
/// the last run (streams to clients that left) does not weigh on the next,
/// and until this process is back to `fds` open descriptors: the last run's
/// connections, closing, must not use up the next run's file limit.
async fn settle(pids: &[u32], fds: usize) {
    let started = Instant::now();
    while started.elapsed() < SETTLE_LIMIT {
        let before = cpu_seconds(pids);
        tokio::time::sleep(Duration::from_millis(500)).await;
        if cpu_seconds(pids) - before < 0.05 && open_fds() <= fds + SETTLED_FDS {
            return;
        }
    }
}

/// Descriptors this process has open.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count)
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
