//! One candidate of a route: a provider and the model to ask it for, with
//! its context window, deadline, retries, weight and price.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::check::Checker;
use super::error::ConfigError;
use super::price::{self, Price, RawPrice};
use super::provider::Provider;

/// How a target naming no provider is reported.
pub(super) const NO_SUCH_PROVIDER: &str = "no provider is named";

/// One target of a route as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTarget {
    pub provider: Spanned<String>,
    pub model: Spanned<String>,
    pub context_window: Option<Spanned<u64>>,
    pub first_token_timeout_ms: Option<Spanned<u64>>,
    pub retries: Option<Spanned<u32>>,
    pub prefill: Option<bool>,
    pub weight: Option<Spanned<u32>>,
    pub price: Option<Spanned<RawPrice>>,
}

/// One candidate of a route: a provider and the model to ask it for.
#[derive(Debug, Clone)]
pub struct Target {
    /// The provider to call.
    pub provider: Arc<Provider>,
    /// The provider's model name.
    pub model: String,
    /// The model's context window in tokens, when declared: a request whose
    /// estimate it cannot hold skips this target, and a context-length error
    /// moves on only to a candidate with a larger one.
    pub context_window: Option<u64>,
    /// From the attempt's start to its first token (the route's unless set here).
    pub first_token_timeout: Duration,
    /// How often a 429, 5xx or connection failure is retried here before moving on.
    pub retries: u32,
    /// Whether the model continues a partial answer given as a final
    /// assistant message (prefill); many current models reject that.
    pub prefill: bool,
    /// This target's share of first attempts on a `weighted` route (at least 1).
    pub weight: u32,
    /// What its tokens cost, when declared: the cost of the answers it
    /// gives, and the estimate a per-request cap is checked against.
    pub price: Option<Price>,
}

/// A route's targets, each on a provider that checked; `first_token_timeout`
/// is the route's, which a target may override.
pub(super) fn check(
    check: &Checker<'_>,
    raw: &Spanned<Vec<Spanned<RawTarget>>>,
    key: &str,
    providers: &HashMap<&str, &Arc<Provider>>,
    first_token_timeout: Duration,
) -> Result<Vec<Target>, ConfigError> {
    let mut targets = Vec::new();
    for (j, target) in raw.get_ref().iter().enumerate() {
        let target = target.get_ref();
        let name = target.provider.get_ref();
        let target_key = |field: &str| format!("{key}[{j}].{field}");
        let provider = providers.get(name.as_str()).ok_or_else(|| {
            check.error(&target.provider, target_key("provider"), format!("{NO_SUCH_PROVIDER} {name:?}"))
        })?;
        if let Err(why) = provider.kind.adapter().check_model(target.model.get_ref()) {
            return Err(check.error(&target.model, target_key("model"), why));
        }
        let deadline = target.first_token_timeout_ms.as_ref();
        let price = match &target.price {
            Some(price) => Some(price::check(check, price, &format!("{key}[{j}].price"))?),
            None => None,
        };
        targets.push(Target {
            provider: Arc::clone(provider),
            model: target.model.get_ref().clone(),
            context_window: target.context_window.as_ref().map(|w| *w.get_ref()),
            first_token_timeout: check.millis(deadline, &target_key("first_token_timeout_ms"), first_token_timeout)?,
            retries: target.retries.as_ref().map_or(0, |n| *n.get_ref()),
            prefill: target.prefill.unwrap_or(false),
            weight: weight(check, target.weight.as_ref(), &target_key("weight"))?,
            price,
        });
    }
    Ok(targets)
}

/// A target's `weight`: a positive whole number, 1 unless set.
fn weight(check: &Checker<'_>, value: Option<&Spanned<u32>>, key: &str) -> Result<u32, ConfigError> {
    match value {
        Some(weight) if *weight.get_ref() == 0 => {
            Err(check.error(weight, key.to_owned(), "must be at least 1 (remove the target to send it nothing)"))
        }
        Some(weight) => Ok(*weight.get_ref()),
        None => Ok(1),
    }
}
