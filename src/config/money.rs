//! What answers cost and what may be spent: a target's `price`, spend
//! budgets over sliding windows (`[[budgets]]` and a key's `budget`), and
//! the most one request may be estimated to cost. All money is `f64` USD,
//! finite and never negative: prices are checked here, and every sum
//! saturates instead of reaching infinity.

use toml::Spanned;

use super::raw::{RawBudget, RawConfig, RawKeyBudget, RawPrice};
use super::validate::Checker;
use super::{ConfigError, Route};
use crate::event::Usage;
use crate::limits::{BudgetWindow, add_usd};

/// The highest price accepted, USD per million tokens: a cost of
/// `u64::MAX` tokens at it is still finite.
const MAX_PRICE_PER_MTOK: f64 = 1_000_000.0;

/// What a target's tokens cost, in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    /// Prompt tokens.
    pub input_per_mtok: f64,
    /// Generated tokens.
    pub output_per_mtok: f64,
    /// Prompt tokens read from the provider's cache, when it reports them
    /// (unset: they cost `input_per_mtok` like the rest).
    pub cached_input_per_mtok: Option<f64>,
}

impl Price {
    /// What `usage` cost at this price, its cache reads at the cached
    /// price; a count the provider left out costs nothing.
    pub fn cost(&self, usage: Usage) -> f64 {
        let input = usage.input_tokens.unwrap_or(0);
        let cached = usage.cached_input_tokens.unwrap_or(0).min(input);
        let full = self.estimate(input - cached, usage.output_tokens.unwrap_or(0));
        let cached_price = self.cached_input_per_mtok.unwrap_or(self.input_per_mtok);
        add_usd(full, cached as f64 * cached_price / 1_000_000.0)
    }

    /// What `input` prompt tokens and `output` generated tokens cost.
    pub fn estimate(&self, input: u64, output: u64) -> f64 {
        let per_token = |tokens: u64, per_mtok: f64| tokens as f64 * per_mtok / 1_000_000.0;
        add_usd(per_token(input, self.input_per_mtok), per_token(output, self.output_per_mtok))
    }
}

/// Whose spend a budget counts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BudgetScope {
    /// Every request.
    Global,
    /// The requests of one client key, by name.
    Key(String),
    /// The requests served by one route, by name.
    Route(String),
}

impl BudgetScope {
    /// Whether a request of `key` served by `route` counts toward this scope.
    pub fn covers(&self, key: Option<&str>, route: &str) -> bool {
        match self {
            BudgetScope::Global => true,
            BudgetScope::Key(name) => key == Some(name.as_str()),
            BudgetScope::Route(name) => name == route,
        }
    }
}

impl std::fmt::Display for BudgetScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BudgetScope::Global => f.write_str("global"),
            BudgetScope::Key(name) => write!(f, "key:{name}"),
            BudgetScope::Route(name) => write!(f, "route:{name}"),
        }
    }
}

/// What happens to a request while its budget is spent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BudgetAction {
    /// Refused with 429 `budget_exceeded`.
    Block,
    /// Served by this other route instead.
    Downgrade(String),
    /// Served, with a warning logged once per window and counted.
    Warn,
}

impl BudgetAction {
    /// Its name in the config and in metric labels.
    pub fn label(&self) -> &'static str {
        match self {
            BudgetAction::Block => "block",
            BudgetAction::Downgrade(_) => "downgrade",
            BudgetAction::Warn => "warn",
        }
    }
}

/// A spend limit over a sliding window.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// Whose spend counts.
    pub scope: BudgetScope,
    /// Over how long.
    pub window: BudgetWindow,
    /// The most that may be spent in any such window.
    pub usd: f64,
    /// What a request meets once it is spent.
    pub action: BudgetAction,
}

/// The most one request of a scope may be estimated to cost before it is sent.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestCap {
    /// Whose requests it holds.
    pub scope: BudgetScope,
    /// USD.
    pub usd: f64,
}

/// Every spend limit of a config.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Budgets {
    /// Windowed budgets, `[[budgets]]` then each key's `budget`.
    pub budgets: Vec<Budget>,
    /// Per-request caps, the top-level one as a global cap.
    pub caps: Vec<RequestCap>,
}

impl Budgets {
    /// The budgets a request of `key` served by `route` counts toward.
    pub fn applying<'a>(&'a self, key: Option<&'a str>, route: &'a str) -> impl Iterator<Item = &'a Budget> + 'a {
        self.budgets.iter().filter(move |budget| budget.scope.covers(key, route))
    }

    /// The lowest cap on one request of `key` served by `route`, if any.
    pub fn max_usd_per_request(&self, key: Option<&str>, route: &str) -> Option<f64> {
        let caps = self.caps.iter().filter(|cap| cap.scope.covers(key, route));
        caps.map(|cap| cap.usd).reduce(f64::min)
    }

    /// Whether there is nothing to check or keep.
    pub fn is_empty(&self) -> bool {
        self.budgets.is_empty() && self.caps.is_empty()
    }
}

