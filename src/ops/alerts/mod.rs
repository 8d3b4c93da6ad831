//! Alerts to webhooks (`[[alerts]]`), off the request path: raising one
//! costs a lock and a `try_send` on a bounded queue — a full queue drops it
//! and counts it, nothing ever waits — and one task delivers them with
//! retries. The same event for the same subject goes out at most once a
//! [`DEDUP_WINDOW`].

mod alert;
mod deliver;
pub mod sign;
mod watch;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

pub use alert::Alert;
pub use deliver::{FIRST_BACKOFF, TRIES, TRY_TIMEOUT};
pub use watch::{StoreAlerts, WATCH_EVERY, Watched};

use crate::config::{AlertEvent, Webhook};
use crate::observe::Metrics;

/// Alerts waiting for delivery at most; past it they are dropped and counted.
pub const QUEUE_ALERTS: usize = 256;
/// The same event about the same subject is sent at most once in this long.
pub const DEDUP_WINDOW: Duration = Duration::from_secs(60);
/// Subjects remembered at most: they are names from the config, so this is
/// only reached by a config with thousands of providers and routes.
const MAX_REMEMBERED: usize = 4096;

/// Raises alerts; cheap to clone. With no `[[alerts]]` it does nothing.
#[derive(Clone, Default)]
pub struct Alerts {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    webhooks: Arc<[Webhook]>,
    queue: mpsc::Sender<Alert>,
    dedup: Mutex<Dedup>,
    metrics: Arc<Metrics>,
}

impl Alerts {
    /// Alerts to `webhooks`, counted in `metrics`, with their delivery task
    /// started on the current tokio runtime; off when there are no webhooks
    /// or no runtime.
    pub fn start(webhooks: &[Webhook], metrics: Arc<Metrics>) -> Alerts {
        if webhooks.is_empty() {
            return Alerts::default();
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("no async runtime: alerts are off");
            return Alerts::default();
        };
        let webhooks: Arc<[Webhook]> = webhooks.into();
        let Some(delivery) = deliver::Delivery::new(Arc::clone(&webhooks), Arc::clone(&metrics)) else {
            return Alerts::default();
        };
        let (queue, queued) = mpsc::channel(QUEUE_ALERTS);
        runtime.spawn(delivery.run(queued));
        let dedup = Mutex::new(Dedup::new(DEDUP_WINDOW));
        Alerts { inner: Some(Arc::new(Inner { webhooks, queue, dedup, metrics })) }
    }

    /// Whether any webhook is told of anything.
    pub fn is_on(&self) -> bool {
        self.inner.is_some()
    }

    /// Whether some webhook is told of `event`.
    pub fn wants(&self, event: AlertEvent) -> bool {
        self.inner.as_ref().is_some_and(|inner| inner.webhooks.iter().any(|webhook| webhook.wants(event)))
    }

    /// Queues `alert` for every webhook that wants its event, unless the
    /// same was sent within the dedup window or the queue is full (then it
    /// is counted as `deduplicated` or `dropped`). Never waits.
    pub fn raise(&self, alert: Alert) {
        let Some(inner) = &self.inner else { return };
        if !self.wants(alert.event) {
            return;
        }
        let event = alert.event.name();
        let fresh = inner.dedup.lock().unwrap_or_else(PoisonError::into_inner).admit(
            alert.event,
            &alert.subject,
            Instant::now(),
        );
        if !fresh {
            inner.metrics.ops().alert(event, "deduplicated");
            return;
        }
        tracing::info!(event, summary = %alert.summary, "alert");
        if inner.queue.try_send(alert).is_err() {
            inner.metrics.ops().alert(event, "dropped");
        }
    }
}

/// Which event was last sent about which subject, and when.
#[derive(Debug)]
pub struct Dedup {
    window: Duration,
    last: HashMap<(AlertEvent, String), Instant>,
}

impl Dedup {
    /// Remembers for `window`.
    pub fn new(window: Duration) -> Self {
        Dedup { window, last: HashMap::new() }
    }

    /// Whether `event` about `subject` may go out at `now` (none went out
    /// within the window); if so, it is remembered as sent now.
    pub fn admit(&mut self, event: AlertEvent, subject: &str, now: Instant) -> bool {
        let recent = |at: &Instant| now.saturating_duration_since(*at) < self.window;
        if self.last.get(&(event, subject.to_owned())).is_some_and(recent) {
            return false;
        }
        if self.last.len() >= MAX_REMEMBERED {
            self.last.retain(|_, at| recent(at));
        }
        if self.last.len() < MAX_REMEMBERED {
            self.last.insert((event, subject.to_owned()), now);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_same_event_about_the_same_subject_goes_out_once_a_minute() {
        let mut dedup = Dedup::new(DEDUP_WINDOW);
        assert!(dedup.admit(AlertEvent::BreakerOpen, "openai", Instant::now()));
        assert!(!dedup.admit(AlertEvent::BreakerOpen, "openai", Instant::now()), "again at once: held back");
        assert!(dedup.admit(AlertEvent::BreakerOpen, "gemini", Instant::now()), "another subject goes out");
        assert!(dedup.admit(AlertEvent::BreakerClosed, "openai", Instant::now()), "another event goes out");
        tokio::time::advance(Duration::from_secs(59)).await;
        assert!(!dedup.admit(AlertEvent::BreakerOpen, "openai", Instant::now()), "59 s later: still held back");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(dedup.admit(AlertEvent::BreakerOpen, "openai", Instant::now()), "a minute later it goes out");
        assert!(!dedup.admit(AlertEvent::BreakerOpen, "openai", Instant::now()), "and the minute starts again");
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_back_alert_does_not_push_the_window_out() {
        let mut dedup = Dedup::new(DEDUP_WINDOW);
        assert!(dedup.admit(AlertEvent::RouteExhausted, "chat", Instant::now()));
        for seconds in [10, 20, 30, 40, 50] {
            tokio::time::advance(Duration::from_secs(10)).await;
            assert!(!dedup.admit(AlertEvent::RouteExhausted, "chat", Instant::now()), "at {seconds} s");
        }
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(dedup.admit(AlertEvent::RouteExhausted, "chat", Instant::now()), "60 s after the one sent");
    }
}
