//! The chain every candidate passes before an attempt is sent: the local
//! policies in order, then — when replicas share a store — the provider's
//! quota across the cluster, the one policy that waits on the network.
//! The attempt loop calls [`Admission::admit`] and nothing else; what it
//! gets back is every ticket of the attempt, to settle once.

use std::sync::Arc;

use super::shared::take_provider_quota;
use super::{
    BreakerPolicy, Candidate, ContextWindowPolicy, CooldownPolicy, Policy, QuotaPolicy, QuotaUse, Settlement, Skip,
    Ticket,
};
use crate::config::Provider;
use crate::state::Store;

/// The policies, in order: the first skip wins.
pub struct Admission {
    policies: Vec<Box<dyn Policy>>,
    /// The providers' quota policy, also read for the metrics.
    quota: QuotaPolicy,
}

impl Default for Admission {
    /// The target's context window (first: a request it cannot hold takes
    /// nothing from the others), the cooldown a provider asked for, its
    /// quota, then its breaker (last, so a probe is never taken for a
    /// request another policy turns away).
    fn default() -> Self {
        let quota = QuotaPolicy::default();
        Admission {
            policies: vec![
                Box::new(ContextWindowPolicy),
                Box::new(CooldownPolicy),
                Box::new(quota.clone()),
                Box::new(BreakerPolicy),
            ],
            quota,
        }
    }
}

impl Admission {
    /// The default policies followed by `more` (limits, quotas, budgets).
    pub fn with(more: Vec<Box<dyn Policy>>) -> Self {
        let mut admission = Admission::default();
        admission.policies.extend(more);
        admission
    }

    /// How much of each of `providers`' quota this replica has in use now.
    pub fn quota_used(&self, providers: &[Arc<Provider>]) -> Vec<QuotaUse> {
        self.quota.used(providers)
    }

    /// Runs `candidate` through every local policy, then, with a `shared`
    /// store, through its provider's quota across every replica (waiting
    /// at most the store's timeout, and never failing because of it). The
    /// tickets of those that admitted it before one skipped are abandoned;
    /// a skip by the shared quota gives back whole what the local policies
    /// took, as nothing was sent.
    pub async fn admit(&self, candidate: &Candidate<'_>, shared: Option<&Arc<Store>>) -> Result<Tickets, Skip> {
        let mut tickets = Tickets::default();
        for policy in &self.policies {
            if let Some(ticket) = policy.admit(candidate)? {
                tickets.held.push(ticket);
            }
        }
        if let Some(store) = shared {
            match take_provider_quota(store, candidate).await {
                Ok(ticket) => tickets.held.extend(ticket),
                Err(skip) => {
                    tickets.settle(Settlement::NotSent);
                    return Err(skip);
                }
            }
        }
        Ok(tickets)
    }
}

/// Every ticket of one attempt, settled together exactly once; dropped
/// unsettled, they settle as [`Settlement::Abandoned`].
#[derive(Default)]
pub struct Tickets {
    held: Vec<Box<dyn Ticket>>,
}

impl Tickets {
    /// The attempt committed.
    pub fn committed(&mut self) {
        self.held.iter_mut().for_each(|ticket| ticket.committed());
    }

    /// The attempt ended so.
    pub fn settle(mut self, how: Settlement) {
        self.held.drain(..).for_each(|ticket| ticket.settle(how));
    }
}

impl Drop for Tickets {
    fn drop(&mut self) {
        self.held.drain(..).for_each(|ticket| ticket.settle(Settlement::Abandoned));
    }
}
