//! The validated configuration: providers, routes and limits in the types the
//! rest of baton uses. Loading goes through [`raw`] first, so every mistake is
//! reported with its file, line and key before anything starts. Each section
//! is one file holding its serde shape as written, the checked types, and
//! the checks from one to the other; [`raw`] composes the sections and
//! checks the whole, and this file only loads and re-exports.

mod breaker;
mod budget;
mod check;
mod drill_fault;
mod error;
mod keys;
mod ops;
mod price;
mod provider;
mod raw;
mod retry_budget;
mod route;
mod state;
mod store;
mod target;
mod telemetry;
mod top;
mod warnings;

use std::path::Path;

pub use crate::secret::Secret;
pub use breaker::BreakerSettings;
pub use budget::{Budget, BudgetAction, BudgetScope, Budgets, RequestCap};
pub use drill_fault::{DrillFault, Drills};
pub use error::ConfigError;
pub use keys::Access;
pub use ops::{AlertEvent, DEFAULT_DRILL_MAX_TOKENS, DEFAULT_DRILL_PROMPT, Drill, DrillExpect, Webhook};
pub use price::Price;
pub use provider::Provider;
pub use retry_budget::RetryBudgetSettings;
pub use route::{
    CommitWindow, DEFAULT_FIRST_TOKEN_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_ANSWER_BYTES, DEFAULT_MAX_COOLDOWN,
    DEFAULT_MAX_RETRY_WAIT, DEFAULT_REQUEST_BOUND, DEFAULT_RETRY_BACKOFF, Hedge, MidstreamPolicy, Route, Strategy,
    Surface, UnsupportedParams, UpstreamLimits,
};
pub use state::{DEFAULT_KEY_PREFIX, DEFAULT_REDIS_URL, DEFAULT_STATE_TIMEOUT, StateBackend, StateConfig};
pub use store::{DEFAULT_RETENTION_DAYS, DEFAULT_STORE_FILE, StoreBackend, StoreConfig};
pub use target::Target;
pub use telemetry::{DEFAULT_SERVICE_NAME, Telemetry};
pub use top::{
    Config, DEFAULT_BODY_READ_TIMEOUT, DEFAULT_CLIENT_STALL_TIMEOUT, DEFAULT_LISTEN, DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_BODY_BYTES_IN_FLIGHT, DEFAULT_MAX_CONNECTIONS, DEFAULT_SHUTDOWN_GRACE,
};

pub use crate::limits::{BudgetWindow, add_usd};

/// A provider `p` and a route `chat` to it: the least a valid config holds,
/// for a section's tests to put their own table beside.
#[cfg(test)]
pub(crate) const ONE_ROUTE: &str = "[[providers]]\nname = \"p\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1\"\n\n[[routes]]\nmodel = \"chat\"\ntargets = [{ provider = \"p\", model = \"m\" }]\n";

use check::Checker;
use raw::RawConfig;

/// Reads and validates the config at `path`, resolving `${VAR}` from the process environment.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    load_with_warnings(path).map(|(config, _)| config)
}

/// Validates config `text`; `label` names it in errors and `env` resolves
/// `${VAR}`. Text has no directory of its own: its store is off unless it
/// names one.
pub fn parse(text: &str, label: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
    parse_in(text, label, env, None)
}

/// [`parse`] for text that lives in `dir`, which relative paths (the
/// SQLite store's) are read against.
pub fn parse_in(
    text: &str,
    label: &str,
    env: &dyn Fn(&str) -> Option<String>,
    dir: Option<&Path>,
) -> Result<Config, ConfigError> {
    parse_with_warnings_in(text, label, env, dir, false).map(|(config, _)| config)
}

/// [`load`], with the likely mistakes a valid config still has.
pub fn load_with_warnings(path: &Path) -> Result<(Config, Vec<String>), ConfigError> {
    load_from_file(path, false)
}

/// [`load`] for a command that touches only the store (`baton keys`): a
/// secret whose `${VAR}` is not set (a provider's key, an admin token) is
/// left unset rather than refused, so an operator revoking a key needs
/// none of the providers' secrets. Never for serving.
pub fn load_for_store(path: &Path) -> Result<Config, ConfigError> {
    load_from_file(path, true).map(|(config, _)| config)
}

fn load_from_file(path: &Path, secrets_optional: bool) -> Result<(Config, Vec<String>), ConfigError> {
    let label = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: label.clone(), source })?;
    let dir = path.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let env = |name: &str| std::env::var(name).ok();
    parse_with_warnings_in(&text, &label, &env, Some(dir), secrets_optional)
}

