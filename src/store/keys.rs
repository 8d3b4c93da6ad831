//! Client keys kept in the store, beside the config's `[[keys]]`: created
//! with a secret that is shown once and kept only as its SHA-256, listed
//! without it, and revoked by name. A revoked key's row stays, so the
//! request log's key names keep meaning something; its name may be given to
//! a new key later.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::db::{Db, DbError};
use super::insert::count;
use super::time::rfc3339;
use crate::access::{ClientKey, DRILL_KEY, parse_sha256};
use crate::config::{Budget, BudgetAction, BudgetScope, BudgetWindow, Config, Secret};

/// What every secret baton mints starts with: shaped like the keys
/// redaction already looks for, so a logged body never keeps one.
pub const SECRET_PREFIX: &str = "sk-baton-";
/// The longest key name: it travels in URLs, logs and metric labels.
const MAX_NAME: usize = 64;

/// What a key may spend, per sliding window; at least one is set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyBudget {
    /// USD over the last minute.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usd_per_minute: Option<f64>,
    /// USD over the last hour.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usd_per_hour: Option<f64>,
    /// USD over the last day.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usd_per_day: Option<f64>,
}

impl KeyBudget {
    fn windows(&self) -> [(Option<f64>, BudgetWindow, &'static str); 3] {
        [
            (self.usd_per_minute, BudgetWindow::Minute, "usd_per_minute"),
            (self.usd_per_hour, BudgetWindow::Hour, "usd_per_hour"),
            (self.usd_per_day, BudgetWindow::Day, "usd_per_day"),
        ]
    }
}

/// What a new key asks for: the body of `POST /admin/keys`, or the flags
/// of `baton keys create`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyRequest {
    /// Its name in logs, metrics and the request log.
    pub name: String,
    /// The routes it may use, by name or alias; none: every route.
    pub routes: Option<Vec<String>>,
    /// Requests per minute.
    pub rpm: Option<u64>,
    /// Tokens per minute.
    pub tpm: Option<u64>,
    /// What it may spend.
    pub budget: Option<KeyBudget>,
}

/// A key as the store holds it: everything but the secret.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredKey {
    /// Its name.
    pub name: String,
    /// The SHA-256 of its secret.
    pub sha256: [u8; 32],
    /// The routes it may use, by route name; none: every route.
    pub routes: Option<Vec<String>>,
    /// Requests per minute.
    pub rpm: Option<u64>,
    /// Tokens per minute.
    pub tpm: Option<u64>,
    /// What it may spend.
    pub budget: Option<KeyBudget>,
    /// When it was created, Unix milliseconds.
    pub created_ms: i64,
    /// When it was revoked, if it was.
    pub revoked_ms: Option<i64>,
}

/// A key just created, with the one copy of its secret there will ever be.
#[derive(Debug)]
pub struct Minted {
    /// The key as stored.
    pub key: StoredKey,
    /// The secret, to hand to whoever asked and then forget.
    pub secret: Secret,
}

/// Why a key could not be created or revoked; the text is for the one who asked.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The request is not one a key can be made from.
    #[error("{0}")]
    Invalid(String),
    /// A key of that name is in use.
    #[error("a key named {0:?} already exists; revoke it first, or choose another name")]
    Exists(String),
    /// The name belongs to a key in the config file.
    #[error("the key {0:?} is set in the config file's [[keys]]; change it there")]
    InConfig(String),
    /// No key of that name is in the store, or it is already revoked.
    #[error("no key named {0:?} is in the store (or it is already revoked)")]
    NotFound(String),
    /// The database failed.
    #[error("the store failed: {0}")]
    Db(#[from] DbError),
}

impl StoredKey {
    /// The key as the access check and the limits use it.
    pub fn client_key(&self) -> ClientKey {
        ClientKey {
            name: self.name.clone(),
            sha256: self.sha256,
            routes: self.routes.clone(),
            rpm: self.rpm,
            tpm: self.tpm,
        }
    }

    /// Its budget, as the request gate checks budgets: each window blocks.
    pub fn budgets(&self) -> Vec<Budget> {
        let windows = self.budget.map(|budget| budget.windows());
        windows
            .into_iter()
            .flatten()
            .filter_map(|(usd, window, _)| {
                let scope = BudgetScope::Key(self.name.clone());
                usd.map(|usd| Budget { scope, window, usd, action: BudgetAction::Block })
            })
            .collect()
    }

