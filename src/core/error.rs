//! What the client is told when no candidate could answer: the error of a
//! whole pass, its HTTP status and label, and the message listing every
//! attempt without a provider's own words.

use std::time::Duration;

use thiserror::Error;

use super::{AttemptRecord, Failure};
use crate::admission::SkipReason;
use crate::providers::ProviderError;

/// Why a request got no answer; the HTTP layer turns it into a response.
#[derive(Debug, Error)]
pub enum ProxyError {
    /// Every candidate failed before commit.
    #[error("all {} candidates failed: {}", .0.len(), describe(.0))]
    AllFailed(Vec<AttemptRecord>),
    /// The proxy is shutting down and stopped waiting for an answer.
    #[error("the proxy is shutting down")]
    ShuttingDown,
    /// No target of the route can honour some fields of the request.
    #[error("no target of this route can honour {}: {}", .fields.join(", "), .targets.join("; "))]
    Unsupported {
        /// The fields, as the client wrote them.
        fields: Vec<String>,
        /// Each target, with what it could not honour.
        targets: Vec<String>,
    },
    /// No target's context window can hold the request: each was skipped
    /// for its declared window (`context_window`) or said so itself.
    #[error("{}", too_long(.0))]
    ContextLengthExceeded(Vec<AttemptRecord>),
    /// A provider said the request itself is wrong; it is passed back as is.
    #[error("{provider}: {message}")]
    Rejected {
        /// The provider that rejected it.
        provider: String,
        /// The status the provider answered.
        status: u16,
        /// The provider's explanation.
        message: String,
    },
}

impl ProxyError {
    /// The client's error when every target skipped the request for fields
    /// it cannot honour (`records` are those skips).
    pub(super) fn unsupported(records: &[AttemptRecord]) -> Self {
        let mut fields: Vec<String> = Vec::new();
        let mut targets = Vec::new();
        for record in records {
            if let Failure::Unsupported(missing) = &record.failure {
                let names: Vec<String> = missing.iter().map(ToString::to_string).collect();
                targets.push(format!("{} ({}) cannot honour {}", record.provider, record.model, names.join(", ")));
                for name in names {
                    if !fields.contains(&name) {
                        fields.push(name);
                    }
                }
            }
        }
        ProxyError::Unsupported { fields, targets }
    }

    /// The client's error for a request a provider rejected as malformed.
    pub(super) fn rejected(record: AttemptRecord) -> Self {
        let (status, message) = match record.failure {
            Failure::Provider(ProviderError::BadRequest { status, message, .. }) => (status, message),
            other => (502, other.to_string()),
        };
        ProxyError::Rejected { provider: record.provider, status, message }
    }

    /// The HTTP status that fits: 429 when every candidate was rate-limited,
    /// 503 when every breaker was open, 504 when every one timed out, 502 for
    /// any other mix.
    pub fn status(&self) -> u16 {
        let attempts = match self {
            ProxyError::AllFailed(attempts) => attempts,
            ProxyError::Rejected { status, .. } => return *status,
            ProxyError::Unsupported { .. } => return 400,
            ProxyError::ShuttingDown => return 503,
            ProxyError::ContextLengthExceeded(_) => return 400,
        };
        // A target that cannot take the request says nothing of why the others failed.
        let others = || {
            attempts.iter().filter(|a| {
                !matches!(a.failure, Failure::Skipped(SkipReason::ContextWindow { .. }) | Failure::Unsupported(_))
            })
        };
        let all = |test: fn(&Failure) -> bool| others().next().is_some() && others().all(|a| test(&a.failure));
        if all(|f| f.class().rate_limited) {
            429
        } else if all(|f| matches!(f, Failure::Skipped(SkipReason::BreakerOpen))) {
            503
        } else if all(|f| f.class().timed_out) {
            504
        } else {
            502
        }
    }

    /// When every candidate was rate-limited: the shortest wait any asked for
    /// (one second when none said), for the client's `Retry-After`.
    pub fn retry_after(&self) -> Option<Duration> {
        let ProxyError::AllFailed(attempts) = self else { return None };
        if self.status() != 429 {
            return None;
        }
        Some(attempts.iter().filter_map(|a| a.failure.retry_after()).min().unwrap_or(Duration::from_secs(1)))
    }

    /// The attempts made or passed over before the request gave up, in
    /// order (none when nothing was tried, as when shutting down).
    pub fn attempts(&self) -> &[AttemptRecord] {
        match self {
            ProxyError::AllFailed(attempts) | ProxyError::ContextLengthExceeded(attempts) => attempts,
            _ => &[],
        }
    }

    /// A short, bounded label for metrics and the error `code`.
    pub fn kind(&self) -> &'static str {
        match (self, self.status()) {
            (ProxyError::Rejected { .. }, _) => "upstream_rejected",
            (ProxyError::Unsupported { .. }, _) => "unsupported_parameter",
            (ProxyError::ShuttingDown, _) => "shutting_down",
            (ProxyError::ContextLengthExceeded(_), _) => "context_length_exceeded",
            (ProxyError::AllFailed(_), 429) => "all_rate_limited",
            (ProxyError::AllFailed(_), 503) => "all_breakers_open",
            (ProxyError::AllFailed(_), 504) => "all_timed_out",
            (ProxyError::AllFailed(_), _) => "all_failed",
        }
    }
}

/// The largest estimate among context-window skips (they are of one request).
fn needed(skips: &[AttemptRecord]) -> u64 {
    let estimate = |a: &AttemptRecord| match a.failure {
        Failure::Skipped(SkipReason::ContextWindow { needed, .. }) => needed,
        _ => 0,
    };
    skips.iter().map(estimate).max().unwrap_or(0)
}

/// Why no target can hold the request: baton's estimate against the
/// declared windows, and which providers said so themselves.
fn too_long(records: &[AttemptRecord]) -> String {
    let said = |a: &AttemptRecord| format!("{} ({}) said the prompt is too long", a.provider, a.model);
    let window = |a: &AttemptRecord| match a.failure {
        Failure::Skipped(SkipReason::ContextWindow { window, .. }) => format!("{} ({}) {window}", a.provider, a.model),
        _ => said(a),
    };
    let each = records.iter().map(window).collect::<Vec<_>>().join(", ");
    if records.iter().all(|a| matches!(a.failure, Failure::Skipped(SkipReason::ContextWindow { .. }))) {
        format!(
            "the request needs about {} tokens (its input estimated at 4 characters a token, plus max_tokens or {} reserved for the answer), more than any target's context window holds: {each}",
            needed(records),
            crate::event::DEFAULT_OUTPUT_RESERVE
        )
    } else {
        format!("the request is too long for the context window of every target of this route: {each}")
    }
}

/// Each attempt's provider, model, class, status and elapsed time: never
/// the provider's own words, which may carry anything, even the key it was sent.
fn describe(attempts: &[AttemptRecord]) -> String {
    let parts: Vec<String> = attempts
        .iter()
        .map(|a| {
            format!(
                "{} ({}): {} after {} ms: {}",
                a.provider,
                a.model,
                a.failure.kind(),
                a.elapsed.as_millis(),
                a.failure.summary()
            )
        })
        .collect();
    parts.join("; ")
}
