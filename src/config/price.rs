//! What a target's tokens cost (`price`), in USD per million tokens. All
//! money is `f64` USD, finite and never negative: prices are checked here,
//! and every sum saturates instead of reaching infinity.

use serde::Deserialize;
use toml::Spanned;

use super::check::Checker;
use super::error::ConfigError;
use crate::event::Usage;
use crate::limits::add_usd;

/// The highest price accepted, USD per million tokens: a cost of
/// `u64::MAX` tokens at it is still finite.
const MAX_PRICE_PER_MTOK: f64 = 1_000_000.0;

/// A target's `price` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPrice {
    pub input_per_mtok: Spanned<f64>,
    pub output_per_mtok: Spanned<f64>,
    pub cached_input_per_mtok: Option<Spanned<f64>>,
}

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

/// A target's `price`.
pub(super) fn check(check: &Checker<'_>, raw: &Spanned<RawPrice>, key: &str) -> Result<Price, ConfigError> {
    let raw = raw.get_ref();
    let per_mtok = |value: &Spanned<f64>, field: &str| {
        let price = *value.get_ref();
        if price.is_finite() && (0.0..=MAX_PRICE_PER_MTOK).contains(&price) {
            Ok(price)
        } else {
            let message = format!("must be a number of USD per million tokens from 0 to {MAX_PRICE_PER_MTOK}");
            Err(check.error(value, format!("{key}.{field}"), message))
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
