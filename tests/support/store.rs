//! Where a store test keeps its records: a SQLite file in a temporary
//! directory of its own, or a PostgreSQL server of its own; both are gone
//! when the test lets go of them.

use super::postgres::TempDb;

/// Where a test's rows go.
pub enum Backend {
    /// A SQLite file in this directory.
    Sqlite(TempDir),
    /// A PostgreSQL server of the test's own.
    Postgres(TempDb),
}

impl Backend {
    /// A SQLite file in a new temporary directory named after `name`.
    pub fn sqlite(name: &str) -> Backend {
        Backend::Sqlite(TempDir::new(name))
    }

    /// A new PostgreSQL server.
    pub async fn postgres() -> Backend {
        Backend::Postgres(TempDb::create().await)
    }

    /// The `[store]` table that keeps records here.
    pub fn toml(&self) -> String {
        match self {
            Backend::Sqlite(dir) => format!("[store]\npath = \"{}\"\n", dir.path().join("baton.db").display()),
            Backend::Postgres(db) => format!("[store]\nbackend = \"postgres\"\nurl = \"{}\"\n", db.url()),
        }
    }
}

/// A temporary directory, removed when dropped.
pub struct TempDir(std::path::PathBuf);

impl TempDir {
    /// A new, empty directory named after `name`.
    pub fn new(name: &str) -> TempDir {
        let path =
            std::env::temp_dir().join(format!("baton-store-{}-{name}-{:08x}", std::process::id(), fastrand::u32(..)));
        std::fs::create_dir_all(&path).expect("temp dir");
        TempDir(path)
    }

    /// Where it is.
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
