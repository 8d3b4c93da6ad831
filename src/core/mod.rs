//! The attempt loop: try a route's targets in the order its strategy gives
//! (hedging a slow one with the next when the route asks), commit to the
//! first that reaches its commit point, and keep every failure for the
//! error. Nothing here knows HTTP on the client side or any provider's wire
//! format.

mod attempt;
mod commit;
mod drill;
mod failure;
mod race;
mod relay;
mod resume;
mod splice;
mod strategy;
mod structured;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

pub use drill::{DrillFault, Drills};
pub use failure::{AttemptRecord, Failure, ProxyError};
pub use relay::CommittedStream;

use crate::admission::Admission;
use crate::clock::far_future;
pub use crate::clock::later;
use crate::config::{Config, DEFAULT_REQUEST_BOUND, Hedge, MidstreamPolicy, Route, Target};
pub use crate::event::Winner;
use crate::event::{ChatRequest, Event};
use crate::observe::Metrics;
use crate::observe::traces::TraceHandle;
use crate::providers::client::ClientError;
use crate::providers::driver::HttpOpener;
use crate::providers::{Opener, ProviderError};
use crate::resilience::Health;
use crate::state::Store;
use attempt::{Ask, TargetRun};
use race::{Failures, Queue, Race};

/// The shortest automatic hedge delay, so a fast primary is not hedged on noise.
const HEDGE_AUTO_FLOOR: Duration = Duration::from_millis(50);

/// Runs requests against the providers through an [`Opener`], and keeps
/// each provider's health across requests.
#[derive(Clone)]
pub struct Engine {
    opener: Arc<dyn Opener>,
    admission: Arc<Admission>,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
    /// The state shared with other replicas, for provider quotas.
    store: Option<Arc<Store>>,
}

/// One pass of the attempt loop: what to ask, of which targets in which
/// order, and by when.
struct Plan<'a> {
    /// The request's id, for logs.
    id: &'a str,
    /// The request's trace, for the attempts' spans.
    trace: &'a TraceHandle,
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
    /// What the client asked; boxed, as every request in flight holds it.
    pub request: Box<ChatRequest>,
    /// Failures an operator asked to simulate.
    pub drills: Drills,
    /// The request's trace, each attempt's span a child of it (empty when
    /// traces are off).
    pub trace: TraceHandle,
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
    /// A pass over every target of `route`, in the order its strategy
    /// gives with the providers' `health` now, for the client's request.
    fn fresh(call: &'a Call, route: &'a Route, health: &Health, deadline: Instant) -> Self {
        Plan {
            id: &call.id,
            trace: &call.trace,
            route,
            ask: Ask::Fresh(&call.request),
            drills: &call.drills,
            order: strategy::order(route, health),
            deadline: Some(deadline),
            after: None,
        }
    }
}

impl Engine {
    /// An engine for `config`'s providers over HTTP, with its own connection pool.
    pub fn new(config: &Config) -> Result<Self, ClientError> {
        Ok(Self::with_opener(config, Arc::new(HttpOpener::new()?)))
    }

    /// An engine for `config`'s providers that reaches them through `opener`
    /// (a scripted one in tests).
    pub fn with_opener(config: &Config, opener: Arc<dyn Opener>) -> Self {
        let health = Health::new(config.providers.iter().map(|p| (p.name.as_str(), p.breaker)));
        let admission = Arc::new(Admission::default());
        Engine { opener, admission, health: Arc::new(health), metrics: Arc::new(Metrics::new()), store: None }
    }

    /// The same engine holding providers' quotas across every replica
    /// sharing `store` (none: each replica's own).
    pub fn with_store(mut self, store: Option<Arc<Store>>) -> Self {
        self.store = store;
        self
    }

    /// The same engine admitting candidates through `admission`.
    pub fn with_admission(mut self, admission: Admission) -> Self {
        self.admission = Arc::new(admission);
        self
    }

    /// Every provider's breaker, cooldown and latency state.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// The input tokens of `request` as the first target of `route` that
    /// speaks the request's own API counts them (Anthropic's
    /// `count_tokens`), with that provider's name; `None` when no target
    /// can or none answered within its first-token deadline, and the
    /// caller estimates.
    pub async fn count_tokens(&self, route: &Route, request: &ChatRequest) -> Option<(String, u64)> {
        let speakers = route.targets.iter().filter(|target| target.provider.kind.dialect() == Some(request.dialect));
        for target in speakers {
            let counting =
                self.opener.count_tokens(target.provider.kind, attempt::upstream(target, route, None), request);
            match tokio::time::timeout(target.first_token_timeout, counting).await {
                Ok(Ok(tokens)) => return Some((target.provider.name.clone(), tokens)),
                Ok(Err(err)) => tracing::debug!(provider = %target.provider.name, error = %err, "count_tokens failed"),
                Err(_) => tracing::debug!(provider = %target.provider.name, "count_tokens timed out"),
            }
        }
        None
    }

