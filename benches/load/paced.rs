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

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{Gateway, REQUEST_TIMEOUT, cpu_seconds, memory, open_fds, quantile_ms, settle, support};

/// How long each level's workers keep sending paced requests.
const DRIVE: Duration = Duration::from_secs(6);
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

    /// The `baton mock` arguments that write it.
    pub fn mock_args(&self) -> Vec<String> {
        vec!["--first-token-ms".into(), self.first_ms.to_string(), "--gap-ms".into(), self.gap_ms.to_string()]
    }
}

/// One path at one level.
struct Run {
    ttft: Vec<Duration>,
    streams: usize,
    failed: usize,
    cpu: f64,
    rss_per_stream: Option<f64>,
}

/// `concurrency` workers send paced requests to `url` back to back for
/// [`DRIVE`]; memory is read at [`SAMPLE_AT`] against `idle`.
async fn drive(client: &reqwest::Client, url: &str, model: &str, concurrency: usize, pids: &[u32], idle: u64) -> Run {
    let body = json!({ "model": model, "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
    let cpu_before = cpu_seconds(pids);
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (client, url, body) = (client.clone(), url.to_owned(), body.clone());
            tokio::spawn(async move {
                let (mut ttft, mut failed) = (Vec::new(), 0);
                while started.elapsed() < DRIVE {
                    let sent = support::request(&client, &url, &body, super::MARKER);
                    match tokio::time::timeout(REQUEST_TIMEOUT, sent).await {
                        Ok(outcome) if outcome.status == 200 && outcome.body.trim_end().ends_with("data: [DONE]") => {
                            ttft.extend(outcome.first_token);
                        }
                        _ => failed += 1,
                    }
                }
                (ttft, failed)
            })
        })
        .collect();
    tokio::time::sleep(SAMPLE_AT).await;
    let during = memory(pids, "VmRSS:");
    let mut run = Run { ttft: Vec::new(), streams: 0, failed: 0, cpu: 0.0, rss_per_stream: None };
    for worker in workers {
        let (ttft, failed) = worker.await.unwrap_or_default();
        run.streams += ttft.len();
        run.ttft.extend(ttft);
        run.failed += failed;
    }
    run.cpu = cpu_seconds(pids) - cpu_before;
    if !pids.is_empty() {
        run.rss_per_stream = Some(during.saturating_sub(idle) as f64 / concurrency as f64);
    }
    run
}

/// Runs every level on direct, nginx and baton, lowest level first (what a
/// level leaves in the allocator is less than the next one uses), and
/// returns the table.
pub async fn run(
    shape: Shape,
    gateways: &[Gateway],
    levels: &[usize],
    client_for: impl Fn(&Gateway) -> reqwest::Client,
) -> String {
    let paths: Vec<&Gateway> = gateways.iter().filter(|g| matches!(g.name, "direct" | "nginx" | "baton")).collect();
    let idle: Vec<u64> = paths.iter().map(|g| memory(&g.pids(), "VmRSS:")).collect();
    let mut table = String::new();
    let _ = writeln!(
        table,
        "Paced answers: {} tokens, the first after {} ms, then one every {} ms.\n\n\
         | path | concurrent streams | streams | TTFT p50 / p99 (ms) | added p50 / p99 (ms) | gateway CPU s per 1,000 streams | CPU vs nginx | RSS per stream in flight (KiB) |\n\
         |---|---|---|---|---|---|---|---|",
        shape.tokens, shape.first_ms, shape.gap_ms
    );
    for &level in levels {
        let mut runs: Vec<(&str, Run)> = Vec::new();
        for (gateway, idle) in paths.iter().zip(&idle) {
            let pids = gateway.pids();
            let (url, model) = &gateway.paced;
            eprintln!("paced: {} at {level} streams", gateway.name);
            let fds = open_fds();
            runs.push((gateway.name, drive(&client_for(gateway), url, model, level, &pids, *idle).await));
            settle(&pids, fds).await;
        }
        let direct = runs.iter().find(|(name, _)| *name == "direct").map(|(_, run)| run);
        let nginx = runs.iter().find(|(name, _)| *name == "nginx").map(|(_, run)| per_thousand(run));
        for (name, run) in &runs {
            let (p50, p99) = (quantile_ms(&run.ttft, 0.5), quantile_ms(&run.ttft, 0.99));
            let added = match direct {
                Some(direct) if *name != "direct" => format!(
                    "{:+.1} / {:+.1}",
                    p50 - quantile_ms(&direct.ttft, 0.5),
                    p99 - quantile_ms(&direct.ttft, 0.99)
                ),
                _ => "—".to_owned(),
            };
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
        }
    }
    table
}

/// Gateway CPU seconds per 1,000 streams answered.
fn per_thousand(run: &Run) -> f64 {
    run.cpu / run.streams.max(1) as f64 * 1000.0
}
