//! A key's `rpm` and `tpm`, and a provider's quota, held across every
//! replica: after the local limiters admit a request (or an attempt), one
//! atomic call takes the same request and tokens from the shared limits.
//! The local limiters only ever count this replica's part of what the
//! shared ones count, so they never refuse what the cluster would admit;
//! they are the state a replica falls back to when the store is
//! unreachable (each replica then holds a limit on its own traffic).

use std::sync::Arc;

use tokio::time::Instant;

use super::{Candidate, QuotaUse, Refusal, Settlement, Skip, SkipReason, Ticket};
use crate::access::ClientKey;
use crate::clock::later;
use crate::observe::Ended;
use crate::state::{Adjust, Limit, Store, Taken};

/// A key's token reservation in the shared store, settled to the usage as
/// the local one is, with the store's next sync: off the request's path.
pub(super) struct SharedTokens {
    store: Arc<Store>,
    tokens: Limit,
}

/// One attempt's tokens reserved from a provider's shared `tpm`.
struct ProviderTokens {
    tokens: SharedTokens,
    reserved: u64,
}

/// Takes one request and the `reserved` tokens from `key`'s limits across
/// every replica, after its local limiters admitted them: the shared token
/// reservation to settle, if one was made; none when the key has no limits
/// or the store did not answer in time (the local limiters decided).
pub(super) async fn take_key_limits(
    store: &Arc<Store>,
    key: &ClientKey,
    reserved: u64,
) -> Result<Option<SharedTokens>, Refusal> {
    let limits = per_minute(&format!("key:{}", key.name), key.rpm, key.tpm, reserved);
    if limits.is_empty() {
        return Ok(None);
    }
    match store.call(|state| state.take(&limits)).await {
        None => Ok(None),
        Some(Taken::Admitted) => Ok(SharedTokens::among(store, limits)),
        Some(Taken::Refused { index, retry_after }) => {
            let limit = limits.get(index).map_or(0, |limit| limit.per_minute);
            let tokens = limits.get(index).is_some_and(|limit| limit.name.ends_with(":tpm"));
            Err(Refusal::RateLimited {
                key: key.name.clone(),
                unit: if tokens { "tokens" } else { "requests" },
                per_minute: limit,
                retry_after: Some(retry_after),
            })
        }
    }
}

/// Takes one attempt on `candidate`'s provider from the provider's `rpm`
/// and `tpm` across every replica, after its local quota admitted it: over
/// them, the target is skipped (`over_quota`) as the local quota would. A
/// store that does not answer in time leaves the local quota to decide.
pub(super) async fn take_provider_quota(
    store: &Arc<Store>,
    candidate: &Candidate<'_>,
) -> Result<Option<Box<dyn Ticket>>, Skip> {
    let provider = candidate.provider;
    if (provider.rpm, provider.tpm) == (None, None) {
        return Ok(None);
    }
    let reserved = if provider.tpm.is_some() { candidate.request.estimated_tokens() } else { 0 };
    let limits = per_minute(&format!("provider:{}", provider.name), provider.rpm, provider.tpm, reserved);
    match store.call(|state| state.take(&limits)).await {
        None => Ok(None),
        Some(Taken::Admitted) => {
            let shared = SharedTokens::among(store, limits);
            Ok(shared.map(|tokens| Box::new(ProviderTokens { tokens, reserved }) as Box<dyn Ticket>))
        }
        Some(Taken::Refused { retry_after, .. }) => {
            let recovers_at = later(Instant::now(), retry_after);
            Err(Skip { reason: SkipReason::OverQuota(retry_after), recovers_at })
        }
    }
}

/// `used` (this replica's share of each provider quota) raised to the
/// cluster's share when `store` answers within its timeout: the share a
/// replica sees locally counts only its own part of the traffic.
pub async fn cluster_quota_used(store: &Store, mut used: Vec<QuotaUse>) -> Vec<QuotaUse> {
    let limits: Vec<Limit> = used
        .iter()
        .map(|quota| Limit {
            name: format!("provider:{}:{}", quota.provider, quota.unit),
            per_minute: quota.per_minute,
            amount: 0,
        })
        .collect();
    if let Some(cluster) = store.call(|state| state.used(&limits)).await {
        for (quota, share) in used.iter_mut().zip(cluster) {
            quota.ratio = quota.ratio.max(share);
        }
    }
    used
}

/// The shared limits of `holder` (`key:web`, `provider:openai`): its `rpm`
/// takes one request, its `tpm` the `reserved` tokens.
fn per_minute(holder: &str, rpm: Option<u64>, tpm: Option<u64>, reserved: u64) -> Vec<Limit> {
    [(rpm, "rpm", 1), (tpm, "tpm", reserved)]
        .into_iter()
        .filter_map(|(limit, unit, amount)| {
            limit.map(|per_minute| Limit { name: format!("{holder}:{unit}"), per_minute, amount })
        })
        .collect()
}

impl SharedTokens {
    /// The token reservation among `limits` just taken, kept to be settled.
    fn among(store: &Arc<Store>, limits: Vec<Limit>) -> Option<SharedTokens> {
        let tokens = limits.into_iter().find(|limit| limit.name.ends_with(":tpm"))?;
        Some(SharedTokens { store: Arc::clone(store), tokens })
    }

    /// Replaces the `reserved` tokens by what the request used, by the
    /// rule the local reservation follows: the usage reported, else all
    /// of it kept when the answer committed and all given back when not.
    pub(super) fn settle(&self, reserved: u64, ended: &Ended<'_>) {
        let settled = match ended.usage.reported_tokens() {
            Some(used) => Some(used),
            None if !ended.committed => Some(0),
            None => None,
        };
        if let Some(used) = settled {
            self.settle_to(reserved, used);
        }
    }

    /// Gives back what `used` left of the `reserved` tokens, or charges what it went past them.
    fn settle_to(&self, reserved: u64, used: u64) {
        let (how, amount) =
            if used < reserved { (Adjust::GiveBack, reserved - used) } else { (Adjust::Charge, used - reserved) };
        self.store.settle_later(&Limit { amount, ..self.tokens.clone() }, how);
    }
}

impl Ticket for ProviderTokens {
    /// Settled as the local quota's ticket is: to the reported usage, all
    /// given back when the attempt failed or was abandoned, kept when its
    /// stream broke (it was generating).
    fn settle(self: Box<Self>, how: Settlement) {
        let used = match how {
            Settlement::Completed(usage) => usage.reported_tokens(),
            Settlement::Broke(_) => None,
            Settlement::Failed(_) | Settlement::Abandoned | Settlement::NotSent => Some(0),
        };
        if let Some(used) = used {
            self.tokens.settle_to(self.reserved, used);
        }
    }
}
