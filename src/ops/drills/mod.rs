//! Drills on a schedule (`[[drills]]`): the fallback path is code that runs
//! only during incidents, so baton runs it on purpose. Each drill has a
//! task of its own that waits a random part of its interval first, then
//! runs it every interval plus a little jitter, so drills spread out. The
//! task runs one drill at a time: a drill slower than its interval is not
//! started again, the ticks it overran are skipped. With a shared state,
//! one replica runs each drill per interval: it takes a lease (`SET NX PX`)
//! first, and a replica that does not get it skips that tick; with no
//! shared state, or one that does not answer, every replica runs its own.

mod board;
pub mod run;

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;

pub use board::Board;
pub use run::{DRILL_KEY, DrillRun};

use super::alerts::{Alert, Alerts};
use crate::access::ClientKey;
use crate::admission::{Refusal, RequestGate};
use crate::clock::later;
use crate::config::Drill;
use crate::core::Engine;
use crate::observe::{RequestWatch, RouteStats};
use crate::state::Store;
use crate::store::Keyring;
use crate::store::Records;

/// The part of the interval added at random to each wait, so drills of
/// several replicas and routes do not stay in step.
const JITTER_SHARE: u32 = 10;

/// Everything a scheduled drill needs: the real engine and what a client
/// request is charged and recorded through.
pub struct DrillContext {
    /// The engine requests go through.
    pub engine: Engine,
    /// The config in force, for the route as it is now.
    pub config: Arc<Keyring>,
    /// Budgets and spend: a drill is charged as key [`DRILL_KEY`].
    pub gate: Arc<RequestGate>,
    /// The request log, when kept.
    pub records: Option<Records>,
    /// Per-route counts, which drills are part of.
    pub routes: Arc<RouteStats>,
    /// The shared state, for the one-replica lease.
    pub store: Option<Arc<Store>>,
    /// Where `drill_failed` and `drill_recovered` go.
    pub alerts: Alerts,
    /// Each drill's last result.
    pub board: Arc<Board>,
}

impl DrillContext {
    /// Starts a task per drill of the config in force, on the current
    /// runtime; each ends once the returned context is dropped.
    pub fn start(self) -> Arc<DrillContext> {
        let context = Arc::new(self);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("no async runtime: scheduled drills are off");
            return context;
        };
        for (index, drill) in context.config.config().drills.iter().enumerate() {
            runtime.spawn(schedule(Arc::downgrade(&context), index, drill.clone()));
            tracing::info!(route = %drill.route, fail = %drill.fail_spec, every_s = drill.every.as_secs(), "drill scheduled");
        }
        context
    }

    /// Runs drill `index` for this tick, unless another replica holds the
    /// drill's lease; tells the board, the metrics, the log and the alerts.
    async fn tick(&self, index: usize, drill: &Drill) {
        if !self.leased(drill).await {
            tracing::debug!(route = %drill.route, "drill run by another replica this interval");
            return;
        }
        let ran = self.run(drill).await;
        let recovered = self.board.record(index, &ran);
        let unix_s = ran.at_ms as f64 / 1000.0;
        self.engine.metrics().ops().drill_run(&ran.route, ran.passed, unix_s);
        let ms = u64::try_from(ran.elapsed.as_millis()).unwrap_or(u64::MAX);
        let answered_by = ran.answered_by.as_ref().map(|(provider, _)| provider.as_str());
        if ran.passed {
            let outcome = ran.outcome;
            tracing::info!(route = %ran.route, fail = %ran.fail, outcome, answered_by, attempts = ran.attempts, ms, "drill passed");
        } else {
            tracing::warn!(route = %ran.route, fail = %ran.fail, outcome = ran.outcome, answered_by, attempts = ran.attempts, ms, "drill failed");
            self.alerts.raise(Alert::drill_failed(&ran.route, &ran.fail, ran.outcome, ran.attempts, ran.elapsed));
        }
        if recovered && let Some(provider) = answered_by {
            self.alerts.raise(Alert::drill_recovered(&ran.route, &ran.fail, provider, ran.attempts, ran.elapsed));
        }
    }

    /// Whether this replica runs the drill this interval: it took the
    /// drill's lease, or there is no shared state that answers to ask.
    async fn leased(&self, drill: &Drill) -> bool {
        let Some(store) = &self.store else { return true };
        let name = format!("drill:{}:{}", drill.route, drill.fail_spec);
        store.call(|state| state.lease(&name, drill.every)).await.unwrap_or(true)
    }

    /// Runs `drill` now as a request of key [`DRILL_KEY`]: through the
    /// gate (budgets hold for drills too), charged, counted and recorded.
    pub async fn run(&self, drill: &Drill) -> DrillRun {
        let config = self.config.config();
        let Some(route) = config.route(&drill.route) else { return DrillRun::not_started(drill, "no_route") };
        let request = run::request(drill);
        let key = drill_key();
        let admitted = self.gate.admit_shared(&config, Some(&key), route, &request).await;
        let served = admitted.as_ref().map_or(route, |admitted| &admitted.route);
        let metrics = Arc::clone(self.engine.metrics());
        let mut watch = RequestWatch::new(metrics, Arc::clone(&self.routes), run::new_id(), &served.model);
        watch.key(DRILL_KEY);
        if let Some(records) = &self.records {
            let mut recording = records.begin(watch.id(), DIALECT);
            recording.row().model_asked = Some(drill.route.clone());
            watch.recorded(Some(recording));
        }
        let admitted = match admitted {
            Ok(admitted) => admitted,
            Err(refusal) => {
                watch.failed(refusal.kind(), refused_status(&refusal), Vec::new());
                return DrillRun::not_started(drill, refusal.kind());
            }
        };
        watch.settle_with(Box::new(admitted.ticket));
        if let Some(from) = &admitted.downgraded_from {
            watch.downgraded(from);
        }
        run::run(&self.engine, &admitted.route, drill, request, Some(&mut watch)).await
    }
}

/// The dialect a drill's row names: its request is a Chat Completions one.
const DIALECT: &str = <crate::dialect::openai::OpenAiChat as crate::dialect::Dialect>::NAME;

/// The key drills are charged to: no secret matches it, it may use every
/// route, and only the budgets hold it.
fn drill_key() -> ClientKey {
    ClientKey { name: DRILL_KEY.to_owned(), sha256: [0; 32], routes: None, rpm: None, tpm: None }
}

/// The status a client refused so would have got.
fn refused_status(refusal: &Refusal) -> u16 {
    match refusal {
        Refusal::RateLimited { .. } | Refusal::BudgetExceeded { .. } => 429,
        Refusal::OverCostCap { .. } => 400,
    }
}

/// Runs drill `index` every `drill.every` from a random offset, one run at
/// a time, until the context is gone.
async fn schedule(context: Weak<DrillContext>, index: usize, drill: Drill) {
    let every = drill.every;
    let mut next = later(Instant::now(), share_of(every, 1));
    loop {
        tokio::time::sleep_until(next).await;
        match context.upgrade() {
            Some(context) => context.tick(index, &drill).await,
            None => return,
        }
        next = later(next, every.saturating_add(share_of(every, JITTER_SHARE)));
        let now = Instant::now();
        while next <= now {
            next = later(next, every);
        }
    }
}

/// A random duration below `every / divisor`.
fn share_of(every: Duration, divisor: u32) -> Duration {
    let bound = u64::try_from((every / divisor.max(1)).as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(fastrand::u64(0..bound.max(1)))
}