    /// The key as the admin API shows it: never the secret or its hash.
    pub fn json(&self) -> Value {
        json!({
            "name": self.name,
            "source": "store",
            "routes": self.routes,
            "rpm": self.rpm,
            "tpm": self.tpm,
            "budget": self.budget,
            "created_at": rfc3339(self.created_ms),
            "revoked_at": self.revoked_ms.map(rfc3339),
        })
    }
}

impl KeyRequest {
    /// The request checked against `config`: a usable name no config key
    /// has, routes that exist (as route names), limits above zero.
    pub fn check(mut self, config: &Config) -> Result<KeyRequest, KeyError> {
        let invalid = |message: String| Err(KeyError::Invalid(message));
        self.name = self.name.trim().to_owned();
        let name = &self.name;
        if name.is_empty() || name.len() > MAX_NAME {
            return invalid(format!("name must be 1 to {MAX_NAME} characters"));
        }
        if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.:@".contains(&b)) {
            return invalid(format!("name {name:?} may hold only letters, digits and - _ . : @"));
        }
        if name == DRILL_KEY {
            return invalid(format!("name {name:?} is reserved: scheduled drills are charged to it"));
        }
        if config.access.keys.keys().iter().any(|key| key.name == *name) {
            return Err(KeyError::InConfig(name.clone()));
        }
        if let Some(names) = &self.routes {
            if names.is_empty() {
                return invalid("routes must name at least one route; leave it out for every route".to_owned());
            }
            let mut routes: Vec<String> = Vec::new();
            for asked in names {
                let Some(route) = config.route(asked) else {
                    return invalid(format!("no route is named {asked:?}"));
                };
                if !routes.contains(&route.model) {
                    routes.push(route.model.clone());
                }
            }
            self.routes = Some(routes);
        }
        for (limit, field) in [(self.rpm, "rpm"), (self.tpm, "tpm")] {
            if limit == Some(0) {
                return invalid(format!("{field} must be at least 1 per minute"));
            }
        }
        if let Some(budget) = &self.budget {
            let windows = budget.windows();
            if windows.iter().all(|(usd, ..)| usd.is_none()) {
                return invalid("budget needs usd_per_minute, usd_per_hour or usd_per_day".to_owned());
            }
            if let Some((_, _, field)) =
                windows.iter().find(|(usd, ..)| usd.is_some_and(|usd| !(usd.is_finite() && usd > 0.0)))
            {
                return invalid(format!("budget.{field} must be a finite amount of USD above 0"));
            }
        }
        Ok(self)
    }
}

/// Creates the key `request` asks for (already [checked](KeyRequest::check))
/// with a new secret. A revoked key's name is taken over; a live one's is not.
pub async fn create(db: &Db, request: KeyRequest, now_ms: i64) -> Result<Minted, KeyError> {
    let secret = new_secret()?;
    let key = StoredKey {
        name: request.name,
        sha256: ClientKey::hash(secret.expose()),
        routes: request.routes,
        rpm: request.rpm,
        tpm: request.tpm,
        budget: request.budget,
        created_ms: now_ms,
        revoked_ms: None,
    };
    let mut tx = db.pool().begin().await.map_err(DbError::from)?;
    sqlx::query("DELETE FROM keys WHERE name = $1 AND revoked_ms IS NOT NULL")
        .bind(key.name.clone())
        .execute(&mut *tx)
        .await
        .map_err(DbError::from)?;
    let routes = key.routes.as_ref().and_then(|routes| serde_json::to_string(routes).ok());
    let budget = key.budget.as_ref().and_then(|budget| serde_json::to_string(budget).ok());
    let inserted = sqlx::query(
        "INSERT INTO keys (name, secret_sha256, routes, rpm, tpm, budget, created_ms) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(key.name.clone())
    .bind(hex(&key.sha256))
    .bind(routes)
    .bind(key.rpm.map(count))
    .bind(key.tpm.map(count))
    .bind(budget)
    .bind(now_ms)
    .execute(&mut *tx)
    .await;
    match inserted {
        Ok(_) => {}
        Err(err) if err.as_database_error().is_some_and(|db| db.is_unique_violation()) => {
            return Err(KeyError::Exists(key.name));
        }
        Err(err) => return Err(DbError::from(err).into()),
    }
    tx.commit().await.map_err(DbError::from)?;
    Ok(Minted { key, secret })
}

/// Every key the store holds, revoked ones included, by name.
pub async fn list(db: &Db) -> Result<Vec<StoredKey>, DbError> {
    read(db, "SELECT * FROM keys ORDER BY name").await
}

/// The store's keys as every replica serves with them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LiveKeys {
    /// The keys that are not revoked.
    pub keys: Vec<StoredKey>,
    /// Whether the store has ever held a key, revoked ones included: once
    /// keys have been in use, revoking the last one must not open the
    /// gateway to everyone.
    pub ever: bool,
}

