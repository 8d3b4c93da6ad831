//! The database behind the store: one connection pool and one code path for
//! SQLite and PostgreSQL (sqlx's `Any` driver, every statement written in
//! SQL both accept, `$1` placeholders included), opened with its schema
//! migrated to the version this build embeds.

use std::borrow::Cow;
use std::path::Path;
use std::time::Duration;

use sqlx::AnyPool;
use sqlx::any::AnyPoolOptions;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{Executor, SqlSafeStr};

use crate::config::StoreBackend;

/// How long opening a connection may take before the store counts as down.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections per pool: the writer's, the retention sweep's and a few for
/// the admin endpoints' reads.
const MAX_CONNECTIONS: u32 = 4;
/// How often opening the store tries to migrate before it gives up.
const MIGRATE_TRIES: u32 = 3;
/// How long it waits between those tries.
const MIGRATE_PAUSE: Duration = Duration::from_millis(200);

/// The schema, one migration per version, in SQLite's words and PostgreSQL's
/// (they differ only in how `seq` counts).
const MIGRATIONS: [(i64, &str, &str, &str); 2] = [
    (
        1,
        "records",
        include_str!("migrations/sqlite/0001_records.sql"),
        include_str!("migrations/postgres/0001_records.sql"),
    ),
    // The same words in both.
    (2, "responses", include_str!("migrations/0002_responses.sql"), include_str!("migrations/0002_responses.sql")),
];

/// Which database a pool reaches, where the SQL must differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// A SQLite file.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
}

/// An open database with the current schema.
#[derive(Debug, Clone)]
pub struct Db {
    pool: AnyPool,
    flavor: Flavor,
}

/// Why the store could not be opened or used; its text is for the one log
/// line that says the store went down, never for a client.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The database refused or failed a statement, or could not be reached.
    #[error("{0}")]
    Sql(#[from] sqlx::Error),
    /// The schema could not be brought to this build's version.
    #[error("migrating the schema: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The database took longer than its bound.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The config keeps nothing.
    #[error("no store is configured")]
    Off,
}

/// Where the schema of a reachable database stands against this build's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaVersion {
    /// The newest migration applied (0: none).
    pub applied: i64,
    /// The newest this build embeds.
    pub embedded: i64,
}

impl SchemaVersion {
    /// Whether every embedded migration has been applied.
    pub fn is_current(&self) -> bool {
        self.applied >= self.embedded
    }
}

impl Db {
    /// Connects to `backend` and migrates its schema (creating a SQLite file
    /// that does not exist yet).
    pub async fn open(backend: &StoreBackend) -> Result<Db, DbError> {
        let db = Self::connect(backend, true).await?;
        db.migrate().await?;
        Ok(db)
    }

    /// Applies this build's migrations, trying again when a try fails: two
    /// processes opening one new SQLite file at once (`baton keys` beside a
    /// `baton serve` that is starting) both find it unmigrated, and the one
    /// that loses the race fails on the tables the other has just made; its
    /// next try finds them recorded. A failed try leaves nothing behind, as
    /// each migration runs in a transaction. (On PostgreSQL sqlx takes a lock
    /// for this; SQLite has none to take.)
    async fn migrate(&self) -> Result<(), DbError> {
        let migrator = self.migrator();
        let mut tries = 1;
        loop {
            match migrator.run(&self.pool).await {
                Ok(()) => return Ok(()),
                Err(_) if tries < MIGRATE_TRIES => {
                    tries += 1;
                    tokio::time::sleep(MIGRATE_PAUSE).await;
                }
                Err(err) => return Err(err.into()),
            }
        }
    }

    /// Connects to `backend` without creating or changing anything, for
    /// `baton check`.
    pub async fn connect_only(backend: &StoreBackend) -> Result<Db, DbError> {
        Self::connect(backend, false).await
    }

