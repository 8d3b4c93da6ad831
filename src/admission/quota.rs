//! The provider's own quota for this account, in requests and tokens per
//! minute: a target over it is skipped (`over_quota`) like an open breaker,
//! before its provider answers 429. Tokens are reserved from the request's
//! estimate and settled to the usage the provider reports.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::time::Instant;

use super::{Candidate, Policy, Settlement, Skip, SkipReason, Ticket};
use crate::clock::later;
use crate::config::Provider;
use crate::limits::Gcra;

/// One provider's limiters, with the limits they were made for.
struct Quota {
    limits: (Option<u64>, Option<u64>),
    requests: Option<Gcra>,
    tokens: Option<Gcra>,
}

/// Every provider's quota state; clones share it.
#[derive(Default, Clone)]
pub struct QuotaPolicy {
    quotas: Arc<Mutex<HashMap<String, Quota>>>,
}

/// How much of one provider's quota is in use, for the metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaUse {
    /// The provider's name.
    pub provider: String,
    /// `rpm` or `tpm`, as the config names the limit.
    pub unit: &'static str,
    /// Its limit per minute.
    pub per_minute: u64,
    /// The share in use on this replica: 0 when idle, 1 when full.
    pub ratio: f64,
}

impl QuotaPolicy {
    /// The share of the `rpm` and `tpm` of each of `providers` that has
    /// them which this replica has in use now (idle until first asked).
    pub fn used(&self, providers: &[Arc<Provider>]) -> Vec<QuotaUse> {
        let now = Instant::now();
        let quotas = self.quotas.lock().unwrap_or_else(PoisonError::into_inner);
        let mut used = Vec::new();
        for provider in providers {
            let quota = quotas.get(&provider.name).filter(|quota| quota.limits == (provider.rpm, provider.tpm));
            let limits = [
                ("rpm", provider.rpm, quota.and_then(|quota| quota.requests.as_ref())),
                ("tpm", provider.tpm, quota.and_then(|quota| quota.tokens.as_ref())),
            ];
            for (unit, limit, gcra) in limits {
                let Some(per_minute) = limit else { continue };
                let available = gcra.map_or(per_minute, |gcra| gcra.available(now));
                let ratio = per_minute.saturating_sub(available) as f64 / per_minute.max(1) as f64;
                used.push(QuotaUse { provider: provider.name.clone(), unit, per_minute, ratio });
            }
        }
        used
    }
}

impl Policy for QuotaPolicy {
    /// Not even a last resort passes: past the quota, the provider would
    /// only answer 429, or the account pay for what it was not meant to.
    fn admit(&self, candidate: &Candidate<'_>) -> Result<Option<Box<dyn Ticket>>, Skip> {
        let provider = candidate.provider;
        let limits = (provider.rpm, provider.tpm);
        if limits == (None, None) {
            return Ok(None);
        }
        let now = Instant::now();
        let mut quotas = self.quotas.lock().unwrap_or_else(PoisonError::into_inner);
        let quota = quotas.entry(provider.name.clone()).or_insert_with(|| Quota::new(limits));
        if quota.limits != limits {
            *quota = Quota::new(limits);
        }
        // The estimate walks the whole request: only a token quota needs it.
        let reserved = if quota.tokens.is_some() { candidate.request.estimated_tokens() } else { 0 };
        let over = |wait| Skip { reason: SkipReason::OverQuota(wait), recovers_at: later(now, wait) };
        // Both limits must have room; neither is touched unless both do.
        let (mut requests, mut tokens) = (quota.requests.clone(), quota.tokens.clone());
        if let Some(requests) = &mut requests {
            requests.take(1, now).map_err(over)?;
        }
        if let Some(tokens) = &mut tokens {
            tokens.take(reserved, now).map_err(over)?;
        }
        (quota.requests, quota.tokens) = (requests, tokens);
        let ticket = QuotaTicket { quotas: Arc::clone(&self.quotas), provider: provider.name.clone(), reserved };
        Ok(Some(Box::new(ticket)))
    }
}

impl Quota {
    fn new(limits: (Option<u64>, Option<u64>)) -> Self {
        Quota { limits, requests: limits.0.map(Gcra::per_minute), tokens: limits.1.map(Gcra::per_minute) }
    }
}

/// The tokens one attempt reserved, settled to what it used.
struct QuotaTicket {
    quotas: Arc<Mutex<HashMap<String, Quota>>>,
    provider: String,
    reserved: u64,
}

impl Ticket for QuotaTicket {
    /// An answer's reported usage replaces the estimate; a failed or
    /// abandoned attempt gives its reservation back (a stream that broke
    /// after commit keeps it: it was generating); one never sent gives
    /// back its request too.
    fn settle(self: Box<Self>, how: Settlement) {
        let now = Instant::now();
        let mut quotas = self.quotas.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(quota) = quotas.get_mut(&self.provider) else { return };
        if how == Settlement::NotSent
            && let Some(requests) = quota.requests.as_mut()
        {
            requests.give_back(1, now);
        }
        let Some(tokens) = quota.tokens.as_mut() else { return };
        match how {
            Settlement::Completed(usage) => {
                if let Some(used) = usage.reported_tokens() {
                    tokens.settle(self.reserved, used, now);
                }
            }
            Settlement::Broke(_) => {}
            Settlement::Failed(_) | Settlement::Abandoned | Settlement::NotSent => tokens.give_back(self.reserved, now),
        }
    }
}