/// The keys that are not revoked, and whether any ever was: one query that
/// reads the live keys and at most one revoked name besides.
pub async fn active(db: &Db) -> Result<LiveKeys, DbError> {
    let rows = read(
        db,
        "SELECT * FROM keys WHERE revoked_ms IS NULL \
         OR name = (SELECT MIN(name) FROM keys WHERE revoked_ms IS NOT NULL) ORDER BY name",
    )
    .await?;
    let ever = !rows.is_empty();
    Ok(LiveKeys { keys: rows.into_iter().filter(|key| key.revoked_ms.is_none()).collect(), ever })
}

/// Revokes the live key `name`: from the next read of the store on, no
/// replica takes it.
pub async fn revoke(db: &Db, name: &str, now_ms: i64) -> Result<StoredKey, KeyError> {
    let revoked = sqlx::query("UPDATE keys SET revoked_ms = $1 WHERE name = $2 AND revoked_ms IS NULL")
        .bind(now_ms)
        .bind(name.to_owned())
        .execute(db.pool())
        .await
        .map_err(DbError::from)?;
    if revoked.rows_affected() == 0 {
        return Err(KeyError::NotFound(name.to_owned()));
    }
    let keys = list(db).await?;
    keys.into_iter().find(|key| key.name == name).ok_or_else(|| KeyError::NotFound(name.to_owned()))
}

async fn read(db: &Db, sql: &'static str) -> Result<Vec<StoredKey>, DbError> {
    let rows = sqlx::query(sql).fetch_all(db.pool()).await?;
    let mut keys = Vec::with_capacity(rows.len());
    for row in &rows {
        match stored_key(row) {
            Ok(Some(key)) => keys.push(key),
            // A row this build cannot read (written by hand, or damaged)
            // admits nobody, and says so.
            Ok(None) => tracing::warn!("store: a key row cannot be read and is ignored"),
            Err(err) => return Err(err),
        }
    }
    Ok(keys)
}

fn stored_key(row: &AnyRow) -> Result<Option<StoredKey>, DbError> {
    let text = |name: &str| row.try_get::<Option<String>, _>(name);
    let int = |name: &str| row.try_get::<Option<i64>, _>(name);
    let Some(sha256) = text("secret_sha256")?.as_deref().and_then(parse_sha256) else { return Ok(None) };
    let routes = match text("routes")? {
        Some(json) => match serde_json::from_str(&json) {
            Ok(routes) => Some(routes),
            Err(_) => return Ok(None),
        },
        None => None,
    };
    let budget = match text("budget")? {
        Some(json) => match serde_json::from_str(&json) {
            Ok(budget) => Some(budget),
            Err(_) => return Ok(None),
        },
        None => None,
    };
    let limit = |value: Option<i64>| value.and_then(|n| u64::try_from(n).ok());
    Ok(Some(StoredKey {
        name: row.try_get("name")?,
        sha256,
        routes,
        rpm: limit(int("rpm")?),
        tpm: limit(int("tpm")?),
        budget,
        created_ms: row.try_get("created_ms")?,
        revoked_ms: int("revoked_ms")?,
    }))
}

/// 32 random bytes from the system's secure generator, in hex after the prefix.
fn new_secret() -> Result<Secret, KeyError> {
    let mut bytes = [0u8; 32];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|_| KeyError::Invalid("no secure random bytes".to_owned()))?;
    Ok(Secret::new(format!("{SECRET_PREFIX}{}", hex(&bytes))))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
