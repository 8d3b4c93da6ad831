//! The cooldown a provider asked for with `Retry-After`: skip it until then,
//! unless nothing else is left.

use tokio::time::Instant;

use super::{Candidate, Policy, Skip, SkipReason, Ticket};

/// Skips a provider that is cooling down after a 429.
pub struct CooldownPolicy;

impl Policy for CooldownPolicy {
    fn admit(&self, candidate: &Candidate<'_>) -> Result<Option<Box<dyn Ticket>>, Skip> {
        match candidate.health.rate_limited_until() {
            Some(until) if !candidate.last_resort => {
                let left = until.saturating_duration_since(Instant::now());
                Err(Skip { reason: SkipReason::CoolingDown(left), recovers_at: until })
            }
            _ => Ok(None),
        }
    }
}
