//! `[[alerts]]` and `[[drills]]`: the webhooks baton tells when something
//! needs a person, and the fallback paths it exercises on a schedule. Names are checked here, so a misspelt event or fault class
//! is an error at load, not an alert that never comes.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::check::Checker;
use super::drill_fault::Drills;
use super::error::ConfigError;
use super::route::Route;
use crate::secret::Secret;

/// What a drill asks when the config does not say: little, so running it often costs little.
pub const DEFAULT_DRILL_PROMPT: &str = "Reply with the word ok.";
/// A drill's answer limit when the config does not say.
pub const DEFAULT_DRILL_MAX_TOKENS: u32 = 8;
/// The shortest `every`: a drill is a real request, paid for.
const MIN_DRILL_EVERY: Duration = Duration::from_secs(1);
/// The longest `every`.
const MAX_DRILL_EVERY: Duration = Duration::from_secs(30 * 86_400);

/// One `[[alerts]]` entry as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAlert {
    url: Spanned<String>,
    events: Option<Spanned<Vec<String>>>,
    secret: Option<Spanned<String>>,
}

/// One `[[drills]]` entry as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDrill {
    route: Spanned<String>,
    every: Spanned<String>,
    fail: Option<Spanned<Vec<String>>>,
    expect: Option<Spanned<String>>,
    prompt: Option<Spanned<String>>,
    max_tokens: Option<Spanned<u32>>,
}

/// What an alert can be about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AlertEvent {
    /// A provider's circuit breaker opened.
    BreakerOpen,
    /// It closed again: the provider answers.
    BreakerClosed,
    /// Every target of a route failed a request.
    RouteExhausted,
    /// A budget reached 80 % or 100 % of its limit.
    BudgetThreshold,
    /// A scheduled drill failed: the fallback path did not answer.
    DrillFailed,
    /// A drill passed after a failure.
    DrillRecovered,
    /// The shared state (Redis) was lost.
    StateDown,
    /// The database store went down.
    StoreDown,
}

impl AlertEvent {
    /// Every event, in the order the docs list them.
    pub const ALL: [AlertEvent; 8] = [
        AlertEvent::BreakerOpen,
        AlertEvent::BreakerClosed,
        AlertEvent::RouteExhausted,
        AlertEvent::BudgetThreshold,
        AlertEvent::DrillFailed,
        AlertEvent::DrillRecovered,
        AlertEvent::StateDown,
        AlertEvent::StoreDown,
    ];

    /// Its name in the config, in alert bodies and in metric labels.
    pub fn name(self) -> &'static str {
        match self {
            AlertEvent::BreakerOpen => "breaker_open",
            AlertEvent::BreakerClosed => "breaker_closed",
            AlertEvent::RouteExhausted => "route_exhausted",
            AlertEvent::BudgetThreshold => "budget_threshold",
            AlertEvent::DrillFailed => "drill_failed",
            AlertEvent::DrillRecovered => "drill_recovered",
            AlertEvent::StateDown => "state_down",
            AlertEvent::StoreDown => "store_down",
        }
    }

    /// The event `name` stands for.
    pub fn from_name(name: &str) -> Option<Self> {
        AlertEvent::ALL.into_iter().find(|event| event.name() == name)
    }
}

/// One webhook: where alerts are POSTed, for which events, signed with what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// The URL; a secret, since a chat webhook's URL is its credential.
    pub url: Secret,
    /// The URL's host, the one part of it logs name.
    pub host: String,
    /// The events it is told of.
    pub events: Vec<AlertEvent>,
    /// The key bodies are signed with (HMAC-SHA256 in `x-baton-signature`), if any.
    pub secret: Option<Secret>,
}

impl Webhook {
    /// Whether this webhook is told of `event`.
    pub fn wants(&self, event: AlertEvent) -> bool {
        self.events.contains(&event)
    }
}

/// What makes a drill pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrillExpect {
    /// A provider that was not failed answered.
    Answered,
}

/// One scheduled drill: a tiny request through a route with some providers failed on purpose.
#[derive(Debug, Clone, PartialEq)]
pub struct Drill {
    /// The route's name (an alias in the config is resolved to it).
    pub route: String,
    /// How often it runs.
    pub every: Duration,
    /// The providers it fails, and how.
    pub fail: Drills,
    /// The same, as written (`openai=http_5xx,claude=refuse`), for logs and status.
    pub fail_spec: String,
    /// What makes it pass.
    pub expect: DrillExpect,
    /// The user message it sends.
    pub prompt: String,
    /// The answer's limit.
    pub max_tokens: u32,
}

