//! Prometheus metrics, every name in one place, with
//! labels bounded to provider, route and outcome kinds: never raw error
//! text, never anything a client chose.

use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::throttle::LogThrottle;
use crate::resilience::{BreakerState, Health};

/// Requests by route and outcome (a counter: the exposition adds `_total`).
pub const REQUESTS: &str = "baton_requests";
/// Attempts by provider and outcome.
pub const ATTEMPTS: &str = "baton_attempts";
/// Moves from one provider to the next, by reason.
pub const FAILOVERS: &str = "baton_failovers";
/// Retries and hedges a spent retry budget turned away, by route and
/// kind (`retry`, `hedge`).
pub const RETRY_BUDGET_EXHAUSTED: &str = "baton_retry_budget_exhausted";
/// Time from an attempt's start to its first token, by provider.
pub const TIME_TO_FIRST_TOKEN: &str = "baton_time_to_first_token_seconds";
/// Time from a request's arrival to its end, by route.
pub const REQUEST_DURATION: &str = "baton_request_duration_seconds";
/// Tokens by provider and direction (`input`, `output`).
pub const TOKENS: &str = "baton_tokens";
/// Breaker state by provider: 0 closed, 1 half-open, 2 open.
pub const BREAKER_STATE: &str = "baton_breaker_state";
/// Streams being relayed now, by provider.
pub const INFLIGHT_STREAMS: &str = "baton_inflight_streams";
/// Whether a provider is up, by provider: 0 while its breaker is open or
/// after its own failures in a row, until its next answer.
pub const PROVIDER_UP: &str = "baton_provider_up";
/// How long each provider outage lasted, from going down to the next
/// answer (MTTR), by provider.
pub const PROVIDER_OUTAGE: &str = "baton_provider_outage_seconds";

/// USD spent, by route, provider and client key (`-` for none): usage
/// at the answering target's price (a float counter).
pub const COST_USD: &str = "baton_cost_usd";
/// Requests that met a spent budget, by scope, window and action.
pub const BUDGET_EXCEEDED: &str = "baton_budget_exceeded";

/// Clients that misbehaved, by kind: `body_timeout`, `client_stalled`,
/// `connection_cap`, `panic`.
pub const CLIENT_FAULTS: &str = "baton_client_faults";

/// Requests for an endpoint baton does not have (an unknown path, a wrong
/// method, a WebSocket upgrade), by method; never by path.
pub const UNKNOWN_ENDPOINT: &str = "baton_unknown_endpoint";

/// Whether the shared state store answers: 1 yes (always, with the memory
/// backend), 0 while each replica falls back to its local state.
pub const STATE_BACKEND_UP: &str = "baton_state_backend_up";

/// Request rows the store could not keep: a full queue, or a database down.
pub const RECORDS_DROPPED: &str = "baton_records_dropped";
/// Request rows the store wrote.
pub const RECORDS_WRITTEN: &str = "baton_records_written";
/// Whether the store's database answers: 1 yes (always, with `backend =
/// "none"`), 0 while rows are dropped.
pub const STORE_UP: &str = "baton_store_up";

/// Histogram buckets from 10 ms to 60 s, in seconds.
const BUCKETS: [f64; 13] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0];

