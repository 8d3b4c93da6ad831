//! The keys in force on this replica: the config file's `[[keys]]` and the
//! store's, merged into the one config every request reads. The store is
//! read again every [`KEYS_REFRESH`], so a key created or revoked on any
//! replica of the same database holds here within a second; while the
//! store is down the keys last read stay in force. Once the store has held
//! a key, a key stays required when the last one is revoked, unless the
//! config says `allow_unauthenticated = true`: a revoke never widens access.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;

use super::keys::{self, LiveKeys, StoredKey};
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
    parts: Mutex<Parts>,
    /// How many reads of the store's keys have started, so that a read
    /// which started before a key was written cannot, by finishing last,
    /// undo one that started after.
    reads: AtomicU64,
}

/// What the config in force is merged from.
struct Parts {
    file: Arc<Config>,
    stored: Arc<LiveKeys>,
    /// The number of the read `stored` came from.
    read: u64,
}

/// One read of the store's keys, numbered when it starts.
pub struct KeysRead(u64);

impl Keyring {
    /// A keyring holding `config`'s keys and none from the store yet.
    pub fn new(config: Config) -> Self {
        let config = Arc::new(config);
        let parts = Parts { file: Arc::clone(&config), stored: Arc::new(LiveKeys::default()), read: 0 };
        Keyring { in_force: ArcSwap::new(config), parts: Mutex::new(parts), reads: AtomicU64::new(0) }
    }

    /// The config in force: the file's, with the store's keys and their budgets.
    pub fn config(&self) -> Arc<Config> {
        self.in_force.load_full()
    }

    /// The config as the file has it, without the store's keys.
    pub fn file_config(&self) -> Arc<Config> {
        Arc::clone(&self.lock().file)
    }

    /// The store's live keys as last read.
    pub fn stored(&self) -> Arc<LiveKeys> {
        Arc::clone(&self.lock().stored)
    }

    /// A new file config (a reload), merged with the store's keys; the
    /// config now in force.
    pub fn set_file_config(&self, config: Config) -> Arc<Config> {
        let mut parts = self.lock();
        parts.file = Arc::new(config);
        self.merge(&parts)
    }

    /// Numbers a read of the store's keys that is about to start.
    pub fn start_read(&self) -> KeysRead {
        KeysRead(self.reads.fetch_add(1, Ordering::Relaxed) + 1)
    }

    /// The store's live keys as `read` found them; whether they changed
    /// anything. A read older than the one in force is stale and ignored.
    pub fn set_stored(&self, read: KeysRead, stored: LiveKeys) -> bool {
        let mut parts = self.lock();
        if read.0 < parts.read {
            return false;
        }
        parts.read = read.0;
        if *parts.stored == stored {
            return false;
        }
        parts.stored = Arc::new(stored);
        self.merge(&parts);
        true
    }

    fn merge(&self, Parts { file, stored, .. }: &Parts) -> Arc<Config> {
        let merged = if stored.keys.is_empty() && !stays_closed(file, stored) {
            Arc::clone(file)
        } else {
            Arc::new(merged(file, stored))
        };
        self.in_force.store(Arc::clone(&merged));
        merged
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Parts> {
        self.parts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether a key stays required though none is live: the store has held
/// keys, and the config does not open the gateway without them.
fn stays_closed(file: &Config, stored: &LiveKeys) -> bool {
    stored.ever && !file.access.allow_unauthenticated
}

/// `file` with `stored`'s keys and budgets added; a stored key whose name
/// the file's config also has is left out (the file's wins), and said so.
/// Once the store has held keys, a key is required even with none live.
fn merged(file: &Config, stored: &LiveKeys) -> Config {
    let mut config = file.clone();
    let taken = |key: &&StoredKey| {
        let clash = file.access.keys.keys().iter().any(|own| own.name == key.name || own.sha256 == key.sha256);
        if clash {
            tracing::warn!(key = %key.name, "a key in the store has the name or secret of a config key: the config's holds");
        }
        !clash
    };
    let usable: Vec<&StoredKey> = stored.keys.iter().filter(taken).collect();
    let keys = file.access.keys.extended(usable.iter().map(|key| key.client_key()));
    config.access.keys = if stays_closed(file, stored) { keys.closed() } else { keys };
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
    let read = keyring.start_read();
    if let Ok(Ok(stored)) = tokio::time::timeout(READ_LIMIT, keys::active(&db)).await
        && keyring.set_stored(read, stored)
    {
        records.redact_with(&keyring.config());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(name: &str) -> StoredKey {
        StoredKey {
            name: name.to_owned(),
            sha256: [7; 32],
            routes: None,
            rpm: None,
            tpm: None,
            budget: None,
            created_ms: 0,
            revoked_ms: None,
        }
    }

    fn names(keyring: &Keyring) -> Vec<String> {
        keyring.config().access.keys.keys().iter().map(|key| key.name.clone()).collect()
    }

    #[test]
    fn a_read_that_started_first_and_finished_last_does_not_undo_a_newer_one() {
        let text = "[[providers]]\nname = \"p\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\n[[routes]]\nmodel = \"m\"\ntargets = [{ provider = \"p\", model = \"m\" }]\n";
        let config = crate::config::parse(text, "test", &|_| None).expect("a config");
        let keyring = Keyring::new(config);
        let before_the_key = keyring.start_read();
        let after_the_key = keyring.start_read();
        assert!(keyring.set_stored(after_the_key, live(&["made"])));
        assert!(!keyring.set_stored(before_the_key, LiveKeys::default()), "a stale read changes nothing");
        assert_eq!(names(&keyring), ["made"]);
        assert!(
            keyring.set_stored(keyring.start_read(), LiveKeys::default()),
            "a newer read that lost the key is taken"
        );
        assert!(names(&keyring).is_empty());
    }

    fn live(names: &[&str]) -> LiveKeys {
        LiveKeys { keys: names.iter().map(|name| stored(name)).collect(), ever: true }
    }

    #[test]
    fn revoking_the_last_stored_key_leaves_the_gateway_closed_unless_the_config_opens_it() {
        let text = "[[providers]]\nname = \"p\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\n[[routes]]\nmodel = \"m\"\ntargets = [{ provider = \"p\", model = \"m\" }]\n";
        let keyring = Keyring::new(crate::config::parse(text, "test", &|_| None).expect("a config"));
        assert!(!keyring.config().access.keys.required(), "open on loopback before any key");
        keyring.set_stored(keyring.start_read(), live(&["made"]));
        assert!(keyring.config().access.keys.required(), "closed once a key exists");
        keyring.set_stored(keyring.start_read(), LiveKeys { keys: Vec::new(), ever: true });
        assert!(keyring.config().access.keys.required(), "still closed once the last key is revoked");
        let open = format!("allow_unauthenticated = true\n{text}");
        keyring.set_file_config(crate::config::parse(&open, "test", &|_| None).expect("a config"));
        assert!(!keyring.config().access.keys.required(), "the config opens it again");
    }
}