    /// The same state, held: for a task that lives beside the engine (the
    /// shared-state sync), which ends once the engine is gone.
    pub fn health_handle(&self) -> &Arc<Health> {
        &self.health
    }

    /// The proxy's Prometheus metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// How much of each of `providers`' `rpm` and `tpm` is in use now: this
    /// replica's share, raised to the cluster's when a shared store answers.
    pub async fn quota_used(&self, providers: &[Arc<crate::config::Provider>]) -> Vec<crate::admission::QuotaUse> {
        let used = self.admission.quota_used(providers);
        match &self.store {
            Some(store) if !used.is_empty() => crate::admission::cluster_quota_used(store, used).await,
            _ => used,
        }
    }

    /// Streams `call` from the first target of `route` that commits. With
    /// `on_midstream_failure = "resume"`, a stream that breaks later is
    /// continued by another candidate.
    pub async fn stream(&self, route: &Arc<Route>, call: Call) -> Result<Committed, ProxyError> {
        let started = Instant::now();
        let id = Arc::clone(&call.id);
        let deadline = later(started, route.request_timeout.unwrap_or(DEFAULT_REQUEST_BOUND));
        let (winner, events) =
            self.run(Plan::fresh(&call, route, &self.health, deadline), |events| async move { Ok(events) }).await?;
        let expected = self.expected_output(route, &call);
        let events = match route.on_midstream_failure {
            MidstreamPolicy::Error => events,
            MidstreamPolicy::Resume => {
                let deadline = route.request_timeout.map(|timeout| later(started, timeout));
                resume::resumable(self.clone(), Arc::clone(route), call, &winner, deadline, events)
            }
        };
        let events = match expected {
            Some(expected) => structured::checked_stream(events, expected, route.limits.max_answer_bytes, id),
            None => events,
        };
        Ok(Committed { winner, events })
    }

    /// Reads a whole answer to `call` from the first target of `route` that
    /// completes one (and, when JSON was asked for, a valid one); a failure
    /// anywhere before the end moves on. The whole
    /// request is bounded by the route's `request_timeout_ms` (or
    /// [`DEFAULT_REQUEST_BOUND`]) and the answer by `max_answer_bytes`.
    pub async fn complete(&self, route: &Route, call: &Call) -> Result<Completed, ProxyError> {
        let timeout = route.request_timeout.unwrap_or(DEFAULT_REQUEST_BOUND);
        let deadline = later(Instant::now(), timeout);
        let max_bytes = route.limits.max_answer_bytes;
        let expected = self.expected_output(route, call);
        let collect = |events| {
            let expected = expected.as_ref();
            async move {
                let events = relay::collect(events, deadline, timeout, max_bytes).await?;
                match expected {
                    Some(expected) => structured::checked(expected, events),
                    None => Ok(events),
                }
            }
        };
        let (winner, events) = self.run(Plan::fresh(call, route, &self.health, deadline), collect).await?;
        Ok(Completed { winner, events })
    }