/// Outage buckets from a second to a day, in seconds.
const OUTAGE_BUCKETS: [f64; 13] =
    [1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 21_600.0, 86_400.0];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteOutcome {
    route: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProviderOutcome {
    provider: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Failover {
    from: String,
    to: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProviderLabel {
    provider: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabel {
    route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteKind {
    route: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodLabel {
    method: &'static str,
}

/// A method as a bounded label: one HTTP defines, else `other`.
fn method_label(method: &http::Method) -> &'static str {
    const KNOWN: [&str; 9] = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"];
    KNOWN.into_iter().find(|known| *known == method.as_str()).unwrap_or("other")
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CostLabels {
    route: String,
    provider: String,
    key: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BudgetLabels {
    scope: String,
    window: &'static str,
    action: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    provider: String,
    direction: String,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// One proxy's metrics: a registry of its own, so every proxy in a process
/// (tests run many) counts only its own traffic.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RouteOutcome, Counter>,
    attempts: Family<ProviderOutcome, Counter>,
    failovers: Family<Failover, Counter>,
    retries_refused: Family<RouteKind, Counter>,
    ttft: Histograms<ProviderLabel>,
    duration: Histograms<RouteLabel>,
    tokens: Family<TokenLabels, Counter>,
    breaker_state: Family<ProviderLabel, Gauge>,
    inflight: Family<ProviderLabel, Gauge>,
    provider_up: Family<ProviderLabel, Gauge>,
    outages: Histograms<ProviderLabel>,
    client_faults: Family<KindLabel, Counter>,
    unknown_endpoint: Family<MethodLabel, Counter>,
    /// When each unknown path was last logged: once a minute.
    knocks: LogThrottle,
    cost: Family<CostLabels, Counter<f64, AtomicU64>>,
    budget_exceeded: Family<BudgetLabels, Counter>,
    state_backend_up: Gauge,
    records_dropped: Counter,
    records_written: Counter,
    store_up: Gauge,
    /// Alerts, drills and quotas: what baton does for its operators.
    ops: super::ops_metrics::OpsMetrics,
    /// When a client fault was last logged, per kind, so a flood logs a line a second.
    fault_logged: LogThrottle,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every metric, registered and at zero.
    pub fn new() -> Self {
        let metrics = Metrics {
            registry: Registry::default(),
            requests: Family::default(),
            attempts: Family::default(),
            failovers: Family::default(),
            retries_refused: Family::default(),
            ttft: Family::new_with_constructor(histogram),
            duration: Family::new_with_constructor(histogram),
            tokens: Family::default(),
            breaker_state: Family::default(),
            inflight: Family::default(),
            provider_up: Family::default(),
            outages: Family::new_with_constructor(|| Histogram::new(OUTAGE_BUCKETS)),
            client_faults: Family::default(),
            unknown_endpoint: Family::default(),
            knocks: LogThrottle::new(Duration::from_secs(60)),
            cost: Family::default(),
            budget_exceeded: Family::default(),
            state_backend_up: Gauge::default(),
            records_dropped: Counter::default(),
            records_written: Counter::default(),
            store_up: Gauge::default(),
            ops: super::ops_metrics::OpsMetrics::default(),
            fault_logged: LogThrottle::new(Duration::from_secs(1)),
        };
        metrics.state_backend_up.set(1);
        metrics.store_up.set(1);
        metrics.registered()
    }

    /// The same metrics, each in the registry under its name.
    fn registered(mut self) -> Self {
        let mut registry = std::mem::take(&mut self.registry);
        registry.register(REQUESTS, "Requests by route and outcome", self.requests.clone());
        registry.register(ATTEMPTS, "Upstream attempts by provider and outcome", self.attempts.clone());
        registry.register(FAILOVERS, "Moves to the next provider, by reason", self.failovers.clone());
        let refused = self.retries_refused.clone();
        registry.register(RETRY_BUDGET_EXHAUSTED, "Retries and hedges a spent retry budget turned away", refused);
        registry.register(TIME_TO_FIRST_TOKEN, "Attempt start to first token, by provider", self.ttft.clone());
        registry.register(REQUEST_DURATION, "Request arrival to end, by route", self.duration.clone());
        registry.register(TOKENS, "Tokens by provider and direction", self.tokens.clone());
        let breaker = self.breaker_state.clone();
        registry.register(BREAKER_STATE, "Circuit breaker: 0 closed, 1 half-open, 2 open", breaker);
        registry.register(INFLIGHT_STREAMS, "Streams being relayed now", self.inflight.clone());
        let up = self.provider_up.clone();
        registry.register(PROVIDER_UP, "Whether the provider is answering: 1 up, 0 down", up);
        registry.register(PROVIDER_OUTAGE, "Provider outages, from down to the next answer", self.outages.clone());
        registry.register(CLIENT_FAULTS, "Clients that misbehaved, by kind", self.client_faults.clone());
        let unknown = self.unknown_endpoint.clone();
        registry.register(UNKNOWN_ENDPOINT, "Requests for an endpoint baton does not have, by method", unknown);
        registry.register(COST_USD, "USD spent, by route, provider and client key", self.cost.clone());
        registry.register(BUDGET_EXCEEDED, "Requests that met a spent budget", self.budget_exceeded.clone());
        let backend = self.state_backend_up.clone();
        registry.register(STATE_BACKEND_UP, "Whether the shared state store answers", backend);
        registry.register(RECORDS_DROPPED, "Request rows the store could not keep", self.records_dropped.clone());
        registry.register(RECORDS_WRITTEN, "Request rows the store wrote", self.records_written.clone());
        registry.register(STORE_UP, "Whether the store's database answers", self.store_up.clone());
        self.ops.register(&mut registry);
        self.registry = registry;
        self
    }

    /// The metrics of alerts, drills and provider quotas.
    pub fn ops(&self) -> &super::ops_metrics::OpsMetrics {
        &self.ops
    }

    /// A request ended with `outcome`, after `duration`.
    pub fn request(&self, route: &str, outcome: &str, duration: Duration) {
        self.requests.get_or_create(&RouteOutcome { route: route.to_owned(), outcome: outcome.to_owned() }).inc();
        self.duration.get_or_create(&RouteLabel { route: route.to_owned() }).observe(duration.as_secs_f64());
    }

    /// An attempt ended (`committed`, or its failure class).
    pub fn attempt(&self, provider: &str, outcome: &str) {
        self.attempts
            .get_or_create(&ProviderOutcome { provider: provider.to_owned(), outcome: outcome.to_owned() })
            .inc();
    }

    /// An attempt reached its first token after `ttft`.
    pub fn first_token(&self, provider: &str, ttft: Duration) {
        self.ttft.get_or_create(&ProviderLabel { provider: provider.to_owned() }).observe(ttft.as_secs_f64());
    }

    /// The request moved from `from` to `to` because of `reason`.
    pub fn failover(&self, from: &str, to: &str, reason: &str) {
        let labels = Failover { from: from.to_owned(), to: to.to_owned(), reason: reason.to_owned() };
        self.failovers.get_or_create(&labels).inc();
    }

    /// A spent retry budget on `route` turned away a `kind` (`retry`, `hedge`).
    pub fn retry_budget_exhausted(&self, route: &str, kind: &'static str) {
        self.retries_refused.get_or_create(&RouteKind { route: route.to_owned(), kind }).inc();
    }

    /// Tokens a provider read and wrote for one answer.
    pub fn tokens(&self, provider: &str, input: u64, output: u64) {
        for (direction, count) in [("input", input), ("output", output)] {
            let labels = TokenLabels { provider: provider.to_owned(), direction: direction.to_owned() };
            self.tokens.get_or_create(&labels).inc_by(count);
        }
    }

    /// An answer on `route` from `provider` for client key `key` cost `usd`.
    pub fn cost(&self, route: &str, provider: &str, key: &str, usd: f64) {
        let labels = CostLabels { route: route.to_owned(), provider: provider.to_owned(), key: key.to_owned() };
        self.cost.get_or_create(&labels).inc_by(usd);
    }

    /// A request met the spent budget of `scope` over `window`, which acted so.
    pub fn budget_exceeded(&self, scope: String, window: &'static str, action: &'static str) {
        self.budget_exceeded.get_or_create(&BudgetLabels { scope, window, action }).inc();
    }

    /// A client misbehaved (`kind` as in [`CLIENT_FAULTS`]): counted always,
    /// logged at warn at most once a second per kind, with how many there
    /// were in all, so a flood of them is visible without flooding the log.
    pub fn client_fault(&self, kind: &'static str) {
        let counter = self.client_faults.get_or_create(&KindLabel { kind });
        counter.inc();
        if self.fault_logged.due(kind, Instant::now()) {
            tracing::warn!(kind, total = counter.get(), "client fault");
        }
    }

    /// A request for an endpoint baton does not have, answered `status`:
    /// counted by method, and logged once per path and minute.
    pub fn unknown_endpoint(&self, method: &http::Method, path: &str, status: u16) {
        let method = method_label(method);
        self.unknown_endpoint.get_or_create(&MethodLabel { method }).inc();
        if self.knocks.due(path, Instant::now()) {
            let path: String = path.chars().take(200).collect();
            tracing::info!(method, path, status, "a request for an endpoint baton does not have");
        }
    }

    /// The exposition text, with the gauges read from `health` now.
    pub fn render(&self, health: &Health) -> String {
        for (name, provider) in health.providers() {
            let state = match provider.breaker.state() {
                BreakerState::Closed => 0,
                BreakerState::HalfOpen => 1,
                BreakerState::Open => 2,
            };
            let label = ProviderLabel { provider: name.clone() };
            self.breaker_state.get_or_create(&label).set(state);
            self.inflight.get_or_create(&label).set(provider.inflight());
            let (up, ended) = provider.take_outages();
            self.provider_up.get_or_create(&label).set(i64::from(up));
            let outages = self.outages.get_or_create(&label);
            for outage in ended {
                outages.observe(outage.as_secs_f64());
            }
        }
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        text
    }
}

impl crate::state::StateSignals for Metrics {
    fn state_backend_up(&self, up: bool) {
        self.state_backend_up.set(i64::from(up));
    }
}

impl crate::store::StoreSignals for Metrics {
    fn records_dropped(&self, rows: u64) {
        self.records_dropped.inc_by(rows);
    }

    fn records_written(&self, rows: u64) {
        self.records_written.inc_by(rows);
    }

    fn store_up(&self, up: bool) {
        self.store_up.set(i64::from(up));
    }
}
