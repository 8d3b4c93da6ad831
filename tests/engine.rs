//! The engine itself, on paused time: scripted providers stand in for real
//! ones through the upstream seam, so every deadline, retry, hedge, resume
//! and breaker decision is checked at its exact virtual instant.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

#[path = "support/engine_call.rs"]
mod engine_call;

use std::sync::Arc;
use std::time::Duration;

use baton::admission::{Admission, Candidate, Policy, Settlement, Skip, Ticket};
use baton::config::{self, Config};
use baton::core::{Call, Committed, Engine, ProxyError};
use baton::event::{Event, Usage};
use baton::providers::ProviderError;
use baton::providers::scripted::{Script, Scripted};
use futures_util::StreamExt;
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);

/// Providers `a`, `b`, `c` (each target asks for the model of its own
/// name) and a route "chat" over `targets`, with `route` keys added.
fn config(route: &str, targets: &[&str]) -> Config {
    let mut text = String::new();
    for name in ["a", "b", "c"] {
        text.push_str(&format!(
            "[[providers]]\nname = \"{name}\"\nkind = \"openai\"\nbase_url = \"http://{name}.invalid/v1\"\nbreaker = {{ failure_threshold = 1000 }}\n\n"
        ));
    }
    let targets: Vec<String> = targets.iter().map(|t| format!("{{ provider = \"{t}\", model = \"{t}\" }}")).collect();
    text.push_str(&format!("[[routes]]\nmodel = \"chat\"\n{route}\ntargets = [{}]\n", targets.join(", ")));
    config::parse(&text, "engine.toml", &|_| None).expect("a valid test config")
}

fn call() -> Call {
    engine_call::call_with_id("req_test")
}

/// Streams one call and reads its whole answer: who answered, and the text.
async fn stream(engine: &Engine, config: &Config) -> Result<(Committed, String), ProxyError> {
    let route = config.route("chat").expect("route");
    let mut committed = engine.stream(route, call()).await?;
    let mut text = String::new();
    while let Some(event) = committed.events.next().await {
        if let Ok(Event::Text(fragment)) = event {
            text.push_str(&fragment);
        }
    }
    Ok((committed, text))
}

fn engine(config: &Config, scripted: &Arc<Scripted>) -> Engine {
    Engine::with_opener(config, Arc::clone(scripted) as Arc<dyn baton::providers::Opener>)
}

fn healthy(text: &str) -> Script {
    Script::answer().text(text).finish()
}

/// When each request of `model` arrived, after `start`.
fn arrivals(scripted: &Scripted, model: &str, start: Instant) -> Vec<Duration> {
    scripted.opened().iter().filter(|o| o.model == model).map(|o| o.at - start).collect()
}

#[tokio::test(start_paused = true)]
async fn a_silent_provider_fails_over_at_exactly_its_first_token_deadline() {
    let config = config("first_token_timeout_ms = 500", &["a", "b"]);
    for silent in [Script::answer().then_silent(), Script::answer().opening_after(Duration::from_secs(60))] {
        let scripted = Scripted::new();
        scripted.then("a", silent).then("b", healthy("from b"));
        let start = Instant::now();
        let (committed, text) = stream(&engine(&config, &scripted), &config).await.expect("answered");
        assert_eq!(&*committed.winner.provider, "b");
        assert_eq!(text, "from b");
        assert_eq!(arrivals(&scripted, "b", start), [500 * MS], "b was asked exactly at a's deadline");
    }
}

#[tokio::test(start_paused = true)]
async fn every_failure_before_the_first_token_fails_over_at_once() {
    let config = config("", &["a", "b"]);
    let failures = [
        Script::fails(ProviderError::Connect("refused".into())),
        Script::fails(ProviderError::Server { status: 503, message: String::new() }),
        Script::fails(ProviderError::RateLimited { retry_after: None, message: String::new() }),
        Script::fails(ProviderError::Auth { status: 401, message: String::new() }),
        Script::fails(ProviderError::ContentType("application/json".into())),
        Script::answer().then_fails(ProviderError::Malformed("{".into())),
        Script::answer().then_fails(ProviderError::ErrorEvent("overloaded".into())),
        Script::answer().then_fails(ProviderError::Truncated),
        Script::answer(),
    ];
    for failure in failures {
        let scripted = Scripted::new();
        let described = format!("{failure:?}");
        scripted.then("a", failure).then("b", healthy("from b"));
        let start = Instant::now();
        let (committed, text) = stream(&engine(&config, &scripted), &config).await.expect("answered");
        assert_eq!((&*committed.winner.provider, text.as_str()), ("b", "from b"), "after {described}");
        assert_eq!(arrivals(&scripted, "b", start), [Duration::ZERO], "at once after {described}");
        assert_eq!(committed.winner.attempts, 2);
    }
}

