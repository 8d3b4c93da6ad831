//! The three measurements: streams driven as fast as they are answered,
//! streams held open for memory, and timed probes beside held streams.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::json;

use super::gateways::Gateway;
use super::process::{cpu_seconds, memory};
use super::{
    DRIVE, MARKER, OPEN_DEADLINE, PROBE_DEADLINE, PROBES, REQUEST_TIMEOUT, TOKENS, WARM_STREAMS, WARMUP, support,
};

#[derive(Default)]
pub(super) struct Drive {
    pub(super) ttft: Vec<Duration>,
    pub(super) ok: usize,
    /// Why requests failed, and how many for each reason.
    pub(super) failures: std::collections::BTreeMap<String, usize>,
    pub(super) cpu: f64,
    pub(super) client_cpu: f64,
    pub(super) elapsed: Duration,
}

/// `concurrency` workers send streamed requests to `url` for [`DRIVE`].
pub(super) async fn drive(client: &reqwest::Client, url: &str, model: &str, concurrency: usize, pids: &[u32]) -> Drive {
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
pub(super) struct Held {
    pub(super) opened: usize,
    pub(super) holders: Vec<tokio::task::JoinHandle<()>>,
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
pub(super) async fn hold(client: &reqwest::Client, url: &str, model: &str, count: usize) -> Held {
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
pub(super) async fn memory_per_stream(
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
pub(super) struct Probe {
    pub(super) direct: Vec<Duration>,
    pub(super) through: Vec<Duration>,
    /// Per pair: through the gateway less direct.
    pub(super) added: Vec<f64>,
    pub(super) held: usize,
}

/// One request's time to first token, if it came within [`REQUEST_TIMEOUT`].
pub(super) async fn timed(client: &reqwest::Client, url: &str, body: &serde_json::Value) -> Option<Duration> {
    let request = support::request(client, url, body, MARKER);
    tokio::time::timeout(REQUEST_TIMEOUT, request).await.ok().and_then(|outcome| outcome.first_token)
}

pub(super) async fn probe(
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
