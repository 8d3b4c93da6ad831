//! One request's spans: the server span for the request, a client span for
//! each attempt under it, and the committed attempt's span kept open until
//! the answer ends, so its token counts are the answer's.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{SdkTracer, Span};

use super::TraceStart;
use super::attrs::*;
use crate::event::Usage;
use crate::resilience::BreakerState;

/// A request's place in its trace, carried by the request record and the
/// engine's call; empty (and free) when traces are off.
#[derive(Clone, Default)]
pub struct TraceHandle(Option<Arc<Traced>>);

struct Traced {
    tracer: SdkTracer,
    /// The client's context with the request span in it: every attempt's parent.
    cx: Context,
    /// The attempt that committed, open until the answer ends, with its
    /// provider's name in the conventions.
    committed: Mutex<Option<(Span, &'static str)>>,
}

impl std::fmt::Debug for TraceHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let span = self.0.as_ref().map(|traced| traced.cx.span().span_context().span_id());
        f.debug_tuple("TraceHandle").field(&span).finish()
    }
}

/// How an attempt ended, for its span.
pub enum AttemptOutcome {
    /// It reached its commit point after `ttft`.
    Committed {
        /// From the attempt's start to its first token.
        ttft: Duration,
    },
    /// It failed as `class`, described by `summary`.
    Failed {
        /// The failure class, as metrics and logs name it.
        class: &'static str,
        /// One line saying what went wrong.
        summary: String,
    },
    /// It was dropped before it ended: a hedge that lost the race, or a
    /// request whose client left. Not an error of the provider's.
    Abandoned,
}

/// One attempt, as its span records it.
pub struct AttemptTrace<'a> {
    /// The provider's name in the config.
    pub provider: &'a str,
    /// The provider's kind (`openai`, `anthropic`, `gemini`).
    pub kind: &'static str,
    /// The model asked of it.
    pub model: &'a str,
    /// Which retry of the target this was.
    pub retry: u32,
    /// How long the attempt took.
    pub elapsed: Duration,
    /// The provider's breaker at the end of the attempt.
    pub breaker: BreakerState,
    /// How it ended.
    pub outcome: AttemptOutcome,
}

/// How the request ended, for its span.
pub struct RequestEnd<'a> {
    /// `ok`, or the failure class or error kind it ended with.
    pub outcome: &'static str,
    /// The provider that answered, by its config name, and the model.
    pub answered_by: Option<(&'a str, &'a str)>,
    /// Requests sent, the answering one included.
    pub attempts: u32,
    /// The usage the provider reported.
    pub usage: Usage,
    /// From the request's arrival to its first token going out.
    pub first_token: Option<Duration>,
}

impl TraceStart {
    /// Starts the request's span, `chat {model}` for the `model` the client
    /// asked for, served by `route`.
    pub fn request(self, model: &str, route: &str) -> TraceHandle {
        let attributes = vec![
            KeyValue::new(OPERATION, "chat"),
            KeyValue::new(REQUEST_MODEL, model.to_owned()),
            KeyValue::new(ROUTE, route.to_owned()),
        ];
        let span = self
            .tracer
            .span_builder(format!("chat {model}"))
            .with_kind(SpanKind::Server)
            .with_start_time(self.at)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &self.parent);
        let cx = self.parent.with_span(span);
        TraceHandle(Some(Arc::new(Traced { tracer: self.tracer, cx, committed: Mutex::new(None) })))
    }
}

impl TraceStart {
    /// Records a request refused before it reached a route (no key, a body
    /// that is not a chat request, an unknown model): its span alone, with
    /// the error's `code` and HTTP `status`.
    pub fn refused(self, code: &'static str, status: u16) {
        let attributes = vec![
            KeyValue::new(OPERATION, "chat"),
            KeyValue::new(OUTCOME, code),
            KeyValue::new(ERROR_TYPE, code),
            KeyValue::new(HTTP_STATUS, i64::from(status)),
        ];
        let mut span = self
            .tracer
            .span_builder("chat")
            .with_kind(SpanKind::Server)
            .with_start_time(self.at)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &self.parent);
        span.set_status(Status::error(code));
        span.end();
    }
}

