//! The one task that POSTs alerts: it takes them off the bounded queue in
//! order and sends each to every webhook that wants its event, at once,
//! with the upstream client (rustls with the platform's verifier). A try
//! that fails for a reason waiting may cure — a 5xx, a 408 or 429, a
//! connection error, no answer within [`TRY_TIMEOUT`] — is repeated after
//! a backoff that doubles, [`TRIES`] times in all; anything else gives up.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::future::join_all;
use http::header::{CONTENT_TYPE, USER_AGENT};
use tokio::sync::mpsc;

use super::Alert;
use super::sign::{SIGNATURE_HEADER, signature};
use crate::config::Webhook;
use crate::egress::Client;
use crate::observe::Metrics;

/// Tries per webhook and alert, the first included.
pub const TRIES: u32 = 4;
/// The wait after the first failed try; each later wait doubles it.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// How long one try may take, the answer read included.
pub const TRY_TIMEOUT: Duration = Duration::from_secs(5);
/// The most of a webhook's answer read: it says nothing baton uses.
const MAX_ANSWER_BYTES: usize = 16 * 1024;
/// The header naming the event, for receivers that route on it.
const EVENT_HEADER: &str = "x-baton-event";
/// Idle connections kept per webhook between alerts.
const IDLE_CONNECTIONS: usize = 2;
/// How long an idle connection to a webhook is kept.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// What the delivery task holds.
pub(super) struct Delivery {
    pub(super) webhooks: Arc<[Webhook]>,
    pub(super) client: Client,
    pub(super) metrics: Arc<Metrics>,
}

/// How one try went.
enum Tried {
    Sent,
    /// Worth another try.
    Retry(String),
    /// Not worth one: the webhook refused the alert itself.
    GiveUp(String),
}

impl Delivery {
    /// A delivery over a client of its own; `None` when no TLS settings can be made.
    pub(super) fn new(webhooks: Arc<[Webhook]>, metrics: Arc<Metrics>) -> Option<Delivery> {
        match Client::new(IDLE_CONNECTIONS, IDLE_TIMEOUT) {
            Ok(client) => Some(Delivery { webhooks, client, metrics }),
            Err(err) => {
                tracing::error!(error = %err, "alerts are off: no HTTP client for the webhooks");
                None
            }
        }
    }

    /// Sends every queued alert until the queue's senders are all gone.
    pub(super) async fn run(self, mut queue: mpsc::Receiver<Alert>) {
        while let Some(alert) = queue.recv().await {
            let body = alert.body();
            let event = alert.event.name();
            let wanting = self.webhooks.iter().filter(|webhook| webhook.wants(alert.event));
            let sent = join_all(wanting.map(|webhook| self.send(webhook, event, &body))).await;
            for sent in sent {
                self.metrics.ops().alert(event, if sent { "sent" } else { "failed" });
            }
        }
    }

    /// Sends `body` to `webhook`, trying again with backoff; whether it arrived.
    async fn send(&self, webhook: &Webhook, event: &'static str, body: &Bytes) -> bool {
        let mut backoff = FIRST_BACKOFF;
        for attempt in 1..=TRIES {
            let why = match tokio::time::timeout(TRY_TIMEOUT, self.try_once(webhook, event, body)).await {
                Ok(Tried::Sent) => return true,
                Ok(Tried::GiveUp(why)) => {
                    tracing::warn!(host = %webhook.host, event, why, "alert refused by its webhook; not retried");
                    return false;
                }
                Ok(Tried::Retry(why)) => why,
                Err(_) => format!("no answer within {} ms", TRY_TIMEOUT.as_millis()),
            };
            if attempt == TRIES {
                tracing::warn!(host = %webhook.host, event, why, tries = TRIES, "alert could not be delivered");
                break;
            }
            tracing::debug!(host = %webhook.host, event, why, attempt, "alert delivery failed; trying again");
            tokio::time::sleep(backoff).await;
            backoff = backoff.saturating_mul(2);
        }
        false
    }

    /// One POST, its answer read (and dropped) so the connection can be kept.
    async fn try_once(&self, webhook: &Webhook, event: &'static str, body: &Bytes) -> Tried {
        let mut request = http::Request::post(webhook.url.expose())
            .header(CONTENT_TYPE, "application/json")
            .header(USER_AGENT, concat!("baton/", env!("CARGO_PKG_VERSION")))
            .header(EVENT_HEADER, event);
        if let Some(secret) = &webhook.secret {
            request = request.header(SIGNATURE_HEADER, signature(secret, body));
        }
        // The URL was checked at load; an error here names no part of it.
        let Ok(request) = request.body(body.clone()) else {
            return Tried::GiveUp("the URL cannot be requested".into());
        };
        let response = match self.client.send(request).await {
            Ok(response) => response,
            Err(err) => return Tried::Retry(err.to_string()),
        };
        let status = response.status();
        let mut answer = response.into_body();
        let mut read = 0;
        while let Some(Ok(chunk)) = answer.next().await {
            read += chunk.len();
            if read > MAX_ANSWER_BYTES {
                break;
            }
        }
        match status.as_u16() {
            200..=299 => Tried::Sent,
            408 | 429 | 500..=599 => Tried::Retry(format!("HTTP {status}")),
            _ => Tried::GiveUp(format!("HTTP {status}")),
        }
    }
}
