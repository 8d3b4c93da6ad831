//! Measures one request from inside its response: time to first token,
//! duration, usage, who answered and how it ended — recorded once, when the
//! answer ends or is dropped, because middleware only ever sees headers.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::traces::{RequestEnd, TraceHandle};
use super::{Metrics, RouteStats};
use crate::config::Price;
use crate::event::{Tried, Usage, Winner};
use crate::resilience::{ProviderHealth, Tally};
use crate::store::Recording;

/// How a request ended when nothing else was said: the client went away.
const CLIENT_DISCONNECT: &str = "client_disconnect";
/// How a request ended when its client stopped reading for the stall timeout.
const CLIENT_STALLED: &str = "client_stalled";
/// The status the request log gives a request that ended before any
/// answer or error was sent (its client left): nginx's "client closed request".
const CLIENT_CLOSED: u16 = 499;

/// The key label and log value of a request that presented no client key.
pub const NO_KEY: &str = "-";

/// How a request ended, for what it reserved or spent.
#[derive(Debug, Clone, Copy)]
pub struct Ended<'a> {
    /// The client key's name, if it presented one.
    pub key: Option<&'a str>,
    /// The route that served it.
    pub route: &'a str,
    /// The provider that answered, if one did.
    pub provider: Option<&'a str>,
    /// The usage the provider reported.
    pub usage: Usage,
    /// Whether an answer committed (a provider was generating for it).
    pub committed: bool,
    /// What it cost: the reported usage at the answering target's price.
    pub cost_usd: Option<f64>,
}

