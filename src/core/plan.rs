//! What one pass of the attempt loop is given: the request as each target
//! is asked it, the route's targets in the order they are tried, its rules
//! and retry budget, and the deadline. The engine and a resume make it; a
//! pass, each target's turn and each attempt read it.

use tokio::time::Instant;

use super::ask::Ask;
use super::budget::RetryBudget;
use super::rules::Rules;
use super::{Call, strategy};
use crate::config::{Drills, Route, Target};
use crate::observe::traces::TraceHandle;
use crate::resilience::Health;

/// One pass of the attempt loop: what to ask, of which targets in which
/// order, and by when.
pub(super) struct Plan<'a> {
    /// The request's id, for logs.
    pub id: &'a str,
    /// The request's trace, for the attempts' spans.
    pub trace: &'a TraceHandle,
    /// The route's name, for metrics and the all-failed error.
    pub route: &'a str,
    /// The route's candidates, in config order.
    pub targets: &'a [Target],
    /// The route's views.
    pub rules: Rules,
    /// The route's retry budget, which retries and hedges draw on.
    pub budget: &'a RetryBudget,
    /// What each target is asked.
    pub ask: Ask<'a>,
    /// Failures an operator asked to simulate.
    pub drills: &'a Drills,
    /// The targets, in the order they are tried.
    pub order: Vec<usize>,
    /// When the pass gives up.
    pub deadline: Option<Instant>,
    /// The target whose failure led to this pass, and why (a resume).
    pub after: Option<(usize, &'static str)>,
}

impl<'a> Plan<'a> {
    /// A pass over every target of `route` for the client's request, in
    /// the order its strategy gives with the providers' `health` now,
    /// bounded by the request deadline from `started`.
    pub(super) fn fresh(
        call: &'a Call,
        route: &'a Route,
        health: &Health,
        budget: &'a RetryBudget,
        started: Instant,
    ) -> Self {
        let rules = Rules::of(route);
        Plan {
            id: &call.id,
            trace: &call.trace,
            route: &route.model,
            targets: &route.targets,
            rules,
            budget,
            ask: Ask::Fresh(&call.request),
            drills: &call.drills,
            order: strategy::order(route, health),
            deadline: Some(rules.deadlines.request_deadline(started)),
            after: None,
        }
    }
}
