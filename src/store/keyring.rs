//! The keys in force on this replica: the config file's `[[keys]]` and the
//! store's, merged into the one config every request reads. The store is
//! read again every [`KEYS_REFRESH`], so a key created or revoked on any
//! replica of the same database holds here within a second; while the
//! store is down the keys last read stay in force.

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;

use super::keys::{self, StoredKey};
use super::{Records, WeakRecords};
use crate::config::Config;

/// How often the store's keys are read again: well inside the second
/// within which a revoked key must stop working on every replica.
pub const KEYS_REFRESH: Duration = Duration::from_millis(200);
/// The longest one read of the keys may take before it is given up.
const READ_LIMIT: Duration = Duration::from_secs(2);

/// The config in force, made of the file's config and the store's keys.
pub struct Keyring {
    in_force: ArcSwap<Config>,
    /// The file's config and the store's live keys it was merged with;
    /// the lock makes each change and its merge one step.
    parts: Mutex<(Arc<Config>, Arc<Vec<StoredKey>>)>,
}

impl Keyring {
    /// A keyring holding `config`'s keys and none from the store yet.
    pub fn new(config: Config) -> Self {
        let config = Arc::new(config);
        Keyring { in_force: ArcSwap::new(Arc::clone(&config)), parts: Mutex::new((config, Arc::new(Vec::new()))) }
    }

    /// The config in force: the file's, with the store's keys and their budgets.
    pub fn config(&self) -> Arc<Config> {
        self.in_force.load_full()
    }

    /// The config as the file has it, without the store's keys.
    pub fn file_config(&self) -> Arc<Config> {
        Arc::clone(&self.lock().0)
    }

    /// The store's live keys as last read.
    pub fn stored(&self) -> Arc<Vec<StoredKey>> {
        Arc::clone(&self.lock().1)
    }

    /// A new file config (a reload), merged with the store's keys; the
    /// config now in force.
    pub fn set_file_config(&self, config: Config) -> Arc<Config> {
        let mut parts = self.lock();
        parts.0 = Arc::new(config);
        self.merge(&parts)
    }

    /// The store's live keys as just read; whether they changed anything.
    pub fn set_stored(&self, stored: Vec<StoredKey>) -> bool {
        let mut parts = self.lock();
        if *parts.1 == stored {
            return false;
        }
        parts.1 = Arc::new(stored);
        self.merge(&parts);
        true
    }

    fn merge(&self, (file, stored): &(Arc<Config>, Arc<Vec<StoredKey>>)) -> Arc<Config> {
        let merged = if stored.is_empty() { Arc::clone(file) } else { Arc::new(merged(file, stored)) };
        self.in_force.store(Arc::clone(&merged));
        merged
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Arc<Config>, Arc<Vec<StoredKey>>)> {
        self.parts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `file` with `stored`'s keys and budgets added; a stored key whose name
/// the file's config also has is left out (the file's wins), and said so.
fn merged(file: &Config, stored: &[StoredKey]) -> Config {
    let mut config = file.clone();
    let taken = |key: &&StoredKey| {
        let clash = file.access.keys.keys().iter().any(|own| own.name == key.name || own.sha256 == key.sha256);
        if clash {
            tracing::warn!(key = %key.name, "a key in the store has the name or secret of a config key: the config's holds");
        }
        !clash
    };
    let usable: Vec<&StoredKey> = stored.iter().filter(taken).collect();
    config.access.keys = file.access.keys.extended(usable.iter().map(|key| key.client_key()));
    config.budgets.budgets.extend(usable.iter().flat_map(|key| key.budgets()));
    config
}

/// Reads the store's keys into `keyring` until either is gone, every
/// [`KEYS_REFRESH`]; a reload that changed them also updates what logged
/// bodies are redacted of.
pub async fn follow(keyring: Weak<Keyring>, records: WeakRecords) {
    let mut tick = tokio::time::interval(KEYS_REFRESH);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let (Some(keyring), Some(records)) = (keyring.upgrade(), records.upgrade()) else { return };
        refresh(&keyring, &records).await;
    }
}

/// Reads the store's keys once into `keyring`; nothing changes when the
/// store is down or slow.
pub async fn refresh(keyring: &Keyring, records: &Records) {
    let Some(db) = records.db() else { return };
    if let Ok(Ok(stored)) = tokio::time::timeout(READ_LIMIT, keys::active(&db)).await
        && keyring.set_stored(stored)
    {
        records.redact_with(&keyring.config());
    }
}
