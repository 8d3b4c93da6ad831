//! One pass of the attempt loop: give the planned targets their turns until
//! one commits and the caller accepts its stream. A turn starts when the
//! previous one failed, or — with a hedge, while the retry budget has room —
//! when it has gone too long without committing; the first to commit wins
//! and the others are dropped, closing their connections.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::attempt::Opened;
use super::plan::Plan;
use super::race::{Failures, Queue, Race};
use super::turn::{self, TargetRun};
use super::{AttemptRecord, CommittedStream, Engine, Failure, ProxyError, Winner, relay};
use crate::config::Hedge;
use crate::providers::ProviderError;

/// The shortest automatic hedge delay, so a fast primary is not hedged on noise.
const HEDGE_AUTO_FLOOR: Duration = Duration::from_millis(50);

/// A pass under way: the candidates left, the turns running, the failures so far.
struct Pass<'a> {
    engine: &'a Engine,
    plan: &'a Plan<'a>,
    queue: Queue,
    race: Race<'a>,
    failed: Failures,
    /// The target whose failure the next turn follows, and why.
    last_failed: Option<(usize, &'static str)>,
    /// How long a turn may go uncommitted before the next starts beside it.
    hedge: Option<Duration>,
}

/// Runs `plan` until a target commits and `finish` accepts its stream.
pub(super) async fn run<T, F, Fut>(engine: &Engine, plan: Plan<'_>, finish: F) -> Result<(Winner, T), ProxyError>
where
    F: Fn(CommittedStream) -> Fut,
    Fut: Future<Output = Result<T, Failure>>,
{
    let hedge = hedge_delay(engine, &plan);
    let mut pass = Pass {
        engine,
        plan: &plan,
        queue: Queue::new(&plan.order),
        race: Race::new(),
        failed: Failures::default(),
        last_failed: plan.after,
        hedge,
    };
    loop {
        if plan.deadline.is_some_and(|deadline| deadline <= Instant::now()) {
            pass.failed.records.push(request_timeout_record(&plan));
            break;
        }
        pass.start_due();
        if pass.race.is_idle() {
            if pass.queue.has_last_resort() {
                continue;
            }
            break;
        }
        let hedge = pass.hedge.filter(|_| pass.queue.has_pending());
        let Some(run) = pass.race.next(hedge, plan.deadline).await else { continue };
        let Some((index, opened)) = pass.absorb(run)? else { continue };
        pass.race.stop();
        if let Some(won) = pass.finish(index, opened, &finish).await {
            return Ok(won);
        }
    }
    Err(pass.failed.into_error(plan.ask.is_fresh()))
}

impl Pass<'_> {
    /// Starts the next candidate when nothing runs, or when a hedge is due
    /// and the retry budget pays for it (an empty budget ends hedging for
    /// the pass: a hedge adds load as a retry does).
    fn start_due(&mut self) {
        let mut hedge_due = self.race.hedge_due(self.hedge) && self.queue.has_pending();
        if hedge_due && !self.plan.budget.withdraw() {
            self.engine.metrics.retry_budget_exhausted(self.plan.route, "hedge");
            (self.hedge, hedge_due) = (None, false);
        }
        if !(self.race.is_idle() || hedge_due) {
            return;
        }
        let Some((index, forced)) = self.queue.next(self.plan.targets) else { return };
        let from = match hedge_due {
            true => self.race.last_started.map(|from| (from, "hedge")),
            false => self.last_failed.take(),
        };
        if let Some((from, reason)) = from {
            self.record_failover(from, index, reason);
        }
        let (engine, plan) = (self.engine, self.plan);
        self.race.start(index, Box::pin(turn::run(engine, plan, index, forced)));
    }

    /// Takes in a finished turn: its skip, its failures, and its answer if
    /// it committed. A provider that rejects the client's request itself
    /// ends the pass at once; one that finds the prompt too long for its
    /// context window passes it on to the targets whose window is larger or
    /// undeclared.
    fn absorb(&mut self, run: TargetRun) -> Result<Option<(usize, Opened)>, ProxyError> {
        if let Some(last) = run.failures.last() {
            self.last_failed = Some((run.index, last.failure.kind()));
        }
        let Some(target) = self.plan.targets.get(run.index) else { return Ok(None) };
        if let Some(until) = run.skipped_until {
            self.queue.skipped(run.index, until);
        }
        self.failed.records.extend(run.failures);
        if let (true, Some(last)) = (self.plan.ask.is_fresh(), self.failed.records.last())
            && let Failure::Provider(ProviderError::BadRequest { context_length, .. }) = &last.failure
        {
            match (context_length, target.context_window) {
                (true, Some(window)) => self.queue.need_window_above(window),
                (true, None) => {}
                (false, _) => {
                    let rejected = self.failed.records.pop().map(ProxyError::rejected);
                    return Err(rejected.unwrap_or_else(|| ProxyError::AllFailed(Vec::new())));
                }
            }
        }
        Ok(run.opened.map(|opened| (run.index, opened)))
    }

    /// Hands the committed answer of target `index` to `finish`: the winner
    /// and what `finish` made of it, or `None` when `finish` failed it
    /// (recorded, and the pass goes on).
    async fn finish<T, F, Fut>(&mut self, index: usize, mut opened: Opened, finish: &F) -> Option<(Winner, T)>
    where
        F: Fn(CommittedStream) -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let target = self.plan.targets.get(index)?;
        let dropped: Vec<String> = opened.dropped.drain(..).map(|field| field.to_string()).collect();
        let attempts = self.failed.attempts_with_winner();
        let started = Instant::now();
        let rules = &self.plan.rules;
        let reasoning = rules.surface.stream_reasoning
            || self.plan.ask.original().shows_reasoning_from(target.provider.kind.dialect_for(&target.model));
        let events = relay::committed(opened.held, opened.rest, rules.deadlines.idle, opened.tickets, reasoning);
        match finish(events).await {
            Ok(answer) => {
                let provider = Arc::from(target.provider.name.as_str());
                let tried = self.failed.records.iter().map(AttemptRecord::tried).collect();
                let model = target.model.clone();
                Some((Winner { provider, model, attempts, target: index, dropped, tried }, answer))
            }
            Err(failure) => {
                self.failed.records.push(AttemptRecord::of(target, failure, started.elapsed()));
                None
            }
        }
    }

    fn record_failover(&self, from: usize, to: usize, reason: &str) {
        if let (Some(from), Some(to)) = (self.plan.targets.get(from), self.plan.targets.get(to)) {
            self.engine.metrics.failover(&from.provider.name, &to.provider.name, reason);
        }
    }
}

/// How long a turn may go uncommitted before the next candidate starts
/// beside it; `auto` goes by the pass's primary, the first of its order.
fn hedge_delay(engine: &Engine, plan: &Plan<'_>) -> Option<Duration> {
    match plan.rules.hedge? {
        Hedge::After(delay) => Some(delay),
        Hedge::Auto => {
            let primary = plan.targets.get(*plan.order.first()?)?;
            let ceiling = primary.first_token_timeout;
            let p95 = engine.health.provider(&primary.provider.name).ttft_p95().unwrap_or(ceiling);
            Some(p95.clamp(HEDGE_AUTO_FLOOR.min(ceiling), ceiling))
        }
    }
}

/// The record of a pass that ran out of the request's time.
fn request_timeout_record(plan: &Plan<'_>) -> AttemptRecord {
    let timeout = plan.rules.deadlines.request_bound();
    AttemptRecord {
        provider: "baton".to_owned(),
        model: plan.route.to_owned(),
        failure: Failure::RequestTimeout(timeout),
        elapsed: timeout,
    }
}
