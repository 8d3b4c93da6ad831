//! What operators see: Prometheus metrics, the per-attempt and per-request
//! records, the per-route counts behind the status API, and OpenTelemetry
//! traces.

mod attempt;
mod log_line;
mod metrics;
pub mod ops_metrics;
mod request;
mod throttle;
pub mod traces;

use std::collections::BTreeMap;
use std::sync::Mutex;

pub use attempt::{AttemptInfo, AttemptObserver, AttemptReport, AttemptResult, Sending};
pub use log_line::PlainLines;
pub use metrics::Metrics;
pub use request::{Ended, NO_KEY, RequestWatch, Settle};

use crate::resilience::{MinuteWindow, Tally};

/// Requests per route over the last minutes: `total` requests, `ok` answered,
/// `failed` needed a failover.
#[derive(Debug, Default)]
pub struct RouteStats {
    routes: Mutex<BTreeMap<String, MinuteWindow<Tally>>>,
}

impl RouteStats {
    /// Counts one request on `route`.
    pub fn record(&self, route: &str, tally: Tally) {
        if let Ok(mut routes) = self.routes.lock() {
            routes.entry(route.to_owned()).or_default().add(tally);
        }
    }

    /// Each route's counts over the last `minutes`.
    pub fn last(&self, minutes: u64) -> BTreeMap<String, Tally> {
        let routes = self.routes.lock();
        routes
            .map(|routes| routes.iter().map(|(name, window)| (name.clone(), window.last(minutes))).collect())
            .unwrap_or_default()
    }
}
