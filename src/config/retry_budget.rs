//! A route's `retry_budget = { percent, min_per_second }`: how many retries
//! and hedges its requests may add, so an outage cannot multiply the load.

use serde::Deserialize;
use toml::Spanned;

use super::ConfigError;
use super::check::Checker;

/// The largest `percent`: ten retries for each request.
const MAX_PERCENT: u32 = 1000;

/// How many retries a route's requests may add over a ten-second window:
/// `percent` of its requests, plus `min_per_second` each second whatever
/// the traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryBudgetSettings {
    /// Retries earned by each request, in percent of a retry.
    pub percent: u32,
    /// Retries allowed each second on top of what requests earn.
    pub min_per_second: u32,
}

impl Default for RetryBudgetSettings {
    /// One retry for every five requests, and ten a second.
    fn default() -> Self {
        RetryBudgetSettings { percent: 20, min_per_second: 10 }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRetryBudget {
    pub percent: Option<Spanned<u32>>,
    pub min_per_second: Option<Spanned<u32>>,
}

/// The route's `retry_budget`, each key defaulting on its own.
pub(super) fn check(
    check: &Checker<'_>,
    raw: Option<&Spanned<RawRetryBudget>>,
    key: &str,
) -> Result<RetryBudgetSettings, ConfigError> {
    let defaults = RetryBudgetSettings::default();
    let Some(budget) = raw else { return Ok(defaults) };
    let budget = budget.get_ref();
    let percent = match &budget.percent {
        Some(percent) if *percent.get_ref() > MAX_PERCENT => {
            let message = format!("must be at most {MAX_PERCENT} (ten retries per request)");
            return Err(check.error(percent, format!("{key}.percent"), message));
        }
        Some(percent) => *percent.get_ref(),
        None => defaults.percent,
    };
    let min_per_second = budget.min_per_second.as_ref().map_or(defaults.min_per_second, |n| *n.get_ref());
    Ok(RetryBudgetSettings { percent, min_per_second })
}