impl Drill {
    /// A drill of `route` failing `fail` (the `x-baton-drill` header's form), or,
    /// when none is given, the route's first target with `http_5xx`.
    pub fn of(route: &Route, fail: Option<&str>, every: Duration) -> Result<Drill, String> {
        let fail_spec = match fail {
            Some(spec) => spec.trim().to_owned(),
            None => {
                let first = route.targets.first().ok_or("the route has no targets")?;
                format!("{}=http_5xx", first.provider.name)
            }
        };
        let drills = Drills::parse(&fail_spec)?;
        Ok(Drill {
            route: route.model.clone(),
            every,
            fail: drills,
            fail_spec,
            expect: DrillExpect::Answered,
            prompt: DEFAULT_DRILL_PROMPT.to_owned(),
            max_tokens: DEFAULT_DRILL_MAX_TOKENS,
        })
    }
}

/// Validates every `[[alerts]]` entry, pushing each mistake to `errors`.
pub(super) fn alerts(check: &Checker<'_>, raw: &[Spanned<RawAlert>], errors: &mut Vec<ConfigError>) -> Vec<Webhook> {
    let mut webhooks = Vec::new();
    for (i, alert) in raw.iter().enumerate() {
        match alert_entry(check, alert.get_ref(), i) {
            Ok(Some(webhook)) => webhooks.push(webhook),
            // Its URL is a secret not set, for a command that sends no alert.
            Ok(None) => {}
            Err(err) => errors.push(err),
        }
    }
    webhooks
}

fn alert_entry(check: &Checker<'_>, raw: &RawAlert, i: usize) -> Result<Option<Webhook>, ConfigError> {
    let key = |field: &str| format!("alerts[{i}].{field}");
    let Some(url) = check.secret(&raw.url, &key("url"))? else { return Ok(None) };
    let host = match url.parse::<http::Uri>() {
        Ok(uri) if matches!(uri.scheme_str(), Some("http" | "https")) => uri.host().map(str::to_owned),
        _ => None,
    };
    // The value as written: an expanded ${VAR} may hold the webhook's credential.
    let written = raw.url.get_ref();
    let host = host.ok_or_else(|| {
        check.error(&raw.url, key("url"), format!("{written:?} is not an http:// or https:// URL with a host"))
    })?;
    let events = match &raw.events {
        None => AlertEvent::ALL.to_vec(),
        Some(names) if names.get_ref().is_empty() => {
            return Err(check.error(names, key("events"), "lists no events; leave it out for every event"));
        }
        Some(names) => {
            let mut events = Vec::new();
            for name in names.get_ref() {
                let event = AlertEvent::from_name(name).ok_or_else(|| {
                    let known: Vec<&str> = AlertEvent::ALL.iter().map(|event| event.name()).collect();
                    let message = format!("unknown event {name:?}; known events are {}", known.join(", "));
                    check.error(names, key("events"), message)
                })?;
                if !events.contains(&event) {
                    events.push(event);
                }
            }
            events
        }
    };
    let secret = match &raw.secret {
        Some(value) => match check.secret(value, &key("secret"))? {
            Some(secret) if secret.is_empty() => return Err(check.error(value, key("secret"), "must not be empty")),
            secret => secret.map(Secret::new),
        },
        None => None,
    };
    Ok(Some(Webhook { url: Secret::new(url), host, events, secret }))
}

/// Validates every `[[drills]]` entry against `routes`, pushing each mistake to `errors`.
/// Drills that cannot exercise a failover: on an ordered route, a drill
/// whose `fail` spares the first target is answered by it, so it passes
/// without any fallback tried.
pub(super) fn drill_warnings(
    check: &Checker<'_>,
    raw: &[Spanned<RawDrill>],
    routes: &[Spanned<super::route::RawRoute>],
) -> Vec<String> {
    let mut out = Vec::new();
    for (i, drill) in raw.iter().enumerate() {
        let drill = drill.get_ref();
        let Some(fail) = &drill.fail else { continue };
        let name = drill.route.get_ref();
        let route = routes.iter().map(Spanned::get_ref).find(|route| {
            route.model.get_ref() == name
                || route.aliases.as_ref().is_some_and(|aliases| aliases.get_ref().iter().any(|alias| alias == name))
        });
        let Some(route) = route else { continue };
        let ordered = route.strategy.as_ref().is_none_or(|strategy| strategy.get_ref() == "ordered");
        let Some(first) = route.targets.get_ref().first().map(|target| target.get_ref().provider.get_ref()) else {
            continue;
        };
        let failed: Vec<&str> = fail
            .get_ref()
            .iter()
            .map(|pair| pair.split_once('=').map_or("", |(provider, _)| provider.trim()))
            .collect();
        if ordered && !failed.contains(&first.as_str()) {
            out.push(format!(
                "{}:{}: drills[{i}].fail: fails {}, but route {name:?} tries {first:?} first, which answers: the drill passes without exercising any failover; fail {first:?} too",
                check.label,
                check.line(fail.span().start),
                failed.join(", ")
            ));
        }
    }
    out
}

