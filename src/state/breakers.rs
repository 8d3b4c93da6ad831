//! Breakers and `Retry-After` cooldowns shared by the cluster without a
//! round trip per request (a cooldown one replica was asked for reaches
//! the others as an opening does): each
//! replica's breakers stay local and decide every admission alone, and one
//! background task per replica, every [`BREAKER_SYNC_EVERY`], tells the
//! store what they decided (an opening, a probe's success, a wish to
//! probe) and brings back what the others did — all providers in one
//! round trip. An opening thus reaches every replica within two periods
//! (500 ms), and the half-open probe is one per cluster: a replica probes
//! only with the store's leave.
//!
//! The same task sends the token settlements and the spend kept since the
//! last sync (one round trip for all keys, one for all budget scopes,
//! which brings back what the cluster spent), and watches the store: while it is down the breakers decide
//! alone (probes included), and when it answers again their openings are
//! told again and they are shared once more.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};

use super::{BreakerAction, Probe, ProviderReport, Store};
use crate::clock::later;
use crate::resilience::breaker::Transition;
use crate::resilience::{BreakerState, Health, ProviderHealth};

/// How often a replica syncs its breakers: an opening reaches the others
/// within twice this, which is the one second the cluster promises with
/// room for a loaded machine; at 4 round trips a second per replica, the
/// cost does not grow with traffic.
pub const BREAKER_SYNC_EVERY: Duration = Duration::from_millis(250);

/// Starts the task that syncs `health`'s breakers through `store` and
/// re-joins the store when it comes back; it ends with the engine that
/// owns `health`. Outside a tokio runtime nothing is shared.
pub fn spawn_sync(store: Arc<Store>, health: Weak<Health>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!("no async runtime: the shared state store is not used");
        return;
    };
    runtime.spawn(async move {
        let mut tick = tokio::time::interval(BREAKER_SYNC_EVERY);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut shared = false;
        loop {
            tick.tick().await;
            let Some(health) = health.upgrade() else { return };
            let providers = health.providers();
            if !store.is_up() && shared {
                providers.iter().for_each(|(_, provider)| provider.breaker.share(false));
                shared = false;
            }
            if store.rejoin().await {
                providers.iter().for_each(|(_, provider)| rejoin(provider));
            }
            if !store.is_up() {
                continue;
            }
            // Every tick, so a provider a reload added is shared too.
            providers.iter().for_each(|(_, provider)| provider.breaker.share(true));
            shared = true;
            store.settle().await;
            store.sync_spend().await;
            sync(&store, &providers).await;
        }
    });
}

/// The store is back: what this replica's breaker holds open is told again.
fn rejoin(provider: &ProviderHealth) {
    let breaker = &provider.breaker;
    if breaker.state() == BreakerState::Open {
        breaker.keep_news(Transition::Opened { until: breaker.recovers_at() });
    }
}