#[tokio::test(start_paused = true)]
async fn a_failure_inside_the_commit_window_is_invisible() {
    let config = config("commit_after_tokens = 3", &["a", "b"]);
    let scripted = Scripted::new();
    scripted.then("a", Script::answer().text("a1 ").text("a2 ").then_fails(ProviderError::Io("reset".into())));
    scripted.then("b", Script::answer().text("b1 ").text("b2 ").text("b3").finish());
    let (committed, text) = stream(&engine(&config, &scripted), &config).await.expect("answered");
    assert_eq!(&*committed.winner.provider, "b");
    assert_eq!(text, "b1 b2 b3", "nothing of a's two tokens");
}

#[tokio::test(start_paused = true)]
async fn a_hedge_starts_on_time_and_the_loser_is_dropped_at_the_winners_commit() {
    let config = config("hedge_after_ms = 100", &["a", "b"]);
    let scripted = Scripted::new();
    scripted.then("a", Script::answer().wait(1000 * MS).text("late a").finish());
    scripted.then("b", Script::answer().wait(50 * MS).text("b").finish());
    let start = Instant::now();
    let route = config.route("chat").expect("route");
    let committed = engine(&config, &scripted).stream(route, call()).await.expect("answered");
    assert_eq!(&*committed.winner.provider, "b");
    assert_eq!(start.elapsed(), 150 * MS, "b started at 100 ms and committed 50 ms later");
    assert_eq!(arrivals(&scripted, "b", start), [100 * MS]);
    assert_eq!(scripted.dropped(), 1, "a was dropped when b committed, not later");
}

#[tokio::test(start_paused = true)]
async fn a_retry_waits_exactly_the_retry_after_asked_for() {
    let config = with_retries(config("max_retry_wait_ms = 2000", &["a", "b"]), 1);
    let scripted = Scripted::new();
    let limited = ProviderError::RateLimited { retry_after: Some(Duration::from_secs(1)), message: String::new() };
    scripted.then("a", Script::fails(limited)).then("a", healthy("a again"));
    let start = Instant::now();
    let (committed, text) = stream(&engine(&config, &scripted), &config).await.expect("answered");
    assert_eq!((&*committed.winner.provider, text.as_str()), ("a", "a again"));
    assert_eq!(arrivals(&scripted, "a", start), [Duration::ZERO, Duration::from_secs(1)]);
}

