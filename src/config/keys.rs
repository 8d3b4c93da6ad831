//! The access part of a config: client keys (a secret from the
//! environment, or only its SHA-256), the routes each may use, and the rule
//! that keeps baton from being an open relay.

use std::net::SocketAddr;
use std::sync::Arc;

use serde::Deserialize;
use toml::Spanned;

use super::budget::{self, Budget, RawKeyBudget};
use super::check::Checker;
use super::error::ConfigError;
use super::route::Route;
use crate::access::{ClientKey, ClientKeys, DRILL_KEY, parse_sha256};

/// One `[[keys]]` entry as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawKey {
    pub name: Spanned<String>,
    pub key: Option<Spanned<String>>,
    pub key_sha256: Option<Spanned<String>>,
    pub routes: Option<Spanned<Vec<String>>>,
    pub rpm: Option<Spanned<u64>>,
    pub tpm: Option<Spanned<u64>>,
    pub budget: Option<Spanned<RawKeyBudget>>,
}

/// The access keys at the config's top level, as written.
pub(super) struct RawAccess<'a> {
    /// `[[keys]]`.
    pub keys: &'a [Spanned<RawKey>],
    /// `allow_unauthenticated`.
    pub allow_unauthenticated: &'a Option<Spanned<bool>>,
    /// `allowed_hosts`.
    pub allowed_hosts: &'a Option<Spanned<Vec<String>>>,
    /// `cors_origins`.
    pub cors_origins: &'a Option<Spanned<Vec<String>>>,
}

/// Who may call, and from where.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// With any, every `/v1` request needs one of them.
    pub keys: ClientKeys,
    /// Serve a non-loopback address without keys (anyone who reaches it
    /// spends the providers' keys).
    pub allow_unauthenticated: bool,
    /// When not empty, the only `Host` names served (against DNS rebinding).
    pub allowed_hosts: Vec<String>,
    /// The web origins whose pages may call baton (`*` for any); empty
    /// sends no CORS headers at all.
    pub cors_origins: Vec<String>,
}

impl Access {
    /// Why serving `listen` with these settings would make baton an open
    /// relay, if it would: a non-loopback address with no keys, unless that
    /// is asked for.
    pub fn open_relay(&self, listen: SocketAddr) -> Option<String> {
        let open = !listen.ip().is_loopback() && !self.keys.required() && !self.allow_unauthenticated;
        open.then(|| {
            format!(
                "{listen} is not a loopback address and no [[keys]] are configured: anyone who reaches it would spend the providers' keys; add [[keys]], or set allow_unauthenticated = true"
            )
        })
    }

    /// On a non-loopback `listen`, with a store that can hold keys
    /// (`store_keeps_keys`) and no `allow_unauthenticated`, a key is
    /// required even before any exists: the gateway starts closed, and
    /// opens to each key `baton keys create` makes.
    pub fn close_until_keyed(&mut self, listen: SocketAddr, store_keeps_keys: bool) {
        if store_keeps_keys && !listen.ip().is_loopback() && !self.allow_unauthenticated {
            self.keys = std::mem::take(&mut self.keys).closed();
        }
    }
}

/// `[[keys]]`, `allow_unauthenticated`, `allowed_hosts` and
/// `cors_origins`; every mistake is pushed to `errors`. Routes named by
/// a key must exist.
pub(super) fn check(
    check: &Checker<'_>,
    raw: RawAccess<'_>,
    routes: &[Arc<Route>],
    budgets: &mut Vec<Budget>,
    errors: &mut Vec<ConfigError>,
) -> Access {
    let mut keys: Vec<ClientKey> = Vec::new();
    for (i, raw_key) in raw.keys.iter().enumerate() {
        match key(check, raw_key.get_ref(), i, routes, budgets) {
            Ok(key) if keys.iter().any(|k| k.name == key.name) => {
                let message = format!("duplicate key name {:?}", key.name);
                errors.push(check.error(&raw_key.get_ref().name, format!("keys[{i}].name"), message));
            }
            Ok(key) if keys.iter().any(|k| k.sha256 == key.sha256) => {
                let message = format!("key {:?} has the same secret as another key", key.name);
                errors.push(check.error(&raw_key.get_ref().name, format!("keys[{i}]"), message));
            }
            Ok(key) => keys.push(key),
            Err(err) => errors.push(err),
        }
    }
    let allowed_hosts =
        raw.allowed_hosts.as_ref().map(|hosts| hosts.get_ref().iter().map(|h| h.to_ascii_lowercase()).collect());
    let mut cors_origins = Vec::new();
    if let Some(origins) = &raw.cors_origins {
        for (i, origin) in origins.get_ref().iter().enumerate() {
            match cors_origin(origin) {
                Some(origin) => cors_origins.push(origin),
                None => errors.push(check.error(
                    origins,
                    format!("cors_origins[{i}]"),
                    format!("{origin:?} is neither \"*\" nor an origin such as \"https://app.example\" (a scheme and a host, an optional port, no path)"),
                )),
            }
        }
    }
    Access {
        keys: ClientKeys::new(keys),
        allow_unauthenticated: raw.allow_unauthenticated.as_ref().is_some_and(|allow| *allow.get_ref()),
        allowed_hosts: allowed_hosts.unwrap_or_default(),
        cors_origins,
    }
}

