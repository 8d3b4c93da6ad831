//! The config file exactly as written: serde types that reject unknown keys
//! and keep each value's position, so validation can name the line. Each
//! section's own shape and checks live in its file; this one holds the
//! top-level keys, composes the sections, and checks the whole.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::budget::{self, RawBudget, RawBudgets};
use super::check::Checker;
use super::error::ConfigError;
use super::keys::{self, RawAccess, RawKey};
use super::ops::{self, RawAlert, RawDrill};
use super::provider::{self, Provider, RawProvider};
use super::route::{self, RawRoute, Route, UpstreamLimits};
use super::state::{self, RawState};
use super::store::{self, RawStore, StoreBackend};
use super::target::NO_SUCH_PROVIDER;
use super::telemetry::{self, RawTelemetry};
use super::top::{
    Config, DEFAULT_BODY_READ_TIMEOUT, DEFAULT_CLIENT_STALL_TIMEOUT, DEFAULT_LISTEN, DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_BODY_BYTES_IN_FLIGHT, DEFAULT_MAX_CONNECTIONS, DEFAULT_SHUTDOWN_GRACE, Top, resolve,
};
use crate::secret::Secret;

/// The whole file as written: the top-level keys and every section.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub listen: Option<Spanned<String>>,
    pub max_body_bytes: Option<Spanned<u64>>,
    pub max_body_bytes_in_flight: Option<Spanned<u64>>,
    pub admin_token: Option<Spanned<String>>,
    pub shutdown_grace_ms: Option<Spanned<u64>>,
    pub max_connections: Option<Spanned<u64>>,
    pub body_read_timeout_ms: Option<Spanned<u64>>,
    pub client_stall_timeout_ms: Option<Spanned<u64>>,
    pub max_event_bytes: Option<Spanned<u64>>,
    pub max_answer_bytes: Option<Spanned<u64>>,
    pub max_cooldown_ms: Option<Spanned<u64>>,
    pub allow_unauthenticated: Option<Spanned<bool>>,
    pub allowed_hosts: Option<Spanned<Vec<String>>>,
    pub cors_origins: Option<Spanned<Vec<String>>>,
    pub max_usd_per_request: Option<Spanned<f64>>,
    pub state: Option<Spanned<RawState>>,
    pub telemetry: Option<Spanned<RawTelemetry>>,
    pub store: Option<Spanned<RawStore>>,
    #[serde(default)]
    pub keys: Vec<Spanned<RawKey>>,
    #[serde(default)]
    pub budgets: Vec<Spanned<RawBudget>>,
    #[serde(default)]
    pub providers: Vec<Spanned<RawProvider>>,
    #[serde(default)]
    pub routes: Vec<Spanned<RawRoute>>,
    #[serde(default)]
    pub alerts: Vec<Spanned<RawAlert>>,
    #[serde(default)]
    pub drills: Vec<Spanned<RawDrill>>,
}

impl RawConfig {
    /// The keys the access section reads.
    fn access(&self) -> RawAccess<'_> {
        RawAccess {
            keys: &self.keys,
            allow_unauthenticated: &self.allow_unauthenticated,
            allowed_hosts: &self.allowed_hosts,
            cors_origins: &self.cors_origins,
        }
    }

    /// The keys the budget section reads.
    fn budgets(&self) -> RawBudgets<'_> {
        RawBudgets { max_usd_per_request: &self.max_usd_per_request, budgets: &self.budgets }
    }
}

