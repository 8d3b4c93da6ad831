//! The retry budget, on paused time with scripted providers: under a total
//! outage of one provider, retries and hedges stay within what the route's
//! requests earn plus its reserve, while failover to the next target goes
//! on for every request.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

#[path = "support/engine_call.rs"]
mod engine_call;

use std::sync::Arc;
use std::time::Duration;

use baton::config::{self, Config, RetryBudgetSettings};
use baton::core::{Call, Engine};
use baton::event::Event;
use baton::providers::ProviderError;
use baton::providers::scripted::{Script, Scripted};
use futures_util::StreamExt;

/// Providers `a` and `b` (each target asks for the model of its own name)
/// and a route "chat" over `a`, retried `retries` times, then `b`, with
/// `route` keys added.
fn config(route: &str, retries: u32) -> Config {
    let mut text = String::new();
    for name in ["a", "b"] {
        text.push_str(&format!(
            "[[providers]]\nname = \"{name}\"\nkind = \"openai\"\nbase_url = \"http://{name}.invalid/v1\"\nbreaker = {{ failure_threshold = 1000000, window = 1000000 }}\n\n"
        ));
    }
    text.push_str(&format!(
        "[[routes]]\nmodel = \"chat\"\n{route}\ntargets = [{{ provider = \"a\", model = \"a\", retries = {retries} }}, {{ provider = \"b\", model = \"b\" }}]\n"
    ));
    config::parse(&text, "retry_budget.toml", &|_| None).expect("a valid test config")
}

fn call() -> Call {
    engine_call::call_with_id("req_budget")
}

/// Streams one call to its end: who answered, and the text.
async fn ask(engine: &Engine, config: &Config) -> (String, String) {
    let route = config.route("chat").expect("route");
    let mut committed = engine.stream(route, call()).await.expect("answered");
    let mut text = String::new();
    while let Some(event) = committed.events.next().await {
        if let Ok(Event::Text(fragment)) = event {
            text.push_str(&fragment);
        }
    }
    (committed.winner.provider.to_string(), text)
}

/// Fifty requests, one after the other, each answered by `b`.
async fn fifty(engine: &Engine, config: &Config) {
    for _ in 0..50 {
        assert_eq!(ask(engine, config).await, ("b".to_owned(), "from b".to_owned()), "b answers every request");
    }
}

fn engine(config: &Config, scripted: &Arc<Scripted>) -> Engine {
    Engine::with_opener(config, Arc::clone(scripted) as Arc<dyn baton::providers::Opener>)
}

/// The value of the budget's counter for `kind`, as `/metrics` shows it.
fn exhausted(engine: &Engine, kind: &str) -> u64 {
    let text = engine.metrics().render(engine.health());
    let prefix = format!("baton_retry_budget_exhausted_total{{route=\"chat\",kind=\"{kind}\"}} ");
    text.lines().find_map(|line| line.strip_prefix(&prefix)).map_or(0, |n| n.parse().expect("a count"))
}

#[tokio::test(start_paused = true)]
async fn under_a_total_outage_retries_stay_within_the_budget_and_every_request_fails_over() {
    // Reserve: 1 a second over 10 s = 10 retries; each request earns a fifth of one.
    let config = config("retry_budget = { percent = 20, min_per_second = 1 }\nretry_backoff_ms = 1", 3);
    let scripted = Scripted::new();
    scripted.then("a", Script::fails(ProviderError::Server { status: 503, message: String::new() }));
    scripted.then("b", Script::answer().text("from b").finish());
    let engine = engine(&config, &scripted);
    tokio::time::timeout(Duration::from_secs(5), fifty(&engine, &config)).await.expect("fifty requests in time");
    // 50 first tries, and 10 + 50 × 20 % = 20 retries; without a budget, 150.
    assert_eq!(scripted.opened_for("a"), 70, "a is sent its first tries and the budget's 20 retries");
    assert_eq!(scripted.opened_for("b"), 50, "failover to b is never held back");
    assert_eq!(exhausted(&engine, "retry"), 47, "every request after the third ran out of budget once");

    tokio::time::advance(Duration::from_secs(10)).await;
    tokio::time::timeout(Duration::from_secs(5), fifty(&engine, &config)).await.expect("fifty more in time");
    assert_eq!(scripted.opened_for("a"), 140, "ten seconds on, the window holds only the new requests' earnings");
    assert_eq!(scripted.opened_for("b"), 100);
}

#[tokio::test(start_paused = true)]
async fn a_route_without_a_budget_to_spend_fails_over_without_retrying() {
    let config = config("retry_budget = { percent = 0, min_per_second = 0 }\nretry_backoff_ms = 1", 3);
    let scripted = Scripted::new();
    scripted.then("a", Script::fails(ProviderError::Connect("refused".into())));
    scripted.then("b", Script::answer().text("from b").finish());
    let engine = engine(&config, &scripted);
    for _ in 0..5 {
        let answered = tokio::time::timeout(Duration::from_secs(5), ask(&engine, &config)).await.expect("in time");
        assert_eq!(answered.0, "b");
    }
    assert_eq!((scripted.opened_for("a"), scripted.opened_for("b")), (5, 5), "one try of a each, then b");
}

#[tokio::test(start_paused = true)]
async fn hedges_draw_on_the_budget_and_stop_when_it_is_spent() {
    // No earnings, a reserve of 10 over the window: ten hedges, then none.
    let config = config("retry_budget = { percent = 0, min_per_second = 1 }\nhedge_after_ms = 100", 0);
    let scripted = Scripted::new();
    scripted.then("a", Script::answer().opening_after(Duration::from_secs(1)).text("from a").finish());
    scripted.then("b", Script::answer().text("from b").finish());
    let engine = engine(&config, &scripted);
    let mut winners = Vec::new();
    for _ in 0..15 {
        let answered = tokio::time::timeout(Duration::from_secs(5), ask(&engine, &config)).await.expect("in time");
        winners.push(answered.0);
    }
    let hedged = winners.iter().take_while(|winner| *winner == "b").count();
    assert_eq!(hedged, 10, "the first ten are hedged and b wins them: {winners:?}");
    assert!(winners[10..].iter().all(|winner| winner == "a"), "the last five wait for a: {winners:?}");
    assert_eq!((scripted.opened_for("a"), scripted.opened_for("b")), (15, 10));
    assert_eq!(exhausted(&engine, "hedge"), 5);
}

#[test]
fn the_budget_defaults_to_a_fifth_of_the_requests_and_ten_a_second() {
    let route = &config("", 0).routes[0];
    assert_eq!(route.retry_budget, RetryBudgetSettings { percent: 20, min_per_second: 10 });
    let partial = &config("retry_budget = { min_per_second = 2 }", 0).routes[0];
    assert_eq!(partial.retry_budget, RetryBudgetSettings { percent: 20, min_per_second: 2 });
}

#[test]
fn a_budget_beyond_reason_is_refused_with_its_key() {
    let text = "[[providers]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://a.invalid/v1\"\n\n\
        [[routes]]\nmodel = \"chat\"\nretry_budget = { percent = 5000 }\ntargets = [{ provider = \"a\", model = \"a\" }]\n";
    let err = config::parse(text, "budget.toml", &|_| None).expect_err("5000 % is refused").to_string();
    assert!(err.contains("routes[0].retry_budget.percent") && err.contains("at most 1000"), "{err}");
    let unknown = text.replace("percent = 5000", "ratio = 0.2");
    let err = config::parse(&unknown, "budget.toml", &|_| None).expect_err("an unknown key is refused").to_string();
    assert!(err.contains("ratio"), "{err}");
}
