//! One target's turn: breaker and rate-limit checks, the request, reading up
//! to the commit point under the first-token deadline, and retries of the
//! failures worth retrying. Every failure is recorded, in order.

use std::time::Duration;

use futures_util::StreamExt;
use tokio::time::{Instant, sleep, sleep_until, timeout_at};

use super::commit::{CommitClock, Next, ReasoningRule};
use super::drill::{DrillFault, Drilled};
use super::splice;
use super::{AttemptRecord, Engine, Failure, Plan};
use crate::admission::{Candidate, Settlement, Skip, Tickets};
use crate::config::{Route, Target};
use crate::event::{ChatRequest, Event};
use crate::observe::traces::{AttemptOutcome, AttemptSpan, AttemptStart, AttemptTrace, TraceHandle};
use crate::providers::{EventStream, Opener, ProviderError, Upstream};
use crate::request::Field;
use crate::resilience::{ProviderHealth, backoff};

/// The events read before commit (the [`CommitClock`] bounds how many).
/// Usage reports are running totals, so a new one merges into the last
/// instead of piling up.
#[derive(Default)]
struct Held {
    events: Vec<Event>,
}

impl Held {
    fn push(&mut self, event: Event) {
        match (self.events.last_mut(), event) {
            (Some(Event::Usage(last)), Event::Usage(later)) => last.merge(later),
            (_, event) => self.events.push(event),
        }
    }
}

/// An attempt that reached its commit point.
pub(super) struct Opened {
    /// The events read so far, the first token among them.
    pub held: Vec<Event>,
    /// The rest of the answer.
    pub rest: EventStream,
    /// The admission tickets, settled when the answer ends.
    pub tickets: Tickets,
    /// The fields left out of the request because the target cannot honour
    /// them and the route drops such fields.
    pub dropped: Vec<Field>,
}

/// How one target's turn ended: what failed along the way, and the opened
/// attempt if one committed.
pub(super) struct TargetRun {
    /// The target's position in the route.
    pub index: usize,
    /// Every failed try, in order.
    pub failures: Vec<AttemptRecord>,
    /// The attempt that committed, if any.
    pub opened: Option<Opened>,
    /// When the turn was skipped by a skip the last resort goes past (an
    /// open breaker, a cooldown), when the provider is due back: the last
    /// resort tries the soonest first.
    pub skipped_until: Option<Instant>,
}

/// Who one try is for.
#[derive(Clone, Copy)]
struct Try<'a> {
    target: &'a Target,
    health: &'a ProviderHealth,
    drill: Option<DrillFault>,
    /// Past open breakers and cooldowns: nothing else is left.
    last_resort: bool,
    /// The request's trace, for an attempt dropped while it is sent.
    trace: &'a TraceHandle,
    /// Which retry of the target this is.
    retry: u32,
}

/// The span of an attempt being sent (when the request is traced), ended
/// as abandoned if the attempt is dropped before it ends (a hedge that
/// lost, a client that left), so a trace shows every request sent.
struct Unfinished<'a> {
    span: Option<AttemptSpan>,
    health: &'a ProviderHealth,
}

impl Unfinished<'_> {
    /// The attempt ended: its span, for the outcome.
    fn ended(&mut self) -> Option<AttemptSpan> {
        self.span.take()
    }
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if let Some(span) = self.span.take() {
            span.end(self.health.breaker.state(), AttemptOutcome::Abandoned);
        }
    }
}

/// What a turn asks of its target: the client's request, or the rest of an
/// answer that broke after it reached the client.
#[derive(Clone, Copy)]
pub(super) enum Ask<'a> {
    /// The client's request as it came.
    Fresh(&'a ChatRequest),
    /// Continue `partial`, the answer so far to `original`.
    Resume {
        /// The client's request.
        original: &'a ChatRequest,
        /// The text the client already has.
        partial: &'a str,
    },
}

/// The request one target is sent: the client's, or a copy made for the
/// target, boxed — every future of an attempt holds it, and a request in
/// flight holds every such future.
enum Asked<'a> {
    Borrowed(&'a ChatRequest),
    Owned(Box<ChatRequest>),
}

