//! `[store]`: the database that keeps what outlives the process — the
//! request log, whose cost column is the spend ledger — in a SQLite file
//! next to the config (the default), in PostgreSQL, or nowhere.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use super::check::Checker;
use super::error::ConfigError;
use crate::secret::Secret;

/// The SQLite file a config loaded from a file keeps its records in, next to it.
pub const DEFAULT_STORE_FILE: &str = "baton.db";
/// How many days of request rows are kept when the config does not say.
pub const DEFAULT_RETENTION_DAYS: u32 = 30;
/// The longest retention accepted: ten years, so the cut-off time never overflows.
const MAX_RETENTION_DAYS: u32 = 3650;

/// The `[store]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStore {
    backend: Option<Spanned<String>>,
    path: Option<Spanned<String>>,
    url: Option<Spanned<String>>,
    retention_days: Option<Spanned<u32>>,
    log_bodies: Option<Spanned<bool>>,
}

/// Which database keeps the records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreBackend {
    /// Nothing is kept (and the endpoints that read the store are off).
    None,
    /// A SQLite file, created when missing.
    Sqlite {
        /// Where the file is: `path` resolved against the config's directory.
        path: PathBuf,
    },
    /// A PostgreSQL database every replica shares.
    Postgres {
        /// Its URL; a secret, since it may carry a password.
        url: Secret,
    },
}

/// The `[store]` section, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// Where records go.
    pub backend: StoreBackend,
    /// Rows older than this many days are deleted.
    pub retention_days: u32,
    /// Whether each row keeps the request body and the answer's text
    /// (capped, with keys redacted); off, no prompt or answer is stored.
    pub log_bodies: bool,
}

impl StoreConfig {
    /// The store a config has without a `[store]` table: a SQLite file next
    /// to the config when it was loaded from a file in `dir`; nothing for a
    /// config given as text (tests; `baton demo` sets a temporary file of its
    /// own), which has no place of its own and must not leave a file in
    /// whatever directory it runs in.
    pub fn default_for(dir: Option<&Path>) -> Self {
        let backend = match dir {
            Some(dir) => StoreBackend::Sqlite { path: dir.join(DEFAULT_STORE_FILE) },
            None => StoreBackend::None,
        };
        StoreConfig { backend, retention_days: DEFAULT_RETENTION_DAYS, log_bodies: false }
    }

    /// The backend's name, for `baton check`, `/admin/status` and logs.
    pub fn backend_name(&self) -> &'static str {
        match self.backend {
            StoreBackend::None => "none",
            StoreBackend::Sqlite { .. } => "sqlite",
            StoreBackend::Postgres { .. } => "postgres",
        }
    }
}

/// Validates `[store]`; its absence is [`StoreConfig::default_for`] the
/// config's directory.
pub(super) fn check(check: &Checker<'_>, raw: Option<&Spanned<RawStore>>) -> Result<StoreConfig, ConfigError> {
    let Some(raw) = raw.map(Spanned::get_ref) else { return Ok(StoreConfig::default_for(check.dir)) };
    let retention_days = match &raw.retention_days {
        Some(days) if !(1..=MAX_RETENTION_DAYS).contains(days.get_ref()) => {
            let message = format!("must be from 1 to {MAX_RETENTION_DAYS} days");
            return Err(check.error(days, "store.retention_days".into(), message));
        }
        Some(days) => *days.get_ref(),
        None => DEFAULT_RETENTION_DAYS,
    };
    let log_bodies = raw.log_bodies.as_ref().is_some_and(|on| *on.get_ref());
    let name = raw.backend.as_ref().map_or("sqlite", |backend| backend.get_ref().as_str());
    let misplaced = |value: &Option<Spanned<String>>, key: &str, wants: &str| match value {
        Some(value) => Err(check.error(value, format!("store.{key}"), format!("only a {wants} backend takes it"))),
        None => Ok(()),
    };
    let backend = match name {
        "sqlite" => {
            misplaced(&raw.url, "url", "postgres")?;
            StoreBackend::Sqlite { path: store_path(check, raw.path.as_ref())? }
        }
        "postgres" => {
            misplaced(&raw.path, "path", "sqlite")?;
            let Some(written) = &raw.url else {
                let at = raw.backend.as_ref().map_or(1, |backend| check.line(backend.span().start));
                return Err(ConfigError::Invalid {
                    path: check.label.to_owned(),
                    line: at,
                    key: "store.url".to_owned(),
                    message: "a postgres backend needs a url, as postgres://baton@127.0.0.1/baton".to_owned(),
                });
            };
            let url = check.expand(written, "store.url")?;
            check_postgres_url(&url).map_err(|why| check.error(written, "store.url".into(), why))?;
            StoreBackend::Postgres { url: Secret::new(url) }
        }
        "none" => {
            misplaced(&raw.path, "path", "sqlite")?;
            misplaced(&raw.url, "url", "postgres")?;
            StoreBackend::None
        }
        other => {
            let message = format!("unknown backend {other:?}; expected sqlite, postgres or none");
            let at = raw.backend.as_ref().map_or(1, |backend| check.line(backend.span().start));
            return Err(ConfigError::Invalid {
                path: check.label.to_owned(),
                line: at,
                key: "store.backend".to_owned(),
                message,
            });
        }
    };
    Ok(StoreConfig { backend, retention_days, log_bodies })
}

