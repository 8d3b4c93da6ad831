//! The paced workload: answers written as real LLM answers are, a token
//! every few milliseconds for about a second, so a gateway pays a wake-up,
//! a read and a write for every token and its per-event cost is all that
//! shows (batching hides it in the flat-out runs). Direct, nginx and baton
//! in one run, against the same simulated provider; per concurrency level:
//! added time to first token (p50 and p99 against direct at that level),
//! gateway CPU per 1,000 streams and its ratio to nginx's, and resident
//! memory per stream in flight.
//!
//! The answer's shape comes from `BATON_BENCH_PACED=tokens,first_ms,gap_ms`
//! (200 tokens, the first after 20 ms, then one every 5 ms, by default).
//! The table is made twice: with the provider on plain HTTP, and behind TLS
//! as every real provider is (an nginx of its own in front of it, with a
//! certificate for 127.0.0.1 that only this run trusts), so the handshake
//! and the record layer are part of each gateway's cost.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::process::{Child, Command};

use super::gateways::{Gateway, spawn_quiet, stop_politely, which};
use super::process::{cpu_seconds, memory, open_fds, settle};
use super::{REQUEST_TIMEOUT, quantile_ms, scratch, support};

/// How long each level's workers keep sending paced requests, at least.
const DRIVE: Duration = Duration::from_secs(6);
/// The fewest streams a level's CPU figure is taken over: at 10 streams,
/// 6 s is 50 streams, a few dozen scheduler ticks of CPU, and the ratio
/// to nginx moved by half between runs of the same code.
const MIN_STREAMS: u32 = 300;
/// When, into a level's run, its memory is read: every worker is mid-stream.
const SAMPLE_AT: Duration = Duration::from_secs(3);

/// What the paced provider writes.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Tokens per answer.
    pub tokens: usize,
    /// Milliseconds to the first token.
    pub first_ms: u64,
    /// Milliseconds between tokens.
    pub gap_ms: u64,
}

impl Shape {
    /// `BATON_BENCH_PACED`, or 200 tokens, 20 ms, 5 ms.
    pub fn from_env() -> Shape {
        let given = std::env::var("BATON_BENCH_PACED").unwrap_or_default();
        let numbers: Vec<u64> = given.split(',').filter_map(|n| n.trim().parse().ok()).collect();
        match numbers[..] {
            [tokens, first_ms, gap_ms] => Shape { tokens: tokens as usize, first_ms, gap_ms },
            _ => Shape { tokens: 200, first_ms: 20, gap_ms: 5 },
        }
    }

    /// How long a level of `concurrency` streams is driven: [`DRIVE`], or
    /// long enough for [`MIN_STREAMS`] answers of this shape.
    pub fn drive_for(&self, concurrency: usize) -> Duration {
        let answer = Duration::from_millis(self.first_ms + self.gap_ms * self.tokens.saturating_sub(1) as u64);
        let rounds = MIN_STREAMS.div_ceil(u32::try_from(concurrency.max(1)).unwrap_or(u32::MAX));
        DRIVE.max(answer * rounds)
    }

    /// The `baton mock` arguments that write it.
    pub fn mock_args(&self) -> Vec<String> {
        vec!["--first-token-ms".into(), self.first_ms.to_string(), "--gap-ms".into(), self.gap_ms.to_string()]
    }
}

/// One path at one level.
struct Run {
    ttft: Vec<Duration>,
    /// The first tokens of every answer but each worker's first, whose
    /// connection was opened for it, with all the others, at the level's start.
    warm: Vec<Duration>,
    streams: usize,
    failed: usize,
    cpu: f64,
    rss_per_stream: Option<f64>,
}