impl std::ops::Deref for Asked<'_> {
    type Target = ChatRequest;

    fn deref(&self) -> &ChatRequest {
        match self {
            Asked::Borrowed(request) => request,
            Asked::Owned(request) => request,
        }
    }
}

impl Ask<'_> {
    /// The client's request, whatever this attempt asks.
    pub(super) fn original(&self) -> &ChatRequest {
        match *self {
            Ask::Fresh(request) | Ask::Resume { original: request, .. } => request,
        }
    }

    /// The request for `target`: a continuation prefills the partial answer
    /// only where the target declares it can.
    fn request_for(&self, target: &Target) -> (Asked<'_>, bool) {
        match *self {
            Ask::Fresh(request) => (Asked::Borrowed(request), false),
            Ask::Resume { original, partial } if target.prefill => {
                (Asked::Owned(Box::new(splice::prefill_request(original, partial))), true)
            }
            Ask::Resume { original, partial } => {
                (Asked::Owned(Box::new(splice::instruction_request(original, partial))), false)
            }
        }
    }
}

impl Engine {
    /// Gives target `index` of `route` its turn, retrying it as the route and
    /// target allow. A rejected prefill continuation is tried again at once
    /// as an instruction, without spending a retry. A `forced` turn goes
    /// past an open breaker or a cooldown: the route has no other candidate.
    pub(super) async fn run_target(&self, plan: &Plan<'_>, index: usize, forced: bool) -> TargetRun {
        let (route, ask) = (plan.route, plan.ask);
        let mut run = TargetRun { index, failures: Vec::new(), opened: None, skipped_until: None };
        let Some(target) = route.targets.get(index) else { return run };
        let health = self.health.provider(&target.provider.name);
        let drill = plan.drills.for_provider(&target.provider.name);
        let (mut req, mut prefilled) = ask.request_for(target);
        let unsupported = target.provider.kind.adapter().unsupported(&req);
        if !unsupported.is_empty() && !route.surface.drop_unsupported {
            let failure = Failure::Unsupported(unsupported);
            self.observe_attempt(plan, target, &health, 0, Instant::now(), Err(&failure));
            run.failures.push(AttemptRecord {
                provider: target.provider.name.clone(),
                model: target.model.clone(),
                failure,
                elapsed: Duration::ZERO,
            });
            return run;
        }
        if !unsupported.is_empty() {
            req = Asked::Owned(Box::new(req.without(&unsupported)));
        }
        let mut retry = 0;
        loop {
            let started = Instant::now();
            let one = Try { target, health: &health, drill, last_resort: forced, trace: plan.trace, retry };
            let mut failure = match self.try_once(&one, &req, route, started).await {
                Ok((mut opened, ttft)) => {
                    self.observe_attempt(plan, target, &health, retry, started, Ok(ttft));
                    opened.dropped = unsupported;
                    run.opened = Some(opened);
                    return run;
                }
                Err((failure, skipped_until)) => {
                    run.skipped_until = skipped_until;
                    failure
                }
            };
            self.observe_attempt(plan, target, &health, retry, started, Err(&failure));
            let prefill_rejected = prefilled && matches!(failure, Failure::Provider(ProviderError::BadRequest { .. }));
            let wait = self.retry_wait(route, target, &health, &mut failure, retry);
            run.failures.push(AttemptRecord {
                provider: target.provider.name.clone(),
                model: target.model.clone(),
                failure,
                elapsed: started.elapsed(),
            });
            if prefill_rejected && let Ask::Resume { original, partial } = ask {
                req = Asked::Owned(Box::new(splice::instruction_request(original, partial)));
                prefilled = false;
                continue;
            }
            match wait {
                Some(wait) => sleep(wait).await,
                None => return run,
            }
            retry += 1;
        }
    }

