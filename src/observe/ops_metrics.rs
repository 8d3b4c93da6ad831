//! The metrics of what baton does for its operators rather than its
//! clients: alerts sent, scheduled drills run, and how much of each
//! provider's quota is in use. Labels are names from the config and fixed
//! words, never anything a client or a provider wrote.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Alerts by event and result: `sent`, `failed`, `dropped`, `deduplicated`.
pub const ALERTS: &str = "baton_alerts";
/// Scheduled drills run, by route and result: `passed`, `failed`.
pub const DRILL_RUNS: &str = "baton_drill_runs";
/// When a drill of a route last passed, in Unix seconds.
pub const DRILL_LAST_SUCCESS: &str = "baton_drill_last_success_timestamp_seconds";
/// How much of a provider's `rpm` or `tpm` is in use, 0 to 1 (more when
/// usage was charged past a reservation).
pub const PROVIDER_QUOTA_USED: &str = "baton_provider_quota_used_ratio";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AlertLabels {
    event: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DrillLabels {
    route: String,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabel {
    route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QuotaLabels {
    provider: String,
    unit: &'static str,
}

type FloatGauges<L> = Family<L, Gauge<f64, AtomicU64>>;

/// The operators' metrics, registered in the proxy's registry.
#[derive(Debug, Default)]
pub struct OpsMetrics {
    alerts: Family<AlertLabels, Counter>,
    drill_runs: Family<DrillLabels, Counter>,
    drill_last_success: FloatGauges<RouteLabel>,
    quota_used: FloatGauges<QuotaLabels>,
}

impl OpsMetrics {
    /// Registers every metric in `registry`.
    pub(super) fn register(&self, registry: &mut Registry) {
        let metrics = self;
        registry.register(ALERTS, "Alerts by event and result", metrics.alerts.clone());
        registry.register(DRILL_RUNS, "Scheduled drills run, by route and result", metrics.drill_runs.clone());
        registry.register(
            DRILL_LAST_SUCCESS,
            "When a drill of the route last passed, in Unix seconds",
            metrics.drill_last_success.clone(),
        );
        registry.register(PROVIDER_QUOTA_USED, "Share of the provider's rpm or tpm in use", metrics.quota_used.clone());
    }

    /// An alert about `event` ended as `result`.
    pub fn alert(&self, event: &'static str, result: &'static str) {
        self.alerts.get_or_create(&AlertLabels { event, result }).inc();
    }

    /// How many alerts about `event` ended as `result` so far.
    pub fn alerts(&self, event: &'static str, result: &'static str) -> u64 {
        self.alerts.get_or_create(&AlertLabels { event, result }).get()
    }

    /// A drill of `route` ran and passed or not; a pass at `unix_seconds`.
    pub fn drill_run(&self, route: &str, passed: bool, unix_seconds: f64) {
        let result = if passed { "passed" } else { "failed" };
        self.drill_runs.get_or_create(&DrillLabels { route: route.to_owned(), result }).inc();
        if passed {
            self.drill_last_success.get_or_create(&RouteLabel { route: route.to_owned() }).set(unix_seconds);
        }
    }

    /// `provider` has `ratio` of its `unit` (`rpm`, `tpm`) in use now.
    pub fn quota_used(&self, provider: &str, unit: &'static str, ratio: f64) {
        self.quota_used.get_or_create(&QuotaLabels { provider: provider.to_owned(), unit }).set(ratio);
    }
}
