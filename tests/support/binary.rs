//! The compiled `baton` binary, run as an operator runs it: started with
//! arguments, ready once it logs that it is serving, killed when the test
//! lets go of it.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const BATON: &str = env!("CARGO_BIN_EXE_baton");
/// How long the binary may take to report that it is serving.
const START_LIMIT: Duration = Duration::from_secs(20);

/// How to start the binary: its arguments, environment and log format.
pub struct Launch {
    args: Vec<String>,
    env: Vec<(String, String)>,
    json_logs: bool,
    unread_logs: bool,
}

impl Launch {
    /// Sets an environment variable for the process.
    pub fn env(mut self, name: &str, value: &str) -> Launch {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Logs as JSON (`--log-format json`): every line up to "is serving" must be JSON.
    pub fn json_logs(mut self) -> Launch {
        self.json_logs = true;
        self.args.splice(0..0, ["--log-format".to_owned(), "json".to_owned()]);
        self
    }

    /// Past the line that says it serves, nobody reads its stderr: the pipe
    /// stays open and fills, as behind a log collector that fell behind.
    pub fn unread_logs(mut self) -> Launch {
        self.unread_logs = true;
        self
    }

    /// Starts the process and waits until it logs that it is serving. Its
    /// logs keep draining into `log_lines` (unless [`Launch::unread_logs`]).
    pub async fn start(self) -> Baton {
        let mut child = Command::new(BATON)
            .args(&self.args)
            .env("RUST_LOG", "info")
            .envs(self.env.iter().map(|(name, value)| (name, value)))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("baton starts");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let logs = Arc::new(Mutex::new(Vec::new()));
        let serving = async {
            loop {
                let line = lines.next_line().await.expect("read log").expect("baton exited before serving");
                logs.lock().expect("logs").push(line.clone());
                if let Some(addr) = serving_addr(&line, self.json_logs) {
                    break addr;
                }
            }
        };
        let addr = tokio::time::timeout(START_LIMIT, serving)
            .await
            .unwrap_or_else(|_| panic!("baton did not report serving within {START_LIMIT:?}"));
        if self.unread_logs {
            return Baton { child, addr, logs, unread: Some(lines) };
        }
        let sink = Arc::clone(&logs);
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                sink.lock().expect("logs").push(line);
            }
        });
        Baton { child, addr, logs, unread: None }
    }
}

/// The address an "is serving" log line reports, or `None` for other lines.
fn serving_addr(line: &str, json: bool) -> Option<SocketAddr> {
    let listen = if json {
        let parsed: Value = serde_json::from_str(line).unwrap_or_else(|_| panic!("a JSON log line: {line}"));
        if parsed["message"] != "baton is serving" {
            return None;
        }
        parsed["listen"].as_str().expect("listen").to_owned()
    } else {
        if !line.contains("is serving") {
            return None;
        }
        let listen = line.split("listen=").nth(1).and_then(|rest| rest.split_whitespace().next());
        listen.expect("listen=").to_owned()
    };
    Some(listen.parse().expect("an address"))
}

/// A running `baton` process; dropping it kills the process.
pub struct Baton {
    child: Child,
    pub addr: SocketAddr,
    logs: Arc<Mutex<Vec<String>>>,
    /// Its stderr, held open and never read, for [`Launch::unread_logs`].
    #[allow(dead_code, reason = "held, not read")]
    unread: Option<tokio::io::Lines<BufReader<tokio::process::ChildStderr>>>,
}

impl Baton {
    /// `baton args…`, ready to start.
    pub fn command(args: &[&str]) -> Launch {
        Launch {
            args: args.iter().map(|arg| (*arg).to_owned()).collect(),
            env: Vec::new(),
            json_logs: false,
            unread_logs: false,
        }
    }

    /// `baton args…` as a command that runs to completion, such as `check`.
    pub fn once(args: &[&str]) -> std::process::Command {
        let mut command = std::process::Command::new(BATON);
        command.args(args);
        command
    }

    /// `baton serve --config path`, ready to start.
    pub fn serve(config: &Path) -> Launch {
        Baton::command(&["serve", "--config", config.to_str().expect("utf-8 path")])
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Sends the process signal `name` (`TERM`, `HUP`).
    pub fn signal(&self, name: &str) {
        let pid = self.child.id().expect("running").to_string();
        let status = std::process::Command::new("kill").args([format!("-{name}"), pid]).status().expect("kill runs");
        assert!(status.success());
    }

    /// Every log line so far.
    pub fn log_lines(&self) -> Vec<String> {
        self.logs.lock().expect("logs").clone()
    }

    /// How the process exited, which it must within `limit`.
    pub async fn exit_within(mut self, limit: Duration) -> ExitStatus {
        tokio::time::timeout(limit, self.child.wait()).await.expect("baton exits").expect("status")
    }
}