/// One round trip: every provider's news out, the cluster's view back.
async fn sync(store: &Store, providers: &[(String, Arc<ProviderHealth>)]) {
    let now = Instant::now();
    let news: Vec<Option<Transition>> = providers.iter().map(|(_, provider)| provider.breaker.take_news()).collect();
    let reports: Vec<ProviderReport> = providers
        .iter()
        .zip(&news)
        .map(|((name, provider), news)| {
            let breaker = &provider.breaker;
            let action = match news {
                Some(Transition::Opened { until }) => BreakerAction::Opened(until.saturating_duration_since(now)),
                Some(Transition::Closed) => BreakerAction::Closed(breaker.cooldown()),
                None if breaker.wants_probe() => BreakerAction::ClaimProbe(breaker.cooldown()),
                None => BreakerAction::Read,
            };
            let cooldown = provider.take_cooldown_news().map(|until| until.saturating_duration_since(now));
            ProviderReport { provider: name.clone(), action, cooldown }
        })
        .collect();
    let Some(views) = store.call(|state| state.sync_providers(&reports)).await else {
        for (((_, provider), news), report) in providers.iter().zip(news).zip(&reports) {
            if let Some(news) = news {
                provider.breaker.keep_news(news);
            }
            if let Some(left) = report.cooldown {
                provider.rate_limit_until(later(now, left));
            }
        }
        return;
    };
    for ((_, provider), view) in providers.iter().zip(views) {
        if let Some(left) = view.cooling_for {
            provider.rate_limit_remotely(later(Instant::now(), left));
        }
        let breaker = &provider.breaker;
        if let Some(left) = view.open_for {
            breaker.open_remotely(left);
        }
        match view.probe {
            Probe::Mine => breaker.grant_probe(),
            Probe::Closed => breaker.close_remotely(),
            Probe::Free | Probe::Taken => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BreakerSettings;
    use crate::resilience::Permit;
    use crate::state::{MemoryState, SaidUp};

    const COOLDOWN: Duration = Duration::from_secs(5);

    /// A replica: its providers' health, synced through its handle on `shared`.
    fn replica(shared: &MemoryState) -> Arc<Health> {
        let settings = BreakerSettings { cooldown: COOLDOWN, ..BreakerSettings::default() };
        let health = Arc::new(Health::new([("p", settings)]));
        let store =
            Store::new(Arc::new(shared.replica()), "memory", Duration::from_millis(50), Arc::new(SaidUp::default()));
        spawn_sync(store, Arc::downgrade(&health));
        health
    }

    fn open(health: &Health) {
        let breaker = Arc::clone(&health.provider("p").breaker);
        (0..3).for_each(|_| breaker.try_acquire().map(Permit::failure).unwrap_or_default());
        assert_eq!(breaker.state(), BreakerState::Open);
    }

    #[tokio::test(start_paused = true)]
    async fn an_opening_reaches_the_other_replica_and_one_probe_decides_for_both() {
        let shared = MemoryState::new();
        let (health_a, health_b) = (replica(&shared), replica(&shared));
        tokio::time::sleep(BREAKER_SYNC_EVERY * 2).await;
        open(&health_a);
        tokio::time::sleep(BREAKER_SYNC_EVERY * 2).await;
        let (a, b) = (Arc::clone(&health_a.provider("p").breaker), Arc::clone(&health_b.provider("p").breaker));
        assert_eq!(b.state(), BreakerState::Open, "within two syncs the opening is everywhere");
        assert!(b.try_acquire().is_none());

        tokio::time::sleep(COOLDOWN).await;
        let permits = [a.try_acquire(), b.try_acquire()];
        let probes: Vec<Permit> = permits.into_iter().flatten().collect();
        assert_eq!(probes.len(), 1, "one probe in the cluster, not one per replica");
        let probe = probes.into_iter().next().unwrap_or_else(|| unreachable!());
        assert!(probe.is_probe());
        probe.success();
        tokio::time::sleep(BREAKER_SYNC_EVERY * 2).await;
        assert_eq!((a.state(), b.state()), (BreakerState::Closed, BreakerState::Closed), "its success closes both");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_probe_opens_every_replica_again() {
        let shared = MemoryState::new();
        let (health_a, health_b) = (replica(&shared), replica(&shared));
        tokio::time::sleep(BREAKER_SYNC_EVERY * 2).await;
        open(&health_a);
        tokio::time::sleep(COOLDOWN + BREAKER_SYNC_EVERY * 2).await;
        let (a, b) = (Arc::clone(&health_a.provider("p").breaker), Arc::clone(&health_b.provider("p").breaker));
        let probe = a.try_acquire().or_else(|| b.try_acquire()).unwrap_or_else(|| panic!("one replica probes"));
        probe.failure();
        tokio::time::sleep(BREAKER_SYNC_EVERY * 2).await;
        assert_eq!((a.state(), b.state()), (BreakerState::Open, BreakerState::Open));
        assert!(a.try_acquire().is_none() && b.try_acquire().is_none());
    }
}
