//! The attempt loop: try a route's targets in order (hedging a slow one with
//! the next when the route asks), commit to the first that reaches its commit
//! point, and keep every failure for the error. Nothing here knows HTTP on the
//! client side or any provider's wire format.

mod attempt;
mod drill;
mod failure;
mod relay;
mod resume;
mod splice;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::time::{Instant, sleep_until};

pub use drill::{DrillFault, Drills};
pub use failure::{AttemptRecord, Failure, ProxyError};
pub use relay::CommittedStream;

use crate::config::{Config, Hedge, MidstreamPolicy, Provider, Route};
use crate::event::{ChatRequest, Event};
use crate::observe::Metrics;
use crate::providers::ProviderError;
use crate::providers::client::{Client, ClientError};
use crate::resilience::Health;
use attempt::{Ask, TargetRun};

/// Idle upstream connections kept per provider host: enough to reuse under a
/// steady load, few enough that a burst does not keep thousands of file
/// descriptors open after it.
const MAX_IDLE_PER_PROVIDER: usize = 512;

/// The shortest automatic hedge delay, so a fast primary is not hedged on noise.
const HEDGE_AUTO_FLOOR: Duration = Duration::from_millis(50);

/// Sends requests upstream through one shared connection pool, and keeps
/// each provider's health across requests.
#[derive(Clone)]
pub struct Engine {
    http: Client,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
}

/// Which provider answered, and after how many attempts.
#[derive(Debug, Clone)]
pub struct Winner {
    /// The provider that answered.
    pub provider: Arc<Provider>,
    /// The upstream model that answered.
    pub model: String,
    /// Requests sent, the winner's included (skipped candidates are not counted).
    pub attempts: u32,
    /// The winner's position among the route's targets.
    pub target: usize,
}

/// One pass of the attempt loop: what to ask, of which targets in which
/// order, and by when.
struct Plan<'a> {
    /// The request's id, for logs.
    id: &'a str,
    route: &'a Route,
    ask: Ask<'a>,
    drills: &'a Drills,
    order: Vec<usize>,
    deadline: Option<Instant>,
    /// The target whose failure led to this pass, and why (a resume).
    after: Option<(usize, &'static str)>,
}

/// One client request as the engine takes it.
#[derive(Debug, Clone)]
pub struct Call {
    /// The request's id: the client's `x-request-id`, or one made up.
    pub id: Arc<str>,
    /// What the client asked.
    pub request: ChatRequest,
    /// Failures an operator asked to simulate.
    pub drills: Drills,
}

/// A streamed answer that has committed: its first token is in hand.
pub struct Committed {
    /// Who is answering.
    pub winner: Winner,
    /// The answer's events, the first token first.
    pub events: CommittedStream,
}

/// A whole answer, read to its end before anything is sent.
pub struct Completed {
    /// Who answered.
    pub winner: Winner,
    /// Every event of the answer.
    pub events: Vec<Event>,
}

impl<'a> Plan<'a> {
    /// A pass over every target of `route`, in order, for the client's request.
    fn fresh(call: &'a Call, route: &'a Route, deadline: Option<Instant>) -> Self {
        Plan {
            id: &call.id,
            route,
            ask: Ask::Fresh(&call.request),
            drills: &call.drills,
            order: (0..route.targets.len()).collect(),
            deadline,
            after: None,
        }
    }
}

impl Engine {
    /// An engine for `config`'s providers with its own connection pool.
    /// Deadlines are the core's, so the client has no timeouts of its own
    /// and never follows redirects.
    pub fn new(config: &Config) -> Result<Self, ClientError> {
        let http = Client::new(MAX_IDLE_PER_PROVIDER, Duration::from_secs(60))?;
        let health = Health::new(config.providers.iter().map(|p| (p.name.as_str(), p.breaker)));
        Ok(Engine { http, health: Arc::new(health), metrics: Arc::new(Metrics::new()) })
    }

    /// Every provider's breaker, cooldown and latency state.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// The proxy's Prometheus metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Streams `call` from the first target of `route` that commits. With
    /// `on_midstream_failure = "resume"`, a stream that breaks later is
    /// continued by another candidate.
    pub async fn stream(&self, route: &Arc<Route>, call: Call) -> Result<Committed, ProxyError> {
        let deadline = route.request_timeout.map(|timeout| Instant::now() + timeout);
        let (winner, events) =
            self.run(Plan::fresh(&call, route, deadline), |events| async move { Ok(events) }).await?;
        let events = match route.on_midstream_failure {
            MidstreamPolicy::Error => events,
            MidstreamPolicy::Resume => {
                resume::resumable(self.clone(), Arc::clone(route), call, &winner, deadline, events)
            }
        };
        Ok(Committed { winner, events })
    }

    /// Reads a whole answer to `call` from the first target of `route` that
    /// completes one; a failure anywhere before the end moves on.
    pub async fn complete(&self, route: &Route, call: &Call) -> Result<Completed, ProxyError> {
        let deadline = route.request_timeout.map(|timeout| Instant::now() + timeout);
        let (winner, events) = self.run(Plan::fresh(call, route, deadline), relay::collect).await?;
        Ok(Completed { winner, events })
    }

