//! One attempt as one pipeline: admit the candidate, open the request
//! (through the drill, when the request carries one for the provider), read
//! up to the commit point, settle the admission tickets, and report the
//! outcome to the observer. A drill is marked once, on the attempt; the
//! opening, the settlement and the report read that mark.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::time::{Instant, sleep_until, timeout_at};

use super::Failure;
use super::commit::{CommitClock, Next, ReasoningRule};
use super::drill::Drilled;
use super::plan::Plan;
use super::rules::Rules;
use crate::admission::{Admission, Candidate, Settlement, Skip, Tickets};
use crate::config::{DrillFault, Target};
use crate::event::{ChatRequest, Event};
use crate::observe::traces::{AttemptSpan, AttemptStart};
use crate::observe::{AttemptInfo, AttemptObserver, AttemptReport, AttemptResult};
use crate::providers::{EventStream, Opener, Upstream};
use crate::request::Field;
use crate::resilience::ProviderHealth;
use crate::state::Store;

/// What every attempt goes through, shared by all requests.
#[derive(Clone)]
pub(super) struct Pipeline {
    /// The way to the providers.
    pub opener: Arc<dyn Opener>,
    /// The policies a candidate must pass.
    pub admission: Arc<Admission>,
    /// The state shared with other replicas, for provider quotas.
    pub store: Option<Arc<Store>>,
    /// Where every attempt's outcome is recorded.
    pub observer: AttemptObserver,
}

/// One try of one target.
pub(super) struct Attempt<'a> {
    /// The target tried.
    pub target: &'a Target,
    /// The attempt as the observer knows it.
    pub info: AttemptInfo<'a>,
    /// The drill that stands in for the provider, when the request carries one.
    drill: Option<DrillFault>,
    /// Past open breakers and cooldowns: nothing else is left.
    last_resort: bool,
    /// When it started: its first-token deadline runs from here.
    pub started: Instant,
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

/// An attempt that did not commit: why, and — for a skip the last resort
/// goes past (an open breaker, a cooldown) — when the target is due back.
pub(super) type NotOpened = (Failure, Option<Instant>);

impl Pipeline {
    /// Runs `attempt` of `request` through the pipeline. The admission
    /// tickets are settled on failure and carried by the opened answer
    /// otherwise.
    pub(super) async fn attempt(
        &self,
        attempt: &Attempt<'_>,
        request: &ChatRequest,
        rules: &Rules,
    ) -> Result<Opened, NotOpened> {
        let candidate = attempt.candidate(request);
        let tickets = match self.admit(&candidate).await {
            Ok(tickets) => tickets,
            Err(skip) => {
                let failure = Failure::Skipped(skip.reason);
                self.report(attempt, Err(&failure), None);
                return Err((failure, skip.reason.yields_to_last_resort().then_some(skip.recovers_at)));
            }
        };
        let sending = self.observer.sending(&attempt.info);
        let opened = self.open(attempt, request, rules, sending.traceparent().as_deref()).await;
        let span = sending.ended();
        match opened {
            Ok((held, rest, ttft)) => {
                let tickets = attempt.committed(tickets);
                self.report(attempt, Ok(ttft), span);
                Ok(Opened { held, rest, tickets, dropped: Vec::new() })
            }
            Err(failure) => {
                let failure = attempt.failed(failure);
                tickets.settle(Settlement::Failed(failure.class()));
                self.report(attempt, Err(&failure), span);
                Err((failure, None))
            }
        }
    }

    /// Admission, as one step: the policy chain, the provider's quota shared
    /// across replicas included.
    async fn admit(&self, candidate: &Candidate<'_>) -> Result<Tickets, Skip> {
        self.admission.admit(candidate, self.store.as_ref()).await
    }

