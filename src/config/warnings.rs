//! Likely mistakes that are still a valid config: `baton check` prints them
//! and `baton serve` logs them, each with its key path and line, and neither
//! refuses to go on.

use super::check::Checker;
use super::provider::RawProvider;
use super::raw::RawConfig;
use super::route::{DEFAULT_FIRST_TOKEN_TIMEOUT, RawRoute};

/// Models that think before their first token, often for tens of seconds.
const THINKING: [&str; 8] = ["o1", "o3", "o4", "gpt-5", "thinking", "reason", "-r1", "2.5-pro"];

/// The first-token deadline under which a thinking model is likely cut off.
const THINKING_DEADLINE_MS: u64 = 20_000;

/// Every warning for `raw`, in file order.
pub(super) fn warnings(check: &Checker<'_>, raw: &RawConfig) -> Vec<String> {
    let mut out = Vec::new();
    for (i, provider) in raw.providers.iter().enumerate() {
        out.extend(base_url(check, provider.get_ref(), i));
    }
    for (i, route) in raw.routes.iter().enumerate() {
        let route = route.get_ref();
        let at = |offset: usize| format!("{}:{}", check.label, check.line(offset));
        let targets = route.targets.get_ref();
        if let Some(first) = targets.first().map(|t| t.get_ref().provider.get_ref())
            && targets.iter().all(|t| t.get_ref().provider.get_ref() == first)
        {
            out.push(format!(
                "{}: routes[{i}].targets: every target uses provider {first:?}, so its outage is this route's too; add a target on another provider",
                at(route.targets.span().start)
            ));
        }
        out.extend(unused_weights(check, route, i));
        let route_deadline = route.first_token_timeout_ms.as_ref().map(|ms| *ms.get_ref());
        for (j, target) in targets.iter().enumerate() {
            let target = target.get_ref();
            let model = target.model.get_ref().to_ascii_lowercase();
            let deadline = target.first_token_timeout_ms.as_ref().map(|ms| *ms.get_ref()).or(route_deadline);
            let deadline =
                deadline.unwrap_or(u64::try_from(DEFAULT_FIRST_TOKEN_TIMEOUT.as_millis()).unwrap_or(u64::MAX));
            if THINKING.iter().any(|word| model.contains(word)) && deadline < THINKING_DEADLINE_MS {
                out.push(format!(
                    "{}: routes[{i}].targets[{j}].first_token_timeout_ms: {deadline} ms is short for {:?}, a model that thinks before it answers (often 20 s or more); set reasoning models a longer first_token_timeout_ms",
                    at(target.model.span().start),
                    target.model.get_ref()
                ));
            }
        }
    }
    out.extend(super::ops::drill_warnings(check, &raw.drills, &raw.routes));
    out
}

/// A `base_url` against its kind's convention: an OpenAI-kind one without
/// a version segment (requests go to `{base_url}/chat/completions`, so
/// `https://api.openai.com` 404s), or an Anthropic or Gemini one that ends
/// in one (baton adds `/v1/messages` or `/v1beta/models/…` itself, so
/// `https://api.anthropic.com/v1` is asked at `/v1/v1/messages` and every
/// request fails over as `upstream_not_found`).
fn base_url(check: &Checker<'_>, provider: &RawProvider, i: usize) -> Option<String> {
    let written = provider.base_url.as_ref()?;
    let url = check.expand_quietly(written)?;
    let path = url.parse::<http::Uri>().ok()?.path().trim_end_matches('/').to_owned();
    let is_version =
        |segment: &str| segment.strip_prefix('v').is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
    let at = format!(
        "{}:{}: providers[{i}].base_url: {:?}",
        check.label,
        check.line(written.span().start),
        written.get_ref()
    );
    let last = path.rsplit('/').next().unwrap_or_default();
    match provider.kind.get_ref().as_str() {
        "openai" if !path.split('/').any(is_version) => Some(format!(
            "{at} has no version segment such as /v1; OpenAI-compatible servers answer at {{base_url}}/chat/completions, usually under /v1"
        )),
        "anthropic" if is_version(last) => Some(format!(
            "{at} ends in /{last}, but baton adds /v1/messages itself: requests would go to …/{last}/v1/messages and fail over as upstream_not_found; leave /{last} out"
        )),
        "gemini" if is_version(last) => Some(format!(
            "{at} ends in /{last}, but baton adds /v1beta/models/… itself: requests would go to …/{last}/v1beta/models/… and fail over as upstream_not_found; leave /{last} out"
        )),
        _ => None,
    }
}

/// A `weight` on a route that is not `weighted`: it changes nothing, which
/// is rarely what whoever wrote it meant.
fn unused_weights(check: &Checker<'_>, route: &RawRoute, i: usize) -> Vec<String> {
    let strategy = route.strategy.as_ref().map_or("ordered", |s| s.get_ref().as_str());
    if strategy == "weighted" {
        return Vec::new();
    }
    let targets = route.targets.get_ref().iter().enumerate();
    targets
        .filter_map(|(j, target)| {
            let weight = target.get_ref().weight.as_ref()?;
            Some(format!(
                "{}:{}: routes[{i}].targets[{j}].weight: unused, the route's strategy is {strategy:?}; set strategy = \"weighted\" to spread first attempts by weight",
                check.label,
                check.line(weight.span().start)
            ))
        })
        .collect()
}
