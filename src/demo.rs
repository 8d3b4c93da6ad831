//! `baton demo`: the proxy in front of two simulated providers on loopback, a
//! flaky primary and a healthy secondary, so failover can be watched with no keys.

use std::net::SocketAddr;
use std::time::Duration;

use baton::config;
use baton::mock::{Fault, MockProvider, Schedule};

use crate::AnyError;

/// The faults the flaky primary draws from, on about half its requests.
const FLAKY: [Fault; 6] = [
    Fault::StallFirstToken,
    Fault::CloseBeforeToken,
    Fault::Http5xx,
    Fault::Http429,
    Fault::ErrorEvent,
    Fault::Malformed,
];

#[expect(clippy::print_stdout, reason = "the demo tells the user what to run")]
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
    let listener = crate::bind(listen)?;
    let listen = listener.local_addr()?;
    let text = format!(
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
"#,
        flaky = flaky.base_url(),
        steady = steady.base_url(),
    );
    // Only the standard OTEL_* variables reach the demo's config: they turn traces on.
    let config = config::parse(&text, "demo", &|name| name.starts_with("OTEL_").then(|| std::env::var(name).ok())?)?;
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
    println!();
    crate::serve_on(listener, config, None).await
}
