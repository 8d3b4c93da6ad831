//! Admin endpoints and request features, behind the config's `admin_token`
//! when one is set: the status API, reload, and drills. Drills are refused
//! without the token, never silently ignored.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use serde_json::{Value, json};

use super::AppState;
use crate::admission::{RequestGate, SpendView};
use crate::config::{BudgetAction, BudgetScope, Config, Drills};
use crate::dialect::ApiError;
use crate::resilience::{BreakerState, ProviderHealth, Tally};

/// The header that carries drills: `provider=fault_class, …`.
pub const DRILL_HEADER: &str = "x-baton-drill";
/// The header that carries the admin credential.
pub const ADMIN_TOKEN_HEADER: &str = "x-baton-admin-token";

/// The drills a request asks for, refused unless it carries the admin token.
pub fn drills(headers: &HeaderMap, config: &Config) -> Result<Drills, ApiError> {
    let Some(spec) = headers.get(DRILL_HEADER) else { return Ok(Drills::default()) };
    authorize(headers, config, "drills", true)?;
    let spec = spec.to_str().map_err(|_| ApiError::bad_request(format!("{DRILL_HEADER} is not text")))?;
    Drills::parse(spec).map_err(|err| ApiError::bad_request(format!("{DRILL_HEADER}: {err}")))
}

/// Checks the admin credential for `what`. Without a configured token, an
/// action that `needs_token` is refused, and any other is open on a
/// loopback address and disabled on any other.
pub(super) fn authorize(headers: &HeaderMap, config: &Config, what: &str, needs_token: bool) -> Result<(), ApiError> {
    let Some(expected) = &config.admin_token else {
        // Open without a token only where nobody else can reach it.
        return if needs_token || !config.listen.ip().is_loopback() {
            Err(ApiError::forbidden(format!("{what} are disabled: no admin_token is configured")))
        } else {
            Ok(())
        };
    };
    let given = headers.get(ADMIN_TOKEN_HEADER).map(|value| value.as_bytes()).unwrap_or_default();
    if constant_time_eq(given, expected.expose().as_bytes()) {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!("{what} need a valid {ADMIN_TOKEN_HEADER}")))
    }
}

/// Compares without an early exit, so response timing does not reveal how
/// much of a guessed token was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// `GET /admin/status`: each provider's breaker, recent attempts, time to
/// first token, streams in flight, last failure and spend; each route's
/// requests, failovers and spend; each key's limits in use and spend; each
/// budget's spend against its limit.
pub(super) async fn status(State(state): State<AppState>, headers: HeaderMap) -> Result<Json<Value>, ApiError> {
    let config = state.config();
    authorize(&headers, &config, "status", false)?;
    let health = state.engine().health();
    let providers: Vec<Value> = config
        .providers
        .iter()
        .map(|provider| {
            let mut status = provider_status(&provider.name, provider.kind.name(), &health.provider(&provider.name));
            status["spend_usd"] = json!(state.gate().provider_spend(&provider.name));
            status
        })
        .collect();
    let (last_1m, last_15m) = (state.routes().last(1), state.routes().last(15));
    let routes: Vec<Value> = config
        .routes
        .iter()
        .map(|route| {
            let targets: Vec<&str> = route.targets.iter().map(|t| t.provider.name.as_str()).collect();
            let counts = |window: &std::collections::BTreeMap<String, Tally>| {
                let tally = window.get(&route.model).copied().unwrap_or_default();
                json!({ "requests": tally.total, "answered": tally.ok, "failovers": tally.failed })
            };
            let spend = spend_json(state.gate().spend(&BudgetScope::Route(route.model.clone())));
            json!({
                "name": route.model,
                "aliases": route.aliases,
                "strategy": route.strategy.as_str(),
                "targets": targets,
                "last_1m": counts(&last_1m),
                "last_15m": counts(&last_15m),
                "spend": spend,
            })
        })
        .collect();
    let keys = keys_status(&config, state.gate());
    let budgets = budgets_status(&config, state.gate());
    let global = spend_json(state.gate().spend(&BudgetScope::Global));
    let shared = json!({
        "backend": config.state.backend_name(),
        "reachable": state.store().is_none_or(|store| store.is_up()),
    });
    let store = json!({
        "backend": config.store.backend_name(),
        "up": state.records().map(crate::store::Records::is_up),
    });
    Ok(Json(json!({
        "state": shared,
        "store": store,
        "providers": providers,
        "routes": routes,
        "keys": keys,
        "budgets": budgets,
        "spend": global,
        "drills": state.ops().drills_status(),
    })))
}