    async fn connect(backend: &StoreBackend, create: bool) -> Result<Db, DbError> {
        sqlx::any::install_default_drivers();
        let (url, flavor) = match backend {
            StoreBackend::None => return Err(DbError::Off),
            StoreBackend::Sqlite { path } => (sqlite_url(path, create), Flavor::Sqlite),
            StoreBackend::Postgres { url } => (url.expose().to_owned(), Flavor::Postgres),
        };
        let options = AnyPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(CONNECT_TIMEOUT)
            // A SQLite connection is this process's handle on a file, with no
            // other end to hang up, so a ping before each use (a round trip to
            // its worker thread besides the query's own) buys nothing but
            // wake-ups, about a tenth of an idle replica's CPU. A PostgreSQL
            // connection can be cut by the network, so it is tested.
            .test_before_acquire(flavor == Flavor::Postgres)
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if flavor == Flavor::Sqlite {
                        // WAL lets the admin reads run beside the writer; NORMAL
                        // syncs at checkpoints, not at every batch: a crash may lose
                        // the last batches, never the file.
                        conn.execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;").await?;
                    }
                    Ok(())
                })
            });
        let pool = tokio::time::timeout(CONNECT_TIMEOUT, options.connect(&url))
            .await
            .map_err(|_| DbError::Timeout(CONNECT_TIMEOUT))??;
        Ok(Db { pool, flavor })
    }

    /// The pool, for the store's statements.
    pub(super) fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Which database this is.
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// The schema's version now, against this build's.
    pub async fn schema(&self) -> Result<SchemaVersion, DbError> {
        let embedded = MIGRATIONS.iter().map(|(version, ..)| *version).max().unwrap_or(0);
        let table = match self.flavor {
            Flavor::Sqlite => "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
            Flavor::Postgres => "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = '_sqlx_migrations'",
        };
        let tables: i64 = sqlx::query_scalar(table).fetch_one(&self.pool).await?;
        if tables == 0 {
            return Ok(SchemaVersion { applied: 0, embedded });
        }
        let applied: Option<i64> = sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations WHERE success = TRUE")
            .fetch_one(&self.pool)
            .await?;
        Ok(SchemaVersion { applied: applied.unwrap_or(0), embedded })
    }

    /// Whether the database answers a trivial statement.
    pub async fn ping(&self) -> Result<(), DbError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// Closes every connection, waiting for those in use.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// This build's migrations, in this database's words: versioned and
    /// checksummed as `sqlx::migrate!` would embed them, without the macro
    /// (whose proc-macro crate would build SQLite a second time).
    fn migrator(&self) -> Migrator {
        let migrations = MIGRATIONS
            .iter()
            .map(|(version, description, sqlite, postgres)| {
                let sql = match self.flavor {
                    Flavor::Sqlite => *sqlite,
                    Flavor::Postgres => *postgres,
                };
                Migration::new(*version, Cow::Borrowed(*description), MigrationType::Simple, sql.into_sql_str(), false)
            })
            .collect();
        Migrator::with_migrations(migrations)
    }
}

/// The URL of the SQLite file at `path` (percent-encoded, so any file name
/// works), created if missing when `create`.
fn sqlite_url(path: &Path, create: bool) -> String {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let mut url = String::from("sqlite://");
    for byte in absolute.to_string_lossy().bytes() {
        if byte.is_ascii_alphanumeric() || b"/._-~".contains(&byte) {
            url.push(char::from(byte));
        } else {
            url.push_str(&format!("%{byte:02X}"));
        }
    }
    url.push_str(if create { "?mode=rwc" } else { "?mode=ro" });
    url
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

    use super::*;

    #[test]
    fn a_sqlite_path_becomes_a_url_whatever_its_characters() {
        assert_eq!(sqlite_url(Path::new("/var/lib/baton.db"), true), "sqlite:///var/lib/baton.db?mode=rwc");
        assert_eq!(sqlite_url(Path::new("/tmp/a b?#%.db"), false), "sqlite:///tmp/a%20b%3F%23%25.db?mode=ro");
        assert!(sqlite_url(Path::new("rel.db"), true).ends_with("/rel.db?mode=rwc"), "made absolute");
    }

    #[tokio::test]
    async fn processes_opening_one_new_sqlite_file_at_once_all_migrate_it() {
        let dir = std::env::temp_dir().join(format!("baton-migrate-{:016x}", fastrand::u64(..)));
        std::fs::create_dir_all(&dir).expect("a directory");
        for round in 0..10 {
            let backend = StoreBackend::Sqlite { path: dir.join(format!("race-{round}.db")) };
            let opened = tokio::time::timeout(Duration::from_secs(60), async {
                tokio::join!(Db::open(&backend), Db::open(&backend), Db::open(&backend))
            })
            .await
            .expect("opened within a minute");
            for db in [opened.0, opened.1, opened.2] {
                let db = db.unwrap_or_else(|err| panic!("round {round}: {err}"));
                assert!(db.schema().await.is_ok_and(|schema| schema.is_current()), "round {round}: migrated");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
