//! A throwaway PostgreSQL database per test, on the server at
//! 127.0.0.1:5432 (trust auth, user `postgres`): created with a random
//! name, dropped when the test lets go of it, whether it passed or not.
//! No server is a failure, not a skip: CI provides one.

use sqlx::Connection;
use sqlx::postgres::PgConnection;

/// The server's maintenance database, from which the others are made.
const ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A database of one test's own.
pub struct TempDb {
    name: String,
}

impl TempDb {
    /// Creates `baton_test_<random>`.
    pub async fn create() -> TempDb {
        let name = format!("baton_test_{:016x}", fastrand::u64(..));
        let mut admin = PgConnection::connect(ADMIN_URL)
            .await
            .expect("PostgreSQL at 127.0.0.1:5432 (user postgres, trust auth) must be running for these tests");
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await
            .expect("create database");
        let _ = admin.close().await;
        TempDb { name }
    }

    /// The URL baton's `[store]` takes.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:5432/{}", self.name)
    }

    /// Creates the database again (empty) after [`TempDb::drop_now`]: the store's database back.
    pub async fn recreate(&self) {
        let mut admin = PgConnection::connect(ADMIN_URL).await.expect("PostgreSQL answers");
        let sql = format!("CREATE DATABASE {}", self.name);
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut admin).await.expect("create database");
        let _ = admin.close().await;
    }

    /// Drops the database now, with its connections: the store's database gone.
    pub async fn drop_now(&self) {
        drop_database(&self.name).await;
    }
}

async fn drop_database(name: &str) {
    let mut admin = PgConnection::connect(ADMIN_URL).await.expect("PostgreSQL answers");
    let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut admin).await.expect("drop database");
    let _ = admin.close().await;
}

impl Drop for TempDb {
    fn drop(&mut self) {
        let name = self.name.clone();
        // The test's runtime may be gone or busy: drop it from a runtime of its own.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            runtime.block_on(drop_database(&name));
        });
        let _ = dropped.join();
    }
}
