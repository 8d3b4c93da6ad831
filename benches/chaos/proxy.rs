//! The proxy under test: the release `baton serve` in a process of its own,
//! from a config file in a temp dir, and a monitor that samples its resident
//! memory from /proc, kills it past a limit, and notices when it exits.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use tokio::process::{Child, Command};

/// How long baton may take to say it is serving.
const START_LIMIT: Duration = Duration::from_secs(15);
/// How often the monitor reads /proc.
const SAMPLE_EVERY: Duration = Duration::from_millis(50);
/// How long a SIGTERM may take: the shipped shutdown grace (10 s) and a margin.
const STOP_LIMIT: Duration = Duration::from_secs(12);

/// The release binary, unless `BATON_BIN` names another.
pub fn binary() -> PathBuf {
    std::env::var_os("BATON_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/baton"))
}

/// A warning when a source file is newer than the binary: its figures would
/// be the old code's.
pub fn staleness(bin: &Path) -> Option<String> {
    let built = std::fs::metadata(bin).and_then(|m| m.modified()).ok()?;
    let newest = newest_under(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))?;
    (newest > built).then(|| format!("{} is older than src/: run `cargo build --release` first", bin.display()))
}

fn newest_under(dir: &Path) -> Option<SystemTime> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|entry| {
            let path = entry.path();
            if path.is_dir() { newest_under(&path) } else { entry.metadata().and_then(|m| m.modified()).ok() }
        })
        .max()
}

/// A running `baton serve`.
pub struct Proxy {
    child: Arc<Mutex<Child>>,
    pub pid: u32,
    /// Its chat completions URL.
    pub url: String,
    pub log: PathBuf,
}

/// Writes `config` to `dir/baton.toml` and starts `bin serve` on it, its log
/// in `dir/baton.log`; returns once the log says where it listens.
pub async fn start(bin: &Path, dir: &Path, config: &str) -> Result<Proxy, String> {
    let path = dir.join("baton.toml");
    std::fs::write(&path, config).map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    let log = dir.join("baton.log");
    let file = std::fs::File::create(&log).map_err(|err| format!("cannot create {}: {err}", log.display()))?;
    let mut child = Command::new(bin)
        .arg("serve")
        .arg("--config")
        .arg(&path)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .stdout(Stdio::null())
        .stderr(file)
        .kill_on_drop(true)
        .spawn()
        .map_err(|err| format!("cannot start {}: {err} (run `cargo build --release` first)", bin.display()))?;
    let pid = child.id().ok_or("baton exited at once")?;
    let started = Instant::now();
    while started.elapsed() < START_LIMIT {
        if let Some(addr) = serving_addr(&log) {
            let child = Arc::new(Mutex::new(child));
            return Ok(Proxy { child, pid, url: format!("http://{addr}/v1/chat/completions"), log });
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("baton exited ({status}): {}", tail(&log)));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(format!("baton did not start serving within {START_LIMIT:?}: {}", tail(&log)))
}

/// The address of the `baton is serving listen=…` log line.
fn serving_addr(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    let line = text.lines().find(|line| line.contains("is serving"))?;
    Some(line.split("listen=").nth(1)?.split_whitespace().next()?.to_owned())
}

fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines().rev().take(5).collect::<Vec<_>>().join(" | ")
}

/// Resident memory and the proxy's fate, as the monitor last saw them.
#[derive(Clone, Default)]
pub struct Health {
    /// Bytes, the highest `VmHWM` (peak resident memory) read.
    pub peak: u64,
    /// Bytes, the last `VmRSS` read.
    pub last: u64,
    /// The resident memory it was killed at, and when after the monitor started.
    pub killed: Option<(u64, Duration)>,
    /// How it exited, once it has.
    pub exited: Option<String>,
}

/// Samples the proxy every [`SAMPLE_EVERY`] until dropped.
pub struct Monitor {
    health: Arc<Mutex<Health>>,
    task: tokio::task::JoinHandle<()>,
}

impl Monitor {
    pub fn health(&self) -> Health {
        self.health.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Whether the proxy has exited or was killed.
    pub fn down(&self) -> bool {
        let health = self.health();
        health.exited.is_some() || health.killed.is_some()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    /// Resident memory now, in bytes.
    pub fn rss(&self) -> Option<u64> {
        status_kb(self.pid, "VmRSS:").map(|kb| kb * 1024)
    }

    /// Open descriptors now.
    pub fn fds(&self) -> Option<usize> {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid)).ok().map(Iterator::count)
    }

    /// Starts sampling; the proxy is killed once its resident memory passes `limit` bytes.
    pub fn monitor(&self, limit: u64) -> Monitor {
        let health = Arc::new(Mutex::new(Health::default()));
        let (child, pid, shared) = (Arc::clone(&self.child), self.pid, Arc::clone(&health));
        let task = tokio::spawn(async move {
            let started = Instant::now();
            while sample(&child, pid, &shared, limit, started) {
                tokio::time::sleep(SAMPLE_EVERY).await;
            }
        });
        Monitor { health, task }
    }

    /// Lines of its log that contain `needle`.
    pub fn log_lines(&self, needle: &str) -> usize {
        std::fs::read_to_string(&self.log).map_or(0, |text| text.lines().filter(|l| l.contains(needle)).count())
    }

    /// Stops it with SIGTERM, or SIGKILL when that takes longer than
    /// [`STOP_LIMIT`]; says how it ended.
    pub async fn stop(self) -> String {
        let _ = std::process::Command::new("kill").args(["-TERM", &self.pid.to_string()]).status();
        let started = Instant::now();
        while started.elapsed() < STOP_LIMIT {
            if let Ok(Some(status)) = self.child.lock().unwrap_or_else(PoisonError::into_inner).try_wait() {
                return format!("stopped on SIGTERM ({status})");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = self.child.lock().unwrap_or_else(PoisonError::into_inner).start_kill();
        format!("killed: still running {STOP_LIMIT:?} after SIGTERM")
    }
}

/// Reads the proxy's memory into `health`, killing it past `limit`; false
/// once it has exited.
fn sample(child: &Mutex<Child>, pid: u32, health: &Mutex<Health>, limit: u64, started: Instant) -> bool {
    let exited = child.lock().unwrap_or_else(PoisonError::into_inner).try_wait();
    let rss = status_kb(pid, "VmRSS:").unwrap_or(0) * 1024;
    let peak = status_kb(pid, "VmHWM:").unwrap_or(0) * 1024;
    let mut health = health.lock().unwrap_or_else(PoisonError::into_inner);
    if let Ok(Some(status)) = exited {
        health.exited = Some(status.to_string());
        return false;
    }
    health.peak = health.peak.max(peak).max(rss);
    health.last = rss;
    if rss > limit && health.killed.is_none() {
        let _ = child.lock().unwrap_or_else(PoisonError::into_inner).start_kill();
        health.killed = Some((rss, started.elapsed()));
    }
    true
}

/// A `kB` field of /proc/<pid>/status.
fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find(|line| line.starts_with(field))?.split_whitespace().nth(1)?.parse().ok()
}