pub(super) fn drills(
    check: &Checker<'_>,
    raw: &[Spanned<RawDrill>],
    routes: &[Arc<Route>],
    errors: &mut Vec<ConfigError>,
) -> Vec<Drill> {
    let mut drills = Vec::new();
    for (i, drill) in raw.iter().enumerate() {
        drills.extend(drill_entry(check, drill.get_ref(), i, routes, errors));
    }
    drills
}

/// Drill `i` as the scheduler runs it, or every mistake in it, each pushed
/// onto `errors`: a wrong `every` does not hide a wrong `max_tokens`.
fn drill_entry(
    check: &Checker<'_>,
    raw: &RawDrill,
    i: usize,
    routes: &[Arc<Route>],
    errors: &mut Vec<ConfigError>,
) -> Option<Drill> {
    let before = errors.len();
    let key = |field: &str| format!("drills[{i}].{field}");
    let name = raw.route.get_ref();
    let route = routes.iter().find(|route| route.answers_to(name));
    if route.is_none() {
        errors.push(check.error(&raw.route, key("route"), format!("no route is named {name:?}")));
    }
    let every = parse_every(raw.every.get_ref()).map_err(|why| errors.push(check.error(&raw.every, key("every"), why)));
    if let Some(expect) = &raw.expect
        && expect.get_ref() != "answered"
    {
        let message = format!("unknown expectation {:?}; expected \"answered\"", expect.get_ref());
        errors.push(check.error(expect, key("expect"), message));
    }
    if let Some(prompt) = raw.prompt.as_ref().filter(|prompt| prompt.get_ref().trim().is_empty()) {
        errors.push(check.error(prompt, key("prompt"), "must not be empty"));
    }
    if let Some(n) = raw.max_tokens.as_ref().filter(|n| *n.get_ref() == 0) {
        errors.push(check.error(n, key("max_tokens"), "must be at least 1"));
    }
    let route = route?;
    let fail = raw.fail.as_ref().map(|fail| (fail.get_ref().join(","), fail));
    let drill = Drill::of(route, fail.as_ref().map(|(spec, _)| spec.as_str()), every.unwrap_or(Duration::ZERO));
    let drill = match drill {
        Ok(drill) => Some(drill),
        Err(why) => {
            let at = fail.as_ref().map_or(1, |(_, written)| check.line(written.span().start));
            errors.push(ConfigError::Invalid {
                path: check.label.to_owned(),
                line: at,
                key: key("fail"),
                message: why,
            });
            None
        }
    };
    if let Some((_, written)) = &fail {
        for pair in written.get_ref() {
            let provider = pair.split_once('=').map_or("", |(provider, _)| provider.trim());
            if !route.targets.iter().any(|target| target.provider.name == provider) {
                let message = format!("{provider:?} is not a target of route {:?}", route.model);
                errors.push(check.error(written, key("fail"), message));
            }
        }
    }
    if errors.len() > before {
        return None;
    }
    let mut drill = drill?;
    if let Some(prompt) = &raw.prompt {
        drill.prompt.clone_from(prompt.get_ref());
    }
    if let Some(n) = &raw.max_tokens {
        drill.max_tokens = *n.get_ref();
    }
    Some(drill)
}

/// `30s`, `15m`, `1h`, `1d`, from one second to thirty days.
fn parse_every(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let wrong = || format!("{text:?} is not a duration like \"30s\", \"15m\", \"1h\" or \"1d\"");
    let unit = match text.chars().last() {
        Some('s') => 1,
        Some('m') => 60,
        Some('h') => 3600,
        Some('d') => 86_400,
        _ => return Err(wrong()),
    };
    let count: u64 = text[..text.len() - 1].parse().map_err(|_| wrong())?;
    let every = Duration::from_secs(count.saturating_mul(unit));
    if !(MIN_DRILL_EVERY..=MAX_DRILL_EVERY).contains(&every) {
        return Err(format!("{text:?} is outside 1s to 30d"));
    }
    Ok(every)
}

#[cfg(test)]
#[path = "ops_tests.rs"]
mod tests;