    /// Sends one request and reads up to its commit point: the first token
    /// within the target's first-token deadline of the attempt's start (one
    /// absolute deadline covers connect, headers and every event before
    /// it), then the route's commit window. Returns the held events, the
    /// rest, and the time to first token. A drill stands in for the
    /// provider ([`Drilled`]).
    async fn open(
        &self,
        attempt: &Attempt<'_>,
        request: &ChatRequest,
        rules: &Rules,
        traceparent: Option<&str>,
    ) -> Result<(Vec<Event>, EventStream, Duration), Failure> {
        let target = attempt.target;
        let reasoning = ReasoningRule {
            streamed: rules.surface.stream_reasoning
                || request.shows_reasoning_from(target.provider.kind.dialect_for(&target.model)),
            keeps_alive: rules.surface.reasoning_keeps_alive,
        };
        let (started, idle) = (attempt.started, rules.deadlines.idle);
        let clock = CommitClock::start(started, target.first_token_timeout, idle, rules.commit, reasoning)
            .failing_over_on_refusal(rules.surface.fail_over_on_refusal);
        let upstream = upstream(target, rules.max_event_bytes, traceparent);
        let drilled;
        let opener: &dyn Opener = match attempt.drill {
            Some(fault) => {
                drilled = Drilled { real: &*self.opener, fault };
                &drilled
            }
            None => &*self.opener,
        };
        let opening = opener.open(target.provider.kind, upstream, request);
        let events =
            timeout_at(clock.first_token_deadline(), opening).await.map_err(|_| clock.first_token_timeout())??;
        read_to_commit(clock, events).await
    }

    /// Reports `attempt`, ended with `result`, to the observer.
    pub(super) fn report(&self, attempt: &Attempt<'_>, result: Result<Duration, &Failure>, span: Option<AttemptSpan>) {
        let result = match result {
            Ok(ttft) => AttemptResult::Committed { ttft },
            Err(failure) => {
                AttemptResult::Failed { class: failure.class(), summary: failure.summary(), detail: failure }
            }
        };
        let elapsed = attempt.started.elapsed();
        self.observer.observe(AttemptReport { attempt: attempt.info, elapsed, result, span });
    }
}

impl<'a> Attempt<'a> {
    /// The `retry`th try of `target` in `plan`, starting now; `last_resort`
    /// when the route has no other candidate left.
    pub(super) fn new(
        plan: &'a Plan<'a>,
        target: &'a Target,
        health: &'a ProviderHealth,
        retry: u32,
        last_resort: bool,
    ) -> Self {
        let provider = &target.provider;
        let drill = plan.drills.for_provider(&provider.name);
        let start = AttemptStart { provider: &provider.name, kind: provider.kind.name(), model: &target.model, retry };
        let info = AttemptInfo { request_id: plan.id, trace: plan.trace, health, start, drilled: drill.is_some() };
        Attempt { target, info, drill, last_resort, started: Instant::now() }
    }

    /// The candidate admission is asked about.
    fn candidate(&self, request: &'a ChatRequest) -> Candidate<'a> {
        Candidate {
            provider: &self.target.provider,
            context_window: self.target.context_window,
            request,
            health: self.info.health,
            last_resort: self.last_resort,
        }
    }

    /// The tickets of an attempt that committed. A drill's answer says
    /// nothing about the provider: its tickets are abandoned.
    fn committed(&self, mut tickets: Tickets) -> Tickets {
        if self.drill.is_some() {
            return Tickets::default();
        }
        tickets.committed();
        tickets
    }

    /// The failure as the attempt records it: a drill's marked as one, and
    /// the provider's words without the key it was sent.
    fn failed(&self, failure: Failure) -> Failure {
        let mut failure = match self.drill {
            Some(_) => Failure::Drill(Box::new(failure)),
            None => failure,
        };
        if let Failure::Provider(err) = &mut failure {
            let provider = &self.target.provider;
            if let Some(key) = &provider.api_key {
                err.redact(key.expose());
            }
            for secret in provider.account.credential.iter().flat_map(|credential| credential.secrets()) {
                err.redact(&secret);
            }
        }
        failure
    }
}

/// Where `target` is reached, with events capped at `max_event_bytes` and
/// the attempt's trace context.
pub(super) fn upstream<'a>(target: &'a Target, max_event_bytes: usize, traceparent: Option<&'a str>) -> Upstream<'a> {
    Upstream {
        base_url: &target.provider.account.base_url,
        account: &target.provider.account,
        api_key: target.provider.api_key.as_ref().map(|key| key.expose()),
        model: &target.model,
        max_event_bytes,
        traceparent,
        egress: &target.provider.egress,
    }
}

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
