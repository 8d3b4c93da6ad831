//! A key's `rpm` and `tpm` held across every replica: after the local
//! limiters admit a request, one atomic call takes the same request and
//! tokens from the shared limits. The local limiters only ever count this
//! replica's part of what the shared ones count, so they never refuse what
//! the cluster would admit; they are the state a replica falls back to when
//! the store is unreachable (each replica then holds a key to its limit on
//! its own traffic).

use std::sync::Arc;

use super::gate::{Admitted, Refusal, RequestGate};
use crate::access::ClientKey;
use crate::config::{Config, Route};
use crate::event::ChatRequest;
use crate::observe::Ended;
use crate::state::{Adjust, Limit, Store, Taken};

impl RequestGate {
    /// [`RequestGate::admit`], then, with a shared store that answers in
    /// time, the key's limits across every replica. A request never waits
    /// longer than the store's timeout for it, and never fails because of it.
    pub async fn admit_shared(
        &self,
        config: &Config,
        key: Option<&ClientKey>,
        route: &Arc<Route>,
        request: &ChatRequest,
    ) -> Result<Admitted, Refusal> {
        let mut admitted = self.admit(config, key, route, request)?;
        let (Some(store), Some(key)) = (&self.store, key) else { return Ok(admitted) };
        let reserved = admitted.ticket.reserved;
        let limits: Vec<Limit> = [(key.rpm, "rpm", 1), (key.tpm, "tpm", reserved)]
            .into_iter()
            .filter_map(|(limit, unit, amount)| {
                limit.map(|per_minute| Limit { name: format!("key:{}:{unit}", key.name), per_minute, amount })
            })
            .collect();
        if limits.is_empty() {
            return Ok(admitted);
        }
        match store.call(|state| state.take(&limits)).await {
            // The store did not answer: the local limiters decided.
            None => Ok(admitted),
            Some(Taken::Admitted) => {
                let tokens = limits.into_iter().find(|limit| limit.name.ends_with(":tpm"));
                admitted.ticket.shared = tokens.map(|tokens| SharedTokens { store: Arc::clone(store), tokens });
                Ok(admitted)
            }
            Some(Taken::Refused { index, retry_after }) => {
                self.release(key, reserved);
                let limit = limits.get(index).map_or(0, |limit| limit.per_minute);
                let unit = if limits.get(index).is_some_and(|limit| limit.name.ends_with(":tpm")) {
                    "tokens"
                } else {
                    "requests"
                };
                Err(Refusal::RateLimited {
                    key: key.name.clone(),
                    unit,
                    per_minute: limit,
                    retry_after: Some(retry_after),
                })
            }
        }
    }
}

/// A key's token reservation in the shared store, settled to the usage as
/// the local one is, with the store's next sync: off the request's path.
pub(super) struct SharedTokens {
    store: Arc<Store>,
    tokens: Limit,
}

impl SharedTokens {
    /// Replaces the `reserved` tokens by what the request used (see
    /// [`GateTicket`](super::GateTicket)'s settlement for the rule).
    pub(super) fn settle(&self, reserved: u64, ended: &Ended<'_>) {
        let usage = ended.usage;
        let (how, amount) = if usage.input_tokens.is_some() || usage.output_tokens.is_some() {
            let used = usage.input_tokens.unwrap_or(0).saturating_add(usage.output_tokens.unwrap_or(0));
            if used < reserved { (Adjust::GiveBack, reserved - used) } else { (Adjust::Charge, used - reserved) }
        } else if !ended.committed {
            (Adjust::GiveBack, reserved)
        } else {
            return;
        };
        self.store.settle_later(&Limit { amount, ..self.tokens.clone() }, how);
    }
}
