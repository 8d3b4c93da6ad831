//! `[[routes]]`: a model name clients ask for, the other names they may
//! send for it (`aliases`), how it orders its targets (`strategy`), its
//! deadlines, hedge, commit window, retries, what it does when a stream
//! breaks, and what it makes of request fields beyond text. Every name a
//! client may send picks one route, so a name or alias used twice is an error.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::check::Checker;
use super::error::ConfigError;
use super::provider::Provider;
use super::retry_budget::{self, RetryBudgetSettings};
use super::target::{self, RawTarget, Target};

/// How long an attempt may take to its first token when the route does not say.
pub const DEFAULT_FIRST_TOKEN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a committed stream may go without an event when the route does not say.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// The base of the retry backoff when the route does not say.
pub const DEFAULT_RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// The longest `Retry-After` waited for when the route does not say.
pub const DEFAULT_MAX_RETRY_WAIT: Duration = Duration::from_secs(2);
/// The most text and tool-call bytes one answer may hold when the config does not say.
pub const DEFAULT_MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;
/// The longest a provider's `Retry-After` keeps it aside when the config does not say.
pub const DEFAULT_MAX_COOLDOWN: Duration = Duration::from_secs(120);
/// What bounds the part of a request before its answer commits, and the
/// whole of a non-streamed one, when the route sets no `request_timeout_ms`.
pub const DEFAULT_REQUEST_BOUND: Duration = Duration::from_secs(300);

/// One `[[routes]]` entry as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRoute {
    pub model: Spanned<String>,
    pub aliases: Option<Spanned<Vec<String>>>,
    pub strategy: Option<Spanned<String>>,
    pub first_token_timeout_ms: Option<Spanned<u64>>,
    pub idle_timeout_ms: Option<Spanned<u64>>,
    pub request_timeout_ms: Option<Spanned<u64>>,
    pub hedge_after_ms: Option<Spanned<RawHedge>>,
    pub commit_after_tokens: Option<Spanned<u32>>,
    pub commit_after_ms: Option<Spanned<u64>>,
    pub retry_backoff_ms: Option<Spanned<u64>>,
    pub max_retry_wait_ms: Option<Spanned<u64>>,
    pub retry_budget: Option<Spanned<super::retry_budget::RawRetryBudget>>,
    pub on_midstream_failure: Option<Spanned<String>>,
    pub unsupported_params: Option<Spanned<String>>,
    pub validate_json: Option<bool>,
    pub reasoning_keeps_alive: Option<bool>,
    pub stream_reasoning: Option<bool>,
    pub fail_over_on_refusal: Option<bool>,
    pub max_resumes: Option<Spanned<u32>>,
    pub targets: Spanned<Vec<Spanned<RawTarget>>>,
}

/// `hedge_after_ms` as written: milliseconds, or the word `auto`.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum RawHedge {
    Millis(u64),
    Word(String),
}

/// A model name clients ask for, and the ordered targets that can answer it.
#[derive(Debug, Clone)]
pub struct Route {
    /// The `model` a client sends: the route's name in metrics, logs and keys.
    pub model: String,
    /// Other names clients may send for this route (a tier, an upstream
    /// model's name), unique across every route's names and aliases.
    pub aliases: Vec<String>,
    /// How each request orders the targets before the first is tried.
    pub strategy: Strategy,
    /// After commit, the longest allowed gap between events.
    pub idle_timeout: Duration,
    /// Bounds the whole request: every attempt, retry and wait.
    pub request_timeout: Option<Duration>,
    /// When to start the next candidate alongside a slow one.
    pub hedge: Option<Hedge>,
    /// How much of an attempt is held back before it commits.
    pub commit: CommitWindow,
    /// The base of the exponential backoff between retries of one target.
    pub retry_backoff: Duration,
    /// The longest `Retry-After` worth waiting for; a longer one fails over.
    pub max_retry_wait: Duration,
    /// How many retries and hedges the route's requests may add.
    pub retry_budget: RetryBudgetSettings,
    /// What a stream that breaks after commit does.
    pub on_midstream_failure: MidstreamPolicy,
    /// What the route does with request fields and answer parts beyond text.
    pub surface: Surface,
    /// How many times one answer may be resumed.
    pub max_resumes: u32,
    /// Caps on what a provider's answer may make baton hold or wait for.
    pub limits: UpstreamLimits,
    /// Candidates, in config order (the `strategy` decides the order tried).
    pub targets: Vec<Target>,
}

