//! What the engine reads of a route besides its targets, taken once per
//! request into small views — its deadlines, retry policy, commit window,
//! hedge, surface and caps — so nothing below the engine's entry holds the
//! whole route.

use std::time::Duration;

use tokio::time::Instant;

use super::later;
use super::retry::RetryPolicy;
use crate::config::{CommitWindow, DEFAULT_REQUEST_BOUND, Hedge, Route, Surface};

/// A route's deadlines, beside each target's own first-token deadline.
#[derive(Debug, Clone, Copy)]
pub(super) struct Deadlines {
    /// The route's `request_timeout_ms`, when it sets one.
    pub request: Option<Duration>,
    /// After commit, the longest allowed gap between events.
    pub idle: Duration,
}

/// The views of one route, for one request.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rules {
    /// When the request and its streams give up.
    pub deadlines: Deadlines,
    /// When a failed attempt is tried again, and after how long.
    pub retry: RetryPolicy,
    /// How much of an attempt is held back before it commits.
    pub commit: CommitWindow,
    /// When a slow attempt gets company.
    pub hedge: Option<Hedge>,
    /// What the route does with request fields and answer parts beyond text.
    pub surface: Surface,
    /// The largest SSE event an upstream may send.
    pub max_event_bytes: usize,
    /// The most text and tool-call bytes an answer held whole may reach.
    pub max_answer_bytes: usize,
}

impl Deadlines {
    /// What bounds a request before its answer commits, and the whole of an
    /// answer read before it is sent: the route's `request_timeout_ms`, or
    /// [`DEFAULT_REQUEST_BOUND`].
    pub(super) fn request_bound(&self) -> Duration {
        self.request.unwrap_or(DEFAULT_REQUEST_BOUND)
    }

    /// The request deadline of a request that started at `started`.
    pub(super) fn request_deadline(&self, started: Instant) -> Instant {
        later(started, self.request_bound())
    }

    /// The deadline a resume of that request keeps: the route's own
    /// `request_timeout_ms` only, as a resume unset is bounded per attempt.
    pub(super) fn resume_deadline(&self, started: Instant) -> Option<Instant> {
        self.request.map(|timeout| later(started, timeout))
    }
}

impl Rules {
    /// The views of `route`.
    pub(super) fn of(route: &Route) -> Self {
        Rules {
            deadlines: Deadlines { request: route.request_timeout, idle: route.idle_timeout },
            retry: RetryPolicy::of(route),
            commit: route.commit,
            hedge: route.hedge,
            surface: route.surface,
            max_event_bytes: route.limits.max_event_bytes,
            max_answer_bytes: route.limits.max_answer_bytes,
        }
    }
}
