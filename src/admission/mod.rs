//! Admission: before an attempt is sent, each policy of a chain admits the
//! candidate with a ticket or skips it with a reason. A ticket is settled
//! exactly once, when the attempt ends — with its outcome and its usage —
//! or, if it is dropped first (a client gone, a hedge lost), as abandoned.
//! The context window, the `Retry-After` cooldown, the provider's quota and
//! its circuit breaker are policies of that chain. What holds the client
//! rather than a candidate — its key's limits, budgets, the per-request
//! cost cap — is checked once per request, before the chain, by the
//! [`RequestGate`].

mod breaker;
mod chain;
mod context;
mod cooldown;
mod gate;
mod quota;
mod refusal;
mod shared;

use std::time::Duration;

use tokio::time::Instant;

pub use breaker::BreakerPolicy;
pub use chain::{Admission, Tickets};
pub use context::ContextWindowPolicy;
pub use cooldown::CooldownPolicy;
pub use gate::{Admitted, GateTicket, KeyUse, RequestGate, SpendView};
pub use quota::{QuotaPolicy, QuotaUse};
pub use refusal::Refusal;
pub use shared::cluster_quota_used;

use crate::config::Provider;
use crate::event::{ChatRequest, Usage};
use crate::providers::Class;
use crate::resilience::ProviderHealth;

/// One candidate asking to be tried.
pub struct Candidate<'a> {
    /// The provider as configured.
    pub provider: &'a Provider,
    /// The context window the target declares, in tokens, if it does.
    pub context_window: Option<u64>,
    /// What is asked of it: token quotas estimate its cost.
    pub request: &'a ChatRequest,
    /// Its shared health: breaker, cooldown, latency.
    pub health: &'a ProviderHealth,
    /// The route has no other candidate left: policies about the provider's
    /// health let it through anyway (a route never shuts itself), policies
    /// about the client or the budget do not.
    pub last_resort: bool,
}

/// Why a candidate was passed over: the attempt's failure, sent nowhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SkipReason {
    /// Its circuit breaker is open.
    #[error("skipped: the circuit breaker is open")]
    BreakerOpen,
    /// It asked, with `Retry-After`, for no requests for this much longer.
    #[error("skipped: rate limited for {} ms more", .0.as_millis())]
    CoolingDown(Duration),
    /// Its quota (requests or tokens per minute) has no room for this much longer.
    #[error("skipped: over its quota for {} ms more", .0.as_millis())]
    OverQuota(Duration),
    /// Its declared context window cannot hold the request's estimate.
    #[error("skipped: the request needs about {needed} tokens, the context window holds {window}")]
    ContextWindow {
        /// The estimated tokens: input, plus `max_tokens` or the default reserve.
        needed: u64,
        /// The target's declared window.
        window: u64,
    },
}

impl SkipReason {
    /// Whether the route's last resort goes past this skip: the provider's
    /// health, yes; its quota or a window too small, no (so it is not
    /// tried again then).
    pub fn yields_to_last_resort(self) -> bool {
        matches!(self, SkipReason::BreakerOpen | SkipReason::CoolingDown(_))
    }

    /// What the skip decides, as a failure's class: never charged to the
    /// provider, and a rate limit when the provider or its quota asked for a wait.
    pub fn class(self) -> Class {
        match self {
            SkipReason::BreakerOpen => Class { skip: true, ..Class::baton("breaker_open") },
            SkipReason::CoolingDown(_) => Class { skip: true, rate_limited: true, ..Class::baton("cooling_down") },
            SkipReason::OverQuota(_) => Class { skip: true, rate_limited: true, ..Class::baton("over_quota") },
            SkipReason::ContextWindow { .. } => Class { skip: true, ..Class::baton("context_window") },
        }
    }

    /// How long until the provider takes requests again, when it or its quota said.
    pub fn retry_after(self) -> Option<Duration> {
        match self {
            SkipReason::CoolingDown(wait) | SkipReason::OverQuota(wait) => Some(wait),
            SkipReason::BreakerOpen | SkipReason::ContextWindow { .. } => None,
        }
    }
}

/// A candidate passed over, and when it is due back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Skip {
    /// Why.
    pub reason: SkipReason,
    /// When the policy would admit it again, for the last resort's order.
    pub recovers_at: Instant,
}

/// How an admitted attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement {
    /// It failed before commit.
    Failed(Class),
    /// Its answer ended complete, having used this much.
    Completed(Usage),
    /// Its answer broke after commit.
    Broke(Class),
    /// It ended without an outcome: the client left, or a hedge lost.
    Abandoned,
    /// A check after the policies (the quota shared across replicas)
    /// refused it: nothing was sent, and every limit it took from is
    /// given back whole, its request included.
    NotSent,
}

/// What one policy holds for an admitted attempt until it ends.
pub trait Ticket: Send {
    /// The attempt committed: its first token is going to the client.
    fn committed(&mut self) {}

    /// The attempt ended so; called exactly once.
    fn settle(self: Box<Self>, how: Settlement);
}

/// One rule a candidate must pass.
pub trait Policy: Send + Sync {
    /// Admits `candidate`, with a ticket to settle when the policy needs
    /// to hear how the attempt ended, or skips it.
    fn admit(&self, candidate: &Candidate<'_>) -> Result<Option<Box<dyn Ticket>>, Skip>;
}
