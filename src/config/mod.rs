//! The validated configuration: providers, routes and limits in the types the
//! rest of baton uses. Loading goes through [`raw`] first, so every mistake is
//! reported with its file, line and key before anything starts.

mod raw;
mod secret;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use toml::Spanned;

pub use secret::Secret;

use crate::providers::ProviderKind;
use raw::{RawConfig, RawProvider, RawRoute};

/// Where the proxy listens when the config does not say.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8080);
/// The largest request body accepted when the config does not say.
pub const DEFAULT_MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
/// How long an attempt may take to its first token when the route does not say.
pub const DEFAULT_FIRST_TOKEN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a committed stream may go without an event when the route does not say.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Everything `baton serve` needs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The proxy's listen address.
    pub listen: SocketAddr,
    /// Request bodies above this size are refused with 413.
    pub max_body_bytes: usize,
    /// The providers, in file order.
    pub providers: Vec<Arc<Provider>>,
    /// The routes, in file order.
    pub routes: Vec<Route>,
}

/// One upstream API account.
#[derive(Debug)]
pub struct Provider {
    /// Unique name, shown in headers, logs and errors.
    pub name: String,
    /// The wire dialect.
    pub kind: ProviderKind,
    /// Base URL, following the kind's official SDK convention.
    pub base_url: String,
    /// The gateway's credential, if the provider needs one.
    pub api_key: Option<Secret>,
}

/// A model name clients ask for, and the ordered targets that can answer it.
#[derive(Debug, Clone)]
pub struct Route {
    /// The `model` a client sends.
    pub model: String,
    /// Per attempt, from its start to its first token.
    pub first_token_timeout: Duration,
    /// After commit, the longest allowed gap between events.
    pub idle_timeout: Duration,
    /// Candidates, in the order they are tried.
    pub targets: Vec<Target>,
}

/// One candidate of a route: a provider and the model to ask it for.
#[derive(Debug, Clone)]
pub struct Target {
    /// The provider to call.
    pub provider: Arc<Provider>,
    /// The provider's model name.
    pub model: String,
    /// The model's context window in tokens, when declared: a context-length
    /// error moves on only to a candidate with a larger one.
    pub context_window: Option<u64>,
}

impl Config {
    /// Finds the route a client's `model` names.
    pub fn route(&self, model: &str) -> Option<&Route> {
        self.routes.iter().find(|route| route.model == model)
    }
}

/// A config that cannot be used, with where and why.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: cannot read config: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file was read but something in it is wrong.
    #[error("{path}:{line}: {key}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// The 1-based line of the offending value.
        line: usize,
        /// The offending key, as a dotted path.
        key: String,
        /// What is wrong with it.
        message: String,
    },
}

/// Reads and validates the config at `path`, resolving `${VAR}` from the process environment.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let label = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: label.clone(), source })?;
    parse(&text, &label, &|name| std::env::var(name).ok())
}

/// Validates config `text`; `label` names it in errors and `env` resolves `${VAR}`.
pub fn parse(text: &str, label: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
    let check = Checker { text, label, env };
    let raw: RawConfig = toml::from_str(text).map_err(|err| {
        let line = err.span().map_or(1, |span| check.line(span.start));
        ConfigError::Invalid {
            path: label.to_owned(),
            line,
            key: key_of(text, err.span()),
            message: err.message().trim().to_owned(),
        }
    })?;
    check.config(raw)
}

/// The key a parse error points at: the text of its span when that is a bare
/// key, the line's own key otherwise.
fn key_of(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    let Some(span) = span else { return "(file)".to_owned() };
    let spanned = text.get(span.clone()).unwrap_or_default().trim();
    if !spanned.is_empty() && spanned.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-') {
        return spanned.to_owned();
    }
    let line_start = text[..span.start.min(text.len())].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or_default();
    line.split('=').next().unwrap_or_default().trim().to_owned()
}

