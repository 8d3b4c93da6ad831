//! `baton demo`: the proxy in front of two simulated providers on loopback, a
//! flaky primary and a healthy secondary, so failover can be watched with no keys.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use baton::config::{Config, DEFAULT_MAX_BODY_BYTES, Provider, Route, Target};
use baton::mock::{Fault, MockProvider, Schedule};
use baton::providers::ProviderKind;

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
        .faults(&FLAKY)
        .schedule(Schedule::Random { probability: 0.5, seed: 7 })
        .spawn()
        .await?;
    let healthy = MockProvider::openai()
        .marker("steady")
        .tokens(24)
        .first_token_after(Duration::from_millis(200))
        .gap(Duration::from_millis(40))
        .spawn()
        .await?;
    let provider = |name: &str, kind, base_url: String| {
        Arc::new(Provider { name: name.to_owned(), kind, base_url, api_key: None })
    };
    let primary = provider("flaky-anthropic", ProviderKind::Anthropic, flaky.base_url());
    let secondary = provider("steady-openai", ProviderKind::OpenAi, healthy.base_url());
    let target = |provider: &Arc<Provider>, model: &str| Target {
        provider: Arc::clone(provider),
        model: model.to_owned(),
        context_window: None,
    };
    let listener = crate::bind(listen).await?;
    let listen = listener.local_addr()?;
    let config = Config {
        listen,
        max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        providers: vec![Arc::clone(&primary), Arc::clone(&secondary)],
        routes: vec![Route {
            model: "chat".to_owned(),
            first_token_timeout: Duration::from_millis(800),
            idle_timeout: Duration::from_secs(5),
            targets: vec![target(&primary, "claude-sim"), target(&secondary, "gpt-sim")],
        }],
    };
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
    crate::serve_on(listener, config).await
}
