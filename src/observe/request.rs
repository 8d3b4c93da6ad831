//! Measures one request from inside its response: time to first token,
//! duration, usage, who answered and how it ended — recorded once, when the
//! answer ends or is dropped, because middleware only ever sees headers.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{Metrics, RouteStats};
use crate::event::Usage;
use crate::event::Winner;
use crate::resilience::{ProviderHealth, Tally};

/// How a request ended when nothing else was said: the client went away.
const CLIENT_DISCONNECT: &str = "client_disconnect";
/// How a request ended when its client stopped reading for the stall timeout.
const CLIENT_STALLED: &str = "client_stalled";

/// The per-request record; logs one line and updates metrics when dropped.
pub struct RequestWatch {
    metrics: Arc<Metrics>,
    routes: Arc<RouteStats>,
    id: Arc<str>,
    route: String,
    started: Instant,
    winner: Option<Winner>,
    streaming: Option<Arc<ProviderHealth>>,
    first_token: Option<Duration>,
    usage: Usage,
    outcome: Option<&'static str>,
    /// Says whether the client stopped reading, for a request it abandoned.
    stalled: Option<Box<dyn Fn() -> bool + Send>>,
}

impl RequestWatch {
    /// Starts watching request `id` on `route`.
    pub fn new(metrics: Arc<Metrics>, routes: Arc<RouteStats>, id: Arc<str>, route: &str) -> Self {
        RequestWatch {
            metrics,
            routes,
            id,
            route: route.to_owned(),
            started: Instant::now(),
            winner: None,
            streaming: None,
            first_token: None,
            usage: Usage::default(),
            outcome: None,
            stalled: None,
        }
    }

    /// `stalled` tells, when the answer is abandoned, whether the client
    /// had stopped reading: then the request ends as `client_stalled`.
    pub fn stalled_when(&mut self, stalled: impl Fn() -> bool + Send + 'static) {
        self.stalled = Some(Box::new(stalled));
    }

    /// The request's id, for the response header.
    pub fn id(&self) -> &Arc<str> {
        &self.id
    }

    /// An attempt committed: its first byte is going out now. A streamed
    /// answer counts as in flight for `health` until the watch ends.
    pub fn committed(&mut self, winner: &Winner, streaming: Option<Arc<ProviderHealth>>) {
        self.first_token = Some(self.started.elapsed());
        if let Some(health) = &streaming {
            health.stream_started();
        }
        self.streaming = streaming;
        self.winner = Some(winner.clone());
    }

    /// Token counts so far; later ones replace earlier ones.
    pub fn usage(&mut self, usage: Usage) {
        self.usage.merge(usage);
    }

    /// The request ended as `outcome` (`ok`, a failure class, an error kind).
    pub fn end(&mut self, outcome: &'static str) {
        self.outcome.get_or_insert(outcome);
    }
}

impl Drop for RequestWatch {
    fn drop(&mut self) {
        let stalled = self.stalled.as_ref().is_some_and(|stalled| stalled());
        let outcome = self.outcome.unwrap_or(if stalled { CLIENT_STALLED } else { CLIENT_DISCONNECT });
        let latency = self.started.elapsed();
        if let Some(health) = &self.streaming {
            health.stream_ended();
        }
        self.metrics.request(&self.route, outcome, latency);
        let (provider, model, attempts) = match &self.winner {
            Some(winner) => (&*winner.provider, winner.model.as_str(), winner.attempts),
            None => ("", "", 0),
        };
        let (input, output) = (self.usage.input_tokens.unwrap_or(0), self.usage.output_tokens.unwrap_or(0));
        if self.winner.is_some() {
            self.metrics.tokens(provider, input, output);
        }
        let failed_over = attempts > 1;
        let answered = self.winner.is_some() && outcome == "ok";
        self.routes.record(&self.route, Tally { total: 1, ok: u64::from(answered), failed: u64::from(failed_over) });
        tracing::info!(
            request_id = %self.id,
            route = %self.route,
            provider,
            model,
            attempt = attempts,
            outcome,
            ttft_ms = self.first_token.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            latency_ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX),
            input_tokens = input,
            output_tokens = output,
            fallback_count = attempts.saturating_sub(1),
            "request"
        );
    }
}