/// Key `i`: a name, exactly one of `key` and `key_sha256`, the routes it
/// may use, its limits; its `budget` goes to `budgets`.
fn key(
    check: &Checker<'_>,
    raw: &RawKey,
    i: usize,
    routes: &[Arc<Route>],
    budgets: &mut Vec<Budget>,
) -> Result<ClientKey, ConfigError> {
    let at = |field: &str| format!("keys[{i}].{field}");
    let name = raw.name.get_ref().trim().to_owned();
    if name.is_empty() {
        return Err(check.error(&raw.name, at("name"), "must not be empty"));
    }
    if name == DRILL_KEY {
        return Err(check.error(&raw.name, at("name"), "\"drill\" is reserved: scheduled drills are charged to it"));
    }
    let sha256 = match (&raw.key, &raw.key_sha256) {
        (Some(key), None) => match check.secret(key, &at("key"))? {
            Some(secret) if secret.len() < 16 => {
                return Err(check.error(key, at("key"), "must be at least 16 characters"));
            }
            Some(secret) => ClientKey::hash(&secret),
            // Only the store is touched (`baton keys`): the name is what counts.
            None => [0; 32],
        },
        (None, Some(hex)) => parse_sha256(hex.get_ref()).ok_or_else(|| {
            check.error(hex, at("key_sha256"), "must be 64 hexadecimal digits (the SHA-256 of the key)")
        })?,
        _ => {
            return Err(check.error(&raw.name, format!("keys[{i}]"), "needs exactly one of `key` and `key_sha256`"));
        }
    };
    let routes = match &raw.routes {
        Some(names) => Some(key_routes(check, names, &at("routes"), routes)?),
        None => None,
    };
    let per_minute = |value: &Option<Spanned<u64>>, field: &str| match value {
        Some(n) if *n.get_ref() == 0 => Err(check.error(n, at(field), "must be at least 1 per minute")),
        Some(n) => Ok(Some(*n.get_ref())),
        None => Ok(None),
    };
    let (rpm, tpm) = (per_minute(&raw.rpm, "rpm")?, per_minute(&raw.tpm, "tpm")?);
    if let Some(budget) = &raw.budget {
        budgets.extend(budget::key_budget(check, budget, &name, &at("budget"))?);
    }
    Ok(ClientKey { name, sha256, routes, rpm, tpm })
}

/// The routes a key names, by name or alias, as route names: a key
/// allowed an alias may use its route under any of its names.
fn key_routes(
    check: &Checker<'_>,
    names: &Spanned<Vec<String>>,
    key: &str,
    routes: &[Arc<Route>],
) -> Result<Vec<String>, ConfigError> {
    let mut allowed: Vec<String> = Vec::new();
    for name in names.get_ref() {
        let Some(route) = routes.iter().find(|route| route.answers_to(name)) else {
            return Err(check.error(names, key.to_owned(), format!("no route is named {name:?}")));
        };
        if !allowed.contains(&route.model) {
            allowed.push(route.model.clone());
        }
    }
    Ok(allowed)
}

/// `origin` as browsers send it in `Origin` (`scheme://host[:port]`,
/// lower case), or `*`; `None` when it is neither.
fn cors_origin(origin: &str) -> Option<String> {
    let origin = origin.trim();
    if origin == "*" {
        return Some(origin.to_owned());
    }
    let (scheme, rest) = origin.split_once("://")?;
    let host_ok = !rest.is_empty()
        && rest.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'));
    (matches!(scheme, "http" | "https") && host_ok).then(|| origin.to_ascii_lowercase())
}