    /// Gives the planned targets their turns until one commits and `finish`
    /// accepts its stream. A turn starts when the previous one failed, or —
    /// with a hedge — when it has gone too long without committing; the first
    /// to commit wins and the others are dropped, closing their connections.
    async fn run<T, F, Fut>(&self, plan: Plan<'_>, finish: F) -> Result<(Winner, T), ProxyError>
    where
        F: Fn(CommittedStream) -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let route = plan.route;
        let mut failed: Vec<AttemptRecord> = Vec::new();
        let mut pending = plan.order.iter().copied().peekable();
        let mut needs_window_above: Option<u64> = None;
        let mut turns: FuturesUnordered<Pin<Box<dyn Future<Output = TargetRun> + Send + '_>>> = FuturesUnordered::new();
        let mut last_start = Instant::now();
        let mut last_started: Option<usize> = None;
        let mut last_failed = plan.after;
        loop {
            let idle = turns.is_empty();
            let hedge_due = !idle && self.hedge_delay(route).is_some_and(|delay| last_start + delay <= Instant::now());
            if idle || hedge_due {
                let fits = |index: &usize| {
                    let window = route.targets.get(*index).and_then(|t| t.context_window);
                    needs_window_above.is_none_or(|floor| window.is_some_and(|w| w > floor))
                };
                if let Some(index) = pending.by_ref().find(fits) {
                    let moved_from =
                        if hedge_due { last_started.map(|from| (from, "hedge")) } else { last_failed.take() };
                    if let Some((from, reason)) = moved_from {
                        self.record_failover(route, from, index, reason);
                    }
                    turns.push(Box::pin(self.run_target(&plan, index)));
                    last_start = Instant::now();
                    last_started = Some(index);
                }
            }
            if turns.is_empty() {
                break;
            }
            let hedge_at = self.hedge_delay(route).filter(|_| pending.peek().is_some()).map(|d| last_start + d);
            let wake_at = [hedge_at, plan.deadline].into_iter().flatten().min();
            let run = tokio::select! {
                Some(run) = turns.next() => run,
                () = sleep_until(wake_at.unwrap_or_else(far_future)), if wake_at.is_some() => {
                    if plan.deadline.is_some_and(|deadline| deadline <= Instant::now()) {
                        failed.push(request_timeout_record(route));
                        break;
                    }
                    continue;
                }
            };
            let Some(target) = route.targets.get(run.index) else { continue };
            if let Some(last) = run.failures.last() {
                last_failed = Some((run.index, last.failure.kind()));
            }
            failed.extend(run.failures);
            if let (Ask::Fresh(_), Some(last)) = (plan.ask, failed.last()) {
                if let Failure::Provider(ProviderError::BadRequest { context_length, .. }) = &last.failure {
                    match target.context_window.filter(|_| *context_length) {
                        Some(window) => needs_window_above = Some(window),
                        None => {
                            return Err(failed
                                .pop()
                                .map(ProxyError::rejected)
                                .unwrap_or(ProxyError::AllFailed(failed)));
                        }
                    }
                }
            }
            let Some(opened) = run.opened else { continue };
            turns.clear();
            let attempts =
                u32::try_from(failed.iter().filter(|r| !r.failure.is_skip()).count() + 1).unwrap_or(u32::MAX);
            let started = Instant::now();
            match finish(relay::committed(opened.held, opened.rest, route.idle_timeout, opened.outcome)).await {
                Ok(answer) => {
                    let winner = Winner {
                        provider: Arc::clone(&target.provider),
                        model: target.model.clone(),
                        attempts,
                        target: run.index,
                    };
                    return Ok((winner, answer));
                }
                Err(failure) => failed.push(AttemptRecord {
                    provider: target.provider.name.clone(),
                    model: target.model.clone(),
                    failure,
                    elapsed: started.elapsed(),
                }),
            }
        }
        // A context-length error that no later target had the window for goes back to the client.
        if matches!(plan.ask, Ask::Fresh(_)) {
            if let Some(last) = failed.pop_if(|record| !record.failure.is_failover()) {
                return Err(ProxyError::rejected(last));
            }
        }
        Err(ProxyError::AllFailed(failed))
    }

    fn record_failover(&self, route: &Route, from: usize, to: usize, reason: &str) {
        if let (Some(from), Some(to)) = (route.targets.get(from), route.targets.get(to)) {
            self.metrics.failover(&from.provider.name, &to.provider.name, reason);
        }
    }

    /// How long a turn may go uncommitted before the next candidate starts beside it.
    fn hedge_delay(&self, route: &Route) -> Option<Duration> {
        match route.hedge? {
            Hedge::After(delay) => Some(delay),
            Hedge::Auto => {
                let primary = route.targets.first()?;
                let ceiling = primary.first_token_timeout;
                let p95 = self.health.provider(&primary.provider.name).ttft_p95().unwrap_or(ceiling);
                Some(p95.clamp(HEDGE_AUTO_FLOOR.min(ceiling), ceiling))
            }
        }
    }
}

fn request_timeout_record(route: &Route) -> AttemptRecord {
    let timeout = route.request_timeout.unwrap_or_default();
    AttemptRecord {
        provider: "baton".to_owned(),
        model: route.model.clone(),
        failure: Failure::RequestTimeout(timeout.as_millis()),
        elapsed: timeout,
    }
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365)
}