/// Validates everything, reporting every provider's and route's first
/// mistake at once rather than one per run.
pub(super) fn check(check: &Checker<'_>, raw: RawConfig) -> Result<Config, ConfigError> {
    let mut errors = Vec::new();
    let top = top(check, &raw).map_err(|err| errors.push(err)).ok();
    let limits = top.as_ref().map_or_else(UpstreamLimits::default, |top| top.limits);
    let (providers, provider_failed) = providers(check, &raw, &mut errors);
    let by_name: HashMap<&str, &Arc<Provider>> = providers.iter().map(|p| (p.name.as_str(), p)).collect();
    let mut routes: Vec<Arc<Route>> = Vec::new();
    for (i, raw_route) in raw.routes.iter().enumerate() {
        match route::check(check, raw_route.get_ref(), i, &by_name, limits) {
            Ok(route) => match route::name_clash(check, raw_route.get_ref(), i, &route, &routes) {
                Some(clash) => errors.push(clash),
                None => routes.push(Arc::new(route)),
            },
            // A target naming a provider that is itself wrong (or misnamed) says nothing new.
            Err(ConfigError::Invalid { message, .. }) if provider_failed && message.starts_with(NO_SUCH_PROVIDER) => {}
            Err(err) => errors.push(err),
        }
    }
    let telemetry = telemetry::check(check, raw.telemetry.as_ref()).map_err(|err| errors.push(err)).ok().flatten();
    let store = store::check(check, raw.store.as_ref()).map_err(|err| errors.push(err)).ok();
    let (alerts, drills) =
        (ops::alerts(check, &raw.alerts, &mut errors), ops::drills(check, &raw.drills, &routes, &mut errors));
    let mut key_budgets = Vec::new();
    let mut access = keys::check(check, raw.access(), &routes, &mut key_budgets, &mut errors);
    if let (Some(top), Some(store)) = (&top, &store) {
        access.close_until_keyed(top.listen, store.backend != StoreBackend::None);
    }
    let key_names: Vec<&str> = access.keys.keys().iter().map(|key| key.name.as_str()).collect();
    let mut budgets = budget::check(check, raw.budgets(), &key_names, &routes, &mut errors);
    budgets.budgets.extend(key_budgets);
    if let (Some(top), Some(listen)) = (&top, &raw.listen)
        && let Some(why) = access.open_relay(top.listen)
    {
        errors.push(check.error(listen, "listen".to_owned(), why));
    }
    if raw.routes.is_empty() && errors.is_empty() {
        errors.push(ConfigError::Invalid {
            path: check.label.to_owned(),
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
fn providers(check: &Checker<'_>, raw: &RawConfig, errors: &mut Vec<ConfigError>) -> (Vec<Arc<Provider>>, bool) {
    let mut providers: Vec<Arc<Provider>> = Vec::new();
    let mut provider_failed = false;
    for (i, raw_provider) in raw.providers.iter().enumerate() {
        match provider::check(check, raw_provider.get_ref(), i) {
            Ok(provider) if providers.iter().any(|p| p.name == provider.name) => {
                let name = &raw_provider.get_ref().name;
                let message = format!("duplicate provider name {:?}", provider.name);
                errors.push(check.error(name, format!("providers[{i}].name"), message));
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
fn top(check: &Checker<'_>, raw: &RawConfig) -> Result<Top, ConfigError> {
    let listen = match &raw.listen {
        Some(value) => {
            let text = check.expand(value, "listen")?;
            resolve(&text).ok_or_else(|| {
                let written = value.get_ref();
                let message = format!("{written:?} is not an address like 127.0.0.1:8080 or localhost:8080");
                check.error(value, "listen".into(), message)
            })?
        }
        None => DEFAULT_LISTEN,
    };
    let max_body_bytes = match &raw.max_body_bytes {
        Some(value) => usize::try_from(*value.get_ref())
            .ok()
            .filter(|bytes| *bytes > 0)
            .ok_or_else(|| check.error(value, "max_body_bytes".into(), "must be a positive size in bytes"))?,
        None => DEFAULT_MAX_BODY_BYTES,
    };
    let max_body_bytes_in_flight = check.size(
        raw.max_body_bytes_in_flight.as_ref(),
        "max_body_bytes_in_flight",
        DEFAULT_MAX_BODY_BYTES_IN_FLIGHT,
    )?;
    let admin_token = match &raw.admin_token {
        Some(value) => match check.secret(value, "admin_token")? {
            Some(token) if token.len() < 16 => {
                return Err(check.error(value, "admin_token".into(), "must be at least 16 characters"));
            }
            token => token.map(Secret::new),
        },
        None => None,
    };
    let shutdown_grace =
        raw.shutdown_grace_ms.as_ref().map_or(DEFAULT_SHUTDOWN_GRACE, |ms| Duration::from_millis(*ms.get_ref()));
    let max_connections = check.size(raw.max_connections.as_ref(), "max_connections", DEFAULT_MAX_CONNECTIONS)?;
    let body_read_timeout =
        check.millis(raw.body_read_timeout_ms.as_ref(), "body_read_timeout_ms", DEFAULT_BODY_READ_TIMEOUT)?;
    let client_stall_timeout =
        check.millis(raw.client_stall_timeout_ms.as_ref(), "client_stall_timeout_ms", DEFAULT_CLIENT_STALL_TIMEOUT)?;
    let defaults = UpstreamLimits::default();
    let limits = UpstreamLimits {
        max_event_bytes: check.size(raw.max_event_bytes.as_ref(), "max_event_bytes", defaults.max_event_bytes)?,
        max_answer_bytes: check.size(raw.max_answer_bytes.as_ref(), "max_answer_bytes", defaults.max_answer_bytes)?,
        max_cooldown: check.millis(raw.max_cooldown_ms.as_ref(), "max_cooldown_ms", defaults.max_cooldown)?,
    };
    let state = state::check(check, raw.state.as_ref())?;
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
