//! What the gate counts, in this process: every key's limiters and every
//! scope's spend, and the views of them the status page shows. Its maps
//! are keyed by names from the config only (keys, routes, providers), so
//! they stay as small as the config.

use std::collections::HashMap;

use tokio::time::Instant;

use crate::access::ClientKey;
use crate::admission::Refusal;
use crate::config::BudgetScope;
use crate::limits::{BudgetWindow, Gcra, Spend};

/// Every key's limiters and every scope's spend.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) keys: HashMap<String, KeyState>,
    pub(super) routes: HashMap<String, Spend>,
    pub(super) providers: HashMap<String, f64>,
    pub(super) global: Spend,
}

/// One key's limiters, with the limits they were made for, and its spend.
#[derive(Default)]
pub(super) struct KeyState {
    pub(super) limits: (Option<u64>, Option<u64>),
    pub(super) requests: Option<Gcra>,
    pub(super) tokens: Option<Gcra>,
    pub(super) spend: Spend,
}

/// A key's limits and spend now, for the status page.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KeyUse {
    /// Requests it could send at once now, when it has an `rpm`.
    pub requests_available: Option<u64>,
    /// Tokens it could reserve at once now, when it has a `tpm`.
    pub tokens_available: Option<u64>,
    /// What it has spent.
    pub spend: SpendView,
}

/// A scope's spend now.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SpendView {
    /// Since baton started.
    pub total_usd: f64,
    /// Over the last minute, hour and day ([`BudgetWindow::ALL`]'s order).
    pub windows: [f64; 3],
}

impl Tally {
    /// Makes room for `key` and `route`: a name is copied only the first time.
    pub(super) fn ensure(&mut self, key: Option<&ClientKey>, route: &str) {
        if let Some(key) = key
            && !self.keys.contains_key(&key.name)
        {
            self.keys.insert(key.name.clone(), KeyState::default());
        }
        if !self.routes.contains_key(route) {
            self.routes.insert(route.to_owned(), Spend::default());
        }
    }

    /// The spend a budget over `scope` checks, once the scope was seen.
    pub(super) fn spend(&mut self, scope: &BudgetScope) -> Option<&mut Spend> {
        match scope {
            BudgetScope::Global => Some(&mut self.global),
            BudgetScope::Key(name) => self.keys.get_mut(name).map(|key| &mut key.spend),
            BudgetScope::Route(name) => self.routes.get_mut(name),
        }
    }

    /// Takes one request and `reserved` tokens from `key`'s limits, or
    /// neither when either has no room.
    pub(super) fn take(&mut self, key: &ClientKey, reserved: u64, now: Instant) -> Result<(), Refusal> {
        let Some(state) = self.keys.get_mut(&key.name) else { return Ok(()) };
        let limits = (key.rpm, key.tpm);
        if state.limits != limits {
            state.limits = limits;
            state.requests = key.rpm.map(Gcra::per_minute);
            state.tokens = key.tpm.map(Gcra::per_minute);
        }
        let refuse = |unit, per_minute, retry_after| Refusal::RateLimited {
            key: key.name.clone(),
            unit,
            per_minute,
            retry_after,
        };
        let mut requests = state.requests.clone();
        if let (Some(gcra), Some(rpm)) = (&mut requests, key.rpm) {
            gcra.take(1, now).map_err(|wait| refuse("requests", rpm, Some(wait)))?;
        }
        if let (Some(gcra), Some(tpm)) = (&mut state.tokens, key.tpm) {
            if reserved > tpm {
                return Err(refuse("tokens", tpm, None));
            }
            gcra.take(reserved, now).map_err(|wait| refuse("tokens", tpm, Some(wait)))?;
        }
        state.requests = requests;
        Ok(())
    }

    /// Gives back the request and the `reserved` tokens `key`'s limiters
    /// took for a request the shared limits then refused.
    pub(super) fn release(&mut self, key: &ClientKey, reserved: u64, now: Instant) {
        let Some(known) = self.keys.get_mut(&key.name) else { return };
        if let Some(requests) = &mut known.requests {
            requests.give_back(1, now);
        }
        if let Some(tokens) = &mut known.tokens {
            tokens.give_back(reserved, now);
        }
    }

    /// `key`'s limits and spend now.
    pub(super) fn key_use(&mut self, key: &ClientKey, now: Instant) -> KeyUse {
        let current = self.keys.get_mut(&key.name).filter(|known| known.limits == (key.rpm, key.tpm));
        match current {
            Some(known) => KeyUse {
                requests_available: known.requests.as_ref().map(|gcra| gcra.available(now)),
                tokens_available: known.tokens.as_ref().map(|gcra| gcra.available(now)),
                spend: view(&mut known.spend, now),
            },
            None => KeyUse {
                requests_available: key.rpm,
                tokens_available: key.tpm,
                spend: self.keys.get_mut(&key.name).map(|known| view(&mut known.spend, now)).unwrap_or_default(),
            },
        }
    }

    /// What `scope` has spent, as of `now`.
    pub(super) fn spend_view(&mut self, scope: &BudgetScope, now: Instant) -> SpendView {
        self.spend(scope).map(|spend| view(spend, now)).unwrap_or_default()
    }
}

fn view(spend: &mut Spend, now: Instant) -> SpendView {
    SpendView { total_usd: spend.total(), windows: BudgetWindow::ALL.map(|window| spend.over(window, now)) }
}
