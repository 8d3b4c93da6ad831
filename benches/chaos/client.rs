//! One chaos request: what it asks (a nonce, streamed or not, dropped
//! mid-stream or not), and what came back, read to its end under a hard
//! deadline.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::json;

/// The most of a body read; a proxy relaying a flood must not take the load
/// generator down with it.
const MAX_BODY: usize = 32 * 1024 * 1024;

/// One request of the run.
pub struct Ask {
    /// Named in the prompt; every word of the right answer carries it.
    pub nonce: String,
    pub stream: bool,
    /// Drop the connection once the first word has arrived.
    pub disconnect: bool,
}

impl Ask {
    /// Request `index`: its choices drawn from a generator seeded by the run's
    /// seed and the index, so a rerun asks the same.
    pub fn new(index: usize, seed: u64, unstreamed_share: f64, disconnect_share: f64) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ index as u64);
        let stream = rng.f64() >= unstreamed_share;
        let disconnect = stream && rng.f64() < disconnect_share;
        Ask { nonce: format!("n{index:07}"), stream, disconnect }
    }

    fn body(&self) -> serde_json::Value {
        let prompt = format!("Write the answer for nonce={} please", self.nonce);
        let mut body =
            json!({ "model": "chaos", "stream": self.stream, "messages": [{ "role": "user", "content": prompt }] });
        if self.stream {
            body["stream_options"] = json!({ "include_usage": true });
        }
        body
    }
}

/// What a request got.
pub enum Received {
    /// Nothing complete within the hard deadline.
    Hung,
    /// No response head: refused, reset, or not HTTP.
    NoResponse(String),
    Response(Response),
}

pub struct Response {
    pub status: u16,
    pub event_stream: bool,
    pub body: Vec<u8>,
    /// The client dropped the connection on purpose, mid-stream.
    pub dropped: bool,
    /// The body broke off with this error (or was too long).
    pub broke: Option<String>,
}

/// Sends `ask` and reads the answer, giving up after `deadline`.
pub async fn send(client: &reqwest::Client, url: &str, ask: &Ask, deadline: Duration) -> Received {
    tokio::time::timeout(deadline, exchange(client, url, ask)).await.unwrap_or(Received::Hung)
}

async fn exchange(client: &reqwest::Client, url: &str, ask: &Ask) -> Received {
    let response = match client.post(url).json(&ask.body()).send().await {
        Ok(response) => response,
        Err(err) => return Received::NoResponse(chain(&err)),
    };
    let status = response.status().as_u16();
    let content_type = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
    let event_stream = content_type.starts_with("text/event-stream");
    let needle = format!("{}.", ask.nonce);
    let mut stream = response.bytes_stream();
    let (mut body, mut broke, mut dropped) = (Vec::new(), None, false);
    while let Some(chunk) = stream.next().await {
        let seen = body.len();
        match chunk {
            Ok(bytes) => body.extend_from_slice(&bytes),
            Err(err) => {
                broke = Some(chain(&err));
                break;
            }
        }
        if body.len() > MAX_BODY {
            broke = Some(format!("a body over {} MiB", MAX_BODY >> 20));
            break;
        }
        let fresh = &body[seen.saturating_sub(needle.len())..];
        if ask.disconnect && fresh.windows(needle.len()).any(|w| w == needle.as_bytes()) {
            dropped = true;
            break;
        }
    }
    Received::Response(Response { status, event_stream, body, dropped, broke })
}

/// An error and its causes on one line.
fn chain(err: &dyn std::error::Error) -> String {
    let mut why = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        why = format!("{why}: {cause}");
        source = cause.source();
    }
    why
}
