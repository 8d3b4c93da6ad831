//! Why an attempt or a committed stream failed, and what the client is told
//! when no candidate could answer.

use std::time::Duration;

use thiserror::Error;

use crate::providers::ProviderError;

/// One attempt's failure: the provider's own error, or a deadline the core enforced.
#[derive(Debug, Error)]
pub enum Failure {
    /// The provider failed.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// No first token within the route's first-token deadline.
    #[error("no first token within {0} ms")]
    FirstTokenTimeout(u128),
    /// A committed stream went silent for longer than the idle timeout.
    #[error("no event for {0} ms")]
    IdleTimeout(u128),
    /// The stream ended before any content, yet with its end marker.
    #[error("the stream ended without any content")]
    Empty,
}

impl Failure {
    /// A short, bounded label for metrics, logs and attempt lists.
    pub fn kind(&self) -> &'static str {
        match self {
            Failure::Provider(err) => err.kind(),
            Failure::FirstTokenTimeout(_) => "first_token_timeout",
            Failure::IdleTimeout(_) => "idle_timeout",
            Failure::Empty => "empty",
        }
    }

    /// Whether another candidate may be tried (see [`ProviderError::is_failover`]).
    pub fn is_failover(&self) -> bool {
        match self {
            Failure::Provider(err) => err.is_failover(),
            Failure::FirstTokenTimeout(_) | Failure::IdleTimeout(_) | Failure::Empty => true,
        }
    }

    fn is_timeout(&self) -> bool {
        matches!(self, Failure::FirstTokenTimeout(_) | Failure::IdleTimeout(_))
    }

    fn retry_after(&self) -> Option<Option<Duration>> {
        match self {
            Failure::Provider(ProviderError::RateLimited { retry_after, .. }) => Some(*retry_after),
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

/// Why a request got no answer; the HTTP layer turns it into a response.
#[derive(Debug, Error)]
pub enum ProxyError {
    /// Every candidate failed before commit.
    #[error("all {} attempts failed: {}", .0.len(), describe(.0))]
    AllFailed(Vec<AttemptRecord>),
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
    /// The client's error for a request a provider rejected as malformed.
    pub(super) fn rejected(record: AttemptRecord) -> Self {
        let (status, message) = match record.failure {
            Failure::Provider(ProviderError::BadRequest { status, message, .. }) => (status, message),
            other => (502, other.to_string()),
        };
        ProxyError::Rejected { provider: record.provider, status, message }
    }

    /// The HTTP status that fits: 429 when every candidate was rate-limited,
    /// 504 when every one timed out, 502 for any other mix.
    pub fn status(&self) -> u16 {
        match self {
            ProxyError::Rejected { status, .. } => *status,
            ProxyError::AllFailed(attempts) if attempts.is_empty() => 502,
            ProxyError::AllFailed(attempts) if attempts.iter().all(|a| a.failure.retry_after().is_some()) => 429,
            ProxyError::AllFailed(attempts) if attempts.iter().all(|a| a.failure.is_timeout()) => 504,
            ProxyError::AllFailed(_) => 502,
        }
    }

    /// When every candidate was rate-limited: the shortest wait any asked for
    /// (one second when none said), for the client's `Retry-After`.
    pub fn retry_after(&self) -> Option<Duration> {
        let ProxyError::AllFailed(attempts) = self else { return None };
        let waits: Option<Vec<Option<Duration>>> = attempts.iter().map(|a| a.failure.retry_after()).collect();
        let waits = waits.filter(|w| !w.is_empty())?;
        Some(waits.into_iter().flatten().min().unwrap_or(Duration::from_secs(1)))
    }

    /// A short, bounded label for metrics and the error `code`.
    pub fn kind(&self) -> &'static str {
        match (self, self.status()) {
            (ProxyError::Rejected { .. }, _) => "upstream_rejected",
            (ProxyError::AllFailed(_), 429) => "all_rate_limited",
            (ProxyError::AllFailed(_), 504) => "all_timed_out",
            (ProxyError::AllFailed(_), _) => "all_failed",
        }
    }
}

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
                a.failure
            )
        })
        .collect();
    parts.join("; ")
}