/// `concurrency` workers send paced requests to `url` back to back for
/// `length`; memory is read at [`SAMPLE_AT`] against `idle`.
async fn drive(
    client: &reqwest::Client,
    url: &str,
    model: &str,
    (concurrency, length): (usize, Duration),
    pids: &[u32],
    idle: u64,
) -> Run {
    let body = json!({ "model": model, "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
    let cpu_before = cpu_seconds(pids);
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (client, url, body) = (client.clone(), url.to_owned(), body.clone());
            tokio::spawn(async move {
                let (mut ttft, mut warm, mut failed) = (Vec::new(), Vec::new(), 0);
                while started.elapsed() < length {
                    let first = ttft.len() + failed == 0;
                    let sent = support::request(&client, &url, &body, super::MARKER);
                    match tokio::time::timeout(REQUEST_TIMEOUT, sent).await {
                        Ok(outcome) if outcome.status == 200 && outcome.body.trim_end().ends_with("data: [DONE]") => {
                            ttft.extend(outcome.first_token);
                            warm.extend(outcome.first_token.filter(|_| !first));
                        }
                        _ => failed += 1,
                    }
                }
                (ttft, warm, failed)
            })
        })
        .collect();
    tokio::time::sleep(SAMPLE_AT).await;
    let during = memory(pids, "VmRSS:");
    let mut run = Run { ttft: Vec::new(), warm: Vec::new(), streams: 0, failed: 0, cpu: 0.0, rss_per_stream: None };
    for worker in workers {
        let (ttft, warm, failed) = worker.await.unwrap_or_default();
        run.streams += ttft.len();
        run.ttft.extend(ttft);
        run.warm.extend(warm);
        run.failed += failed;
    }
    run.cpu = cpu_seconds(pids) - cpu_before;
    if !pids.is_empty() {
        run.rss_per_stream = Some(during.saturating_sub(idle) as f64 / concurrency as f64);
    }
    run
}

/// The paced provider behind TLS: its own nginx (so its CPU is no gateway's),
/// and the certificate that signs for 127.0.0.1, which the paths trust.
pub struct TlsFront {
    process: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its certificate, self-signed: the one trust anchor of this run.
    pub ca: PathBuf,
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        stop_politely(&mut self.process);
    }
}