impl TraceHandle {
    /// Whether the request is traced: what to check before gathering
    /// anything for a span.
    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// Records one attempt as a child of the request span, ending now. A
    /// committed attempt's span stays open until the request ends.
    pub fn attempt(&self, attempt: AttemptTrace<'_>) {
        let Some(traced) = &self.0 else { return };
        let now = SystemTime::now();
        let mut attributes = vec![
            KeyValue::new(OPERATION, "chat"),
            KeyValue::new(PROVIDER, provider_name(attempt.kind)),
            KeyValue::new(REQUEST_MODEL, attempt.model.to_owned()),
            KeyValue::new(PROVIDER_NAME, attempt.provider.to_owned()),
            KeyValue::new(RETRY, i64::from(attempt.retry)),
            KeyValue::new(BREAKER_STATE, breaker_state(attempt.breaker)),
        ];
        match &attempt.outcome {
            AttemptOutcome::Committed { ttft } => attributes.extend([
                KeyValue::new(OUTCOME, "committed"),
                KeyValue::new(RESPONSE_MODEL, attempt.model.to_owned()),
                KeyValue::new(TIME_TO_FIRST_CHUNK, ttft.as_secs_f64()),
            ]),
            AttemptOutcome::Failed { class, .. } => attributes.extend([
                KeyValue::new(OUTCOME, "failed"),
                KeyValue::new(FAILURE_CLASS, *class),
                KeyValue::new(ERROR_TYPE, *class),
            ]),
            AttemptOutcome::Abandoned => attributes.push(KeyValue::new(OUTCOME, "abandoned")),
        }
        let mut span = traced
            .tracer
            .span_builder(format!("chat {}", attempt.model))
            .with_kind(SpanKind::Client)
            .with_start_time(now.checked_sub(attempt.elapsed).unwrap_or(now))
            .with_attributes(attributes)
            .start_with_context(&traced.tracer, &traced.cx);
        match attempt.outcome {
            AttemptOutcome::Committed { .. } => {
                let earlier = traced.committed.lock().ok().and_then(|mut slot| slot.replace((span, attempt.kind)));
                // An answer that broke and was resumed elsewhere: its attempt is over.
                if let Some((mut earlier, _)) = earlier {
                    earlier.end_with_timestamp(now);
                }
            }
            AttemptOutcome::Failed { summary, .. } => {
                span.set_status(Status::error(summary));
                span.end_with_timestamp(now);
            }
            AttemptOutcome::Abandoned => span.end_with_timestamp(now),
        }
    }

    /// Ends the committed attempt's span and the request's, with how the
    /// request ended.
    pub fn end(&self, end: &RequestEnd<'_>) {
        let Some(traced) = &self.0 else { return };
        let now = SystemTime::now();
        let usage = usage_attributes(end.usage);
        let committed = traced.committed.lock().ok().and_then(|mut slot| slot.take());
        let kind = committed.map(|(mut span, kind)| {
            span.set_attributes(usage.clone());
            span.end_with_timestamp(now);
            kind
        });
        let span = traced.cx.span();
        span.set_attributes(usage);
        let fallbacks = end.attempts.saturating_sub(1);
        span.set_attributes([
            KeyValue::new(OUTCOME, end.outcome),
            KeyValue::new(ATTEMPTS, i64::from(end.attempts)),
            KeyValue::new(FALLBACK_COUNT, i64::from(fallbacks)),
        ]);
        if let Some(kind) = kind {
            span.set_attribute(KeyValue::new(PROVIDER, provider_name(kind)));
        }
        if let Some((provider, model)) = end.answered_by {
            span.set_attribute(KeyValue::new(PROVIDER_NAME, provider.to_owned()));
            span.set_attribute(KeyValue::new(RESPONSE_MODEL, model.to_owned()));
        }
        if let Some(ttft) = end.first_token {
            span.set_attribute(KeyValue::new(TIME_TO_FIRST_CHUNK, ttft.as_secs_f64()));
        }
        if end.outcome != "ok" {
            span.set_attribute(KeyValue::new(ERROR_TYPE, end.outcome));
            span.set_attribute(KeyValue::new(FAILURE_CLASS, end.outcome));
            span.set_status(Status::error(end.outcome));
        }
        span.end_with_timestamp(now);
    }
}

/// The token counts the provider reported, as span attributes.
fn usage_attributes(usage: Usage) -> Vec<KeyValue> {
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let counts = [
        (INPUT_TOKENS, usage.input_tokens),
        (OUTPUT_TOKENS, usage.output_tokens),
        (CACHED_INPUT_TOKENS, usage.cached_input_tokens),
    ];
    counts.into_iter().filter_map(|(key, n)| n.map(|n| KeyValue::new(key, count(n)))).collect()
}