impl Route {
    /// Whether a client's `model` names this route, by its name or an alias.
    pub fn answers_to(&self, model: &str) -> bool {
        self.model == model || self.aliases.iter().any(|alias| alias == model)
    }
}

/// How a route orders its targets for one request; failover then walks the
/// order, as it always has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// Config order, every time.
    #[default]
    Ordered,
    /// By the providers' recent p95 time to first token, fastest first,
    /// taken afresh for every request; ties stay in config order.
    Fastest,
    /// The first target drawn at random in proportion to `weight` (spreading
    /// load over several keys or regions of one provider), then the rest in
    /// config order.
    Weighted,
}

impl Strategy {
    /// The name the config uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Ordered => "ordered",
            Strategy::Fastest => "fastest",
            Strategy::Weighted => "weighted",
        }
    }
}

/// Caps on what one provider's bytes can make baton hold or wait for: set
/// at the top level of the config, carried by every route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamLimits {
    /// The largest SSE event; a larger one fails the attempt (`event_too_large`).
    pub max_event_bytes: usize,
    /// The most text and tool-call bytes an answer that baton holds whole
    /// (non-streamed, or kept for resume) may reach.
    pub max_answer_bytes: usize,
    /// The longest a `Retry-After` keeps a provider aside.
    pub max_cooldown: Duration,
}

impl Default for UpstreamLimits {
    fn default() -> Self {
        UpstreamLimits {
            max_event_bytes: crate::providers::sse::DEFAULT_MAX_EVENT_BYTES,
            max_answer_bytes: DEFAULT_MAX_ANSWER_BYTES,
            max_cooldown: DEFAULT_MAX_COOLDOWN,
        }
    }
}

/// When a hedge starts: the next candidate runs in parallel once the current
/// attempt has gone this long without committing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Hedge {
    /// A fixed delay.
    After(Duration),
    /// The primary's recent p95 time to first token, within a floor and a ceiling.
    Auto,
}

/// What a route does with a request field a target cannot honour
/// (`unsupported_params`). A field it sends the request without is named in
/// `x-baton-dropped-params`; a field it refuses skips the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UnsupportedParams {
    /// Refuse every such field.
    Refuse,
    /// Send the request without a field that asks nothing of the answer
    /// (the client dialect says which: Claude Code's `context_management`,
    /// Codex's `namespace` tool…); refuse the rest. The default, so agents
    /// work through any kind with a route's defaults.
    #[default]
    DropSafe,
    /// Send the request without every such field.
    Drop,
}

/// A route's rules for what a request may ask beyond text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Surface {
    /// What happens to a field a target cannot honour.
    pub unsupported_params: UnsupportedParams,
    /// Check a `json_schema` answer against its schema before it commits.
    pub validate_json: bool,
    /// While reasoning arrives, measure the first-token deadline from the
    /// latest reasoning delta: a thinking model is alive, not stalled.
    pub reasoning_keeps_alive: bool,
    /// Send reasoning to the client (`delta.reasoning_content`); it then
    /// commits like a token.
    pub stream_reasoning: bool,
    /// A content filter's refusal before any token (Azure's
    /// `content_filter`, Gemini's `SAFETY`) tries the next target instead of
    /// being the answer.
    pub fail_over_on_refusal: bool,
}

impl Default for Surface {
    fn default() -> Self {
        Surface {
            unsupported_params: UnsupportedParams::default(),
            validate_json: true,
            reasoning_keeps_alive: false,
            stream_reasoning: false,
            fail_over_on_refusal: false,
        }
    }
}

/// What happens when a committed stream breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MidstreamPolicy {
    /// End the stream with an error event and no `[DONE]`.
    Error,
    /// Ask the next candidate to continue the answer and splice it in.
    Resume,
}

/// An attempt commits once it has produced `tokens` content events and
/// `after` has passed since its first one, or its answer has ended: until
/// then a failure still fails over invisibly, at the price of a later first byte.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CommitWindow {
    /// Content events to hold back before commit (at least 1).
    pub tokens: u32,
    /// Time after the first token to hold back before commit.
    pub after: Duration,
}