/// What a request holds until it ends (a key's token reservation, its
/// spend to charge), settled exactly once with how it ended.
pub trait Settle: Send {
    /// The request ended so.
    fn settle(self: Box<Self>, ended: &Ended<'_>);
}

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
    key: Option<String>,
    price: Option<Price>,
    downgraded_from: Option<String>,
    settle: Option<Box<dyn Settle>>,
    trace: TraceHandle,
    /// The request's row in the request log, sent when the watch ends.
    recording: Option<Recording>,
    /// The status the client got, when the request ended with an error.
    status: Option<u16>,
    /// The attempts that did not answer, when no attempt did.
    tried: Vec<Tried>,
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
            key: None,
            price: None,
            downgraded_from: None,
            settle: None,
            trace: TraceHandle::default(),
            recording: None,
            status: None,
            tried: Vec::new(),
        }
    }

    /// The request's row in the request log, completed and sent when the
    /// watch ends (none: the store keeps nothing).
    pub fn recorded(&mut self, recording: Option<Recording>) {
        self.recording = recording;
    }

    /// Whether the request has a row to fill: only then is anything gathered for it.
    pub fn is_recording(&self) -> bool {
        self.recording.is_some()
    }

    /// The answer's text so far, for a row that keeps bodies.
    pub fn answer_text(&mut self, text: &str) {
        if let Some(recording) = &mut self.recording {
            recording.answer(text);
        }
    }

    /// The request ended as `outcome` with an error of HTTP `status`,
    /// after the attempts `tried` (none when nothing was tried).
    pub fn failed(&mut self, outcome: &'static str, status: u16, tried: Vec<Tried>) {
        self.end(outcome);
        self.status.get_or_insert(status);
        self.tried = tried;
    }

    /// The client key the request presented, by name.
    pub fn key(&mut self, name: &str) {
        self.key = Some(name.to_owned());
    }

    /// What the request holds until it ends, settled when the watch ends.
    pub fn settle_with(&mut self, settle: Box<dyn Settle>) {
        self.settle = Some(settle);
    }

    /// A budget moved the request here from route `from`.
    pub fn downgraded(&mut self, from: &str) {
        self.downgraded_from = Some(from.to_owned());
    }

    /// `stalled` tells, when the answer is abandoned, whether the client
    /// had stopped reading: then the request ends as `client_stalled`.
    pub fn stalled_when(&mut self, stalled: impl Fn() -> bool + Send + 'static) {
        self.stalled = Some(Box::new(stalled));
    }

    /// The request's trace, whose span ends with the watch.
    pub fn traced(&mut self, trace: TraceHandle) {
        self.trace = trace;
    }

    /// The request's place in its trace, for the engine's attempts.
    pub fn trace(&self) -> &TraceHandle {
        &self.trace
    }

    /// The request's id, for the response header.
    pub fn id(&self) -> &Arc<str> {
        &self.id
    }

    /// An attempt committed: its first byte is going out now. A streamed
    /// answer counts as in flight for `health` until the watch ends.
    /// `price` is the answering target's, which the answer's usage is charged at.
    pub fn committed(&mut self, winner: &Winner, price: Option<Price>, streaming: Option<Arc<ProviderHealth>>) {
        self.price = price;
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

    /// What the answer cost: its reported usage at the answering target's price.
    fn cost(&self) -> Option<f64> {
        let price = self.winner.as_ref().and(self.price)?;
        self.usage.reported_tokens().map(|_| price.cost(self.usage))
    }

    /// Completes the request's row in the request log and sends it.
    fn fill_row(&mut self, outcome: &str, latency: Duration, cost_usd: Option<f64>) {
        let Some(mut recording) = self.recording.take() else { return };
        let row = recording.row();
        row.key.clone_from(&self.key);
        row.route = Some(self.route.clone());
        match &self.winner {
            Some(winner) => {
                row.provider = Some(winner.provider.to_string());
                row.model = Some(winner.model.clone());
                row.attempts = winner.attempts;
                row.tried = winner.tried.clone();
                row.status = 200;
            }
            None => {
                row.tried = std::mem::take(&mut self.tried);
                let sent = row.tried.iter().filter(|tried| tried.sent).count();
                row.attempts = u32::try_from(sent).unwrap_or(u32::MAX);
                row.status = self.status.unwrap_or(CLIENT_CLOSED);
            }
        }
        row.ttft_ms = self.first_token.map(millis);
        row.duration_ms = millis(latency);
        row.usage = self.usage;
        row.cost_usd = cost_usd;
        outcome.clone_into(&mut row.outcome);
        if row.trace_id.is_none() {
            row.trace_id = self.trace.trace_id();
        }
        recording.finish();
    }

    /// The attempts sent to a provider: the winner's count, or, when none
    /// answered, those of the failed attempts that were sent (not skipped).
    fn attempts_sent(&self) -> u32 {
        match &self.winner {
            Some(winner) => winner.attempts,
            None => u32::try_from(self.tried.iter().filter(|tried| tried.sent).count()).unwrap_or(u32::MAX),
        }
    }

    /// The request's log line, `attempts` sent in all.
    fn log(&self, outcome: &str, latency: Duration, cost_usd: Option<f64>, attempts: u32) {
        let (provider, model) = match &self.winner {
            Some(winner) => (&*winner.provider, winner.model.as_str()),
            None => ("", ""),
        };
        let (input, output) = (self.usage.input_tokens.unwrap_or(0), self.usage.output_tokens.unwrap_or(0));
        tracing::info!(
            request_id = %self.id,
            key = self.key.as_deref().unwrap_or(NO_KEY),
            route = %self.route,
            downgraded_from = self.downgraded_from.as_deref(),
            provider,
            model,
            attempt = attempts,
            outcome,
            ttft_ms = self.first_token.map(millis),
            latency_ms = millis(latency),
            input_tokens = input,
            output_tokens = output,
            fallback_count = attempts.saturating_sub(1),
            cost_usd,
            "request"
        );
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
        let cost_usd = self.cost();
        if let Some(winner) = &self.winner {
            let (input, output) = (self.usage.input_tokens.unwrap_or(0), self.usage.output_tokens.unwrap_or(0));
            self.metrics.tokens(&winner.provider, input, output);
            if let Some(cost) = cost_usd {
                self.metrics.cost(&self.route, &winner.provider, self.key.as_deref().unwrap_or(NO_KEY), cost);
            }
        }
        if let Some(settle) = self.settle.take() {
            let provider = self.winner.as_ref().map(|winner| &*winner.provider);
            let (key, committed) = (self.key.as_deref(), self.winner.is_some());
            settle.settle(&Ended { key, route: &self.route, provider, usage: self.usage, committed, cost_usd });
        }
        let attempts = self.attempts_sent();
        if self.trace.is_on() {
            let answered_by = self.winner.as_ref().map(|winner| (&*winner.provider, winner.model.as_str()));
            let first_token = self.first_token;
            self.trace.end(&RequestEnd { outcome, answered_by, attempts, usage: self.usage, first_token });
        }
        self.fill_row(outcome, latency, cost_usd);
        // The route's tally counts an answer that came after a failover.
        let failed_over = self.winner.as_ref().is_some_and(|winner| winner.attempts > 1);
        let answered = self.winner.is_some() && outcome == "ok";
        self.routes.record(&self.route, Tally { total: 1, ok: u64::from(answered), failed: u64::from(failed_over) });
        self.log(outcome, latency, cost_usd, attempts);
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