struct Checker<'a> {
    text: &'a str,
    label: &'a str,
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl Checker<'_> {
    fn line(&self, offset: usize) -> usize {
        self.text.get(..offset).map_or(1, |before| before.matches('\n').count() + 1)
    }

    fn error<T>(&self, at: &Spanned<T>, key: String, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            path: self.label.to_owned(),
            line: self.line(at.span().start),
            key,
            message: message.into(),
        }
    }

    /// Replaces every `${VAR}` with the variable's value.
    fn expand(&self, value: &Spanned<String>, key: &str) -> Result<String, ConfigError> {
        let mut out = String::new();
        let mut rest = value.get_ref().as_str();
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after.find('}').ok_or_else(|| self.error(value, key.to_owned(), "unclosed `${` in value"))?;
            let name = &after[..end];
            let resolved = (self.env)(name)
                .ok_or_else(|| self.error(value, key.to_owned(), format!("environment variable {name} is not set")))?;
            out.push_str(&resolved);
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    fn config(&self, raw: RawConfig) -> Result<Config, ConfigError> {
        let listen = match &raw.listen {
            Some(value) => {
                let text = self.expand(value, "listen")?;
                text.parse().map_err(|_| {
                    self.error(value, "listen".into(), format!("{text:?} is not an address like 127.0.0.1:8080"))
                })?
            }
            None => DEFAULT_LISTEN,
        };
        let max_body_bytes = match &raw.max_body_bytes {
            Some(value) => usize::try_from(*value.get_ref())
                .ok()
                .filter(|bytes| *bytes > 0)
                .ok_or_else(|| self.error(value, "max_body_bytes".into(), "must be a positive size in bytes"))?,
            None => DEFAULT_MAX_BODY_BYTES,
        };
        let mut providers: Vec<Arc<Provider>> = Vec::new();
        for (i, raw_provider) in raw.providers.iter().enumerate() {
            let provider = self.provider(raw_provider.get_ref(), i)?;
            if providers.iter().any(|p| p.name == provider.name) {
                let name = &raw_provider.get_ref().name;
                return Err(self.error(
                    name,
                    format!("providers[{i}].name"),
                    format!("duplicate provider name {:?}", provider.name),
                ));
            }
            providers.push(Arc::new(provider));
        }
        let by_name: HashMap<&str, &Arc<Provider>> = providers.iter().map(|p| (p.name.as_str(), p)).collect();
        let mut routes: Vec<Route> = Vec::new();
        for (i, raw_route) in raw.routes.iter().enumerate() {
            let route = self.route(raw_route.get_ref(), i, &by_name)?;
            if routes.iter().any(|r| r.model == route.model) {
                let model = &raw_route.get_ref().model;
                return Err(self.error(
                    model,
                    format!("routes[{i}].model"),
                    format!("duplicate route {:?}", route.model),
                ));
            }
            routes.push(route);
        }
        Ok(Config { listen, max_body_bytes, providers, routes })
    }

    fn provider(&self, raw: &RawProvider, i: usize) -> Result<Provider, ConfigError> {
        let key = |field: &str| format!("providers[{i}].{field}");
        let name = raw.name.get_ref().trim().to_owned();
        if name.is_empty() {
            return Err(self.error(&raw.name, key("name"), "must not be empty"));
        }
        let kind = ProviderKind::from_name(raw.kind.get_ref()).ok_or_else(|| {
            self.error(
                &raw.kind,
                key("kind"),
                format!("unknown kind {:?}; expected openai, anthropic or gemini", raw.kind.get_ref()),
            )
        })?;
        let base_url = self.expand(&raw.base_url, &key("base_url"))?;
        match reqwest::Url::parse(&base_url) {
            Ok(url) if matches!(url.scheme(), "http" | "https") => {}
            _ => return Err(self.error(&raw.base_url, key("base_url"), format!("{base_url:?} is not an http(s) URL"))),
        }
        let api_key = match &raw.api_key {
            Some(value) => {
                let secret = self.expand(value, &key("api_key"))?;
                if reqwest::header::HeaderValue::from_str(&secret).is_err() {
                    return Err(self.error(value, key("api_key"), "contains characters an HTTP header cannot carry"));
                }
                Some(Secret::new(secret))
            }
            None => None,
        };
        Ok(Provider { name, kind, base_url, api_key })
    }

    fn route(&self, raw: &RawRoute, i: usize, providers: &HashMap<&str, &Arc<Provider>>) -> Result<Route, ConfigError> {
        let key = |field: &str| format!("routes[{i}].{field}");
        let model = raw.model.get_ref().trim().to_owned();
        if model.is_empty() {
            return Err(self.error(&raw.model, key("model"), "must not be empty"));
        }
        let first_token_timeout = self.millis(
            raw.first_token_timeout_ms.as_ref(),
            &key("first_token_timeout_ms"),
            DEFAULT_FIRST_TOKEN_TIMEOUT,
        )?;
        let idle_timeout = self.millis(raw.idle_timeout_ms.as_ref(), &key("idle_timeout_ms"), DEFAULT_IDLE_TIMEOUT)?;
        if raw.targets.get_ref().is_empty() {
            return Err(self.error(&raw.targets, key("targets"), "a route needs at least one target"));
        }
        let mut targets = Vec::new();
        for (j, target) in raw.targets.get_ref().iter().enumerate() {
            let target = target.get_ref();
            let name = target.provider.get_ref();
            let provider = providers.get(name.as_str()).ok_or_else(|| {
                self.error(
                    &target.provider,
                    key(&format!("targets[{j}].provider")),
                    format!("no provider is named {name:?}"),
                )
            })?;
            targets.push(Target {
                provider: Arc::clone(provider),
                model: target.model.get_ref().clone(),
                context_window: target.context_window.as_ref().map(|w| *w.get_ref()),
            });
        }
        Ok(Route { model, first_token_timeout, idle_timeout, targets })
    }

    fn millis(&self, value: Option<&Spanned<u64>>, key: &str, default: Duration) -> Result<Duration, ConfigError> {
        match value {
            Some(ms) if *ms.get_ref() == 0 => Err(self.error(ms, key.to_owned(), "must be at least 1 ms")),
            Some(ms) => Ok(Duration::from_millis(*ms.get_ref())),
            None => Ok(default),
        }
    }
}
