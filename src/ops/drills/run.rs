//! One drill, now: a tiny request through the real route and engine, with
//! the drill's providers failed as an `x-baton-drill` header fails them
//! (never called) and the rest real. `baton drill` and the scheduler both
//! run drills through [`run`]; the scheduler also charges them to the key
//! [`DRILL_KEY`] and keeps their rows, through the request's watch.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::config::{Drill, Route};
use crate::core::{AttemptRecord, Call, Engine};
use crate::event::{ChatRequest, Event, Message, Role};
use crate::observe::RequestWatch;

pub use crate::access::DRILL_KEY;

/// How a drill went.
#[derive(Debug, Clone, PartialEq)]
pub struct DrillRun {
    /// The route drilled.
    pub route: String,
    /// The providers failed, as written (`openai=http_5xx`).
    pub fail: String,
    /// When it started, in Unix milliseconds.
    pub at_ms: i64,
    /// Whether a provider that was not failed answered.
    pub passed: bool,
    /// `ok`; `no_failover` when it passed because the first target tried
    /// was not one it fails (so no fallback was exercised); or why not: the
    /// engine's error kind (`all_failed`, …), a refusal's
    /// (`budget_exceeded`), `answered_by_failed` or `no_route`.
    pub outcome: &'static str,
    /// Who answered, provider and model, if anyone did.
    pub answered_by: Option<(String, String)>,
    /// Requests sent, the winner's included.
    pub attempts: u32,
    /// From start to end.
    pub elapsed: Duration,
    /// The engine's error, for `baton drill`'s terminal only: it may quote
    /// a provider, so no alert, status or metric carries it.
    pub error: Option<String>,
}

impl DrillRun {
    /// A drill that could not start: no route answers to its name now, or
    /// the gate refused it (`outcome` says which).
    pub fn not_started(drill: &Drill, outcome: &'static str) -> DrillRun {
        DrillRun {
            route: drill.route.clone(),
            fail: drill.fail_spec.clone(),
            at_ms: crate::store::now_ms(),
            passed: false,
            outcome,
            answered_by: None,
            attempts: 0,
            elapsed: Duration::ZERO,
            error: None,
        }
    }
}

/// What a drill asks: its prompt as one user message, its `max_tokens`.
pub fn request(drill: &Drill) -> Box<ChatRequest> {
    Box::new(ChatRequest {
        messages: vec![Message::text(Role::User, drill.prompt.as_str())],
        max_tokens: Some(drill.max_tokens),
        ..ChatRequest::default()
    })
}

/// A fresh id for a drill's request, as a client's request gets one.
pub fn new_id() -> Arc<str> {
    Arc::from(crate::random_id::random_id("drill_", 16))
}

/// Runs `drill` on `route` now, asking `request`; `watch`, when given, is
/// told the answer as a client request's watch is (its cost, its row).
pub async fn run(
    engine: &Engine,
    route: &Route,
    drill: &Drill,
    request: Box<ChatRequest>,
    mut watch: Option<&mut RequestWatch>,
) -> DrillRun {
    let id = watch.as_ref().map_or_else(new_id, |watch| Arc::clone(watch.id()));
    let trace = watch.as_ref().map(|watch| watch.trace().clone()).unwrap_or_default();
    let call = Call { id, request, drills: drill.fail.clone(), trace };
    let mut ran = DrillRun::not_started(drill, "ok");
    let started = Instant::now();
    let answered = engine.complete(route, &call).await;
    ran.elapsed = started.elapsed();
    match answered {
        Ok(done) => {
            let winner = &done.winner;
            if let Some(watch) = watch.as_deref_mut() {
                let price = route.targets.get(winner.target).and_then(|target| target.price);
                watch.committed(winner, price, None);
                for event in &done.events {
                    if let Event::Usage(usage) = event {
                        watch.usage(*usage);
                    }
                }
                watch.end("ok");
            }
            let failed_one_answered = drill.fail.for_provider(&winner.provider).is_some();
            ran.passed = !failed_one_answered;
            ran.outcome = match (failed_one_answered, winner.attempts) {
                (true, _) => "answered_by_failed",
                // The first one tried answered: no failover was exercised.
                (false, 0 | 1) => "no_failover",
                (false, _) => "ok",
            };
            ran.answered_by = Some((winner.provider.to_string(), winner.model.clone()));
            ran.attempts = winner.attempts;
        }
        Err(err) => {
            let tried: Vec<_> = err.attempts().iter().map(AttemptRecord::tried).collect();
            ran.attempts = u32::try_from(tried.iter().filter(|tried| tried.sent).count()).unwrap_or(u32::MAX);
            if let Some(watch) = watch {
                watch.failed(err.kind(), err.status(), tried);
            }
            ran.outcome = err.kind();
            ran.error = Some(err.to_string());
        }
    }
    ran
}