/// Keys by name, the routes each may use, its limits with what is left of
/// them now, and its spend: never a secret or a hash.
fn keys_status(config: &Config, gate: &RequestGate) -> Vec<Value> {
    let keys = config.access.keys.keys().iter();
    keys.map(|key| {
        let used = gate.key_use(key);
        let limit = |limit: Option<u64>, available: Option<u64>| {
            limit.map(|limit| json!({ "per_minute": limit, "available": available }))
        };
        json!({
            "name": key.name,
            "routes": key.routes,
            "rpm": limit(key.rpm, used.requests_available),
            "tpm": limit(key.tpm, used.tokens_available),
            "spend": spend_json(used.spend),
        })
    })
    .collect()
}

/// Each budget and per-request cap, with what its scope spent over its window.
fn budgets_status(config: &Config, gate: &RequestGate) -> Vec<Value> {
    let budgets = config.budgets.budgets.iter().map(|budget| {
        let (spent, cluster) = gate.budget_spend(budget);
        let downgrade_to = match &budget.action {
            BudgetAction::Downgrade(to) => Some(to.as_str()),
            _ => None,
        };
        json!({
            "scope": budget.scope.to_string(),
            "window": budget.window.label(),
            "usd": budget.usd,
            "spent_usd": spent,
            "spent_by": if cluster { "cluster" } else { "replica" },
            "action": budget.action.label(),
            "downgrade_to": downgrade_to,
        })
    });
    let caps =
        config.budgets.caps.iter().map(|cap| json!({ "scope": cap.scope.to_string(), "max_usd_per_request": cap.usd }));
    budgets.chain(caps).collect()
}

fn spend_json(spend: SpendView) -> Value {
    let [last_1m, last_1h, last_1d] = spend.windows;
    json!({ "total_usd": spend.total_usd, "last_1m": last_1m, "last_1h": last_1h, "last_1d": last_1d })
}

fn provider_status(name: &str, kind: &str, health: &ProviderHealth) -> Value {
    let breaker = match health.breaker.state() {
        BreakerState::Closed => "closed",
        BreakerState::HalfOpen => "half_open",
        BreakerState::Open => "open",
    };
    let millis = |q| health.ttft_percentile(q).map(|d| d.as_secs_f64() * 1000.0);
    let last_failure = health.last_failure().map(|(class, at)| {
        let unix_ms = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
        let ago_s = SystemTime::now().duration_since(at).map_or(0.0, |d| d.as_secs_f64());
        json!({ "class": class, "at_unix_ms": unix_ms, "seconds_ago": ago_s })
    });
    let cooldown_ms = health.rate_limited_until().map(|until| {
        u64::try_from(until.saturating_duration_since(tokio::time::Instant::now()).as_millis()).unwrap_or(u64::MAX)
    });
    json!({
        "name": name,
        "kind": kind,
        "breaker": breaker,
        "cooldown_ms": cooldown_ms,
        "inflight": health.inflight(),
        "ttft_ms": { "p50": millis(0.5), "p95": millis(0.95) },
        "last_1m": health.attempts(1),
        "last_15m": health.attempts(15),
        "last_failure": last_failure,
    })
}

/// `POST /admin/reload`: re-reads the config file, as SIGHUP does.
pub(super) async fn reload(State(state): State<AppState>, headers: HeaderMap) -> Result<Json<Value>, ApiError> {
    authorize(&headers, &state.config(), "reload", false)?;
    match state.reload() {
        Ok(config) => {
            let routes: Vec<&str> = config.routes.iter().map(|r| r.model.as_str()).collect();
            Ok(Json(json!({ "reloaded": true, "routes": routes })))
        }
        Err(err) => {
            tracing::error!(error = %err, "config reload refused; the running config stays");
            Err(ApiError::bad_request(format!("reload refused, the running config stays: {err}")))
        }
    }
}
