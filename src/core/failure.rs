//! Why an attempt or a committed stream failed, and the record each failed
//! attempt leaves for the error and the request log.

use std::time::Duration;

use thiserror::Error;

use crate::admission::SkipReason;
use crate::config::Target;
use crate::providers::{Class, ProviderError};
use crate::request::Field;

/// Fields, comma-separated, for messages.
fn list(fields: &[Field]) -> String {
    fields.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// One attempt's failure: the provider's own error, a deadline the core
/// enforced, or a candidate skipped without being tried.
#[derive(Debug, PartialEq, Error)]
pub enum Failure {
    /// The provider failed.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// No first token within the target's first-token deadline.
    #[error("no first token within {} ms", .0.as_millis())]
    FirstTokenTimeout(Duration),
    /// A stream went silent for longer than the idle timeout.
    #[error("no event for {} ms", .0.as_millis())]
    IdleTimeout(Duration),
    /// The stream ended before any content, yet with its end marker.
    #[error("the stream ended without any content")]
    Empty,
    /// The provider's content filter refused to answer, on a route that
    /// fails over on refusals.
    #[error("the provider's content filter refused to answer")]
    RefusedByFilter,
    /// The request's own time ran out before any candidate committed (or,
    /// for an answer sent whole, before it ended).
    #[error("the request timeout of {} ms ran out", .0.as_millis())]
    RequestTimeout(Duration),
    /// An answer sent whole grew past `max_answer_bytes`.
    #[error("the answer is larger than the limit of {0} bytes")]
    AnswerTooLarge(usize),
    /// The answer is not the JSON the request asked for.
    #[error("the answer is not valid for the requested format: {0}")]
    InvalidOutput(String),
    /// Skipped: the target cannot honour these fields of the request.
    #[error("skipped: cannot honour {}", list(.0))]
    Unsupported(Vec<Field>),
    /// Passed over by admission, without a request: its breaker, a wait
    /// it asked for, its quota, or its context window.
    #[error(transparent)]
    Skipped(#[from] SkipReason),
    /// The proxy is shutting down and its grace period is over.
    #[error("the proxy is shutting down")]
    ShuttingDown,
    /// A committed stream broke and no candidate could continue it.
    #[error("{broke}; resuming failed: {why}")]
    Unresumed {
        /// What broke the stream.
        broke: Box<Failure>,
        /// Why no continuation was had.
        why: String,
    },
    /// A synthetic failure injected by an operator's drill, standing for the real one.
    #[error("drill: {0}")]
    Drill(Box<Failure>),
}

impl Failure {
    /// What this failure decides, in one place (see [`Class`]). A drill
    /// decides as the failure it stands for, except that it never charges
    /// the provider's breaker; a stream that could not be resumed keeps the
    /// class of what broke it.
    pub fn class(&self) -> Class {
        match self {
            Failure::Provider(err) => err.class(),
            Failure::FirstTokenTimeout(_) => Class { timed_out: true, ..Class::upstream("first_token_timeout") },
            Failure::IdleTimeout(_) => Class { timed_out: true, ..Class::upstream("idle_timeout") },
            Failure::Empty => Class::upstream("empty"),
            // The provider works as designed: its breaker is not charged.
            Failure::RefusedByFilter => Class { charge_breaker: false, ..Class::upstream("refused_by_filter") },
            Failure::RequestTimeout(_) => Class { timed_out: true, ..Class::baton("request_timeout") },
            Failure::AnswerTooLarge(_) => Class::baton("answer_too_large"),
            Failure::Skipped(reason) => reason.class(),
            Failure::Unsupported(_) => Class { skip: true, ..Class::baton("unsupported") },
            Failure::InvalidOutput(_) => Class { charge_breaker: false, ..Class::upstream("invalid_output") },
            Failure::ShuttingDown => Class::baton("shutting_down"),
            Failure::Unresumed { broke, .. } => Class { charge_breaker: false, ..broke.class() },
            Failure::Drill(real) => Class { label: "drill", charge_breaker: false, ..real.class() },
        }
    }

    /// A short, bounded label for metrics, logs and attempt lists.
    pub fn kind(&self) -> &'static str {
        self.class().label
    }

    /// What happened, without any text a provider wrote: for the all-failed
    /// error other clients see, error events, and logs at info.
    pub fn summary(&self) -> String {
        match self {
            Failure::Provider(err) => err.summary(),
            Failure::Unresumed { broke, .. } => format!("{}; resuming failed", broke.summary()),
            Failure::Drill(real) => format!("drill: {}", real.summary()),
            Failure::InvalidOutput(_) => "the answer is not valid for the requested format".to_owned(),
            other => other.to_string(),
        }
    }

    /// Whether another candidate may be tried.
    pub fn is_failover(&self) -> bool {
        self.class().failover
    }

    /// Whether the same target may be tried again: a refused or reset
    /// connection, a 5xx or a 429, all before any byte of an answer. Never a
    /// timeout (the provider is slow, waiting again won't help) and never a
    /// request the provider rejected.
    pub fn is_retryable(&self) -> bool {
        self.class().retry
    }

    /// Whether this says the provider is unwell, for its circuit breaker.
    pub fn counts_against_provider(&self) -> bool {
        self.class().charge_breaker
    }

    /// Whether the candidate was passed over without a request.
    pub fn is_skip(&self) -> bool {
        self.class().skip
    }

    /// How long a provider asked to be left alone, when it did.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Failure::Provider(ProviderError::RateLimited { retry_after, .. }) => *retry_after,
            Failure::Skipped(reason) => reason.retry_after(),
            _ => None,
        }
    }
}

