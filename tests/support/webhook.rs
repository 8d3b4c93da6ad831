//! A webhook receiver on `127.0.0.1:0`: it records every alert POSTed to
//! it and answers with the statuses a test scripts (then 200), or never.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::Value;
use tokio::sync::mpsc;

/// One POST the receiver got.
#[derive(Debug, Clone)]
pub struct Delivered {
    pub headers: HeaderMap,
    /// The body exactly as sent.
    pub body: Bytes,
    /// The body as JSON.
    pub json: Value,
    /// The status the receiver answered it with.
    pub answered: u16,
}

impl Delivered {
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|value| value.to_str().ok()).unwrap_or("")
    }
}

#[derive(Clone)]
struct Script {
    statuses: Arc<Mutex<VecDeque<u16>>>,
    stall: bool,
    got: mpsc::Sender<Delivered>,
}

/// A running receiver; dropping it stops it.
pub struct WebhookReceiver {
    pub addr: std::net::SocketAddr,
    received: tokio::sync::Mutex<mpsc::Receiver<Delivered>>,
    task: super::Task,
}

impl WebhookReceiver {
    /// A receiver that answers 200 to everything.
    pub async fn start() -> WebhookReceiver {
        Self::serve(&[], false).await
    }

    /// A receiver that answers `statuses` in turn, then 200.
    pub async fn answering(statuses: &[u16]) -> WebhookReceiver {
        Self::serve(statuses, false).await
    }

    /// A receiver that records each POST and never answers it.
    pub async fn stalling() -> WebhookReceiver {
        Self::serve(&[], true).await
    }

    async fn serve(statuses: &[u16], stall: bool) -> WebhookReceiver {
        let (got, received) = mpsc::channel(1024);
        let script = Script { statuses: Arc::new(Mutex::new(statuses.iter().copied().collect())), stall, got };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the webhook receiver");
        let addr = listener.local_addr().expect("its address");
        let app = Router::new().route("/hook", post(receive)).with_state(script);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        WebhookReceiver { addr, received: tokio::sync::Mutex::new(received), task: task.into() }
    }

    /// The URL alerts go to.
    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    /// An `[[alerts]]` entry for this receiver: `events` (all when empty),
    /// signed with `secret` when given.
    pub fn toml(&self, events: &[&str], secret: Option<&str>) -> String {
        let mut entry = format!("[[alerts]]\nurl = \"{}\"\n", self.url());
        if !events.is_empty() {
            let names: Vec<String> = events.iter().map(|event| format!("\"{event}\"")).collect();
            entry.push_str(&format!("events = [{}]\n", names.join(", ")));
        }
        if let Some(secret) = secret {
            entry.push_str(&format!("secret = \"{secret}\"\n"));
        }
        entry
    }

    /// The next POST, within `limit`; fails the test otherwise.
    pub async fn next(&self, limit: Duration) -> Delivered {
        let mut received = self.received.lock().await;
        match tokio::time::timeout(limit, received.recv()).await {
            Ok(Some(delivered)) => delivered,
            Ok(None) => panic!("the webhook receiver stopped"),
            Err(_) => panic!("no alert reached the webhook within {limit:?}"),
        }
    }

    /// The next POST about `event` within `limit`, passing over others.
    pub async fn next_event(&self, event: &str, limit: Duration) -> Delivered {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let delivered = self.next(left).await;
            if delivered.json["event"] == event {
                return delivered;
            }
        }
    }

    /// Whether a POST arrives within `limit` (taking it if so).
    pub async fn gets_any_within(&self, limit: Duration) -> Option<Delivered> {
        let mut received = self.received.lock().await;
        tokio::time::timeout(limit, received.recv()).await.ok().flatten()
    }
}

async fn receive(State(script): State<Script>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let answered = script.statuses.lock().expect("the script").pop_front().unwrap_or(200);
    let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let _ = script.got.try_send(Delivered { headers, body, json, answered });
    if script.stall {
        std::future::pending::<()>().await;
    }
    StatusCode::from_u16(answered).unwrap_or(StatusCode::OK)
}