    /// One try of `target`: admission, the request, reading to its commit
    /// point. The admission tickets are settled on failure and carried by
    /// the opened answer otherwise; a skip says when the target is due back.
    async fn try_once(
        &self,
        one: &Try<'_>,
        req: &ChatRequest,
        route: &Route,
        started: Instant,
    ) -> Result<(Opened, Duration), (Failure, Option<Instant>)> {
        let Try { target, health, drill, last_resort, trace, retry } = *one;
        let context_window = target.context_window;
        let candidate = Candidate { provider: &target.provider, context_window, request: req, health, last_resort };
        let skipped = |skip: Skip| {
            let due_back = skip.reason.yields_to_last_resort().then_some(skip.recovers_at);
            (Failure::skipped(skip.reason), due_back)
        };
        let mut tickets = self.admission.admit(&candidate, self.store.as_ref()).await.map_err(skipped)?;
        let provider = &target.provider;
        let start = AttemptStart { provider: &provider.name, kind: provider.kind.name(), model: &target.model, retry };
        let mut sending = Unfinished { span: trace.sending(&start), health };
        let traceparent = sending.span.as_ref().and_then(AttemptSpan::traceparent);
        let opened = self.open(target, req, route, drill, started, traceparent.as_deref()).await;
        let span = sending.ended();
        match opened {
            Ok((held, rest, ttft)) => {
                // A drill's answer says nothing about the provider: its tickets are abandoned.
                let tickets = match drill {
                    Some(_) => Tickets::default(),
                    None => {
                        tickets.committed();
                        tickets
                    }
                };
                // After the commit, which closes a probing breaker.
                if let Some(span) = span {
                    span.end(health.breaker.state(), AttemptOutcome::Committed { ttft });
                }
                Ok((Opened { held, rest, tickets, dropped: Vec::new() }, ttft))
            }
            Err(mut failure) => {
                if drill.is_some() {
                    failure = Failure::Drill(Box::new(failure));
                }
                tickets.settle(Settlement::Failed(failure.class()));
                if let (Failure::Provider(err), Some(key)) = (&mut failure, &target.provider.api_key) {
                    err.redact(key.expose());
                }
                if let Some(span) = span {
                    let outcome = AttemptOutcome::Failed { class: failure.kind(), summary: failure.summary() };
                    span.end(health.breaker.state(), outcome);
                }
                Err((failure, None))
            }
        }
    }

    /// Logs one attempt, counts it in the metrics and the provider's
    /// health (skips and drills say nothing about the provider's health),
    /// and gives it a span when the request is traced.
    fn observe_attempt(
        &self,
        plan: &Plan<'_>,
        target: &Target,
        health: &ProviderHealth,
        retry: u32,
        started: Instant,
        result: Result<Duration, &Failure>,
    ) {
        let request_id = plan.id;
        let provider = target.provider.name.as_str();
        let model = target.model.as_str();
        let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        match result {
            Ok(ttft) => {
                health.record_ttft(ttft);
                health.record_attempt(None, false);
                self.metrics.attempt(provider, "committed");
                self.metrics.first_token(provider, ttft);
                let ttft_ms = u64::try_from(ttft.as_millis()).unwrap_or(u64::MAX);
                tracing::info!(
                    request_id,
                    provider,
                    model,
                    retry,
                    outcome = "committed",
                    ttft_ms,
                    latency_ms,
                    "attempt"
                );
            }
            Err(failure) => {
                let failure_class = failure.kind();
                if !failure.is_skip() && !matches!(failure, Failure::Drill(_)) {
                    health.record_attempt(Some(failure_class), failure.counts_against_provider());
                }
                self.metrics.attempt(provider, failure_class);
                tracing::info!(
                    request_id, provider, model, retry, outcome = "failed", failure_class, latency_ms,
                    error = %failure.summary(), "attempt"
                );
                tracing::debug!(request_id, provider, error = %failure, "attempt failure in the provider's words");
            }
        }
        // An attempt that was sent has its own span, from the moment it went.
        if plan.trace.is_on() && matches!(result, Err(failure) if failure.is_skip()) {
            plan.trace.attempt(AttemptTrace {
                provider,
                kind: target.provider.kind.name(),
                model,
                retry,
                elapsed: started.elapsed(),
                breaker: health.breaker.state(),
                outcome: match result {
                    Ok(ttft) => AttemptOutcome::Committed { ttft },
                    Err(failure) => AttemptOutcome::Failed { class: failure.kind(), summary: failure.summary() },
                },
            });
        }
    }

