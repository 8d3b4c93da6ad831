//! The attempt loop: try a route's targets in the order its strategy gives
//! (hedging a slow one with the next when the route asks), commit to the
//! first that reaches its commit point, and keep every failure for the
//! error. Nothing here knows HTTP on the client side or any provider's wire
//! format.

mod ask;
mod attempt;
mod budget;
mod commit;
mod drill;
mod error;
mod failure;
mod pass;
mod plan;
mod race;
mod relay;
mod resume;
mod retry;
mod rules;
mod splice;
mod strategy;
mod structured;
mod turn;

use std::sync::Arc;

use tokio::time::Instant;

pub use error::ProxyError;
pub use failure::{AttemptRecord, Failure};
pub use relay::CommittedStream;

use crate::admission::Admission;
use crate::clock::far_future;
use crate::clock::later;
use crate::config::{Config, Drills, MidstreamPolicy, Route};
pub use crate::event::Winner;
use crate::event::{ChatRequest, Event};
use crate::observe::traces::TraceHandle;
use crate::observe::{AttemptObserver, Metrics};
use crate::providers::Opener;
use crate::resilience::Health;
use crate::state::Store;
use attempt::Pipeline;
use budget::{RetryBudget, RetryBudgets};
use plan::Plan;
use resume::Continuation;

/// Runs requests against the providers through an [`Opener`], and keeps
/// each provider's health and each route's retry budget across requests.
#[derive(Clone)]
pub struct Engine {
    /// What every attempt goes through.
    pipeline: Pipeline,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
    budgets: Arc<RetryBudgets>,
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

impl Engine {
    /// An engine for `config`'s providers that reaches them through `opener`:
    /// `providers::driver::HttpOpener` over HTTP, a scripted one in tests.
    /// The engine makes no opener of its own: whoever makes the engine
    /// decides how providers are reached.
    pub fn with_opener(config: &Config, opener: Arc<dyn Opener>) -> Self {
        let health = Health::new(config.providers.iter().map(|p| (p.name.as_str(), p.breaker)));
        let metrics = Arc::new(Metrics::new());
        let observer = AttemptObserver::new(Arc::clone(&metrics));
        let pipeline = Pipeline { opener, admission: Arc::new(Admission::default()), store: None, observer };
        Engine { pipeline, health: Arc::new(health), metrics, budgets: Arc::default() }
    }

    /// The same engine holding providers' quotas across every replica
    /// sharing `store` (none: each replica's own).
    pub fn with_store(mut self, store: Option<Arc<Store>>) -> Self {
        self.pipeline.store = store;
        self
    }

    /// The same engine admitting candidates through `admission`.
    pub fn with_admission(mut self, admission: Admission) -> Self {
        self.pipeline.admission = Arc::new(admission);
        self
    }

    /// Every provider's breaker, cooldown and latency state.
    pub fn health(&self) -> &Health {
        &self.health
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

    /// The input tokens of `request` as the first target of `route` that
    /// speaks the request's own API counts them (Anthropic's
    /// `count_tokens`), with that provider's name; `None` when no target
    /// can or none answered within its first-token deadline, and the
    /// caller estimates.
    pub async fn count_tokens(&self, route: &Route, request: &ChatRequest) -> Option<(String, u64)> {
        let speakers = route
            .targets
            .iter()
            .filter(|target| target.provider.kind.dialect_for(&target.model) == Some(request.dialect));
        for target in speakers {
            let upstream = attempt::upstream(target, route.limits.max_event_bytes, None);
            let counting = self.pipeline.opener.count_tokens(target.provider.kind, upstream, request);
            match tokio::time::timeout(target.first_token_timeout, counting).await {
                Ok(Ok(tokens)) => return Some((target.provider.name.clone(), tokens)),
                Ok(Err(err)) => tracing::debug!(provider = %target.provider.name, error = %err, "count_tokens failed"),
                Err(_) => tracing::debug!(provider = %target.provider.name, "count_tokens timed out"),
            }
        }
        None
    }

    /// How much of each of `providers`' `rpm` and `tpm` is in use now: this
    /// replica's share, raised to the cluster's when a shared store answers.
    pub async fn quota_used(&self, providers: &[Arc<crate::config::Provider>]) -> Vec<crate::admission::QuotaUse> {
        let used = self.pipeline.admission.quota_used(providers);
        match &self.pipeline.store {
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
        let budget = self.budget(route);
        let plan = Plan::fresh(&call, route, &self.health, &budget, started);
        let rules = plan.rules;
        let (winner, events) = pass::run(self, plan, |events| async move { Ok(events) }).await?;
        let expected = self.expected_output(route, &call);
        let events = match route.on_midstream_failure {
            MidstreamPolicy::Error => events,
            MidstreamPolicy::Resume => {
                let deadline = rules.deadlines.resume_deadline(started);
                let engine = self.clone();
                let from = Continuation { engine, route: Arc::clone(route), rules, budget, call, deadline };
                resume::resumable(from, &winner, events)
            }
        };
        let events = match expected {
            Some(expected) => structured::checked_stream(events, expected, rules.max_answer_bytes, id),
            None => events,
        };
        Ok(Committed { winner, events })
    }

    /// Reads a whole answer to `call` from the first target of `route` that
    /// completes one (and, when JSON was asked for, a valid one); a failure
    /// anywhere before the end moves on. The whole request is bounded by the
    /// route's `request_timeout_ms` (or
    /// [`DEFAULT_REQUEST_BOUND`](crate::config::DEFAULT_REQUEST_BOUND)) and
    /// the answer by `max_answer_bytes`.
    pub async fn complete(&self, route: &Route, call: &Call) -> Result<Completed, ProxyError> {
        let started = Instant::now();
        let budget = self.budget(route);
        let plan = Plan::fresh(call, route, &self.health, &budget, started);
        let (deadlines, max_bytes) = (plan.rules.deadlines, plan.rules.max_answer_bytes);
        let (deadline, timeout) = (deadlines.request_deadline(started), deadlines.request_bound());
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
        let (winner, events) = pass::run(self, plan, collect).await?;
        Ok(Completed { winner, events })
    }

    /// The retry budget of `route`, with this request's deposit made.
    fn budget(&self, route: &Route) -> Arc<RetryBudget> {
        let budget = self.budgets.of(route);
        budget.deposit();
        budget
    }

    /// The JSON the answer must be, when the request asks for JSON and the
    /// route checks it (`validate_json`, on by default).
    fn expected_output(&self, route: &Route, call: &Call) -> Option<structured::Expected> {
        route
            .surface
            .validate_json
            .then(|| structured::Expected::of(call.request.response_format.as_ref(), &call.id))?
    }
}
