//! The gateways the benchmark compares: baton, nginx as a plain SSE
//! pass-through and LiteLLM's proxy, each started here and stopped on drop.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

use super::process::with_children;
use super::{LITELLM_KEY, MARKER, baton_bin, gateway_bin, paced, pin, root, scratch};

/// One way to reach the providers.
pub(super) struct Gateway {
    pub(super) name: &'static str,
    /// The chat URL and the model to send, for the fast answers.
    pub(super) fast: (String, &'static str),
    /// The same for the slow answers that are held open.
    pub(super) slow: (String, &'static str),
    /// The same for the paced answers.
    pub(super) paced: (String, &'static str),
    /// The same for the paced answers from the provider behind TLS, when it could be started.
    pub(super) paced_tls: Option<(String, &'static str)>,
    /// The gateway's processes, to measure; none for direct.
    pub(super) process: Option<Child>,
    /// A bearer token the gateway demands.
    pub(super) token: Option<String>,
}

impl Drop for Gateway {
    /// A polite stop: nginx's master takes its workers down on SIGTERM, and
    /// is given a moment to, where the SIGKILL of `kill_on_drop` right away
    /// would orphan them.
    fn drop(&mut self) {
        if let Some(process) = self.process.as_mut() {
            stop_politely(process);
        }
    }
}

/// Sends `process` SIGTERM and gives it a second to end, so an nginx master
/// takes its workers down with it (the SIGKILL of `kill_on_drop` alone would
/// orphan them, still listening).
pub(super) fn stop_politely(process: &mut Child) {
    let Some(pid) = process.id() else { return };
    let _ = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status();
    for _ in 0..50 {
        if !matches!(process.try_wait(), Ok(None)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Gateway {
    pub(super) fn pids(&self) -> Vec<u32> {
        self.process.as_ref().and_then(Child::id).map(with_children).unwrap_or_default()
    }
}

pub(super) async fn nginx(
    fast: SocketAddr,
    slow: SocketAddr,
    paced: SocketAddr,
    tls: Option<&paced::TlsFront>,
) -> Option<(Child, SocketAddr)> {
    if which("nginx").is_none() {
        let status =
            std::process::Command::new("apt-get").args(["install", "-y", "-q", "nginx-light"]).status().ok()?;
        if !status.success() {
            return None;
        }
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
    let dir = scratch().join("nginx");
    std::fs::create_dir_all(dir.join("logs")).ok()?;
    let conf = format!(
        "worker_processes {workers};\npid {dir}/nginx.pid;\nerror_log {dir}/logs/error.log warn;\nworker_rlimit_nofile 20000;\n\
         events {{ worker_connections 20000; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {dir}/body;\n  proxy_temp_path {dir}/proxy;\n\
         upstream fast {{ server {fast}; keepalive 1024; }}\n  upstream slow {{ server {slow}; keepalive 1024; }}\n\
         upstream paced {{ server {paced}; keepalive 1024; }}\n\
         server {{\n    listen 127.0.0.1:{port} backlog=4096;\n\
         location /fast/ {{ proxy_pass http://fast/; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering off; proxy_cache off; }}\n\
         location /slow/ {{ proxy_pass http://slow/; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering off; proxy_cache off; }}\n\
         location /paced/ {{ proxy_pass http://paced/; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering off; proxy_cache off; }}\n\
         {tls}\
         }}\n}}\n",
        dir = dir.display(),
        workers = pin::nginx_workers(),
        tls = tls.map(|front| format!(
            "location /paced-tls/ {{ proxy_pass https://paced_tls/; proxy_http_version 1.1; proxy_set_header Connection \"\"; \
             proxy_buffering off; proxy_cache off; proxy_ssl_verify on; proxy_ssl_trusted_certificate {ca}; \
             proxy_ssl_name localhost; proxy_ssl_session_reuse on; }}\n",
            ca = front.ca.display()
        )).unwrap_or_default()
    );
    let conf = match tls {
        Some(front) => conf.replacen(
            "server {\n",
            &format!("upstream paced_tls {{ server {}; keepalive 1024; }}\n  server {{\n", front.addr),
            1,
        ),
        None => conf,
    };
    std::fs::write(dir.join("nginx.conf"), conf).ok()?;
    let mut command = pin::command(which("nginx")?);
    command.args(["-g", "daemon off;", "-c"]).arg(dir.join("nginx.conf"));
    let child = spawn_quiet(&mut command)?;
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().ok()?;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return Some((child, addr));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// LiteLLM's proxy from PyPI, in a virtual environment of the bench's own,
/// with the same providers and a fallback from the flaky one to the fast one.
pub(super) async fn litellm(fast: SocketAddr, slow: SocketAddr, flaky: SocketAddr) -> Option<(Child, SocketAddr)> {
    let venv = root().join("target/bench-venv");
    let bin = venv.join("bin/litellm");
    if !bin.exists() {
        println!("installing LiteLLM into {} (once)", venv.display());
        let made = std::process::Command::new("python3").args(["-m", "venv"]).arg(&venv).status().ok()?;
        let pip = venv.join("bin/pip");
        let installed = std::process::Command::new(pip)
            .args(["install", "-q", "--disable-pip-version-check", "litellm[proxy]"])
            .status()
            .ok()?;
        if !made.success() || !installed.success() {
            return None;
        }
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
    let deployment = |name: &str, addr: SocketAddr| {
        format!(
            "  - model_name: {name}\n    litellm_params:\n      model: openai/m\n      api_base: http://{addr}/v1\n      api_key: unused\n"
        )
    };
    let config = format!(
        "model_list:\n{}{}{}router_settings:\n  num_retries: 0\n  fallbacks: [{{\"flaky\": [\"fast\"]}}]\nlitellm_settings:\n  num_retries: 0\n",
        deployment("fast", fast),
        deployment("slow", slow),
        deployment("flaky", flaky)
    );
    let path = scratch().join("litellm.yaml");
    std::fs::write(&path, config).ok()?;
    let mut command = pin::command(bin);
    command
        .args(["--config"])
        .arg(&path)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .env("LITELLM_LOG", "ERROR")
        .env("LITELLM_MASTER_KEY", LITELLM_KEY);
    let child = spawn_quiet(&mut command)?;
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().ok()?;
    let client = reqwest::Client::new();
    for _ in 0..240 {
        let probe = client.get(format!("http://{addr}/health/liveliness")).bearer_auth(LITELLM_KEY).send().await;
        if probe.is_ok_and(|r| r.status().is_success()) {
            return Some((child, addr));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    None
}

/// Starts a peer gateway with its output discarded, killed with the bench.
pub(super) fn spawn_quiet(command: &mut Command) -> Option<Child> {
    command.stdout(Stdio::null()).stderr(Stdio::null()).kill_on_drop(true).spawn().ok()
}

pub(super) fn which(program: &str) -> Option<PathBuf> {
    ["/usr/sbin", "/usr/bin", "/usr/local/bin", "/sbin", "/bin"]
        .iter()
        .map(|dir| Path::new(dir).join(program))
        .find(|p| p.exists())
}

/// How long a baton process may take to say where it serves.
const START_LIMIT: Duration = Duration::from_secs(30);

/// Starts `baton args…` and returns it with the address its log reports.
/// Its log goes straight to a file, which is read only for that address:
/// a load generator that relayed one gateway's log lines would spend, on
/// that gateway's requests alone, the CPU it times their first tokens with.
pub(super) async fn start_baton(args: &[&str]) -> (Child, SocketAddr) {
    static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let binary = if args[0] == "serve" { gateway_bin() } else { baton_bin() };
    let nth = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let log = scratch().join(format!("{}-{}-{nth}.log", args[0], std::process::id()));
    let file = std::fs::File::create(&log).expect("a log file in the scratch folder");
    // The gateway on its core when pinning; the simulated providers with the load generator.
    let mut command = if args[0] == "serve" { pin::command(binary) } else { Command::new(binary) };
    let mut child = command
        .args(args)
        .env("RUST_LOG", "warn,baton=info")
        .stdout(Stdio::null())
        .stderr(Stdio::from(file))
        .kill_on_drop(true)
        .spawn()
        .expect("the release binary exists: run `cargo build --release` first");
    let serving = async {
        loop {
            if let Some(addr) = serving_addr(&log) {
                break addr;
            }
            assert!(child.try_wait().ok().flatten().is_none(), "baton exited early: see {}", log.display());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let addr = tokio::time::timeout(START_LIMIT, serving)
        .await
        .expect("baton says where it serves within 30 s (its log is in target/bench-load)");
    (child, addr)
}

/// The address the log at `log` says baton serves on, once it says so.
fn serving_addr(log: &Path) -> Option<SocketAddr> {
    let text = std::fs::read_to_string(log).ok()?;
    let line = text.lines().find(|line| line.contains("is serving"))?;
    line.split("listen=").nth(1)?.split_whitespace().next()?.parse().ok()
}

pub(super) async fn mock(tokens: usize, extra: &[&str]) -> (Child, SocketAddr) {
    let tokens = tokens.to_string();
    let mut args = vec!["mock", "--kind", "openai", "--listen", "127.0.0.1:0", "--marker", MARKER, "--tokens", &tokens];
    args.extend_from_slice(extra);
    start_baton(&args).await
}

/// Breakers off and deadlines long: this benchmark measures what the relay
/// costs, so overload must show as latency, not as failovers or open breakers.
pub(super) fn baton_config(
    fast: SocketAddr,
    slow: SocketAddr,
    flaky: SocketAddr,
    paced: SocketAddr,
    tls: Option<&paced::TlsFront>,
) -> PathBuf {
    let no_breaker = "breaker = { failure_threshold = 1000000, window = 1000000 }";
    let text = format!(
        "listen = \"127.0.0.1:0\"\n\n\
         [[providers]]\nname = \"fast\"\nkind = \"openai\"\nbase_url = \"http://{fast}/v1\"\n{no_breaker}\n\n\
         [[providers]]\nname = \"slow\"\nkind = \"openai\"\nbase_url = \"http://{slow}/v1\"\n{no_breaker}\n\n\
         [[providers]]\nname = \"flaky\"\nkind = \"openai\"\nbase_url = \"http://{flaky}/v1\"\n{no_breaker}\n\n\
         [[providers]]\nname = \"paced\"\nkind = \"openai\"\nbase_url = \"http://{paced}/v1\"\n{no_breaker}\n\n\
         [[routes]]\nmodel = \"paced\"\nfirst_token_timeout_ms = 60000\nidle_timeout_ms = 60000\ntargets = [{{ provider = \"paced\", model = \"m\" }}]\n\n\
         [[routes]]\nmodel = \"fast\"\nfirst_token_timeout_ms = 60000\nidle_timeout_ms = 60000\ntargets = [{{ provider = \"fast\", model = \"m\" }}]\n\n\
         [[routes]]\nmodel = \"slow\"\nfirst_token_timeout_ms = 60000\nidle_timeout_ms = 60000\ntargets = [{{ provider = \"slow\", model = \"m\" }}]\n\n\
         [[routes]]\nmodel = \"flaky\"\nfirst_token_timeout_ms = 60000\nidle_timeout_ms = 60000\n\
         targets = [{{ provider = \"flaky\", model = \"m\", first_token_timeout_ms = 1000 }}, {{ provider = \"fast\", model = \"m\" }}]\n"
    );
    let tls = tls.map(|front| format!(
        "[[providers]]\nname = \"paced-tls\"\nkind = \"openai\"\nbase_url = \"https://{}/v1\"\nca_file = \"{}\"\n{no_breaker}\n\n\
         [[routes]]\nmodel = \"paced-tls\"\nfirst_token_timeout_ms = 60000\nidle_timeout_ms = 60000\ntargets = [{{ provider = \"paced-tls\", model = \"m\" }}]\n\n",
        front.addr,
        front.ca.display()
    )).unwrap_or_default();
    let path = scratch().join("baton.toml");
    std::fs::write(&path, format!("{text}\n{tls}{}{}", bench_keys(), bench_store())).expect("config");
    path
}

/// `BATON_BENCH_STORE=none` keeps no records, to measure what keeping
/// them costs; by default the request log is the default one, SQLite
/// beside the config.
pub(super) fn bench_store() -> String {
    match std::env::var("BATON_BENCH_STORE").as_deref() {
        Ok("none") => "[store]\nbackend = \"none\"\n".to_owned(),
        _ => String::new(),
    }
}

/// With `BATON_BENCH_KEYS=N`, N client keys, each with limits and a budget
/// too high to refuse anything, so a run measures what checking them costs;
/// baton's requests then carry [`bench_key`]'s secret.
pub(super) fn bench_keys() -> String {
    let count = key_count();
    let mut text = String::new();
    for i in 0..count {
        text.push_str(&format!(
            "[[keys]]\nname = \"app{i}\"\nkey = \"bench-client-key-{i:06}\"\nrpm = 100000000\ntpm = 100000000000\nbudget = {{ usd_per_hour = 1000000.0 }}\n\n"
        ));
    }
    text
}

pub(super) fn key_count() -> usize {
    std::env::var("BATON_BENCH_KEYS").ok().and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// The secret baton's requests present when keys are configured: the last one's.
pub(super) fn bench_key() -> Option<String> {
    key_count().checked_sub(1).map(|last| format!("bench-client-key-{last:06}"))
}