    /// How long to wait before trying `target` again after `failure`, or
    /// `None` to move on. A 429's `Retry-After` is honoured up to the
    /// configured `max_cooldown` (and shared with other requests, which try
    /// the provider only when nothing else is left); one longer than the
    /// route waits for moves on.
    fn retry_wait(
        &self,
        route: &Route,
        target: &Target,
        health: &ProviderHealth,
        failure: &mut Failure,
        retry: u32,
    ) -> Option<Duration> {
        if let Failure::Provider(ProviderError::RateLimited { retry_after: Some(wait), .. }) = failure {
            *wait = (*wait).min(route.limits.max_cooldown);
            health.rate_limit_until(super::later(Instant::now(), *wait));
            if *wait > route.max_retry_wait {
                return None;
            }
        }
        if retry >= target.retries || !failure.is_retryable() {
            return None;
        }
        Some(failure.retry_after().unwrap_or_else(|| backoff::full_jitter(route.retry_backoff, retry)))
    }

    /// Sends one request and reads up to its commit point: the first token
    /// within the target's first-token deadline of `started` (one absolute
    /// deadline covers connect, headers and every event before it), then the
    /// route's commit window. Returns the held events, the rest, and the time
    /// to first token. A drill stands in for the provider ([`Drilled`]).
    async fn open(
        &self,
        target: &Target,
        req: &ChatRequest,
        route: &Route,
        drill: Option<DrillFault>,
        started: Instant,
        traceparent: Option<&str>,
    ) -> Result<(Vec<Event>, EventStream, Duration), Failure> {
        let reasoning = ReasoningRule {
            streamed: route.surface.stream_reasoning || req.shows_reasoning_from(target.provider.kind.dialect()),
            keeps_alive: route.surface.reasoning_keeps_alive,
        };
        let clock =
            CommitClock::start(started, target.first_token_timeout, route.idle_timeout, route.commit, reasoning);
        let upstream = upstream(target, route, traceparent);
        let drilled;
        let opener: &dyn Opener = match drill {
            Some(fault) => {
                drilled = Drilled { real: &*self.opener, fault };
                &drilled
            }
            None => &*self.opener,
        };
        let opening = opener.open(target.provider.kind, upstream, req);
        let events =
            timeout_at(clock.first_token_deadline(), opening).await.map_err(|_| clock.first_token_timeout())??;
        read_to_commit(clock, events).await
    }
}

/// Where `target` of `route` is reached, with the attempt's trace context.
pub(super) fn upstream<'a>(target: &'a Target, route: &Route, traceparent: Option<&'a str>) -> Upstream<'a> {
    Upstream {
        base_url: &target.provider.base_url,
        api_key: target.provider.api_key.as_ref().map(|key| key.expose()),
        model: &target.model,
        max_event_bytes: route.limits.max_event_bytes,
        traceparent,
        egress: &target.provider.egress,
    }
}

/// Reads `events` until `clock` says commit or fail: returns the held
/// events, the rest of the stream and the time to first token.
async fn read_to_commit(
    mut clock: CommitClock,
    mut events: EventStream,
) -> Result<(Vec<Event>, EventStream, Duration), Failure> {
    let mut held = Held::default();
    loop {
        let wake_at = match clock.at(Instant::now()) {
            Next::Commit { ttft } => return Ok((held.events, events, ttft)),
            Next::Fail(failure) => return Err(failure),
            Next::Hold { wake_at } => wake_at,
        };
        let next = tokio::select! {
            next = events.next() => next,
            () = sleep_until(wake_at) => continue,
        };
        let Some(event) = next else {
            return clock.ended().map(|ttft| (held.events, events, ttft));
        };
        let event = event?;
        clock.event(&event, Instant::now());
        if clock.keeps(&event) {
            held.push(event);
        }
    }
}