/// Starts the TLS front for the paced provider at `paced`, or says why not.
pub async fn tls_front(paced: SocketAddr) -> Option<TlsFront> {
    let dir = scratch().join("tls-front");
    std::fs::create_dir_all(dir.join("logs")).ok()?;
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let made = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
        .args(["-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status()
        .ok()?;
    if !made.success() {
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
    let conf = format!(
        "worker_processes 1;\npid {dir}/nginx.pid;\nerror_log {dir}/logs/error.log warn;\nworker_rlimit_nofile 20000;\n\
         events {{ worker_connections 20000; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {dir}/body;\n  proxy_temp_path {dir}/proxy;\n\
         upstream paced {{ server {paced}; keepalive 1024; }}\n\
         server {{\n    listen 127.0.0.1:{port} ssl backlog=4096;\n    ssl_certificate {cert};\n    ssl_certificate_key {key};\n\
         keepalive_requests 100000;\n\
         location / {{ proxy_pass http://paced; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering off; }}\n\
         }}\n}}\n",
        dir = dir.display(),
        cert = cert.display(),
        key = key.display()
    );
    std::fs::write(dir.join("nginx.conf"), conf).ok()?;
    let mut command = Command::new(which("nginx")?);
    command.args(["-g", "daemon off;", "-c"]).arg(dir.join("nginx.conf"));
    let process = spawn_quiet(&mut command)?;
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().ok()?;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return Some(TlsFront { process, addr, ca: cert });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// A client for `gateway`, with its bearer token, trusting `ca` beside the system's roots.
fn client(gateway: &Gateway, ca: Option<&reqwest::Certificate>) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(token) = gateway.token.as_deref().and_then(|token| format!("Bearer {token}").parse().ok()) {
        headers.insert("authorization", token);
    }
    let builder = reqwest::Client::builder().tcp_nodelay(true).default_headers(headers);
    let builder = match ca {
        Some(ca) => builder.add_root_certificate(ca.clone()),
        None => builder,
    };
    builder.build().expect("client")
}

/// Runs every level on direct, nginx and baton, lowest level first (what a
/// level leaves in the allocator is less than the next one uses), and
/// returns the table: over plain HTTP, or with `tls` to the provider behind
/// its TLS front.
pub async fn run(shape: Shape, gateways: &[Gateway], levels: &[usize], tls: Option<&TlsFront>) -> String {
    let ca =
        tls.and_then(|front| std::fs::read(&front.ca).ok()).and_then(|pem| reqwest::Certificate::from_pem(&pem).ok());
    let paths: Vec<&Gateway> = gateways
        .iter()
        .filter(|g| matches!(g.name, "direct" | "nginx" | "baton"))
        .filter(|g| tls.is_none() || g.paced_tls.is_some())
        .collect();
    let idle: Vec<u64> = paths.iter().map(|g| memory(&g.pids(), "VmRSS:")).collect();
    let mut table = String::new();
    let _ = writeln!(
        table,
        "Paced answers: {} tokens, the first after {} ms, then one every {} ms; the provider {}.\n\n\
         | path | concurrent streams | streams | TTFT p50 / p99 (ms) | added p50 / p99 (ms) | gateway CPU s per 1,000 streams | CPU vs nginx | RSS per stream in flight (KiB) |\n\
         |---|---|---|---|---|---|---|---|",
        shape.tokens,
        shape.first_ms,
        shape.gap_ms,
        if tls.is_some() { "behind TLS" } else { "on plain HTTP" }
    );
    let mut warm_table = String::from(
        "The same levels without each worker's first answer, whose connection to the gateway (and most of the \
         gateway's to the provider) was opened for it at the level's start: the first tokens of a steady state.\n\n\
         | path | concurrent streams | streams | TTFT p50 / p99 (ms) | added p50 / p99 (ms) |\n|---|---|---|---|---|\n",
    );
    for &level in levels {
        let mut runs: Vec<(&str, Run)> = Vec::new();
        for (gateway, idle) in paths.iter().zip(&idle) {
            let pids = gateway.pids();
            let Some((url, model)) = (if tls.is_some() { gateway.paced_tls.as_ref() } else { Some(&gateway.paced) })
            else {
                continue;
            };
            eprintln!("paced{}: {} at {level} streams", if tls.is_some() { " over TLS" } else { "" }, gateway.name);
            let fds = open_fds();
            runs.push((
                gateway.name,
                drive(&client(gateway, ca.as_ref()), url, model, (level, shape.drive_for(level)), &pids, *idle).await,
            ));
            settle(&pids, fds).await;
        }
        let direct = runs.iter().find(|(name, _)| *name == "direct").map(|(_, run)| run);
        let nginx = runs.iter().find(|(name, _)| *name == "nginx").map(|(_, run)| per_thousand(run));
        for (name, run) in &runs {
            let (p50, p99) = (quantile_ms(&run.ttft, 0.5), quantile_ms(&run.ttft, 0.99));
            // What this path's first tokens are set against: direct's, unless it is direct.
            let baseline = direct.filter(|_| *name != "direct");
            let added = added_ms(&run.ttft, baseline.map(|direct| &direct.ttft[..]));
            let (cpu, ratio) = match (*name, nginx) {
                ("direct", _) => ("—".to_owned(), "—".to_owned()),
                (_, Some(nginx)) => (format!("{:.2}", per_thousand(run)), format!("{:.2}×", per_thousand(run) / nginx)),
                _ => (format!("{:.2}", per_thousand(run)), "—".to_owned()),
            };
            let rss = run.rss_per_stream.map_or("—".to_owned(), |bytes| format!("{:.1}", bytes / 1024.0));
            let failed = if run.failed > 0 { format!(" ({} failed)", run.failed) } else { String::new() };
            let _ = writeln!(
                table,
                "| {name} | {level} | {}{failed} | {p50:.1} / {p99:.1} | {added} | {cpu} | {ratio} | {rss} |",
                run.streams
            );
            let added = added_ms(&run.warm, baseline.map(|direct| &direct.warm[..]));
            let _ = writeln!(
                warm_table,
                "| {name} | {level} | {} | {:.1} / {:.1} | {added} |",
                run.warm.len(),
                quantile_ms(&run.warm, 0.5),
                quantile_ms(&run.warm, 0.99)
            );
        }
    }
    format!("{table}\n{warm_table}")
}

/// How much later than `direct`'s the first tokens of `path` came, at p50
/// and p99; a dash for the direct path itself.
fn added_ms(path: &[Duration], direct: Option<&[Duration]>) -> String {
    match direct {
        Some(direct) => format!(
            "{:+.1} / {:+.1}",
            quantile_ms(path, 0.5) - quantile_ms(direct, 0.5),
            quantile_ms(path, 0.99) - quantile_ms(direct, 0.99)
        ),
        None => "—".to_owned(),
    }
}

/// Gateway CPU seconds per 1,000 streams answered.
fn per_thousand(run: &Run) -> f64 {
    run.cpu / run.streams.max(1) as f64 * 1000.0
}