/// The SQLite file: `path` as written (`${VAR}` expanded), relative to
/// the config's directory, or to the working directory for a config
/// given as text; `baton.db` when not written.
fn store_path(check: &Checker<'_>, written: Option<&Spanned<String>>) -> Result<PathBuf, ConfigError> {
    let path = match written {
        Some(value) => {
            let path = check.expand(value, "store.path")?;
            if path.trim().is_empty() {
                return Err(check.error(value, "store.path".into(), "must name a file"));
            }
            PathBuf::from(path)
        }
        None => PathBuf::from(DEFAULT_STORE_FILE),
    };
    Ok(match check.dir {
        Some(dir) if path.is_relative() => dir.join(path),
        _ => path,
    })
}

/// Why `url` is not a PostgreSQL URL baton can reach, if it is not.
fn check_postgres_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
        .ok_or("must start with postgres://, as postgres://baton@127.0.0.1/baton")?;
    let host = rest.split(['/', '?']).next().unwrap_or_default().rsplit('@').next().unwrap_or_default();
    if host.is_empty() {
        return Err("names no host, as postgres://baton@127.0.0.1/baton".into());
    }
    if url.contains("sslmode=require") || url.contains("sslmode=verify") {
        return Err("TLS to PostgreSQL is not built into baton; reach it over a private network".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::ONE_ROUTE as ROUTE;

    fn env(name: &str) -> Option<String> {
        (name == "DATABASE_URL").then(|| "postgres://baton:pw@10.0.0.9:5433/records".to_owned())
    }

    fn parse(store: &str, dir: Option<&Path>) -> Result<StoreConfig, String> {
        let text = format!("{store}\n{ROUTE}");
        crate::config::parse_in(&text, "conf/baton.toml", &env, dir)
            .map(|config| config.store)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_config_file_keeps_its_records_next_to_it_and_a_text_config_keeps_none() {
        let dir = Path::new("/etc/baton");
        let store = parse("", Some(dir)).expect("valid");
        assert_eq!(store.backend, StoreBackend::Sqlite { path: dir.join("baton.db") });
        assert_eq!((store.retention_days, store.log_bodies), (30, false));
        assert_eq!(parse("", None).expect("valid").backend, StoreBackend::None, "no file, no place to keep one");
    }

    #[test]
    fn a_sqlite_path_is_relative_to_the_config_s_directory() {
        let dir = Path::new("/etc/baton");
        let relative = parse("[store]\npath = \"data/records.db\"", Some(dir)).expect("valid");
        assert_eq!(relative.backend, StoreBackend::Sqlite { path: dir.join("data/records.db") });
        let absolute = parse("[store]\nbackend = \"sqlite\"\npath = \"/var/lib/baton.db\"", Some(dir)).expect("valid");
        assert_eq!(absolute.backend, StoreBackend::Sqlite { path: PathBuf::from("/var/lib/baton.db") });
        let text = parse("[store]\nbackend = \"sqlite\"", None).expect("valid");
        assert_eq!(text.backend, StoreBackend::Sqlite { path: PathBuf::from("baton.db") }, "named: the working dir");
    }

    #[test]
    fn postgres_takes_its_url_and_none_keeps_nothing() {
        let store = parse(
            "[store]\nbackend = \"postgres\"\nurl = \"${DATABASE_URL}\"\nretention_days = 7\nlog_bodies = true",
            None,
        )
        .expect("valid");
        assert_eq!(
            store.backend,
            StoreBackend::Postgres { url: Secret::new("postgres://baton:pw@10.0.0.9:5433/records") }
        );
        assert_eq!((store.retention_days, store.log_bodies), (7, true));
        assert_eq!(
            parse("[store]\nbackend = \"none\"", Some(Path::new("/x"))).expect("valid").backend,
            StoreBackend::None
        );
    }

    #[test]
    fn mistakes_name_their_file_line_and_key() {
        for (store, starts) in [
            ("[store]\nbackend = \"mysql\"", "conf/baton.toml:2: store.backend: unknown backend \"mysql\""),
            ("[store]\nbackend = \"postgres\"", "conf/baton.toml:2: store.url: a postgres backend needs a url"),
            (
                "[store]\nbackend = \"postgres\"\nurl = \"mysql://x\"",
                "conf/baton.toml:3: store.url: must start with postgres://",
            ),
            (
                "[store]\nbackend = \"postgres\"\nurl = \"postgres:///db\"",
                "conf/baton.toml:3: store.url: names no host",
            ),
            (
                "[store]\nbackend = \"postgres\"\nurl = \"postgres://h/db?sslmode=require\"",
                "conf/baton.toml:3: store.url: TLS to PostgreSQL",
            ),
            (
                "[store]\nbackend = \"postgres\"\nurl = \"${NOPE}\"",
                "conf/baton.toml:3: store.url: environment variable NOPE",
            ),
            ("[store]\nurl = \"postgres://h/db\"", "conf/baton.toml:2: store.url: only a postgres backend takes it"),
            ("[store]\nbackend = \"none\"\npath = \"x.db\"", "conf/baton.toml:3: store.path: only a sqlite backend"),
            ("[store]\npath = \"\"", "conf/baton.toml:2: store.path: must name a file"),
            ("[store]\nretention_days = 0", "conf/baton.toml:2: store.retention_days: must be from 1 to 3650"),
            ("[store]\nretention_days = 99999", "conf/baton.toml:2: store.retention_days: must be from 1 to 3650"),
            ("[store]\nretention_days = -1", "conf/baton.toml:2: retention_days:"),
            ("[store]\nlog_bodies = \"yes\"", "conf/baton.toml:2: log_bodies:"),
            ("[store]\nkeep = 1", "conf/baton.toml:2: keep: unknown field `keep`, expected one of `backend`"),
        ] {
            let err = parse(store, None).expect_err(store);
            assert!(err.starts_with(starts), "{store:?} gave {err:?}, expected {starts:?}");
        }
    }
}
