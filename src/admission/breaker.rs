//! The provider's circuit breaker as an admission policy: its permit is the
//! ticket, settled by how the attempt ended.

use std::sync::Arc;

use super::{Candidate, Policy, Settlement, Skip, SkipReason, Ticket};
use crate::resilience::{Breaker, Permit};

/// Skips a provider whose breaker is open, or whose one probe is out.
pub struct BreakerPolicy;

impl Policy for BreakerPolicy {
    fn admit(&self, candidate: &Candidate<'_>) -> Result<Option<Box<dyn Ticket>>, Skip> {
        let breaker = &candidate.health.breaker;
        let permit = if candidate.last_resort {
            breaker.force_acquire()
        } else {
            breaker
                .try_acquire()
                .ok_or_else(|| Skip { reason: SkipReason::BreakerOpen, recovers_at: breaker.recovers_at() })?
        };
        Ok(Some(Box::new(BreakerTicket { permit: Some(permit), breaker: Arc::clone(breaker) })))
    }
}

/// A permit until commit; after it, what is left to settle (a probe settles
/// at commit: its first token shows the provider is back).
struct BreakerTicket {
    permit: Option<Permit>,
    breaker: Arc<Breaker>,
}

impl Ticket for BreakerTicket {
    fn committed(&mut self) {
        self.permit = self.permit.take().and_then(Permit::commit);
    }

    /// A failure counts only when its class charges the provider; a long
    /// generation, a client that left and a lost hedge never do.
    fn settle(self: Box<Self>, how: Settlement) {
        match (how, self.permit) {
            (Settlement::Failed(class) | Settlement::Broke(class), Some(permit)) if class.charge_breaker => {
                permit.failure();
            }
            (Settlement::Broke(class), None) if class.charge_breaker => self.breaker.record_failure(),
            (Settlement::Completed(_), Some(permit)) => permit.success(),
            _ => {}
        }
    }
}
