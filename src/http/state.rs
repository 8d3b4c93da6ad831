//! What every handler shares, and the two things that change it at run time:
//! a config reload and a drain before shutdown. The state is wired from its
//! parts in `build.rs`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::admission::RequestGate;
use crate::config::{self, Config, ConfigError};
use crate::core::Engine;
use crate::observe::RouteStats;
use crate::observe::traces::Tracer;
use crate::state::Store;
use crate::store::{Keyring, Records};

/// The proxy's shared state.
#[derive(Clone)]
pub struct AppState {
    /// The config in force: the file's, with the store's client keys.
    pub(super) keyring: Arc<Keyring>,
    pub(super) config_path: Option<Arc<PathBuf>>,
    pub(super) engine: Engine,
    pub(super) routes: Arc<RouteStats>,
    pub(super) gate: Arc<RequestGate>,
    pub(super) store: Option<Arc<Store>>,
    pub(super) drain: watch::Sender<Option<Instant>>,
    pub(super) drain_begun: DrainBegun,
    pub(super) tracer: Option<Arc<Tracer>>,
    pub(super) bodies: super::body::BodyBudget,
    pub(super) records: Option<Records>,
    pub(super) ops: crate::ops::Ops,
}

impl AppState {
    /// The config in force and the store's keys merged into it.
    pub fn keyring(&self) -> &Keyring {
        &self.keyring
    }

    /// Alerts and drills.
    pub fn ops(&self) -> &crate::ops::Ops {
        &self.ops
    }

    /// The request log, when the config keeps one.
    pub fn records(&self) -> Option<&Records> {
        self.records.as_ref()
    }

    /// The bytes request bodies may hold at once.
    pub(super) fn bodies(&self) -> &super::body::BodyBudget {
        &self.bodies
    }

    /// The tracer, when traces are on.
    pub fn tracer(&self) -> Option<&Tracer> {
        self.tracer.as_deref()
    }

    /// Exports the spans still waiting and stops the tracer, within
    /// `limit`; whether that finished (true when traces are off).
    pub async fn flush_traces(&self, limit: Duration) -> bool {
        match &self.tracer {
            Some(tracer) => tracer.shutdown(limit).await,
            None => true,
        }
    }

    /// The config in force now; a request keeps the one it started with.
    pub fn config(&self) -> Arc<Config> {
        self.keyring.config()
    }

    /// The attempt loop, with provider health and metrics.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// What client connections are held to, from the config in force at
    /// start (a new cap or stall timeout needs a restart, as `listen` does).
    pub fn connection_limits(&self) -> super::server::ConnectionLimits {
        let config = self.config();
        let metrics = Arc::clone(self.engine.metrics());
        super::server::ConnectionLimits::new(config.max_connections, config.client_stall_timeout, metrics)
    }

    /// Client keys' limits, budgets and spend, kept across reloads.
    pub fn gate(&self) -> &RequestGate {
        &self.gate
    }

    /// The store shared with other replicas; none with the memory backend.
    pub fn store(&self) -> Option<&Arc<Store>> {
        self.store.as_ref()
    }

    /// Per-route request counts.
    pub fn routes(&self) -> &Arc<RouteStats> {
        &self.routes
    }

    /// Re-reads the config file. A valid one replaces routes and providers
    /// for new requests (streams in flight keep theirs, and providers that
    /// stay keep their breaker and latency state); an invalid one is refused
    /// and the running config stays.
    pub fn reload(&self) -> Result<Arc<Config>, ConfigError> {
        let Some(path) = &self.config_path else {
            return Err(ConfigError::Read {
                path: "(none)".to_owned(),
                source: std::io::Error::other("this proxy was not started from a config file"),
            });
        };
        let mut next = config::load(path)?;
        let current = self.keyring.file_config();
        if next.listen != current.listen {
            tracing::warn!(listen = %current.listen, "a new listen address takes effect only on restart");
        }
        next.listen_on(current.listen);
        if (next.max_connections, next.client_stall_timeout) != (current.max_connections, current.client_stall_timeout)
        {
            tracing::warn!("new max_connections or client_stall_timeout_ms take effect only on restart");
        }
        if next.state != current.state {
            tracing::warn!("a new [state] takes effect only on restart");
            next.state = current.state.clone();
        }
        if next.store != current.store {
            tracing::warn!("a new [store] takes effect only on restart");
            next.store = current.store.clone();
        }
        if next.telemetry != current.telemetry {
            tracing::warn!("a new [telemetry] takes effect only on restart");
            next.telemetry.clone_from(&current.telemetry);
        }
        if (&next.alerts, &next.drills) != (&current.alerts, &current.drills) {
            tracing::warn!("new [[alerts]] or [[drills]] take effect only on restart");
            (next.alerts, next.drills) = (current.alerts.clone(), current.drills.clone());
        }
        self.engine.health().reconcile(next.providers.iter().map(|p| (p.name.as_str(), p.breaker)));
        let next = self.keyring.set_file_config(next);
        if let Some(records) = &self.records {
            records.redact_with(&next);
        }
        tracing::info!(path = %path.display(), routes = next.routes.len(), providers = next.providers.len(), "config reloaded");
        Ok(next)
    }

    /// Starts draining: streams still running after `grace` are ended with
    /// an error event.
    pub fn drain(&self, grace: Duration) {
        self.drain_begun.0.store(true, Ordering::Release);
        self.drain.send_replace(Some(crate::clock::later(Instant::now(), grace)));
    }

    /// Whether a drain has begun, for a stream that asks between its events.
    pub(super) fn drain_begun(&self) -> DrainBegun {
        self.drain_begun.clone()
    }

    /// Resolves once a drain's grace period is over.
    pub(super) async fn drained(&self) {
        let mut deadline = self.drain.subscribe();
        loop {
            let at = *deadline.borrow_and_update();
            match at {
                Some(at) => return tokio::time::sleep_until(at).await,
                None => {
                    if deadline.changed().await.is_err() {
                        return std::future::pending().await;
                    }
                }
            }
        }
    }
}

/// Whether a drain has begun: a flag every stream reads without a lock,
/// where asking the drain's channel takes a lock they all share.
#[derive(Clone, Default)]
pub(super) struct DrainBegun(Arc<AtomicBool>);

impl DrainBegun {
    /// True from the moment [`AppState::drain`] is called.
    pub(super) fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}
