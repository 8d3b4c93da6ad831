//! `[state]`: where the state several replicas must share lives — in the
//! process (the default), or in one Redis that every replica reaches.

use std::time::Duration;

use toml::Spanned;

use serde::Deserialize;

use super::check::Checker;
use super::error::ConfigError;
use crate::secret::Secret;

/// The Redis a `backend = "redis"` reaches when `redis_url` is not given.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";
/// What every key baton writes in Redis starts with when `key_prefix` is not given.
pub const DEFAULT_KEY_PREFIX: &str = "baton:";
/// How long one Redis call may take before the replica uses its local
/// state instead: a loopback or same-zone round trip is well under 1 ms,
/// so 50 ms only passes when Redis is down or overloaded.
pub const DEFAULT_STATE_TIMEOUT: Duration = Duration::from_millis(50);
/// The longest `timeout_ms` accepted: every request may wait this long once
/// when Redis goes away, so more would make Redis part of the latency.
const MAX_STATE_TIMEOUT_MS: u64 = 1000;

/// The `[state]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawState {
    pub backend: Option<Spanned<String>>,
    pub redis_url: Option<Spanned<String>>,
    pub key_prefix: Option<Spanned<String>>,
    pub timeout_ms: Option<Spanned<u64>>,
}

/// Where shared state lives.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum StateBackend {
    /// In this process only: each replica keeps its own.
    #[default]
    Memory,
    /// In one Redis shared by every replica.
    Redis {
        /// Its URL; a secret, since it may carry a password.
        url: Secret,
    },
}

/// The `[state]` section, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateConfig {
    /// Memory or Redis.
    pub backend: StateBackend,
    /// What every Redis key starts with, so deployments can share one Redis.
    pub key_prefix: String,
    /// The bound on one Redis call; past it the local state answers.
    pub timeout: Duration,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig {
            backend: StateBackend::Memory,
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            timeout: DEFAULT_STATE_TIMEOUT,
        }
    }
}

impl StateConfig {
    /// The backend's name, for `/admin/status` and logs.
    pub fn backend_name(&self) -> &'static str {
        match self.backend {
            StateBackend::Memory => "memory",
            StateBackend::Redis { .. } => "redis",
        }
    }
}

/// Validates `[state]`; its absence is the memory backend.
pub(super) fn check(check: &Checker<'_>, raw: Option<&Spanned<RawState>>) -> Result<StateConfig, ConfigError> {
    let Some(raw) = raw.map(Spanned::get_ref) else { return Ok(StateConfig::default()) };
    let key_prefix = match &raw.key_prefix {
        Some(prefix) if prefix.get_ref().is_empty() || prefix.get_ref().contains(char::is_whitespace) => {
            return Err(check.error(prefix, "state.key_prefix".into(), "must be a non-empty word without spaces"));
        }
        Some(prefix) => prefix.get_ref().clone(),
        None => DEFAULT_KEY_PREFIX.to_owned(),
    };
    let timeout = match &raw.timeout_ms {
        Some(ms) if !(1..=MAX_STATE_TIMEOUT_MS).contains(ms.get_ref()) => {
            let message = format!("must be from 1 to {MAX_STATE_TIMEOUT_MS} ms: Redis is never worth a longer wait");
            return Err(check.error(ms, "state.timeout_ms".into(), message));
        }
        Some(ms) => Duration::from_millis(*ms.get_ref()),
        None => DEFAULT_STATE_TIMEOUT,
    };
    let url = match &raw.redis_url {
        Some(url) => Some((check.expand(url, "state.redis_url")?, url)),
        None => None,
    };
    let backend = match raw.backend.as_ref().map(|backend| (backend.get_ref().as_str(), backend)) {
        None | Some(("memory", _)) => StateBackend::Memory,
        Some(("redis", _)) => {
            let url = match url {
                Some((url, written)) => {
                    check_url(&url).map_err(|why| check.error(written, "state.redis_url".into(), why))?;
                    url
                }
                None => DEFAULT_REDIS_URL.to_owned(),
            };
            StateBackend::Redis { url: Secret::new(url) }
        }
        Some((other, at)) => {
            let message = format!("unknown backend {other:?}; expected memory or redis");
            return Err(check.error(at, "state.backend".into(), message));
        }
    };
    Ok(StateConfig { backend, key_prefix, timeout })
}

