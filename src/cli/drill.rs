//! `baton drill`: one drill of a route now, with its result on stdout.

use std::sync::Arc;
use std::time::Duration;

use baton::config;
use baton::providers::driver::HttpOpener;

use super::AnyError;

/// Runs one drill of `route` now and says how it went; an error unless a
/// provider that was not failed answered. The route's `[[drills]]` entry,
/// when it has one, gives what `--fail` does not.
#[expect(clippy::print_stdout, reason = "a drill prints how it went")]
pub(crate) async fn run(path: &std::path::Path, route: &str, fail: Option<&str>) -> Result<(), AnyError> {
    let config = config::load(path)?;
    let route = config.route(route).ok_or_else(|| format!("no route {route:?} in {}", path.display()))?;
    let configured = config.drills.iter().find(|drill| drill.route == route.model);
    let drill = match (configured, fail) {
        (Some(configured), None) => configured.clone(),
        (configured, fail) => {
            let mut drill = config::Drill::of(route, fail, Duration::ZERO).map_err(|err| format!("--fail: {err}"))?;
            if let Some(configured) = configured {
                (drill.prompt, drill.max_tokens) = (configured.prompt.clone(), configured.max_tokens);
            }
            drill
        }
    };
    let engine = baton::core::Engine::with_opener(&config, Arc::new(HttpOpener::new()?));
    let ran =
        baton::ops::drills::run::run(&engine, route, &drill, baton::ops::drills::run::request(&drill), None).await;
    let (spec, elapsed_ms) = (&drill.fail_spec, ran.elapsed.as_millis());
    match (&ran.answered_by, ran.passed) {
        (Some((provider, model)), true) => {
            println!(
                "drill of {:?} ({spec}): answered by {provider} ({model}) after {} attempts in {elapsed_ms} ms",
                route.model, ran.attempts
            );
            if ran.outcome == "no_failover" {
                println!(
                    "note: {provider} was tried first and is not one the drill fails, so no failover was exercised; fail the route's first target to drill its fallback"
                );
            }
            Ok(())
        }
        (Some((provider, _)), false) => {
            Err(format!("drill of {:?} ({spec}): answered by the failed {provider}", route.model).into())
        }
        (None, _) => Err(format!(
            "drill of {:?} ({spec}) failed after {elapsed_ms} ms: {}: {}",
            route.model,
            ran.outcome,
            ran.error.as_deref().unwrap_or("no answer")
        )
        .into()),
    }
}
