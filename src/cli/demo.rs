//! `baton demo`: the proxy in front of two simulated providers on loopback, a
//! flaky primary and a healthy secondary, so failover can be watched with no keys.
//! Its requests are recorded in a SQLite file in a directory of its own under
//! the system's temporary directory, removed when the demo stops, so the
//! page has history to draw and nothing is left where the demo ran.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use baton::config::{self, StoreBackend};
use baton::mock::{Fault, MockProvider, Schedule};

use super::AnyError;

/// The faults the flaky primary draws from, on about half its requests.
const FLAKY: [Fault; 6] = [
    Fault::StallFirstToken,
    Fault::CloseBeforeToken,
    Fault::Http5xx,
    Fault::Http429,
    Fault::ErrorEvent,
    Fault::Malformed,
];

/// Serves the demo on `listen` until it is stopped.
pub(crate) async fn run(listen: SocketAddr) -> Result<(), AnyError> {
    let flaky = MockProvider::anthropic()
        .marker("flaky")
        .tokens(24)
        .first_token_after(Duration::from_millis(150))
        .gap(Duration::from_millis(40))
        .retry_after_secs(0)
        .faults(&FLAKY)
        .schedule(Schedule::Random { probability: 0.5, seed: 7 })
        .spawn()
        .await?;
    let steady = MockProvider::openai()
        .marker("steady")
        .tokens(24)
        .first_token_after(Duration::from_millis(200))
        .gap(Duration::from_millis(40))
        .spawn()
        .await?;
    let listener = super::serve::bind(listen)?;
    let listen = listener.local_addr()?;
    let text = demo_toml(listen, &flaky.base_url(), &steady.base_url());
    // Only the standard OTEL_* variables reach the demo's config: they turn traces on.
    let mut config =
        config::parse(&text, "demo", &|name| name.starts_with("OTEL_").then(|| std::env::var(name).ok())?)?;
    let records = TempDir::create()?;
    config.store.backend = StoreBackend::Sqlite { path: records.0.join("demo.db") };
    tracing::info!(path = %records.0.display(), "the demo records its requests here until it stops");
    welcome(listen);
    let served = super::serve::serve_on(listener, config, None).await;
    drop(records);
    served
}

/// The demo's config: baton on `listen` in front of the flaky provider at
/// `flaky` and the steady one at `steady`, with a drill of its route.
fn demo_toml(listen: SocketAddr, flaky: &str, steady: &str) -> String {
    format!(
        r#"listen = "{listen}"

[[providers]]
name = "flaky-anthropic"
kind = "anthropic"
base_url = "{flaky}"
breaker = {{ failure_threshold = 1000000, window = 1000000 }}  # stays in rotation, so failovers stay visible

[[providers]]
name = "steady-openai"
kind = "openai"
base_url = "{steady}"

[[routes]]
model = "chat"
first_token_timeout_ms = 800
idle_timeout_ms = 5000
targets = [
  {{ provider = "flaky-anthropic", model = "claude-sim", price = {{ input_per_mtok = 3.0, output_per_mtok = 15.0 }} }},
  {{ provider = "steady-openai", model = "gpt-sim", price = {{ input_per_mtok = 0.15, output_per_mtok = 0.60 }} }},
]

[[drills]]                      # fails the flaky provider on purpose: the steady one must answer
route = "chat"
every = "30s"
fail = ["flaky-anthropic=http_5xx"]
"#,
    )
}

/// Tells the user what is running and what to try.
#[expect(clippy::print_stdout, reason = "the demo tells the user what to run")]
fn welcome(listen: SocketAddr) {
    println!("baton demo: a flaky simulated Anthropic (fails about half its requests) and a steady simulated OpenAI,");
    println!(
        "behind baton on http://{listen}. Route \"chat\" tries the flaky one first, with an 800 ms first-token deadline."
    );
    println!();
    println!("Try it (run it a few times; -i shows which provider answered in x-baton-provider):");
    println!();
    println!("  curl -N -i http://{listen}/v1/chat/completions -H 'content-type: application/json' \\");
    println!(
        "    -d '{{\"model\": \"chat\", \"stream\": true, \"messages\": [{{\"role\": \"user\", \"content\": \"hello\"}}]}}'"
    );
    println!();
    println!("Open http://{listen}/ for the playground and the live status of both providers and the route.");
    println!("Each failover is explained in the log below: an \"attempt\" line per try, with its failure_class.");
    println!("Requests are recorded for the page's charts in a temporary database, removed when the demo stops.");
    println!("Every 30 s a drill fails the flaky provider on purpose and checks that the steady one answers.");
    println!();
}

/// A directory of the demo's own under the system's temporary directory,
/// removed with everything in it when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn create() -> std::io::Result<TempDir> {
        let name = format!("baton-demo-{}-{:016x}", std::process::id(), fastrand::u64(..));
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir(&path)?;
        Ok(TempDir(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Err(err) = std::fs::remove_dir_all(&self.0) {
            tracing::warn!(error = %err, path = %self.0.display(), "the demo's records could not be removed");
        }
    }
}