    /// The JSON the answer must be, when the request asks for JSON and the
    /// route checks it (`validate_json`, on by default).
    fn expected_output(&self, route: &Route, call: &Call) -> Option<structured::Expected> {
        route
            .surface
            .validate_json
            .then(|| structured::Expected::of(call.request.response_format.as_ref(), &call.id))?
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
        let hedge = self.hedge_delay(route, plan.order.first().and_then(|first| route.targets.get(*first)));
        let (mut queue, mut race, mut failed) = (Queue::new(&plan.order), Race::new(), Failures::default());
        let mut last_failed = plan.after;
        loop {
            if plan.deadline.is_some_and(|deadline| deadline <= Instant::now()) {
                failed.records.push(request_timeout_record(route));
                break;
            }
            let hedge_due = race.hedge_due(hedge) && queue.has_pending();
            if (race.is_idle() || hedge_due)
                && let Some((index, forced)) = queue.next(route)
            {
                let from = if hedge_due { race.last_started.map(|from| (from, "hedge")) } else { last_failed.take() };
                if let Some((from, reason)) = from {
                    self.record_failover(route, from, index, reason);
                }
                race.start(index, Box::pin(self.run_target(&plan, index, forced)));
            }
            if race.is_idle() {
                if queue.has_last_resort() {
                    continue;
                }
                break;
            }
            let Some(run) = race.next(hedge.filter(|_| queue.has_pending()), plan.deadline).await else { continue };
            if let Some(last) = run.failures.last() {
                last_failed = Some((run.index, last.failure.kind()));
            }
            let Some(opened) = absorb(&plan, &mut queue, &mut failed, run)? else { continue };
            race.stop();
            let (index, mut opened) = opened;
            let Some(target) = route.targets.get(index) else { continue };
            let dropped: Vec<String> = opened.dropped.drain(..).map(|field| field.to_string()).collect();
            let attempts = failed.attempts_with_winner();
            let started = Instant::now();
            match finish(relay::committed(
                opened.held,
                opened.rest,
                route.idle_timeout,
                opened.tickets,
                route.surface.stream_reasoning
                    || plan.ask.original().shows_reasoning_from(target.provider.kind.dialect()),
            ))
            .await
            {
                Ok(answer) => {
                    let provider = Arc::from(target.provider.name.as_str());
                    let tried = failed.records.iter().map(AttemptRecord::tried).collect();
                    let model = target.model.clone();
                    let winner = Winner { provider, model, attempts, target: index, dropped, tried };
                    return Ok((winner, answer));
                }
                Err(failure) => failed.records.push(AttemptRecord {
                    provider: target.provider.name.clone(),
                    model: target.model.clone(),
                    failure,
                    elapsed: started.elapsed(),
                }),
            }
        }
        Err(failed.into_error(matches!(plan.ask, Ask::Fresh(_))))
    }

    fn record_failover(&self, route: &Route, from: usize, to: usize, reason: &str) {
        if let (Some(from), Some(to)) = (route.targets.get(from), route.targets.get(to)) {
            self.metrics.failover(&from.provider.name, &to.provider.name, reason);
        }
    }

    /// How long a turn may go uncommitted before the next candidate starts
    /// beside it; `auto` goes by the pass's `primary`, the first of its order.
    fn hedge_delay(&self, route: &Route, primary: Option<&Target>) -> Option<Duration> {
        match route.hedge? {
            Hedge::After(delay) => Some(delay),
            Hedge::Auto => {
                let primary = primary?;
                let ceiling = primary.first_token_timeout;
                let p95 = self.health.provider(&primary.provider.name).ttft_p95().unwrap_or(ceiling);
                Some(p95.clamp(HEDGE_AUTO_FLOOR.min(ceiling), ceiling))
            }
        }
    }
}

/// Takes in a finished turn: its skip, its failures, and its answer if it
/// committed. A provider that rejects the client's request itself ends the
/// pass at once; one that finds the prompt too long for its context window
/// passes it on to the targets whose window is larger or undeclared.
fn absorb(
    plan: &Plan<'_>,
    queue: &mut Queue,
    failed: &mut Failures,
    run: TargetRun,
) -> Result<Option<(usize, attempt::Opened)>, ProxyError> {
    let Some(target) = plan.route.targets.get(run.index) else { return Ok(None) };
    if let Some(until) = run.skipped_until {
        queue.skipped(run.index, until);
    }
    failed.records.extend(run.failures);
    if let (Ask::Fresh(_), Some(last)) = (plan.ask, failed.records.last())
        && let Failure::Provider(ProviderError::BadRequest { context_length, .. }) = &last.failure
    {
        match (context_length, target.context_window) {
            (true, Some(window)) => queue.need_window_above(window),
            (true, None) => {}
            (false, _) => {
                let rejected = failed.records.pop().map(ProxyError::rejected);
                return Err(rejected.unwrap_or_else(|| ProxyError::AllFailed(Vec::new())));
            }
        }
    }
    Ok(run.opened.map(|opened| (run.index, opened)))
}

fn request_timeout_record(route: &Route) -> AttemptRecord {
    let timeout = route.request_timeout.unwrap_or(DEFAULT_REQUEST_BOUND);
    AttemptRecord {
        provider: "baton".to_owned(),
        model: route.model.clone(),
        failure: Failure::RequestTimeout(timeout),
        elapsed: timeout,
    }
}