impl Checker<'_> {
    /// A target's `price`.
    pub(super) fn price(&self, raw: &Spanned<RawPrice>, key: &str) -> Result<Price, ConfigError> {
        let raw = raw.get_ref();
        let per_mtok = |value: &Spanned<f64>, field: &str| {
            let price = *value.get_ref();
            if price.is_finite() && (0.0..=MAX_PRICE_PER_MTOK).contains(&price) {
                Ok(price)
            } else {
                let message = format!("must be a number of USD per million tokens from 0 to {MAX_PRICE_PER_MTOK}");
                Err(self.error(value, format!("{key}.{field}"), message))
            }
        };
        Ok(Price {
            input_per_mtok: per_mtok(&raw.input_per_mtok, "input_per_mtok")?,
            output_per_mtok: per_mtok(&raw.output_per_mtok, "output_per_mtok")?,
            cached_input_per_mtok: match &raw.cached_input_per_mtok {
                Some(value) => Some(per_mtok(value, "cached_input_per_mtok")?),
                None => None,
            },
        })
    }

    /// A key's `budget = { usd_per_minute, usd_per_hour, usd_per_day }`:
    /// each amount given is a blocking budget on the key.
    pub(super) fn key_budget(
        &self,
        raw: &Spanned<RawKeyBudget>,
        name: &str,
        key: &str,
    ) -> Result<Vec<Budget>, ConfigError> {
        let fields = [
            (&raw.get_ref().usd_per_minute, BudgetWindow::Minute, "usd_per_minute"),
            (&raw.get_ref().usd_per_hour, BudgetWindow::Hour, "usd_per_hour"),
            (&raw.get_ref().usd_per_day, BudgetWindow::Day, "usd_per_day"),
        ];
        let mut budgets = Vec::new();
        for (value, window, field) in fields {
            let Some(value) = value else { continue };
            let usd = self.usd(value, &format!("{key}.{field}"))?;
            budgets.push(Budget { scope: BudgetScope::Key(name.to_owned()), window, usd, action: BudgetAction::Block });
        }
        if budgets.is_empty() {
            return Err(self.error(raw, key.to_owned(), "needs usd_per_minute, usd_per_hour or usd_per_day"));
        }
        Ok(budgets)
    }

    /// `[[budgets]]` and the top-level `max_usd_per_request`; scopes and
    /// `downgrade_to` must name keys and routes that exist.
    pub(super) fn budgets(
        &self,
        raw: &RawConfig,
        keys: &[&str],
        routes: &[std::sync::Arc<Route>],
        errors: &mut Vec<ConfigError>,
    ) -> Budgets {
        let mut out = Budgets::default();
        if let Some(value) = &raw.max_usd_per_request {
            match self.usd(value, "max_usd_per_request") {
                Ok(usd) => out.caps.push(RequestCap { scope: BudgetScope::Global, usd }),
                Err(err) => errors.push(err),
            }
        }
        for (i, budget) in raw.budgets.iter().enumerate() {
            match self.budget(budget, &format!("budgets[{i}]"), keys, routes) {
                Ok((budget, cap)) => {
                    out.budgets.extend(budget);
                    out.caps.extend(cap);
                }
                Err(err) => errors.push(err),
            }
        }
        out
    }

    fn budget(
        &self,
        spanned: &Spanned<RawBudget>,
        key: &str,
        keys: &[&str],
        routes: &[std::sync::Arc<Route>],
    ) -> Result<(Option<Budget>, Option<RequestCap>), ConfigError> {
        let raw = spanned.get_ref();
        let at = |field: &str| format!("{key}.{field}");
        let route_named = |name: &str| routes.iter().any(|route| route.model == name);
        let scope = match raw.scope.get_ref().split_once(':') {
            None if raw.scope.get_ref() == "global" => BudgetScope::Global,
            Some(("key", name)) if keys.contains(&name) => BudgetScope::Key(name.to_owned()),
            Some(("route", name)) if route_named(name) => BudgetScope::Route(name.to_owned()),
            Some(("key", name)) => {
                return Err(self.error(&raw.scope, at("scope"), format!("no key is named {name:?}")));
            }
            Some(("route", name)) => {
                return Err(self.error(&raw.scope, at("scope"), format!("no route is named {name:?}")));
            }
            _ => {
                let message = format!(
                    "unknown scope {:?}; expected \"global\", \"key:<name>\" or \"route:<name>\"",
                    raw.scope.get_ref()
                );
                return Err(self.error(&raw.scope, at("scope"), message));
            }
        };
        let cap = match &raw.max_usd_per_request {
            Some(value) => Some(RequestCap { scope: scope.clone(), usd: self.usd(value, &at("max_usd_per_request"))? }),
            None => None,
        };
        let (window, usd) = match (&raw.window, &raw.usd) {
            (Some(window), Some(usd)) => {
                let label = window.get_ref();
                let window = BudgetWindow::from_label(label).ok_or_else(|| {
                    self.error(
                        window,
                        at("window"),
                        format!("unknown window {label:?}; expected \"1m\", \"1h\" or \"1d\""),
                    )
                })?;
                (window, self.usd(usd, &at("usd"))?)
            }
            (None, None) if cap.is_some() => {
                if let Some(action) = &raw.action {
                    return Err(self.error(action, at("action"), "an action needs a window and usd to act on"));
                }
                return Ok((None, cap));
            }
            (Some(_), None) | (None, None) => {
                return Err(self.error(
                    spanned,
                    at("usd"),
                    "a budget needs usd and window (or only max_usd_per_request)",
                ));
            }
            (None, Some(usd)) => {
                return Err(self.error(usd, at("window"), "a budget needs a window: \"1m\", \"1h\" or \"1d\""));
            }
        };
        let action = self.action(raw, spanned, &at("action"), &at("downgrade_to"), &scope, &route_named)?;
        Ok((Some(Budget { scope, window, usd, action }), cap))
    }

    fn action(
        &self,
        raw: &RawBudget,
        spanned: &Spanned<RawBudget>,
        key: &str,
        downgrade_key: &str,
        scope: &BudgetScope,
        route_named: &dyn Fn(&str) -> bool,
    ) -> Result<BudgetAction, ConfigError> {
        let word = raw.action.as_ref().map_or("block", |action| action.get_ref().as_str());
        let action = match (word, &raw.downgrade_to) {
            ("block", None) => BudgetAction::Block,
            ("warn", None) => BudgetAction::Warn,
            ("downgrade", None) => {
                let at = raw.action.as_ref().map_or(spanned.span().start, |action| action.span().start);
                return Err(ConfigError::Invalid {
                    path: self.label.to_owned(),
                    line: self.line(at),
                    key: downgrade_key.to_owned(),
                    message: "action \"downgrade\" needs downgrade_to, the route to serve instead".to_owned(),
                });
            }
            ("downgrade", Some(to)) => {
                let name = to.get_ref();
                if !route_named(name) {
                    return Err(self.error(to, downgrade_key.to_owned(), format!("no route is named {name:?}")));
                }
                if *scope == BudgetScope::Route(name.clone()) {
                    return Err(self.error(to, downgrade_key.to_owned(), "must name another route than the scope's"));
                }
                BudgetAction::Downgrade(name.clone())
            }
            ("block" | "warn", Some(to)) => {
                return Err(self.error(to, downgrade_key.to_owned(), "only action \"downgrade\" takes downgrade_to"));
            }
            (other, _) => {
                let message = format!("unknown action {other:?}; expected \"block\", \"downgrade\" or \"warn\"");
                return Err(raw.action.as_ref().map_or_else(
                    || self.error(spanned, key.to_owned(), message.clone()),
                    |action| self.error(action, key.to_owned(), message.clone()),
                ));
            }
        };
        Ok(action)
    }

    /// An amount of USD: finite and above zero.
    fn usd(&self, value: &Spanned<f64>, key: &str) -> Result<f64, ConfigError> {
        let usd = *value.get_ref();
        if usd.is_finite() && usd > 0.0 {
            Ok(usd)
        } else {
            Err(self.error(value, key.to_owned(), "must be a finite amount of USD above 0"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_reads_cost_the_cached_price_and_the_rest_the_input_price() {
        let price = Price { input_per_mtok: 2.0, output_per_mtok: 10.0, cached_input_per_mtok: Some(0.5) };
        let usage = Usage {
            input_tokens: Some(1_000_000),
            output_tokens: Some(100_000),
            cached_input_tokens: Some(600_000),
            ..Usage::default()
        };
        assert!((price.cost(usage) - (0.8 + 1.0 + 0.3)).abs() < 1e-9, "{}", price.cost(usage));
        let unpriced_cache = Price { cached_input_per_mtok: None, ..price };
        assert!((unpriced_cache.cost(usage) - (2.0 + 1.0)).abs() < 1e-9);
        let absurd = Usage { cached_input_tokens: Some(u64::MAX), ..usage };
        assert!(price.cost(absurd).is_finite(), "a cache count above the prompt is held to it");
    }
}