/// [`parse`], with the likely mistakes a valid config still has: an
/// OpenAI-kind `base_url` without a version segment, a route whose targets
/// all use one provider, a thinking model with a short first-token deadline.
pub fn parse_with_warnings(
    text: &str,
    label: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Config, Vec<String>), ConfigError> {
    parse_with_warnings_in(text, label, env, None, false)
}

/// [`parse_with_warnings`] for text that lives in `dir`.
fn parse_with_warnings_in(
    text: &str,
    label: &str,
    env: &dyn Fn(&str) -> Option<String>,
    dir: Option<&Path>,
    secrets_optional: bool,
) -> Result<(Config, Vec<String>), ConfigError> {
    let check = Checker { text, label, env, dir, secrets_optional };
    let raw = parse_raw(&check)?;
    let warnings = warnings::warnings(&check, &raw);
    raw::check(&check, raw).map(|config| (config, warnings))
}

/// The most mistakes one parse reports.
const MAX_PARSE_ERRORS: usize = 20;

/// The config's text as written, or every mistake in it that reading it
/// finds: each unknown key or value of the wrong type is reported, its
/// lines blanked out, and the text read again, so two typos are two
/// errors, each at its line and with the key it most likely meant. A
/// syntax error (or one that blanking a line caused) ends the search.
fn parse_raw(check: &Checker<'_>) -> Result<RawConfig, ConfigError> {
    let mut text = check.text.to_owned();
    let mut errors = Vec::new();
    while errors.len() < MAX_PARSE_ERRORS {
        let err = match toml::from_str::<RawConfig>(&text) {
            Ok(raw) if errors.is_empty() => return Ok(raw),
            Ok(_) => break,
            Err(err) => err,
        };
        let message = err.message().trim();
        let about_a_value = ["unknown field", "invalid type", "invalid value"].iter().any(|m| message.starts_with(m));
        if !errors.is_empty() && !about_a_value {
            break;
        }
        errors.push(ConfigError::Invalid {
            path: check.label.to_owned(),
            line: err.span().map_or(1, |span| check.line(span.start)),
            key: key_of(check.text, err.span()),
            message: with_suggestion(message),
        });
        match err.span() {
            Some(span) if about_a_value => blank_lines(&mut text, span),
            _ => break,
        }
    }
    match errors.len() {
        1 => Err(errors.remove(0)),
        _ => Err(ConfigError::Many(errors)),
    }
}

/// Spaces over the lines `span` touches, their line ends kept, so the rest
/// of the text keeps its lines and offsets.
fn blank_lines(text: &mut String, span: std::ops::Range<usize>) {
    let start = text[..span.start.min(text.len())].rfind('\n').map_or(0, |i| i + 1);
    let end = text[span.end.min(text.len())..].find('\n').map_or(text.len(), |i| span.end.min(text.len()) + i);
    let blank: String = text[start..end].chars().map(|c| if c == '\n' { '\n' } else { ' ' }).collect();
    text.replace_range(start..end, &blank);
}

/// An unknown key's message with the expected key it is closest to, when
/// one is close: `first_token_timout_ms` most likely meant
/// `first_token_timeout_ms`.
fn with_suggestion(message: &str) -> String {
    let Some(rest) = message.strip_prefix("unknown field `") else { return message.to_owned() };
    let Some((unknown, expected)) = rest.split_once('`') else { return message.to_owned() };
    let best = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|candidate| (strsim::damerau_levenshtein(unknown, candidate), candidate))
        .filter(|(distance, candidate)| *distance <= (candidate.len() / 3).max(2))
        .min();
    match best {
        Some((_, meant)) => format!("{message}; did you mean `{meant}`?"),
        None => message.to_owned(),
    }
}

/// The key a parse error points at: the text of its span when that is a bare
/// key, the line's own key otherwise.
fn key_of(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    let Some(span) = span else { return "(file)".to_owned() };
    let spanned = text.get(span.clone()).unwrap_or_default().trim();
    // A number is a value, not a key: `-1` is the bad value of the line's key.
    let word = spanned.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-');
    if word && spanned.chars().any(|c| c.is_alphabetic() || c == '_') {
        return spanned.to_owned();
    }
    let line_start = text[..span.start.min(text.len())].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or_default();
    line.split('=').next().unwrap_or_default().trim().to_owned()
}
