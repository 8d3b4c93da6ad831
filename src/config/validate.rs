//! Raw config → validated config: every check, each error naming the line and key.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use toml::Spanned;

use super::raw::{RawBreaker, RawConfig, RawHedge, RawProvider, RawRoute};
use super::top::{Top, resolve};
use super::*;

/// How a target naming no provider is reported.
const NO_SUCH_PROVIDER: &str = "no provider is named";

pub(super) struct Checker<'a> {
    pub text: &'a str,
    pub label: &'a str,
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// The config file's directory, when it came from a file.
    pub dir: Option<&'a std::path::Path>,
}

impl Checker<'_> {
    pub fn line(&self, offset: usize) -> usize {
        self.text.get(..offset).map_or(1, |before| before.matches('\n').count() + 1)
    }

    pub(super) fn error<T>(&self, at: &Spanned<T>, key: String, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            path: self.label.to_owned(),
            line: self.line(at.span().start),
            key,
            message: message.into(),
        }
    }

    /// [`Checker::expand`], or nothing when a variable is missing (that is
    /// an error reported elsewhere).
    pub fn expand_quietly(&self, value: &Spanned<String>) -> Option<String> {
        self.expand(value, "").ok()
    }

    /// Replaces every `${VAR}` with the variable's value, and `${VAR:-default}`
    /// with it or, when it is unset or empty, with `default`.
    pub(super) fn expand(&self, value: &Spanned<String>, key: &str) -> Result<String, ConfigError> {
        let mut out = String::new();
        let mut rest = value.get_ref().as_str();
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after.find('}').ok_or_else(|| self.error(value, key.to_owned(), "unclosed `${` in value"))?;
            let (name, default) = match after[..end].split_once(":-") {
                Some((name, default)) => (name, Some(default)),
                None => (&after[..end], None),
            };
            let resolved = (self.env)(name)
                .filter(|value| default.is_none() || !value.is_empty())
                .or_else(|| default.map(str::to_owned))
                .ok_or_else(|| self.error(value, key.to_owned(), format!("environment variable {name} is not set")))?;
            out.push_str(&resolved);
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// Validates everything, reporting every provider's and route's first
    /// mistake at once rather than one per run.
    pub fn config(&self, raw: RawConfig) -> Result<Config, ConfigError> {
        let mut errors = Vec::new();
        let top = self.top(&raw).map_err(|err| errors.push(err)).ok();
        let limits = top.as_ref().map_or_else(UpstreamLimits::default, |top| top.limits);
        let (providers, provider_failed) = self.providers(&raw, &mut errors);
        let by_name: HashMap<&str, &Arc<Provider>> = providers.iter().map(|p| (p.name.as_str(), p)).collect();
        let mut routes: Vec<Arc<Route>> = Vec::new();
        for (i, raw_route) in raw.routes.iter().enumerate() {
            match self.route(raw_route.get_ref(), i, &by_name, limits) {
                Ok(route) => match self.name_clash(raw_route.get_ref(), i, &route, &routes) {
                    Some(clash) => errors.push(clash),
                    None => routes.push(Arc::new(route)),
                },
                // A target naming a provider that is itself wrong (or misnamed) says nothing new.
                Err(ConfigError::Invalid { message, .. })
                    if provider_failed && message.starts_with(NO_SUCH_PROVIDER) => {}
                Err(err) => errors.push(err),
            }
        }
        let telemetry = self.telemetry(raw.telemetry.as_ref()).map_err(|err| errors.push(err)).ok().flatten();
        let store = self.store(raw.store.as_ref()).map_err(|err| errors.push(err)).ok();
        let (alerts, drills) = (self.alerts(&raw.alerts, &mut errors), self.drills(&raw.drills, &routes, &mut errors));
        let mut key_budgets = Vec::new();
        let mut access = self.access(&raw, &routes, &mut key_budgets, &mut errors);
        if let (Some(top), Some(store)) = (&top, &store) {
            access.close_until_keyed(top.listen, store.backend != StoreBackend::None);
        }
        let key_names: Vec<&str> = access.keys.keys().iter().map(|key| key.name.as_str()).collect();
        let mut budgets = self.budgets(&raw, &key_names, &routes, &mut errors);
        budgets.budgets.extend(key_budgets);
        if let (Some(top), Some(listen)) = (&top, &raw.listen)
            && let Some(why) = access.open_relay(top.listen)
        {
            errors.push(self.error(listen, "listen".to_owned(), why));
        }
        if raw.routes.is_empty() && errors.is_empty() {
            errors.push(ConfigError::Invalid {
                path: self.label.to_owned(),
                line: 1,
                key: "routes".to_owned(),
                message: "the config has no [[routes]]: baton would have nothing to serve".to_owned(),
            });
        }
        match (top, store, errors.len()) {
            (Some(top), Some(store), 0) => {
                Ok(Config { telemetry, store, alerts, drills, ..top.into_config(access, providers, routes, budgets) })
            }
            (_, _, 1) => Err(errors.remove(0)),
            _ => Err(ConfigError::Many(errors)),
        }
    }

    /// Every valid provider, and whether any was not (then a route naming
    /// a provider that does not exist may only be its echo).
    fn providers(&self, raw: &RawConfig, errors: &mut Vec<ConfigError>) -> (Vec<Arc<Provider>>, bool) {
        let mut providers: Vec<Arc<Provider>> = Vec::new();
        let mut provider_failed = false;
        for (i, raw_provider) in raw.providers.iter().enumerate() {
            match self.provider(raw_provider.get_ref(), i) {
                Ok(provider) if providers.iter().any(|p| p.name == provider.name) => {
                    let name = &raw_provider.get_ref().name;
                    let message = format!("duplicate provider name {:?}", provider.name);
                    errors.push(self.error(name, format!("providers[{i}].name"), message));
                    provider_failed = true;
                }
                Ok(provider) => providers.push(Arc::new(provider)),
                Err(err) => {
                    errors.push(err);
                    provider_failed = true;
                }
            }
        }
        (providers, provider_failed)
    }

    /// The top-level keys.
    fn top(&self, raw: &RawConfig) -> Result<Top, ConfigError> {
        let listen = match &raw.listen {
            Some(value) => {
                let text = self.expand(value, "listen")?;
                resolve(&text).ok_or_else(|| {
                    let written = value.get_ref();
                    let message = format!("{written:?} is not an address like 127.0.0.1:8080 or localhost:8080");
                    self.error(value, "listen".into(), message)
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
        let max_body_bytes_in_flight = self.size(
            raw.max_body_bytes_in_flight.as_ref(),
            "max_body_bytes_in_flight",
            super::DEFAULT_MAX_BODY_BYTES_IN_FLIGHT,
        )?;
        let admin_token = match &raw.admin_token {
            Some(value) => {
                let token = self.expand(value, "admin_token")?;
                if token.len() < 16 {
                    return Err(self.error(value, "admin_token".into(), "must be at least 16 characters"));
                }
                Some(Secret::new(token))
            }
            None => None,
        };
        let shutdown_grace =
            raw.shutdown_grace_ms.as_ref().map_or(DEFAULT_SHUTDOWN_GRACE, |ms| Duration::from_millis(*ms.get_ref()));
        let max_connections = self.size(raw.max_connections.as_ref(), "max_connections", DEFAULT_MAX_CONNECTIONS)?;
        let body_read_timeout =
            self.millis(raw.body_read_timeout_ms.as_ref(), "body_read_timeout_ms", DEFAULT_BODY_READ_TIMEOUT)?;
        let client_stall_timeout =
            self.millis(raw.client_stall_timeout_ms.as_ref(), "client_stall_timeout_ms", DEFAULT_CLIENT_STALL_TIMEOUT)?;
        let defaults = UpstreamLimits::default();
        let limits = UpstreamLimits {
            max_event_bytes: self.size(raw.max_event_bytes.as_ref(), "max_event_bytes", defaults.max_event_bytes)?,
            max_answer_bytes: self.size(
                raw.max_answer_bytes.as_ref(),
                "max_answer_bytes",
                defaults.max_answer_bytes,
            )?,
            max_cooldown: self.millis(raw.max_cooldown_ms.as_ref(), "max_cooldown_ms", defaults.max_cooldown)?,
        };
        let state = self.state(raw.state.as_ref())?;
        Ok(Top {
            state,
            listen,
            max_body_bytes,
            max_body_bytes_in_flight,
            admin_token,
            shutdown_grace,
            max_connections,
            body_read_timeout,
            client_stall_timeout,
            limits,
        })
    }

    fn provider(&self, raw: &RawProvider, i: usize) -> Result<Provider, ConfigError> {
        let key = |field: &str| format!("providers[{i}].{field}");
        let name = raw.name.get_ref().trim().to_owned();
        if name.is_empty() {
            return Err(self.error(&raw.name, key("name"), "must not be empty"));
        }
        let kind = match raw.kind.get_ref().as_str() {
            "openai" => ProviderKind::OpenAi,
            "anthropic" => ProviderKind::Anthropic,
            "gemini" => ProviderKind::Gemini,
            other => {
                let message = format!("unknown kind {other:?}; expected openai, anthropic or gemini");
                return Err(self.error(&raw.kind, key("kind"), message));
            }
        };
        let kind = match (&raw.api, kind) {
            (None, kind) => kind,
            (Some(api), ProviderKind::OpenAi) => match api.get_ref().as_str() {
                "chat_completions" => ProviderKind::OpenAi,
                "responses" => ProviderKind::OpenAiResponses,
                other => {
                    let message = format!("unknown api {other:?}; expected chat_completions or responses");
                    return Err(self.error(api, key("api"), message));
                }
            },
            (Some(api), kind) => {
                let message = format!("a {kind} provider speaks one API; `api` is for an openai-kind provider");
                return Err(self.error(api, key("api"), message));
            }
        };
        let base_url = self.expand(&raw.base_url, &key("base_url"))?;
        match base_url.parse::<http::Uri>() {
            Ok(url) if matches!(url.scheme_str(), Some("http" | "https")) && url.host().is_some() => {}
            _ => {
                // The value as written: an expanded ${VAR} may hold a secret.
                let written = raw.base_url.get_ref();
                return Err(self.error(&raw.base_url, key("base_url"), format!("{written:?} is not an http(s) URL")));
            }
        }
        let api_key = match &raw.api_key {
            Some(value) => {
                let secret = self.expand(value, &key("api_key"))?;
                if http::HeaderValue::from_str(&secret).is_err() {
                    return Err(self.error(value, key("api_key"), "contains characters an HTTP header cannot carry"));
                }
                Some(Secret::new(secret))
            }
            None => None,
        };
        let breaker = match &raw.breaker {
            Some(breaker) => self.breaker(breaker.get_ref(), &key("breaker"))?,
            None => BreakerSettings::default(),
        };
        let per_minute = |value: &Option<Spanned<u64>>, field: &str| match value {
            Some(n) if *n.get_ref() == 0 => Err(self.error(n, key(field), "must be at least 1 per minute")),
            Some(n) => Ok(Some(*n.get_ref())),
            None => Ok(None),
        };
        let (rpm, tpm) = (per_minute(&raw.rpm, "rpm")?, per_minute(&raw.tpm, "tpm")?);
        let egress = self.egress(raw, i, &base_url)?;
        Ok(Provider { name, kind, base_url, api_key, breaker, rpm, tpm, egress })
    }

    fn breaker(&self, raw: &RawBreaker, key: &str) -> Result<BreakerSettings, ConfigError> {
        let defaults = BreakerSettings::default();
        let failure_threshold = match &raw.failure_threshold {
            Some(n) if *n.get_ref() == 0 => {
                return Err(self.error(n, format!("{key}.failure_threshold"), "must be at least 1"));
            }
            Some(n) => *n.get_ref(),
            None => defaults.failure_threshold,
        };
        let failure_rate = match &raw.failure_rate {
            Some(rate) if !(*rate.get_ref() > 0.0 && *rate.get_ref() <= 1.0) => {
                return Err(self.error(rate, format!("{key}.failure_rate"), "must be above 0 and at most 1"));
            }
            Some(rate) => *rate.get_ref(),
            None => defaults.failure_rate,
        };
        let window = match &raw.window {
            Some(n) if *n.get_ref() == 0 => return Err(self.error(n, format!("{key}.window"), "must be at least 1")),
            Some(n) => usize::try_from(*n.get_ref()).unwrap_or(usize::MAX),
            None => defaults.window,
        };
        let cooldown = self.millis(raw.cooldown_ms.as_ref(), &format!("{key}.cooldown_ms"), defaults.cooldown)?;
        Ok(BreakerSettings { failure_threshold, failure_rate, window, cooldown })
    }

    fn route(
        &self,
        raw: &RawRoute,
        i: usize,
        providers: &HashMap<&str, &Arc<Provider>>,
        limits: UpstreamLimits,
    ) -> Result<Route, ConfigError> {
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
        let request_timeout = match &raw.request_timeout_ms {
            Some(ms) => Some(self.millis(Some(ms), &key("request_timeout_ms"), Duration::ZERO)?),
            None => None,
        };
        let hedge = self.hedge(raw, &key("hedge_after_ms"))?;
        let commit = self.commit(raw, &key("commit_after_tokens"))?;
        let retry_backoff =
            self.millis(raw.retry_backoff_ms.as_ref(), &key("retry_backoff_ms"), DEFAULT_RETRY_BACKOFF)?;
        let max_retry_wait =
            raw.max_retry_wait_ms.as_ref().map_or(DEFAULT_MAX_RETRY_WAIT, |ms| Duration::from_millis(*ms.get_ref()));
        let retry_budget = self.retry_budget(raw, &key("retry_budget"))?;
        let on_midstream_failure = self.midstream(raw, &key("on_midstream_failure"))?;
        let surface = self.surface(raw, &key("unsupported_params"))?;
        let max_resumes = raw.max_resumes.as_ref().map_or(1, |n| *n.get_ref());
        if raw.targets.get_ref().is_empty() {
            return Err(self.error(&raw.targets, key("targets"), "a route needs at least one target"));
        }
        let targets = self.targets(raw, &key("targets"), providers, first_token_timeout)?;
        let (aliases, strategy) = (self.aliases(raw, &model, &key("aliases"))?, self.strategy(raw, &key("strategy"))?);
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

    fn hedge(&self, raw: &RawRoute, key: &str) -> Result<Option<Hedge>, ConfigError> {
        let Some(value) = &raw.hedge_after_ms else { return Ok(None) };
        match value.get_ref() {
            RawHedge::Millis(ms) => Ok(Some(Hedge::After(Duration::from_millis(*ms)))),
            RawHedge::Word(word) if word == "auto" => Ok(Some(Hedge::Auto)),
            RawHedge::Word(word) => {
                Err(self.error(value, key.to_owned(), format!("{word:?} is neither milliseconds nor \"auto\"")))
            }
        }
    }

    fn commit(&self, raw: &RawRoute, key: &str) -> Result<CommitWindow, ConfigError> {
        let tokens = match &raw.commit_after_tokens {
            Some(n) if *n.get_ref() == 0 => {
                let message = "must be at least 1: the first token commits at the earliest";
                return Err(self.error(n, key.to_owned(), message));
            }
            Some(n) => *n.get_ref(),
            None => 1,
        };
        let after = raw.commit_after_ms.as_ref().map_or(Duration::ZERO, |ms| Duration::from_millis(*ms.get_ref()));
        Ok(CommitWindow { tokens, after })
    }

    fn midstream(&self, raw: &RawRoute, key: &str) -> Result<MidstreamPolicy, ConfigError> {
        let Some(value) = &raw.on_midstream_failure else { return Ok(MidstreamPolicy::Error) };
        match value.get_ref().as_str() {
            "error" => Ok(MidstreamPolicy::Error),
            "resume" => Ok(MidstreamPolicy::Resume),
            other => Err(self.error(value, key.to_owned(), format!("{other:?} is neither \"error\" nor \"resume\""))),
        }
    }

    fn surface(&self, raw: &RawRoute, key: &str) -> Result<Surface, ConfigError> {
        let defaults = Surface::default();
        let drop_unsupported = match &raw.unsupported_params {
            None => false,
            Some(value) => match value.get_ref().as_str() {
                "refuse" => false,
                "drop" => true,
                other => {
                    return Err(self.error(
                        value,
                        key.to_owned(),
                        format!("{other:?} is neither \"refuse\" nor \"drop\""),
                    ));
                }
            },
        };
        Ok(Surface {
            drop_unsupported,
            validate_json: raw.validate_json.unwrap_or(defaults.validate_json),
            reasoning_keeps_alive: raw.reasoning_keeps_alive.unwrap_or(defaults.reasoning_keeps_alive),
            stream_reasoning: raw.stream_reasoning.unwrap_or(defaults.stream_reasoning),
        })
    }

    fn targets(
        &self,
        raw: &RawRoute,
        key: &str,
        providers: &HashMap<&str, &Arc<Provider>>,
        first_token_timeout: Duration,
    ) -> Result<Vec<Target>, ConfigError> {
        let mut targets = Vec::new();
        for (j, target) in raw.targets.get_ref().iter().enumerate() {
            let target = target.get_ref();
            let name = target.provider.get_ref();
            let target_key = |field: &str| format!("{key}[{j}].{field}");
            let provider = providers.get(name.as_str()).ok_or_else(|| {
                self.error(&target.provider, target_key("provider"), format!("{NO_SUCH_PROVIDER} {name:?}"))
            })?;
            let deadline = target.first_token_timeout_ms.as_ref();
            let price = match &target.price {
                Some(price) => Some(self.price(price, &format!("{key}[{j}].price"))?),
                None => None,
            };
            targets.push(Target {
                provider: Arc::clone(provider),
                model: target.model.get_ref().clone(),
                context_window: target.context_window.as_ref().map(|w| *w.get_ref()),
                first_token_timeout: self.millis(
                    deadline,
                    &target_key("first_token_timeout_ms"),
                    first_token_timeout,
                )?,
                retries: target.retries.as_ref().map_or(0, |n| *n.get_ref()),
                prefill: target.prefill.unwrap_or(false),
                weight: self.weight(target.weight.as_ref(), &target_key("weight"))?,
                price,
            });
        }
        Ok(targets)
    }

    fn size(&self, value: Option<&Spanned<u64>>, key: &str, default: usize) -> Result<usize, ConfigError> {
        match value {
            Some(n) => usize::try_from(*n.get_ref())
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| self.error(n, key.to_owned(), "must be a positive whole number")),
            None => Ok(default),
        }
    }

    fn millis(&self, value: Option<&Spanned<u64>>, key: &str, default: Duration) -> Result<Duration, ConfigError> {
        match value {
            Some(ms) if *ms.get_ref() == 0 => Err(self.error(ms, key.to_owned(), "must be at least 1 ms")),
            Some(ms) => Ok(Duration::from_millis(*ms.get_ref())),
            None => Ok(default),
        }
    }
}
