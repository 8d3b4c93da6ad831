//! Why a request is turned away before any provider is tried: its key's
//! rate limits, a blocking budget, or a cost cap no target fits. Both the
//! local gate and the limits shared across replicas refuse with it.

use std::time::Duration;

/// Why a request is refused before any provider is tried.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// The key is over its `rpm` or `tpm`.
    RateLimited {
        /// The key's name.
        key: String,
        /// `"requests"` or `"tokens"`.
        unit: &'static str,
        /// Its limit per minute.
        per_minute: u64,
        /// When it would fit; none when it never can (more tokens than the limit).
        retry_after: Option<Duration>,
    },
    /// A blocking budget is spent.
    BudgetExceeded {
        /// Its scope, as written in the config.
        scope: String,
        /// Its window's name.
        window: &'static str,
        /// Its limit.
        usd: f64,
        /// What was spent over the window.
        spent: f64,
        /// When enough of that spend leaves the window.
        retry_after: Option<Duration>,
    },
    /// No target's estimate fits `max_usd_per_request`.
    OverCostCap {
        /// The route asked for.
        route: String,
        /// The cheapest target's estimate.
        estimate: f64,
        /// The cap.
        cap: f64,
    },
}

impl Refusal {
    /// The request's outcome, for metrics and the request log.
    pub fn kind(&self) -> &'static str {
        match self {
            Refusal::RateLimited { .. } => "key_rate_limited",
            Refusal::BudgetExceeded { .. } => "budget_exceeded",
            Refusal::OverCostCap { .. } => "over_cost_cap",
        }
    }

    /// How long the client should wait before asking again, when waiting helps.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Refusal::RateLimited { retry_after, .. } | Refusal::BudgetExceeded { retry_after, .. } => *retry_after,
            Refusal::OverCostCap { .. } => None,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::RateLimited { key, unit, per_minute, retry_after: Some(_) } => {
                write!(f, "the API key {key:?} is over its limit of {per_minute} {unit} per minute")
            }
            Refusal::RateLimited { key, unit, per_minute, retry_after: None } => write!(
                f,
                "this request needs more {unit} than the API key {key:?} may use in a minute ({per_minute}); lower max_tokens or shorten it"
            ),
            Refusal::BudgetExceeded { scope, window, usd, spent, .. } => {
                write!(f, "budget exceeded: {scope} has spent ${spent:.4} of its ${usd:.2} over the last {window}")
            }
            Refusal::OverCostCap { route, estimate, cap } => write!(
                f,
                "this request's estimated cost of ${estimate:.4} is above max_usd_per_request ${cap:.4} on every target of route {route:?}; lower max_tokens or shorten it"
            ),
        }
    }
}
