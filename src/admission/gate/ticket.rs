//! What one admitted request holds until it ends, and how it is settled:
//! its key's token reservation replaced by the usage reported, and the
//! cost of its answer charged to every scope that watches it.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::time::Instant;

use super::tally::Tally;
use crate::admission::shared::SharedTokens;
use crate::config::BudgetScope;
use crate::limits::add_usd;
use crate::observe::{Ended, Settle};
use crate::state::Store;

/// What one admitted request holds: its key's token reservation, and the
/// spend its answer will be charged.
pub struct GateTicket {
    pub(super) tally: Arc<Mutex<Tally>>,
    pub(super) reserved: u64,
    /// The key's token reservation in the shared store, when it was made there.
    pub(super) shared: Option<SharedTokens>,
    /// Where the spend is shared with other replicas, if it is.
    pub(super) store: Option<Arc<Store>>,
}

impl Settle for GateTicket {
    /// The reserved tokens are replaced by the usage reported; with none
    /// reported, an answer that committed keeps its reservation (it was
    /// generating) and one that never did gives it back. The cost is
    /// charged to the global, key, route and provider spend.
    fn settle(self: Box<Self>, ended: &Ended<'_>) {
        if let Some(shared) = &self.shared {
            shared.settle(self.reserved, ended);
        }
        let now = Instant::now();
        let mut tally = self.tally.lock().unwrap_or_else(PoisonError::into_inner);
        let key = ended.key.and_then(|key| tally.keys.get_mut(key));
        if let Some(tokens) = key.and_then(|key| key.tokens.as_mut()) {
            if let Some(used) = ended.usage.reported_tokens() {
                tokens.settle(self.reserved, used, now);
            } else if !ended.committed {
                tokens.give_back(self.reserved, now);
            }
        }
        let Some(cost) = ended.cost_usd else { return };
        if let Some(store) = &self.store {
            store.spend_later(&BudgetScope::Global.to_string(), cost);
            if let Some(key) = ended.key {
                store.spend_later(&BudgetScope::Key(key.to_owned()).to_string(), cost);
            }
            store.spend_later(&BudgetScope::Route(ended.route.to_owned()).to_string(), cost);
        }
        tally.global.add(cost, now);
        if let Some(key) = ended.key.and_then(|key| tally.keys.get_mut(key)) {
            key.spend.add(cost, now);
        }
        if let Some(route) = tally.routes.get_mut(ended.route) {
            route.add(cost, now);
        }
        if let Some(provider) = ended.provider {
            match tally.providers.get_mut(provider) {
                Some(total) => *total = add_usd(*total, cost),
                None => {
                    tally.providers.insert(provider.to_owned(), cost);
                }
            }
        }
    }
}
