//! Where a test's request log goes: a SQLite file in a temporary directory
//! of the test's own, or a PostgreSQL server of its own; both are gone when
//! the test lets go of them.

use std::path::{Path, PathBuf};

use super::postgres::TempDb;

/// A store for one test, and the `[store]` table that names it.
pub enum Backend {
    Sqlite(TempDir),
    Postgres(TempDb),
}

impl Backend {
    /// A SQLite file in a fresh directory named after `name`.
    pub fn sqlite(name: &str) -> Backend {
        Backend::Sqlite(TempDir::new(name))
    }

    /// A database on a PostgreSQL server of this test's own.
    pub async fn postgres() -> Backend {
        Backend::Postgres(TempDb::create().await)
    }

    /// The `[store]` table for this backend.
    pub fn toml(&self) -> String {
        match self {
            Backend::Sqlite(dir) => format!("[store]\npath = \"{}\"\n", dir.path().join("baton.db").display()),
            Backend::Postgres(db) => format!("[store]\nbackend = \"postgres\"\nurl = \"{}\"\n", db.url()),
        }
    }
}

/// A temporary directory, removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh directory named after the test process, `name` and a random suffix.
    pub fn new(name: &str) -> TempDir {
        let path =
            std::env::temp_dir().join(format!("baton-store-{}-{name}-{:08x}", std::process::id(), fastrand::u32(..)));
        std::fs::create_dir_all(&path).expect("temp dir");
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A scenario's two tests, one a backend: `$sqlite` runs it on a SQLite file
/// in a fresh directory named after `$dir`, `$postgres` on a PostgreSQL
/// server of its own, each failed rather than hung once `$limit` has passed.
#[macro_export]
macro_rules! on_each_backend {
    ($scenario:ident within $limit:expr => $sqlite:ident($dir:literal), $postgres:ident) => {
        #[test]
        fn $sqlite() {
            $crate::support::run($limit, $scenario($crate::support::backend::Backend::sqlite($dir)));
        }

        #[test]
        fn $postgres() {
            $crate::support::run($limit, async {
                $scenario($crate::support::backend::Backend::postgres().await).await;
            });
        }
    };
}
