//! A provider's `breaker = { failure_threshold, failure_rate, window,
//! cooldown_ms }`: when its circuit breaker opens and for how long, each key
//! defaulting on its own.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::check::Checker;
use super::error::ConfigError;

/// When a breaker opens and for how long.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BreakerSettings {
    /// Consecutive provider failures that open the breaker.
    pub failure_threshold: u32,
    /// The failure rate over the last `window` attempts that opens it.
    pub failure_rate: f64,
    /// How many recent attempts the failure rate is taken over.
    pub window: usize,
    /// How long an open breaker skips the provider before one probe.
    pub cooldown: Duration,
}

impl Default for BreakerSettings {
    fn default() -> Self {
        BreakerSettings { failure_threshold: 3, failure_rate: 0.5, window: 20, cooldown: Duration::from_secs(30) }
    }
}

/// A provider's `breaker` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBreaker {
    pub failure_threshold: Option<Spanned<u32>>,
    pub failure_rate: Option<Spanned<f64>>,
    pub window: Option<Spanned<u32>>,
    pub cooldown_ms: Option<Spanned<u64>>,
}

/// The provider's `breaker`, each key defaulting on its own.
pub(super) fn breaker_settings(
    check: &Checker<'_>,
    raw: &RawBreaker,
    key: &str,
) -> Result<BreakerSettings, ConfigError> {
    let defaults = BreakerSettings::default();
    let failure_threshold = match &raw.failure_threshold {
        Some(n) if *n.get_ref() == 0 => {
            return Err(check.error(n, format!("{key}.failure_threshold"), "must be at least 1"));
        }
        Some(n) => *n.get_ref(),
        None => defaults.failure_threshold,
    };
    let failure_rate = match &raw.failure_rate {
        Some(rate) if !(*rate.get_ref() > 0.0 && *rate.get_ref() <= 1.0) => {
            return Err(check.error(rate, format!("{key}.failure_rate"), "must be above 0 and at most 1"));
        }
        Some(rate) => *rate.get_ref(),
        None => defaults.failure_rate,
    };
    let window = match &raw.window {
        Some(n) if *n.get_ref() == 0 => return Err(check.error(n, format!("{key}.window"), "must be at least 1")),
        Some(n) => usize::try_from(*n.get_ref()).unwrap_or(usize::MAX),
        None => defaults.window,
    };
    let cooldown = check.millis(raw.cooldown_ms.as_ref(), &format!("{key}.cooldown_ms"), defaults.cooldown)?;
    Ok(BreakerSettings { failure_threshold, failure_rate, window, cooldown })
}
