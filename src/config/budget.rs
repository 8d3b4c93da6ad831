//! What may be spent: budgets over sliding windows (`[[budgets]]` and a
//! key's `budget`), what each does once spent, and the most one request may
//! be estimated to cost (`max_usd_per_request`).

use std::sync::Arc;

use serde::Deserialize;
use toml::Spanned;

use super::check::Checker;
use super::error::ConfigError;
use super::route::Route;
use crate::limits::BudgetWindow;

/// One `[[budgets]]` entry as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBudget {
    pub scope: Spanned<String>,
    pub window: Option<Spanned<String>>,
    pub usd: Option<Spanned<f64>>,
    pub action: Option<Spanned<String>>,
    pub downgrade_to: Option<Spanned<String>>,
    pub max_usd_per_request: Option<Spanned<f64>>,
}

/// A key's `budget` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawKeyBudget {
    pub usd_per_minute: Option<Spanned<f64>>,
    pub usd_per_hour: Option<Spanned<f64>>,
    pub usd_per_day: Option<Spanned<f64>>,
}

/// The budget keys at the config's top level, as written.
pub(super) struct RawBudgets<'a> {
    /// `max_usd_per_request`, the global cap.
    pub max_usd_per_request: &'a Option<Spanned<f64>>,
    /// `[[budgets]]`.
    pub budgets: &'a [Spanned<RawBudget>],
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

/// A key's `budget = { usd_per_minute, usd_per_hour, usd_per_day }`:
/// each amount given is a blocking budget on the key.
pub(super) fn key_budget(
    check: &Checker<'_>,
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
        let usd = amount(check, value, &format!("{key}.{field}"))?;
        budgets.push(Budget { scope: BudgetScope::Key(name.to_owned()), window, usd, action: BudgetAction::Block });
    }
    if budgets.is_empty() {
        return Err(check.error(raw, key.to_owned(), "needs usd_per_minute, usd_per_hour or usd_per_day"));
    }
    Ok(budgets)
}

/// `[[budgets]]` and the top-level `max_usd_per_request`; scopes and
/// `downgrade_to` must name keys and routes that exist.
pub(super) fn check(
    check: &Checker<'_>,
    raw: RawBudgets<'_>,
    keys: &[&str],
    routes: &[Arc<Route>],
    errors: &mut Vec<ConfigError>,
) -> Budgets {
    let mut out = Budgets::default();
    if let Some(value) = &raw.max_usd_per_request {
        match amount(check, value, "max_usd_per_request") {
            Ok(usd) => out.caps.push(RequestCap { scope: BudgetScope::Global, usd }),
            Err(err) => errors.push(err),
        }
    }
    for (i, budget) in raw.budgets.iter().enumerate() {
        match budget_entry(check, budget, &format!("budgets[{i}]"), keys, routes) {
            Ok((budget, cap)) => {
                out.budgets.extend(budget);
                out.caps.extend(cap);
            }
            Err(err) => errors.push(err),
        }
    }
    out
}

/// One `[[budgets]]` entry: a budget over a window, a per-request cap, or both.
fn budget_entry(
    check: &Checker<'_>,
    spanned: &Spanned<RawBudget>,
    key: &str,
    keys: &[&str],
    routes: &[Arc<Route>],
) -> Result<(Option<Budget>, Option<RequestCap>), ConfigError> {
    let raw = spanned.get_ref();
    let at = |field: &str| format!("{key}.{field}");
    let route_named = |name: &str| routes.iter().any(|route| route.model == name);
    let scope = match raw.scope.get_ref().split_once(':') {
        None if raw.scope.get_ref() == "global" => BudgetScope::Global,
        Some(("key", name)) if keys.contains(&name) => BudgetScope::Key(name.to_owned()),
        Some(("route", name)) if route_named(name) => BudgetScope::Route(name.to_owned()),
        Some(("key", name)) => {
            return Err(check.error(&raw.scope, at("scope"), format!("no key is named {name:?}")));
        }
        Some(("route", name)) => {
            return Err(check.error(&raw.scope, at("scope"), format!("no route is named {name:?}")));
        }
        _ => {
            let message = format!(
                "unknown scope {:?}; expected \"global\", \"key:<name>\" or \"route:<name>\"",
                raw.scope.get_ref()
            );
            return Err(check.error(&raw.scope, at("scope"), message));
        }
    };
    let cap = match &raw.max_usd_per_request {
        Some(value) => {
            Some(RequestCap { scope: scope.clone(), usd: amount(check, value, &at("max_usd_per_request"))? })
        }
        None => None,
    };
    let (window, usd) = match (&raw.window, &raw.usd) {
        (Some(window), Some(usd)) => {
            let label = window.get_ref();
            let window = BudgetWindow::from_label(label).ok_or_else(|| {
                check.error(
                    window,
                    at("window"),
                    format!("unknown window {label:?}; expected \"1m\", \"1h\" or \"1d\""),
                )
            })?;
            (window, amount(check, usd, &at("usd"))?)
        }
        (None, None) if cap.is_some() => {
            if let Some(action) = &raw.action {
                return Err(check.error(action, at("action"), "an action needs a window and usd to act on"));
            }
            return Ok((None, cap));
        }
        (Some(_), None) | (None, None) => {
            return Err(check.error(spanned, at("usd"), "a budget needs usd and window (or only max_usd_per_request)"));
        }
        (None, Some(usd)) => {
            return Err(check.error(usd, at("window"), "a budget needs a window: \"1m\", \"1h\" or \"1d\""));
        }
    };
    let action = action(check, raw, spanned, &at("action"), &at("downgrade_to"), &scope, &route_named)?;
    Ok((Some(Budget { scope, window, usd, action }), cap))
}

/// What a spent budget does: `block` (the default), `warn`, or `downgrade` to another route.
fn action(
    check: &Checker<'_>,
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
                path: check.label.to_owned(),
                line: check.line(at),
                key: downgrade_key.to_owned(),
                message: "action \"downgrade\" needs downgrade_to, the route to serve instead".to_owned(),
            });
        }
        ("downgrade", Some(to)) => {
            let name = to.get_ref();
            if !route_named(name) {
                return Err(check.error(to, downgrade_key.to_owned(), format!("no route is named {name:?}")));
            }
            if *scope == BudgetScope::Route(name.clone()) {
                return Err(check.error(to, downgrade_key.to_owned(), "must name another route than the scope's"));
            }
            BudgetAction::Downgrade(name.clone())
        }
        ("block" | "warn", Some(to)) => {
            return Err(check.error(to, downgrade_key.to_owned(), "only action \"downgrade\" takes downgrade_to"));
        }
        (other, _) => {
            let message = format!("unknown action {other:?}; expected \"block\", \"downgrade\" or \"warn\"");
            return Err(raw.action.as_ref().map_or_else(
                || check.error(spanned, key.to_owned(), message.clone()),
                |action| check.error(action, key.to_owned(), message.clone()),
            ));
        }
    };
    Ok(action)
}

/// An amount of USD: finite and above zero.
fn amount(check: &Checker<'_>, value: &Spanned<f64>, key: &str) -> Result<f64, ConfigError> {
    let usd = *value.get_ref();
    if usd.is_finite() && usd > 0.0 {
        Ok(usd)
    } else {
        Err(check.error(value, key.to_owned(), "must be a finite amount of USD above 0"))
    }
}