/// What one failed attempt was, for the all-failed error message and logs.
#[derive(Debug)]
pub struct AttemptRecord {
    /// The provider's configured name.
    pub provider: String,
    /// The upstream model.
    pub model: String,
    /// Why it failed.
    pub failure: Failure,
    /// From the attempt's start to its failure.
    pub elapsed: Duration,
}

impl AttemptRecord {
    /// The record of `target`'s attempt that failed so after `elapsed`.
    pub(super) fn of(target: &Target, failure: Failure, elapsed: Duration) -> Self {
        AttemptRecord { provider: target.provider.name.clone(), model: target.model.clone(), failure, elapsed }
    }

    /// The attempt as the request log keeps it.
    pub fn tried(&self) -> crate::event::Tried {
        crate::event::Tried {
            provider: self.provider.clone(),
            model: self.model.clone(),
            class: self.failure.kind(),
            sent: !self.failure.is_skip(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::Source;

    fn server() -> Failure {
        Failure::Provider(ProviderError::Server { status: 503, message: String::new() })
    }

    #[test]
    fn a_drill_decides_as_the_failure_it_stands_for_but_never_charges_the_breaker() {
        let drilled = Failure::Drill(Box::new(server()));
        assert!(drilled.is_retryable() && server().is_retryable(), "a drilled 5xx is retried like a real one");
        assert!(drilled.is_failover());
        assert!(server().counts_against_provider() && !drilled.counts_against_provider());
        assert_eq!(drilled.kind(), "drill");
    }

    #[test]
    fn batons_own_faults_are_neither_retried_nor_charged_to_the_provider() {
        let own = Failure::Provider(ProviderError::Request("the scheme is not http or https".into()));
        assert_eq!(own.class().source, Source::Baton);
        assert!(!own.is_retryable() && !own.counts_against_provider() && own.is_failover());
        let connect = Failure::Provider(ProviderError::Connect("refused".into()));
        assert_eq!(connect.class().source, Source::Upstream);
        assert!(connect.is_retryable() && connect.counts_against_provider());
    }

    #[test]
    fn the_client_s_own_mistake_goes_back_to_it() {
        let rejected = ProviderError::BadRequest { status: 400, message: String::new(), context_length: false };
        let class = Failure::Provider(rejected).class();
        assert_eq!((class.source, class.failover, class.charge_breaker), (Source::Client, false, false));
    }
}
