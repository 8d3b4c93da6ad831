//! A PostgreSQL server of one test's own: a throwaway data directory made
//! by `initdb`, the server on a free loopback port, both gone when the test
//! lets go of it, whether it passed or not. Another's databases are never
//! touched. PostgreSQL refuses to run as root, so the server runs as the
//! `postgres` user when the test runs as root. No PostgreSQL installed is a
//! failure, not a skip: CI installs it.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a server may take to accept connections after it starts.
const START_LIMIT: Duration = Duration::from_secs(30);

/// The database the store's tests use inside their server.
const DATABASE: &str = "baton";

/// A running server of this test's own, and its database.
pub struct TempDb {
    dir: PathBuf,
    port: u16,
    server: Option<Child>,
}

impl TempDb {
    /// Makes a data directory, starts a server on it and creates the database.
    pub async fn create() -> TempDb {
        tokio::task::spawn_blocking(|| {
            let dir = std::env::temp_dir().join(format!("baton-pg-{:016x}", fastrand::u64(..)));
            std::fs::create_dir_all(&dir).expect("a data directory");
            if is_root() {
                let status = Command::new("chown").args(["-R", "postgres:postgres"]).arg(&dir).status();
                assert!(status.is_ok_and(|status| status.success()), "chown the data directory");
            }
            let data = dir.join("data").display().to_string();
            let initdb = as_postgres(&bin("initdb"))
                .args(["-D", &data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"])
                .stdout(Stdio::null())
                .status()
                .expect("initdb runs (is PostgreSQL installed?)");
            assert!(initdb.success(), "initdb failed");
            let port = free_port();
            let server = Some(start(&dir, port));
            let created = as_postgres(&bin("createdb"))
                .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "postgres", DATABASE])
                .status()
                .expect("createdb runs");
            assert!(created.success(), "createdb failed");
            TempDb { dir, port, server }
        })
        .await
        .expect("the server starts")
    }

    /// The URL baton's `[store]` takes.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{DATABASE}", self.port)
    }

    /// Stops the server at once, as a crash would: the store's database gone.
    pub fn stop(&mut self) {
        if let Some(mut server) = self.server.take() {
            let _ = server.kill();
            let _ = server.wait();
        }
    }

    /// Starts the server again on its port and data: the database back.
    pub async fn restart(&mut self) {
        let (dir, port) = (self.dir.clone(), self.port);
        let server = tokio::task::spawn_blocking(move || start(&dir, port)).await.expect("the server starts again");
        self.server = Some(server);
    }
}

/// Starts the server on `dir`'s data at `port` and waits until it takes logins.
fn start(dir: &Path, port: u16) -> Child {
    let data = dir.join("data");
    // A killed server leaves its pid file behind; with the process gone it is safe to remove.
    let _ = std::fs::remove_file(data.join("postmaster.pid"));
    let server = as_postgres(&bin("postgres"))
        .arg("-D")
        .arg(&data)
        .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1", "-k"])
        .arg(dir)
        .args(["-c", "fsync=off", "-c", "max_connections=50"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("postgres starts");
    let started = Instant::now();
    let ready = || {
        as_postgres(&bin("pg_isready"))
            .args(["-q", "-h", "127.0.0.1", "-p", &port.to_string()])
            .status()
            .is_ok_and(|status| status.success())
    };
    while !ready() {
        assert!(started.elapsed() < START_LIMIT, "PostgreSQL did not take logins within {START_LIMIT:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    server
}

/// `program`, run as `postgres` when this test runs as root: PostgreSQL
/// refuses root. `setpriv` executes it in place, so killing the child
/// kills the server itself.
fn as_postgres(program: &Path) -> Command {
    if is_root() {
        let mut command = Command::new("setpriv");
        command.args(["--reuid=postgres", "--regid=postgres", "--init-groups"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A PostgreSQL program, from the newest server installed.
fn bin(name: &str) -> PathBuf {
    let root = Path::new("/usr/lib/postgresql");
    let mut versions: Vec<PathBuf> = std::fs::read_dir(root)
        .map(|dir| dir.filter_map(|entry| entry.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    versions.sort();
    match versions.last() {
        Some(version) => version.join("bin").join(name),
        None => PathBuf::from(name),
    }
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|out| out.stdout.starts_with(b"0\n"))
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}
