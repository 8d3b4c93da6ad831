//! What every handler shares, and the two things that change it at run time:
//! a config reload and a drain before shutdown.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::admission::RequestGate;
use crate::config::{self, Config, ConfigError};
use crate::core::Engine;
use crate::egress::ClientError;
use crate::observe::RouteStats;
use crate::observe::traces::{TraceError, Tracer};
use crate::ops::alerts::{StoreAlerts, Watched};
use crate::ops::drills::DrillContext;
use crate::state::Store;
use crate::store::{Keyring, Records, keyring};

/// How long starting waits for the store to open and hand over the spend
/// budgets must start from; past it baton serves anyway, and the budgets
/// take that spend in when the store opens.
const STORE_START_WAIT: Duration = Duration::from_secs(5);

/// The proxy's shared state.
#[derive(Clone)]
pub struct AppState {
    /// The config in force: the file's, with the store's client keys.
    keyring: Arc<Keyring>,
    config_path: Option<Arc<PathBuf>>,
    engine: Engine,
    routes: Arc<RouteStats>,
    gate: Arc<RequestGate>,
    store: Option<Arc<Store>>,
    drain: watch::Sender<Option<Instant>>,
    drain_begun: DrainBegun,
    tracer: Option<Arc<Tracer>>,
    bodies: super::body::BodyBudget,
    records: Option<Records>,
    ops: crate::ops::Ops,
}

impl AppState {
    /// State for `config`, with a fresh engine.
    pub fn new(config: Config) -> Result<Self, ClientError> {
        let engine = Engine::new(&config)?;
        let store = Store::from_config(&config.state, Arc::clone(engine.metrics()) as _);
        let engine = engine.with_store(store.clone());
        if let Some(store) = &store {
            crate::state::spawn_sync(Arc::clone(store), Arc::downgrade(engine.health_handle()));
        }
        let gate = Arc::new(RequestGate::new(Arc::clone(engine.metrics())).with_store(store.clone()));
        let bodies = super::body::BodyBudget::new(config.max_body_bytes_in_flight);
        let ops = crate::ops::Ops::start(&config, Arc::clone(engine.metrics()));
        let keyring = Arc::new(Keyring::new(config));
        let health = Arc::downgrade(engine.health_handle());
        let watched = Watched { health, gate: Arc::clone(&gate), config: Arc::clone(&keyring), store: store.clone() };
        watched.spawn(ops.alerts().clone());
        Ok(AppState {
            bodies,
            gate,
            store,
            keyring,
            ops,
            config_path: None,
            engine,
            routes: Arc::new(RouteStats::default()),
            drain: watch::Sender::new(None),
            drain_begun: DrainBegun::default(),
            tracer: None,
            records: None,
        })
    }

    /// Starts the request log the config's `[store]` asks for (from inside a
    /// tokio runtime, where its writer then runs), and loads the budgets'
    /// windows from its ledger. It waits for the first attempt to open the
    /// database (five seconds at most); if that fails, it serves anyway and
    /// the budgets take the ledger's spend in when the store opens.
    pub async fn with_records(mut self) -> Self {
        let alerts = self.ops.alerts().clone();
        let (metrics, backend) = (Arc::clone(self.engine.metrics()), self.config().store.backend_name());
        let signals: Arc<dyn crate::store::StoreSignals> = Arc::new(StoreAlerts { metrics, alerts, backend });
        let Some((records, started)) = Records::start(&self.config(), signals) else { return self };
        let gate = Arc::clone(&self.gate);
        let seeding = tokio::spawn(async move {
            if let Ok(spent) = started.spent.await {
                gate.seed(&spent);
            }
        });
        match tokio::time::timeout(STORE_START_WAIT, started.first_open).await {
            Ok(Ok(true)) => {
                // The ledger's spend was sent before the first open was told.
                let _ = tokio::time::timeout(STORE_START_WAIT, seeding).await;
            }
            Ok(_) => tracing::warn!("serving without the store for now: budgets count from this start until it opens"),
            Err(_) => {
                tracing::warn!("the store has not opened yet; serving, with budgets from this start until it does")
            }
        }
        // The store's keys are in force before the first request is served.
        keyring::refresh(&self.keyring, &records).await;
        let keys = &self.config().access.keys;
        if keys.required() && keys.keys().is_empty() {
            tracing::warn!(
                "no client key exists yet: every /v1 request gets 401 until one is made (baton keys create, or POST /admin/keys)"
            );
        }
        tokio::spawn(keyring::follow(Arc::downgrade(&self.keyring), records.downgrade()));
        self.records = Some(records);
        self
    }

    /// The config in force and the store's keys merged into it.
    pub fn keyring(&self) -> &Keyring {
        &self.keyring
    }

    /// Starts the config's `[[drills]]` on their schedule (from inside a
    /// tokio runtime; after [`AppState::with_records`], so drills are
    /// recorded as the requests they are).
    pub fn with_drills(mut self) -> Self {
        let context = DrillContext {
            engine: self.engine.clone(),
            config: Arc::clone(&self.keyring),
            gate: Arc::clone(&self.gate),
            records: self.records.clone(),
            routes: Arc::clone(&self.routes),
            store: self.store.clone(),
            alerts: self.ops.alerts().clone(),
            board: Arc::clone(self.ops.board()),
        };
        self.ops = self.ops.with_drills(context);
        self
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

    /// Remembers where the config came from, so it can be reloaded.
    pub fn with_config_path(mut self, path: PathBuf) -> Self {
        self.config_path = Some(Arc::new(path));
        self
    }

    /// Starts exporting traces when the config turns them on (from inside
    /// a tokio runtime); otherwise the state has no tracer and requests no spans.
    pub fn with_traces(mut self) -> Result<Self, TraceError> {
        if let Some(telemetry) = &self.config().telemetry {
            self.tracer = Some(Tracer::install(telemetry)?);
            tracing::info!(endpoint = %telemetry.traces_endpoint, service = %telemetry.service_name, "exporting traces");
        }
        Ok(self)
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
