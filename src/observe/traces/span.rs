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

/// Which attempt a span is for.
#[derive(Clone, Copy)]
pub struct AttemptStart<'a> {
    /// The provider's name in the config.
    pub provider: &'a str,
    /// The provider's kind (`openai`, `anthropic`, `gemini`).
    pub kind: &'static str,
    /// The model asked of it.
    pub model: &'a str,
    /// Which retry of the target this was.
    pub retry: u32,
}

impl AttemptTrace<'_> {
    fn start(&self) -> AttemptStart<'_> {
        AttemptStart { provider: self.provider, kind: self.kind, model: self.model, retry: self.retry }
    }
}

impl Traced {
    /// A client span under the request span for `attempt`, started at `at`.
    fn start(&self, attempt: &AttemptStart<'_>, at: SystemTime) -> Span {
        let attributes = vec![
            KeyValue::new(OPERATION, "chat"),
            KeyValue::new(PROVIDER, provider_name(attempt.kind)),
            KeyValue::new(REQUEST_MODEL, attempt.model.to_owned()),
            KeyValue::new(PROVIDER_NAME, attempt.provider.to_owned()),
            KeyValue::new(RETRY, i64::from(attempt.retry)),
        ];
        self.tracer
            .span_builder(format!("chat {}", attempt.model))
            .with_kind(SpanKind::Client)
            .with_start_time(at)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &self.cx)
    }
}

/// The span of an attempt that was sent, open until it ends.
pub struct AttemptSpan {
    traced: Arc<Traced>,
    span: Span,
    kind: &'static str,
    model: String,
}

impl AttemptSpan {
    /// The attempt's W3C `traceparent`, for the request to the provider;
    /// none when the span has no valid context.
    pub fn traceparent(&self) -> Option<String> {
        let context = self.span.span_context();
        context
            .is_valid()
            .then(|| format!("00-{}-{}-{:02x}", context.trace_id(), context.span_id(), context.trace_flags().to_u8()))
    }

    /// Ends the attempt with its provider's `breaker` state then: now, or,
    /// for an attempt that committed, when the request ends (its span then
    /// carries the answer's token counts).
    pub fn end(self, breaker: BreakerState, outcome: AttemptOutcome) {
        let AttemptSpan { traced, mut span, kind, model } = self;
        let now = SystemTime::now();
        span.set_attribute(KeyValue::new(BREAKER_STATE, breaker_state(breaker)));
        match outcome {
            AttemptOutcome::Committed { ttft } => {
                span.set_attributes([
                    KeyValue::new(OUTCOME, "committed"),
                    KeyValue::new(RESPONSE_MODEL, model),
                    KeyValue::new(TIME_TO_FIRST_CHUNK, ttft.as_secs_f64()),
                ]);
                let earlier = traced.committed.lock().ok().and_then(|mut slot| slot.replace((span, kind)));
                // An answer that broke and was resumed elsewhere: its attempt is over.
                if let Some((mut earlier, _)) = earlier {
                    earlier.end_with_timestamp(now);
                }
            }
            AttemptOutcome::Failed { class, summary } => {
                span.set_attributes([
                    KeyValue::new(OUTCOME, "failed"),
                    KeyValue::new(FAILURE_CLASS, class),
                    KeyValue::new(ERROR_TYPE, class),
                ]);
                span.set_status(Status::error(summary));
                span.end_with_timestamp(now);
            }
            AttemptOutcome::Abandoned => {
                span.set_attribute(KeyValue::new(OUTCOME, "abandoned"));
                span.end_with_timestamp(now);
            }
        }
    }
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

    /// The W3C trace id the request's span belongs to (32 hex digits), when traced.
    pub fn trace_id(&self) -> Option<String> {
        let traced = self.0.as_ref()?;
        Some(traced.cx.span().span_context().trace_id().to_string())
    }

    /// Records one attempt that was never sent (a target passed over) as
    /// a child of the request span, ending now.
    pub fn attempt(&self, attempt: AttemptTrace<'_>) {
        let Some(traced) = &self.0 else { return };
        let now = SystemTime::now();
        let start = attempt.start();
        let span = traced.start(&start, now.checked_sub(attempt.elapsed).unwrap_or(now));
        let sent = AttemptSpan { traced: Arc::clone(traced), span, kind: attempt.kind, model: start.model.to_owned() };
        sent.end(attempt.breaker, attempt.outcome);
    }

    /// Opens the span of an attempt about to be sent, as a child of the
    /// request span: its context goes to the provider as `traceparent`.
    pub fn sending(&self, start: &AttemptStart<'_>) -> Option<AttemptSpan> {
        let traced = self.0.as_ref()?;
        let span = traced.start(start, SystemTime::now());
        Some(AttemptSpan { traced: Arc::clone(traced), span, kind: start.kind, model: start.model.to_owned() })
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
