//! One attempt, recorded once where its outcome is known: the log line, the
//! attempt and first-token metrics, the provider's health and the attempt's
//! span are all written from one [`AttemptReport`], so they cannot disagree.

use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;

use super::Metrics;
use super::traces::{AttemptOutcome, AttemptSpan, AttemptStart, AttemptTrace, TraceHandle};
use crate::providers::Class;
use crate::resilience::ProviderHealth;

/// Which attempt is observed, known before it starts.
#[derive(Clone, Copy)]
pub struct AttemptInfo<'a> {
    /// The request's id, for the log.
    pub request_id: &'a str,
    /// The request's trace, which the attempt's span belongs to.
    pub trace: &'a TraceHandle,
    /// The provider's health, where the outcome is counted.
    pub health: &'a ProviderHealth,
    /// The provider, its kind, the model and which retry of the target.
    pub start: AttemptStart<'a>,
    /// A drill stood in for the provider: a failure it made is synthetic
    /// and says nothing about the provider's health.
    pub drilled: bool,
}

/// How an attempt ended.
pub enum AttemptResult<'a> {
    /// It reached its commit point.
    Committed {
        /// From the attempt's start to its first token.
        ttft: Duration,
    },
    /// It failed, or was passed over without being sent (`class.skip`).
    Failed {
        /// What the failure decides, its label among it.
        class: Class,
        /// What happened, without any text a provider wrote.
        summary: String,
        /// The failure in full, in the provider's words, for the debug log.
        detail: &'a dyn Display,
    },
}

/// One attempt's outcome: all the observer records.
pub struct AttemptReport<'a> {
    /// Which attempt.
    pub attempt: AttemptInfo<'a>,
    /// From its start to its outcome.
    pub elapsed: Duration,
    /// How it ended.
    pub result: AttemptResult<'a>,
    /// Its span, when it was sent on a traced request.
    pub span: Option<AttemptSpan>,
}

/// Records attempts into the proxy's metrics, the log, the providers'
/// health and the requests' traces.
#[derive(Clone)]
pub struct AttemptObserver {
    metrics: Arc<Metrics>,
}

/// The span of an attempt being sent (when the request is traced), ended
/// as abandoned if the attempt is dropped before its report (a hedge that
/// lost, a client that left), so a trace shows every request sent.
pub struct Sending<'a> {
    span: Option<AttemptSpan>,
    health: &'a ProviderHealth,
}

impl AttemptObserver {
    /// An observer counting into `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        AttemptObserver { metrics }
    }

    /// `attempt` is about to be sent: its span starts now.
    pub fn sending<'a>(&self, attempt: &AttemptInfo<'a>) -> Sending<'a> {
        Sending { span: attempt.trace.sending(&attempt.start), health: attempt.health }
    }

    /// Logs the attempt, counts it in the metrics and in the provider's
    /// health, and ends its span. A skip or a drill's failure says nothing
    /// about the provider's health; a drilled attempt that committed did
    /// reach the provider, whose first token is real.
    pub fn observe(&self, report: AttemptReport<'_>) {
        let AttemptReport { attempt, elapsed, result, span } = report;
        let AttemptStart { provider, model, retry, .. } = attempt.start;
        let (request_id, health) = (attempt.request_id, attempt.health);
        let latency_ms = millis(elapsed);
        let outcome = match &result {
            AttemptResult::Committed { ttft } => {
                health.record_ttft(*ttft);
                health.record_attempt(None, false);
                self.metrics.attempt(provider, "committed");
                self.metrics.first_token(provider, *ttft);
                let ttft_ms = millis(*ttft);
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
                AttemptOutcome::Committed { ttft: *ttft }
            }
            AttemptResult::Failed { class, summary, detail } => {
                let failure_class = class.label;
                if !class.skip && !attempt.drilled {
                    health.record_attempt(Some(failure_class), class.charge_breaker);
                }
                self.metrics.attempt(provider, failure_class);
                tracing::info!(
                    request_id, provider, model, retry, outcome = "failed", failure_class, latency_ms,
                    error = %summary, "attempt"
                );
                tracing::debug!(request_id, provider, error = %detail, "attempt failure in the provider's words");
                AttemptOutcome::Failed { class: failure_class, summary: summary.clone() }
            }
        };
        let skipped = matches!(&result, AttemptResult::Failed { class, .. } if class.skip);
        match span {
            Some(span) => span.end(health.breaker.state(), outcome),
            // An attempt never sent gets its span here, ending now.
            None if skipped && attempt.trace.is_on() => attempt.trace.attempt(AttemptTrace {
                provider,
                kind: attempt.start.kind,
                model,
                retry,
                elapsed,
                breaker: health.breaker.state(),
                outcome,
            }),
            None => {}
        }
    }
}

impl Sending<'_> {
    /// The attempt's W3C `traceparent`, for the request to the provider.
    pub fn traceparent(&self) -> Option<String> {
        self.span.as_ref().and_then(AttemptSpan::traceparent)
    }

    /// The attempt ended: its span, for the report.
    pub fn ended(mut self) -> Option<AttemptSpan> {
        self.span.take()
    }
}

impl Drop for Sending<'_> {
    fn drop(&mut self) {
        if let Some(span) = self.span.take() {
            span.end(self.health.breaker.state(), AttemptOutcome::Abandoned);
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BreakerSettings;
    use crate::resilience::{Health, Tally};

    fn failed(class: Class) -> AttemptResult<'static> {
        AttemptResult::Failed { class, summary: class.label.to_owned(), detail: &"in the provider's words" }
    }

    #[test]
    fn each_report_is_counted_once_and_a_drill_or_a_skip_leaves_the_provider_s_health_alone() {
        let metrics = Arc::new(Metrics::new());
        let observer = AttemptObserver::new(Arc::clone(&metrics));
        let health = Health::new([("a", BreakerSettings::default())]);
        let provider = health.provider("a");
        let trace = TraceHandle::default();
        let report = |drilled, result| {
            let start = AttemptStart { provider: "a", kind: "openai", model: "m", retry: 0 };
            let attempt = AttemptInfo { request_id: "req", trace: &trace, health: &provider, start, drilled };
            AttemptReport { attempt, elapsed: Duration::from_millis(5), result, span: None }
        };
        let server = Class::upstream("http_5xx");
        observer.observe(report(false, AttemptResult::Committed { ttft: Duration::from_millis(3) }));
        observer.observe(report(false, failed(server)));
        observer.observe(report(true, failed(Class { label: "drill", charge_breaker: false, ..server })));
        observer.observe(report(false, failed(Class { skip: true, ..Class::baton("breaker_open") })));
        let counted = provider.attempts(1);
        assert_eq!(counted, Tally { total: 2, ok: 1, failed: 1 }, "only the answer and the real 5xx reach health");
        let text = metrics.render(&health);
        for outcome in ["committed", "http_5xx", "drill", "breaker_open"] {
            let line = format!("baton_attempts_total{{provider=\"a\",outcome=\"{outcome}\"}} 1");
            assert!(text.contains(&line), "{line} in:\n{text}");
        }
        assert!(text.contains("baton_time_to_first_token_seconds_count{provider=\"a\"} 1"), "{text}");
    }
}