/// Route `i` as the engine uses it, its targets on the `providers` that
/// checked, carrying the top-level `limits`.
pub(super) fn check(
    check: &Checker<'_>,
    raw: &RawRoute,
    i: usize,
    providers: &HashMap<&str, &Arc<Provider>>,
    limits: UpstreamLimits,
) -> Result<Route, ConfigError> {
    let key = |field: &str| format!("routes[{i}].{field}");
    let model = raw.model.get_ref().trim().to_owned();
    if model.is_empty() {
        return Err(check.error(&raw.model, key("model"), "must not be empty"));
    }
    let first_token_timeout = check.millis(
        raw.first_token_timeout_ms.as_ref(),
        &key("first_token_timeout_ms"),
        DEFAULT_FIRST_TOKEN_TIMEOUT,
    )?;
    let idle_timeout = check.millis(raw.idle_timeout_ms.as_ref(), &key("idle_timeout_ms"), DEFAULT_IDLE_TIMEOUT)?;
    let request_timeout = match &raw.request_timeout_ms {
        Some(ms) => Some(check.millis(Some(ms), &key("request_timeout_ms"), Duration::ZERO)?),
        None => None,
    };
    let hedge = hedge(check, raw, &key("hedge_after_ms"))?;
    let commit = commit(check, raw, &key("commit_after_tokens"))?;
    let retry_backoff = check.millis(raw.retry_backoff_ms.as_ref(), &key("retry_backoff_ms"), DEFAULT_RETRY_BACKOFF)?;
    let max_retry_wait =
        raw.max_retry_wait_ms.as_ref().map_or(DEFAULT_MAX_RETRY_WAIT, |ms| Duration::from_millis(*ms.get_ref()));
    let retry_budget = retry_budget::check(check, raw.retry_budget.as_ref(), &key("retry_budget"))?;
    let on_midstream_failure = midstream(check, raw, &key("on_midstream_failure"))?;
    let surface = surface(check, raw, &key("unsupported_params"))?;
    let max_resumes = raw.max_resumes.as_ref().map_or(1, |n| *n.get_ref());
    if raw.targets.get_ref().is_empty() {
        return Err(check.error(&raw.targets, key("targets"), "a route needs at least one target"));
    }
    let targets = target::check(check, &raw.targets, &key("targets"), providers, first_token_timeout)?;
    let (aliases, strategy) = (aliases(check, raw, &model, &key("aliases"))?, strategy(check, raw, &key("strategy"))?);
    Ok(Route {
        model,
        aliases,
        strategy,
        idle_timeout,
        request_timeout,
        hedge,
        commit,
        retry_backoff,
        max_retry_wait,
        retry_budget,
        on_midstream_failure,
        surface,
        max_resumes,
        limits,
        targets,
    })
}

/// `hedge_after_ms`: none, a delay, or `auto`.
fn hedge(check: &Checker<'_>, raw: &RawRoute, key: &str) -> Result<Option<Hedge>, ConfigError> {
    let Some(value) = &raw.hedge_after_ms else { return Ok(None) };
    match value.get_ref() {
        RawHedge::Millis(ms) => Ok(Some(Hedge::After(Duration::from_millis(*ms)))),
        RawHedge::Word(word) if word == "auto" => Ok(Some(Hedge::Auto)),
        RawHedge::Word(word) => {
            Err(check.error(value, key.to_owned(), format!("{word:?} is neither milliseconds nor \"auto\"")))
        }
    }
}

/// The commit window: `commit_after_tokens` (at least 1) and `commit_after_ms`.
fn commit(check: &Checker<'_>, raw: &RawRoute, key: &str) -> Result<CommitWindow, ConfigError> {
    let tokens = match &raw.commit_after_tokens {
        Some(n) if *n.get_ref() == 0 => {
            let message = "must be at least 1: the first token commits at the earliest";
            return Err(check.error(n, key.to_owned(), message));
        }
        Some(n) => *n.get_ref(),
        None => 1,
    };
    let after = raw.commit_after_ms.as_ref().map_or(Duration::ZERO, |ms| Duration::from_millis(*ms.get_ref()));
    Ok(CommitWindow { tokens, after })
}

