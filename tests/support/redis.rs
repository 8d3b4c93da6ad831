//! A `redis-server` of a test's own, on a free loopback port: never the
//! machine's own Redis, never its port, nothing written to disk.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` of this test's own, killed when dropped: no disk, no
/// shared port, nothing of the machine's own Redis touched.
pub struct RedisServer {
    pub port: u16,
    child: Option<Child>,
}

impl RedisServer {
    pub fn start() -> RedisServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut server = RedisServer { port, child: None };
        server.restart();
        server
    }

    /// Starts the server on its port again (after [`RedisServer::kill`]).
    pub fn restart(&mut self) {
        let binary =
            std::env::var_os("REDIS_SERVER").map_or_else(|| PathBuf::from("/usr/bin/redis-server"), PathBuf::from);
        let child = Command::new(&binary)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|err| {
                panic!("{} must be installed (apt-get install redis-server): {err}", binary.display())
            });
        self.child = Some(child);
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(started.elapsed() < Duration::from_secs(10), "redis-server did not listen on {}", self.port);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// A `[state]` on this server, with a key prefix no other test uses,
    /// and a timeout a loaded machine's Redis answers within (past it a
    /// replica would fall back to its own limits and the counts change).
    pub fn state_toml(&self, test: &str) -> String {
        format!(
            "[state]\nbackend = \"redis\"\nredis_url = \"redis://127.0.0.1:{}\"\nkey_prefix = \"baton-test:{}:{test}:\"\ntimeout_ms = 500\n",
            self.port,
            std::process::id()
        )
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