/// Why `url` is not a Redis URL baton can reach, if it is not.
fn check_url(url: &str) -> Result<(), String> {
    if url.starts_with("rediss://") {
        return Err("TLS to Redis (rediss://) is not built into baton; use redis:// over a private network".into());
    }
    let rest = url.strip_prefix("redis://").ok_or("must start with redis://, as redis://127.0.0.1:6379")?;
    let host = rest.rsplit('@').next().unwrap_or_default().split(['/', ':']).next().unwrap_or_default();
    if host.is_empty() {
        return Err("names no host, as redis://127.0.0.1:6379".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::ONE_ROUTE as ROUTE;

    fn parse(state: &str) -> Result<StateConfig, String> {
        let env = |name: &str| (name == "REDIS_URL").then(|| "redis://10.0.0.7:6380/2".to_owned());
        let text = format!("{state}\n{ROUTE}");
        crate::config::parse(&text, "baton.toml", &env).map(|config| config.state).map_err(|err| err.to_string())
    }

    #[test]
    fn no_state_section_is_the_memory_backend() {
        assert_eq!(parse(""), Ok(StateConfig::default()));
        assert_eq!(StateConfig::default().backend_name(), "memory");
    }

    #[test]
    fn a_redis_backend_takes_its_url_prefix_and_timeout() {
        let state = parse(
            "[state]\nbackend = \"redis\"\nredis_url = \"${REDIS_URL}\"\nkey_prefix = \"prod:\"\ntimeout_ms = 20",
        )
        .expect("valid");
        assert_eq!(state.backend, StateBackend::Redis { url: Secret::new("redis://10.0.0.7:6380/2") });
        assert_eq!((state.key_prefix.as_str(), state.timeout), ("prod:", Duration::from_millis(20)));
        let defaults = parse("[state]\nbackend = \"redis\"").expect("valid");
        assert_eq!(defaults.backend, StateBackend::Redis { url: Secret::new(DEFAULT_REDIS_URL) });
        assert_eq!((defaults.key_prefix.as_str(), defaults.timeout), (DEFAULT_KEY_PREFIX, DEFAULT_STATE_TIMEOUT));
    }

    #[test]
    fn mistakes_name_their_key_and_line() {
        for (state, starts) in [
            ("[state]\nbackend = \"etcd\"", "baton.toml:2: state.backend: unknown backend \"etcd\""),
            (
                "[state]\nbackend = \"redis\"\nredis_url = \"http://x\"",
                "baton.toml:3: state.redis_url: must start with redis://",
            ),
            ("[state]\nbackend = \"redis\"\nredis_url = \"rediss://x:6379\"", "baton.toml:3: state.redis_url: TLS"),
            ("[state]\nbackend = \"redis\"\nredis_url = \"redis://\"", "baton.toml:3: state.redis_url: names no host"),
            ("[state]\ntimeout_ms = 0", "baton.toml:2: state.timeout_ms: must be from 1 to 1000 ms"),
            ("[state]\ntimeout_ms = 5000", "baton.toml:2: state.timeout_ms: must be from 1 to 1000 ms"),
            ("[state]\nkey_prefix = \"\"", "baton.toml:2: state.key_prefix: must be a non-empty word"),
            ("[state]\nredis = \"x\"", "baton.toml:2: redis: unknown field `redis`, expected one of `backend`"),
        ] {
            let err = parse(state).expect_err(state);
            assert!(err.starts_with(starts), "{state:?} gave {err:?}, expected {starts:?}");
        }
    }
}
