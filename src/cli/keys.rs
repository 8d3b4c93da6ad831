//! `baton keys create|list|revoke`: the store's client keys from a shell,
//! straight to the database the config's `[store]` names, so no running
//! baton and no admin token is needed; every replica of that database takes
//! a change within a second. `create` prints the secret alone on stdout,
//! for `KEY=$(baton keys create …)`, and what it made on stderr.

use std::path::{Path, PathBuf};
use std::time::Duration;

use baton::config::{self, StoreBackend};
use baton::store::keys::{self, KeyBudget, KeyRequest, StoredKey};
use baton::store::{Db, now_ms};
use clap::Subcommand;

use super::AnyError;

/// The longest a keys command waits for the store.
const STORE_LIMIT: Duration = Duration::from_secs(10);

/// What to do with the store's keys.
#[derive(Subcommand)]
pub(crate) enum KeysCommand {
    /// Make a key; its secret is printed once, and only its hash is kept.
    Create {
        /// The config file whose `[store]` keeps the key.
        #[arg(long, default_value = "baton.toml")]
        config: PathBuf,
        /// The key's name, in logs, metrics and the request log.
        name: String,
        /// A route it may use, by name or alias (repeat for more); default: every route.
        #[arg(long = "route")]
        routes: Vec<String>,
        /// Requests per minute.
        #[arg(long)]
        rpm: Option<u64>,
        /// Tokens per minute.
        #[arg(long)]
        tpm: Option<u64>,
        /// USD it may spend in any minute.
        #[arg(long)]
        usd_per_minute: Option<f64>,
        /// USD it may spend in any hour.
        #[arg(long)]
        usd_per_hour: Option<f64>,
        /// USD it may spend in any day.
        #[arg(long)]
        usd_per_day: Option<f64>,
    },
    /// List the store's keys, revoked ones too, and the config's: never a secret.
    List {
        /// The config file.
        #[arg(long, default_value = "baton.toml")]
        config: PathBuf,
    },
    /// Revoke a key of the store: every replica refuses it within a second.
    Revoke {
        /// The config file.
        #[arg(long, default_value = "baton.toml")]
        config: PathBuf,
        /// The key's name.
        name: String,
    },
}

/// Runs `command` against the config's store.
#[expect(clippy::print_stdout, reason = "the keys commands print what they made and found")]
pub(crate) async fn run(command: KeysCommand) -> Result<(), AnyError> {
    match command {
        KeysCommand::Create { config, name, routes, rpm, tpm, usd_per_minute, usd_per_hour, usd_per_day } => {
            let config_file = config::load_for_store(&config)?;
            let budget = KeyBudget { usd_per_minute, usd_per_hour, usd_per_day };
            let request = KeyRequest {
                name,
                routes: (!routes.is_empty()).then_some(routes),
                rpm,
                tpm,
                budget: (budget != KeyBudget::default()).then_some(budget),
            };
            let request = request.check(&config_file)?;
            let db = open(&config, &config_file.store.backend).await?;
            let minted = bounded(keys::create(&db, request, now_ms())).await?;
            db.close().await;
            eprintln!("created key {:?}: {}", minted.key.name, describe(&minted.key));
            eprintln!("this is the only time its secret is shown; baton keeps only its hash");
            println!("{}", minted.secret.expose());
        }
        KeysCommand::List { config } => {
            let config_file = config::load_for_store(&config)?;
            let db = open(&config, &config_file.store.backend).await?;
            let stored = bounded(keys::list(&db)).await?;
            db.close().await;
            for key in config_file.access.keys.keys() {
                println!("{:<24} config  routes {}", key.name, routes(key.routes.as_deref()));
            }
            for key in &stored {
                let state = if key.revoked_ms.is_some() { "revoked" } else { "store  " };
                println!("{:<24} {state} {}", key.name, describe(key));
            }
        }
        KeysCommand::Revoke { config, name } => {
            let config_file = config::load_for_store(&config)?;
            if config_file.access.keys.keys().iter().any(|key| key.name == name) {
                return Err(keys::KeyError::InConfig(name).into());
            }
            let db = open(&config, &config_file.store.backend).await?;
            let revoked = bounded(keys::revoke(&db, &name, now_ms())).await?;
            let left = bounded(keys::active(&db)).await?;
            db.close().await;
            println!("revoked key {:?}: refused on every replica within a second", revoked.name);
            if left.keys.is_empty() && config_file.access.keys.keys().is_empty() {
                eprintln!("{}", last_key_revoked(config_file.access.allow_unauthenticated));
            }
        }
    }
    Ok(())
}

/// What the gateway does once no key is left: a revoke never opens it.
fn last_key_revoked(allow_unauthenticated: bool) -> &'static str {
    if allow_unauthenticated {
        "that was the last key: with allow_unauthenticated = true in the config, the gateway now serves requests without a key"
    } else {
        "that was the last key: the gateway stays closed, and every /v1 request gets 401 until a key is made (or the config sets allow_unauthenticated = true)"
    }
}

/// The config's store, opened (and migrated) for a change to its keys.
async fn open(path: &Path, backend: &StoreBackend) -> Result<Db, AnyError> {
    if *backend == StoreBackend::None {
        return Err(format!(
            "{} keeps no store ([store] backend = \"none\"): keys can only be set in [[keys]]",
            path.display()
        )
        .into());
    }
    bounded(Db::open(backend)).await
}

/// `work` within [`STORE_LIMIT`].
async fn bounded<T, E: Into<AnyError>>(work: impl Future<Output = Result<T, E>>) -> Result<T, AnyError> {
    match tokio::time::timeout(STORE_LIMIT, work).await {
        Ok(done) => done.map_err(Into::into),
        Err(_) => Err(format!("the store did not answer within {STORE_LIMIT:?}").into()),
    }
}

/// A key's routes and limits on one line.
fn describe(key: &StoredKey) -> String {
    let limit = |limit: Option<u64>| limit.map_or("-".to_owned(), |n| n.to_string());
    let budget = key.budget.and_then(|budget| serde_json::to_string(&budget).ok()).unwrap_or_else(|| "-".to_owned());
    format!("routes {}, rpm {}, tpm {}, budget {budget}", routes(key.routes.as_deref()), limit(key.rpm), limit(key.tpm))
}

fn routes(routes: Option<&[String]>) -> String {
    routes.map_or_else(|| "every route".to_owned(), |routes| routes.join(","))
}