/// `on_midstream_failure`: `error` unless the route says `resume`.
fn midstream(check: &Checker<'_>, raw: &RawRoute, key: &str) -> Result<MidstreamPolicy, ConfigError> {
    let Some(value) = &raw.on_midstream_failure else { return Ok(MidstreamPolicy::Error) };
    match value.get_ref().as_str() {
        "error" => Ok(MidstreamPolicy::Error),
        "resume" => Ok(MidstreamPolicy::Resume),
        other => Err(check.error(value, key.to_owned(), format!("{other:?} is neither \"error\" nor \"resume\""))),
    }
}

/// What the route makes of fields and parts beyond text.
fn surface(check: &Checker<'_>, raw: &RawRoute, key: &str) -> Result<Surface, ConfigError> {
    let defaults = Surface::default();
    let unsupported_params = match &raw.unsupported_params {
        None => defaults.unsupported_params,
        Some(value) => match value.get_ref().as_str() {
            "refuse" => UnsupportedParams::Refuse,
            "drop_safe" => UnsupportedParams::DropSafe,
            "drop" => UnsupportedParams::Drop,
            other => {
                return Err(check.error(
                    value,
                    key.to_owned(),
                    format!("{other:?} is not one of \"refuse\", \"drop_safe\", \"drop\""),
                ));
            }
        },
    };
    Ok(Surface {
        unsupported_params,
        validate_json: raw.validate_json.unwrap_or(defaults.validate_json),
        reasoning_keeps_alive: raw.reasoning_keeps_alive.unwrap_or(defaults.reasoning_keeps_alive),
        stream_reasoning: raw.stream_reasoning.unwrap_or(defaults.stream_reasoning),
        fail_over_on_refusal: raw.fail_over_on_refusal.unwrap_or(defaults.fail_over_on_refusal),
    })
}

/// The route's aliases: none empty, none repeated, none its own name.
fn aliases(check: &Checker<'_>, raw: &RawRoute, model: &str, key: &str) -> Result<Vec<String>, ConfigError> {
    let Some(names) = &raw.aliases else { return Ok(Vec::new()) };
    let mut aliases: Vec<String> = Vec::new();
    for alias in names.get_ref() {
        let alias = alias.trim();
        let wrong = if alias.is_empty() {
            Some("an alias must not be empty".to_owned())
        } else if alias == model {
            Some(format!("{alias:?} is already the route's own name"))
        } else if aliases.iter().any(|a| a == alias) {
            Some(format!("{alias:?} is listed twice"))
        } else {
            None
        };
        if let Some(message) = wrong {
            return Err(check.error(names, key.to_owned(), message));
        }
        aliases.push(alias.to_owned());
    }
    Ok(aliases)
}

/// `strategy`: `"ordered"` unless the route says otherwise.
fn strategy(check: &Checker<'_>, raw: &RawRoute, key: &str) -> Result<Strategy, ConfigError> {
    let Some(value) = &raw.strategy else { return Ok(Strategy::Ordered) };
    match value.get_ref().as_str() {
        "ordered" => Ok(Strategy::Ordered),
        "fastest" => Ok(Strategy::Fastest),
        "weighted" => Ok(Strategy::Weighted),
        other => Err(check.error(
            value,
            key.to_owned(),
            format!("{other:?} is not a strategy: use \"ordered\", \"fastest\" or \"weighted\""),
        )),
    }
}

/// Route `i`'s name or one of its aliases, if either already names one
/// of the routes before it: a client sending it could not say which.
pub(super) fn name_clash(
    check: &Checker<'_>,
    raw: &RawRoute,
    i: usize,
    route: &Route,
    before: &[Arc<Route>],
) -> Option<ConfigError> {
    if let Some(other) = before.iter().find(|other| other.answers_to(&route.model)) {
        let message = if other.model == route.model {
            format!("duplicate route {:?}", route.model)
        } else {
            format!("{:?} is already an alias of route {:?}", route.model, other.model)
        };
        return Some(check.error(&raw.model, format!("routes[{i}].model"), message));
    }
    let aliases = raw.aliases.as_ref()?;
    route.aliases.iter().find_map(|alias| {
        let other = before.iter().find(|other| other.answers_to(alias))?;
        let message = format!("alias {alias:?} already names route {:?}", other.model);
        Some(check.error(aliases, format!("routes[{i}].aliases"), message))
    })
}
