//! Whether a failed try of a target is tried again, and after how long: for
//! 429s, 5xx and failed connections only, `retries` times, with exponential
//! backoff and full jitter, or after the wait the provider asked for. The
//! route's retry budget has the last word ([`super::budget`]).

use std::time::Duration;

use tokio::time::Instant;

use super::Failure;
use crate::config::Route;
use crate::providers::ProviderError;
use crate::resilience::{ProviderHealth, backoff};

/// A route's retry policy.
#[derive(Debug, Clone, Copy)]
pub(super) struct RetryPolicy {
    /// The base of the exponential backoff between retries of one target.
    pub backoff: Duration,
    /// The longest `Retry-After` worth waiting for; a longer one moves on.
    pub max_wait: Duration,
    /// The longest a `Retry-After` keeps a provider aside.
    pub max_cooldown: Duration,
}

impl RetryPolicy {
    /// The policy `route` sets.
    pub(super) fn of(route: &Route) -> Self {
        RetryPolicy {
            backoff: route.retry_backoff,
            max_wait: route.max_retry_wait,
            max_cooldown: route.limits.max_cooldown,
        }
    }

    /// How long to wait before trying a target again after `failure`, its
    /// `retry`th retry of the `retries` allowed, or `None` to move on. A
    /// 429's `Retry-After` is capped at `max_cooldown` (and shared through
    /// `health` with other requests, which try the provider only when
    /// nothing else is left); one longer than `max_wait` moves on.
    pub(super) fn wait(
        &self,
        failure: &mut Failure,
        retry: u32,
        retries: u32,
        health: &ProviderHealth,
    ) -> Option<Duration> {
        if let Failure::Provider(ProviderError::RateLimited { retry_after: Some(wait), .. }) = failure {
            *wait = (*wait).min(self.max_cooldown);
            health.rate_limit_until(super::later(Instant::now(), *wait));
            if *wait > self.max_wait {
                return None;
            }
        }
        if retry >= retries || !failure.is_retryable() {
            return None;
        }
        Some(failure.retry_after().unwrap_or_else(|| backoff::full_jitter(self.backoff, retry)))
    }
}
