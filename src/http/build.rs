//! The app wired from the parts it is given, in one place: [`AppBuilder`]
//! takes the config and the [`Opener`] every attempt reaches providers
//! through (HTTP for `baton serve`, a script in tests, so the whole app runs
//! without a socket to any provider) and makes the rest from them: the
//! engine, the shared state and its sync, the request gate, the body
//! budget, alerts, the keyring. The steps that start work beside the app
//! from inside a runtime (the request log, traces, drills) follow it here.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::AppState;
use super::body::BodyBudget;
use super::state::DrainBegun;
use crate::admission::RequestGate;
use crate::config::Config;
use crate::core::Engine;
use crate::observe::RouteStats;
use crate::observe::traces::{TraceError, Tracer};
use crate::ops::Ops;
use crate::ops::alerts::{StoreAlerts, Watched};
use crate::ops::drills::DrillContext;
use crate::providers::Opener;
use crate::state::Store;
use crate::store::{Keyring, Records, keyring};

/// How long starting waits for the store to open and hand over the spend
/// budgets must start from; past it baton serves anyway, and the budgets
/// take that spend in when the store opens.
const STORE_START_WAIT: Duration = Duration::from_secs(5);

/// The parts an app is made of, before it is wired: what cannot be made
/// from the config alone is given here, so a test can give a scripted
/// opener where `baton serve` gives one over HTTP.
pub struct AppBuilder {
    config: Config,
    opener: Arc<dyn Opener>,
    config_path: Option<PathBuf>,
}

impl AppBuilder {
    /// An app for `config` whose engine reaches its providers through
    /// `opener` (`providers::driver::HttpOpener` to serve).
    pub fn new(config: Config, opener: Arc<dyn Opener>) -> Self {
        AppBuilder { config, opener, config_path: None }
    }

    /// Remembers where the config came from, so the app can reload it.
    pub fn config_path(mut self, path: PathBuf) -> Self {
        self.config_path = Some(path);
        self
    }

    /// The app's state, wired: the engine over the opener, sharing state
    /// through the config's `[state]` store (synced in the background when
    /// there is one); the request gate on the same store; the body budget;
    /// alerts watching health, gate, config and store; the keyring holding
    /// the config. From inside a tokio runtime, which the sync and the
    /// alerts' watch run on.
    pub fn build(self) -> AppState {
        let AppBuilder { config, opener, config_path } = self;
        let engine = Engine::with_opener(&config, opener);
        let store = Store::from_config(&config.state, Arc::clone(engine.metrics()) as _);
        let engine = engine.with_store(store.clone());
        if let Some(store) = &store {
            crate::state::spawn_sync(Arc::clone(store), Arc::downgrade(engine.health_handle()));
        }
        let gate = Arc::new(RequestGate::new(Arc::clone(engine.metrics())).with_store(store.clone()));
        let bodies = BodyBudget::new(config.max_body_bytes_in_flight);
        let ops = Ops::start(&config, Arc::clone(engine.metrics()));
        let keyring = Arc::new(Keyring::new(config));
        let health = Arc::downgrade(engine.health_handle());
        let watched = Watched { health, gate: Arc::clone(&gate), config: Arc::clone(&keyring), store: store.clone() };
        watched.spawn(ops.alerts().clone());
        AppState {
            bodies,
            gate,
            store,
            keyring,
            ops,
            config_path: config_path.map(Arc::new),
            engine,
            routes: Arc::new(RouteStats::default()),
            drain: watch::Sender::new(None),
            drain_begun: DrainBegun::default(),
            tracer: None,
            records: None,
        }
    }
}

/// What starts beside a built app, from inside a tokio runtime.
impl AppState {
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

    /// Starts exporting traces when the config turns them on (from inside
    /// a tokio runtime); otherwise the state has no tracer and requests no spans.
    pub fn with_traces(mut self) -> Result<Self, TraceError> {
        if let Some(telemetry) = &self.config().telemetry {
            self.tracer = Some(Tracer::install(telemetry)?);
            tracing::info!(endpoint = %telemetry.traces_endpoint, service = %telemetry.service_name, "exporting traces");
        }
        Ok(self)
    }
}