#[tokio::test(start_paused = true)]
async fn retries_back_off_within_their_exponential_bounds() {
    let config = with_retries(config("retry_backoff_ms = 100", &["a", "b"]), 2);
    for _ in 0..20 {
        let scripted = Scripted::new();
        let server = || Script::fails(ProviderError::Server { status: 500, message: String::new() });
        scripted.then("a", server()).then("a", server()).then("a", healthy("third"));
        let start = Instant::now();
        let (_, text) = stream(&engine(&config, &scripted), &config).await.expect("answered");
        assert_eq!(text, "third");
        let at = arrivals(&scripted, "a", start);
        assert!(at[1] - at[0] <= 100 * MS, "first backoff within [0, 100 ms]: {at:?}");
        assert!(at[2] - at[1] <= 200 * MS, "second backoff within [0, 200 ms]: {at:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_request_timeout_ends_the_wait_at_its_exact_time() {
    let config = config("request_timeout_ms = 300\nfirst_token_timeout_ms = 1000", &["a", "b"]);
    let scripted = Scripted::new();
    scripted.then("a", Script::answer().then_silent()).then("b", healthy("never"));
    let start = Instant::now();
    let failed = stream(&engine(&config, &scripted), &config).await.err().expect("no answer");
    assert_eq!(start.elapsed(), 300 * MS);
    assert!(failed.to_string().contains("request_timeout"), "{failed}");
    assert_eq!(scripted.opened_for("b"), 0, "b's turn never came");
}

#[tokio::test(start_paused = true)]
async fn a_broken_stream_is_resumed_by_the_next_target_and_spliced() {
    let config = config("on_midstream_failure = \"resume\"", &["a", "b"]);
    let scripted = Scripted::new();
    scripted.then("a", Script::answer().text("w0").text(" w1").then_fails(ProviderError::Truncated));
    // b repeats the last word before going on, as models often do.
    scripted.then("b", Script::answer().text(" w1").text(" w2").finish());
    let (_, text) = stream(&engine(&config, &scripted), &config).await.expect("answered");
    assert_eq!(text, "w0 w1 w2", "every word once");
    let continuation = &scripted.opened()[1].request;
    let last = continuation.messages.last().expect("a message");
    assert!(last.joined_text().contains("<partial>w0 w1</partial>"), "b was given the text so far: {last:?}");
}

#[tokio::test(start_paused = true)]
async fn a_half_open_breaker_lets_exactly_one_probe_through() {
    let text = "[[providers]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://a.invalid/v1\"\nbreaker = { failure_threshold = 1, cooldown_ms = 1000 }\n\n\
                [[providers]]\nname = \"b\"\nkind = \"openai\"\nbase_url = \"http://b.invalid/v1\"\n\n\
                [[routes]]\nmodel = \"chat\"\ntargets = [{ provider = \"a\", model = \"a\" }, { provider = \"b\", model = \"b\" }]\n";
    let config = config::parse(text, "engine.toml", &|_| None).expect("config");
    let scripted = Scripted::new();
    scripted.then("a", Script::fails(ProviderError::Server { status: 503, message: String::new() }));
    scripted.then("a", Script::answer().wait(100 * MS).text("a is back").finish());
    scripted.then("b", healthy("b"));
    let engine = engine(&config, &scripted);
    let (committed, _) = stream(&engine, &config).await.expect("answered");
    assert_eq!(&*committed.winner.provider, "b", "a failed and its breaker opened");
    tokio::time::advance(Duration::from_secs(1)).await;
    let answers = futures_util::future::join_all((0..3).map(|_| stream(&engine, &config))).await;
    let winners: Vec<String> =
        answers.into_iter().map(|a| a.expect("answered").0.winner.provider.to_string()).collect();
    assert_eq!(winners.iter().filter(|w| *w == "a").count(), 1, "exactly one probe: {winners:?}");
    assert_eq!(scripted.opened_for("a"), 2);
}

/// `config` with every target retried `retries` times.
fn with_retries(config: Config, retries: u32) -> Config {
    let mut config = config;
    config.routes = config
        .routes
        .iter()
        .map(|route| {
            let mut route = (**route).clone();
            route.targets.iter_mut().for_each(|target| target.retries = retries);
            Arc::new(route)
        })
        .collect();
    config
}

/// Records every settlement, per provider.
#[derive(Default)]
struct Recorder(std::sync::Mutex<Vec<(String, Settlement)>>);

struct Recorded(Arc<Recorder>, String);

impl Ticket for Recorded {
    fn settle(self: Box<Self>, how: Settlement) {
        self.0.0.lock().unwrap().push((self.1.clone(), how));
    }
}

struct Recording(Arc<Recorder>);

impl Policy for Recording {
    fn admit(&self, candidate: &Candidate<'_>) -> Result<Option<Box<dyn Ticket>>, Skip> {
        Ok(Some(Box::new(Recorded(Arc::clone(&self.0), candidate.provider.name.clone()))))
    }
}

#[tokio::test(start_paused = true)]
async fn every_admitted_attempt_is_settled_once_with_its_outcome_and_usage() {
    let config = config("hedge_after_ms = 100", &["a", "b", "c"]);
    let scripted = Scripted::new();
    scripted.then("a", Script::fails(ProviderError::Server { status: 500, message: String::new() }));
    scripted.then("b", Script::answer().then_silent());
    let usage = Usage { input_tokens: Some(7), output_tokens: Some(2), ..Usage::default() };
    scripted.then("c", Script::answer().wait(50 * MS).text("c").event(Event::Usage(usage)).finish());
    let recorder = Arc::new(Recorder::default());
    let policies: Vec<Box<dyn Policy>> = vec![Box::new(Recording(Arc::clone(&recorder)))];
    let engine = engine(&config, &scripted).with_admission(Admission::with(policies));
    let (committed, text) = stream(&engine, &config).await.expect("answered");
    assert_eq!((&*committed.winner.provider, text.as_str()), ("c", "c"));
    drop(committed);
    let settled = recorder.0.lock().unwrap().clone();
    let server = ProviderError::Server { status: 500, message: String::new() }.class();
    assert_eq!(
        settled,
        [
            ("a".to_owned(), Settlement::Failed(server)),
            ("b".to_owned(), Settlement::Abandoned),
            ("c".to_owned(), Settlement::Completed(usage)),
        ],
        "a failed, b lost the hedge, c answered with its usage: each settled once"
    );
}

fn quota_config(quota: &str) -> Config {
    let text = format!(
        "[[providers]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://a.invalid/v1\"\n{quota}\n\n\
         [[providers]]\nname = \"b\"\nkind = \"openai\"\nbase_url = \"http://b.invalid/v1\"\n\n\
         [[routes]]\nmodel = \"chat\"\ntargets = [{{ provider = \"a\", model = \"a\" }}, {{ provider = \"b\", model = \"b\" }}]\n"
    );
    config::parse(&text, "engine.toml", &|_| None).expect("config")
}

#[tokio::test(start_paused = true)]
async fn a_provider_over_its_request_quota_is_skipped_until_it_has_room() {
    let config = quota_config("rpm = 2");
    let scripted = Scripted::new();
    scripted.then("a", healthy("a")).then("b", healthy("b"));
    let engine = engine(&config, &scripted);
    let mut winners = Vec::new();
    for _ in 0..3 {
        winners.push(stream(&engine, &config).await.expect("answered").0.winner.provider.to_string());
    }
    assert_eq!(winners, ["a", "a", "b"], "a burst of two, then a is over its quota");
    tokio::time::advance(Duration::from_secs(30)).await;
    let (committed, _) = stream(&engine, &config).await.expect("answered");
    assert_eq!(&*committed.winner.provider, "a", "one request's room comes back every 30 s");
}

#[tokio::test(start_paused = true)]
async fn token_reservations_are_settled_to_the_reported_usage() {
    // Each request reserves its estimate (a few input tokens + 1,024 for output).
    let config = quota_config("tpm = 1500");
    let small = Usage { input_tokens: Some(5), output_tokens: Some(3), ..Usage::default() };
    let scripted = Scripted::new();
    scripted.then("a", Script::answer().text("a").event(Event::Usage(small)).finish()).then("b", healthy("b"));
    let engine = engine(&config, &scripted);
    for i in 0..5 {
        let (committed, _) = stream(&engine, &config).await.expect("answered");
        assert_eq!(&*committed.winner.provider, "a", "request {i}: 8 tokens used each, the reservation given back");
    }
    let unreported = Scripted::new();
    unreported.then("a", healthy("a")).then("b", healthy("b"));
    let engine = self::engine(&config, &unreported);
    let first = stream(&engine, &config).await.expect("answered").0.winner.provider.to_string();
    let second = stream(&engine, &config).await.expect("answered").0.winner.provider.to_string();
    assert_eq!([first, second], ["a", "b"], "without a usage report the reservation stands");
}

#[tokio::test(start_paused = true)]
async fn a_provider_over_its_quota_is_not_tried_again_as_a_last_resort() {
    let config = quota_config("rpm = 1");
    let scripted = Scripted::new();
    scripted.then("a", healthy("a"));
    scripted.then("b", Script::fails(ProviderError::Server { status: 503, message: String::new() }));
    let engine = engine(&config, &scripted);
    assert_eq!(&*stream(&engine, &config).await.expect("answered").0.winner.provider, "a");
    let failed = stream(&engine, &config).await.err().expect("a over its quota, b failing");
    let listed = failed.to_string();
    assert_eq!(listed.matches("over_quota").count(), 1, "one skip, not a second as a last resort: {listed}");
    assert_eq!(scripted.opened_for("a"), 1);
}
