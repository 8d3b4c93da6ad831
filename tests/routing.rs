//! Routing on paused time, through the scripted upstream: the order a
//! route's strategy gives each request (weighted, fastest), targets skipped
//! because their context window cannot hold the request, and the config
//! mistakes around them, each named by its key.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

use std::sync::Arc;
use std::time::Duration;

use baton::config::{self, Config, ConfigError};
use baton::core::{Call, Committed, Engine, ProxyError};
use baton::event::{ChatRequest, Event, Message, Role};
use baton::providers::ProviderError;
use baton::providers::scripted::{Script, Scripted};
use futures_util::StreamExt;

const MS: Duration = Duration::from_millis(1);

/// Providers `a`, `b`, `c` whose breakers never open (each target asks for
/// the model of its provider's name) and a route "chat" with `route` keys
/// over `targets`, each `(provider, extra target keys)`.
fn config(route: &str, targets: &[(&str, &str)]) -> Config {
    let mut text = String::new();
    for name in ["a", "b", "c"] {
        text.push_str(&format!(
            "[[providers]]\nname = \"{name}\"\nkind = \"openai\"\nbase_url = \"http://{name}.invalid/v1\"\nbreaker = {{ failure_threshold = 1000, failure_rate = 1.0 }}\n\n"
        ));
    }
    let targets: Vec<String> =
        targets.iter().map(|(t, keys)| format!("{{ provider = \"{t}\", model = \"{t}\"{keys} }}")).collect();
    text.push_str(&format!("[[routes]]\nmodel = \"chat\"\n{route}\ntargets = [{}]\n", targets.join(", ")));
    config::parse(&text, "routing.toml", &|_| None).expect("a valid test config")
}

fn engine(config: &Config, scripted: &Arc<Scripted>) -> Engine {
    Engine::with_opener(config, Arc::clone(scripted) as Arc<dyn baton::providers::Opener>)
}

/// A request of `chars` characters of text, with `max_tokens` if given.
fn call(chars: usize, max_tokens: Option<u32>) -> Call {
    let request = ChatRequest {
        messages: vec![Message::text(Role::User, "x".repeat(chars))],
        max_tokens,
        ..ChatRequest::default()
    };
    Call {
        id: Arc::from("req_routing"),
        request: Box::new(request),
        drills: Default::default(),
        trace: Default::default(),
    }
}

/// Streams `call` and reads its answer to the end.
async fn stream(engine: &Engine, config: &Config, call: Call) -> Result<Committed, ProxyError> {
    let route = config.route("chat").expect("route");
    let mut committed = engine.stream(route, call).await?;
    while let Some(event) = committed.events.next().await {
        if let Ok(Event::Finish(_)) = event {
            break;
        }
    }
    Ok(committed)
}

/// An answer whose first token comes after `ms`.
fn answers_after(ms: u32) -> Script {
    Script::answer().wait(ms * MS).text("hello").finish()
}

fn fails() -> Script {
    Script::fails(ProviderError::Server { status: 503, message: String::new() })
}

/// An engine for `config` whose providers `a` and `b` each answer after 1 ms.
fn a_then_b_answering(config: &Config) -> (Arc<Scripted>, Engine) {
    let scripted = Scripted::new();
    scripted.then("a", answers_after(1)).then("b", answers_after(1));
    let engine = engine(config, &scripted);
    (scripted, engine)
}

/// The model asked first by the request that began once `before` requests had been seen.
fn first_asked(scripted: &Scripted, before: usize) -> String {
    scripted.opened().get(before).map(|opened| opened.model.clone()).unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn weighted_first_attempts_follow_the_weights_over_two_thousand_requests() {
    let config = config("strategy = \"weighted\"", &[("a", ", weight = 3"), ("b", ", weight = 1")]);
    let (scripted, engine) = a_then_b_answering(&config);
    fastrand::seed(7);
    for _ in 0..2000 {
        let committed = stream(&engine, &config, call(10, None)).await.expect("answered");
        assert_eq!(committed.winner.attempts, 1, "both are healthy: the first attempt answers");
    }
    let share = scripted.opened_for("a") as f64 / 2000.0;
    assert!((share - 0.75).abs() <= 0.05, "weights 3:1 put a first on {share:.3} of requests, not 0.75 ± 0.05");
}

#[tokio::test(start_paused = true)]
async fn a_weighted_pick_that_fails_over_walks_the_rest_in_config_order() {
    let config = config("strategy = \"weighted\"", &[("a", ""), ("b", ", weight = 1000000"), ("c", "")]);
    let scripted = Scripted::new();
    scripted.then("a", answers_after(1)).then("b", fails()).then("c", answers_after(1));
    let engine = engine(&config, &scripted);
    fastrand::seed(11);
    for _ in 0..20 {
        let before = scripted.opened().len();
        let committed = stream(&engine, &config, call(10, None)).await.expect("answered");
        let models: Vec<String> = scripted.opened()[before..].iter().map(|o| o.model.clone()).collect();
        if models.first().is_some_and(|m| m == "b") {
            assert_eq!(models, ["b", "a"], "after the weighted pick, a comes next: config order");
            assert_eq!((&*committed.winner.provider, committed.winner.attempts), ("a", 2));
        }
    }
    assert!(scripted.opened_for("b") >= 19, "b, weighted 1000000 to 1, went first nearly every time");
}

#[tokio::test(start_paused = true)]
async fn fastest_moves_the_first_attempt_to_whichever_p95_is_now_lower() {
    let config = config("strategy = \"fastest\"", &[("a", ""), ("b", "")]);
    let scripted = Scripted::new();
    let engine = engine(&config, &scripted);
    // Nothing measured yet: config order. a fails, so b answers and is measured at 50 ms.
    // Then b is measured and a is not: b first. b fails, so a answers and is measured at 10 ms.
    let rounds = [
        ("a", "b", 50, "unmeasured targets keep config order"),
        ("b", "a", 10, "a measured target goes before an unmeasured one"),
    ];
    for (failing, answering, after_ms, why) in rounds {
        for _ in 0..10 {
            scripted.then(failing, fails()).then(answering, answers_after(after_ms));
        }
        for _ in 0..10 {
            let before = scripted.opened().len();
            stream(&engine, &config, call(10, None)).await.unwrap_or_else(|err| panic!("{answering} answers: {err:?}"));
            assert_eq!(first_asked(&scripted, before), failing, "{why}");
        }
    }
    // Both measured, a faster: a first. Its next answer takes 200 ms.
    scripted.then("a", answers_after(200)).then("b", answers_after(50));
    let before = scripted.opened().len();
    let committed = stream(&engine, &config, call(10, None)).await.expect("a answers");
    assert_eq!((first_asked(&scripted, before).as_str(), &*committed.winner.provider), ("a", "a"));
    // One slow answer in eleven puts a's p95 at 200 ms, over b's 50: b goes first now.
    let before = scripted.opened().len();
    let committed = stream(&engine, &config, call(10, None)).await.expect("b answers");
    assert_eq!(first_asked(&scripted, before), "b", "a's p95 rose above b's within one latency window");
    assert_eq!((&*committed.winner.provider, committed.winner.attempts), ("b", 1));
}

#[tokio::test(start_paused = true)]
async fn automatic_hedging_goes_by_the_first_target_of_the_order() {
    let route = "strategy = \"weighted\"\nhedge_after_ms = \"auto\"";
    let config = config(route, &[("a", ""), ("b", ", weight = 1000000")]);
    let scripted = Scripted::new();
    let engine = engine(&config, &scripted);
    // a (never first here) is measured at 500 ms, b at 100 ms.
    for _ in 0..10 {
        engine.health().provider("a").record_ttft(500 * MS);
        engine.health().provider("b").record_ttft(100 * MS);
    }
    scripted.then("b", Script::answer().wait(1000 * MS).text("late b").finish()).then("a", answers_after(10));
    fastrand::seed(3);
    let start = tokio::time::Instant::now();
    let committed = stream(&engine, &config, call(10, None)).await.expect("answered");
    assert_eq!(&*committed.winner.provider, "a");
    let a_at: Vec<Duration> = scripted.opened().iter().filter(|o| o.model == "a").map(|o| o.at - start).collect();
    assert_eq!(a_at, [100 * MS], "the hedge started at b's p95 (the first of the order), not a's");
}

#[tokio::test(start_paused = true)]
async fn a_target_too_small_for_the_request_is_skipped_without_an_attempt() {
    let config = config("", &[("a", ", context_window = 1000"), ("b", ", context_window = 100000")]);
    let (scripted, engine) = a_then_b_answering(&config);
    // 4,000 characters are about 1,000 tokens, and 1,024 more are reserved for the answer.
    let committed = stream(&engine, &config, call(4000, None)).await.expect("b answers");
    assert_eq!((&*committed.winner.provider, committed.winner.attempts), ("b", 1), "the skip is no attempt");
    assert_eq!(scripted.opened_for("a"), 0, "nothing was sent to a");
    // With max_tokens the reserve is that: 200 + 100 tokens fit in a's 1,000.
    let committed = stream(&engine, &config, call(800, Some(100))).await.expect("a answers");
    assert_eq!(&*committed.winner.provider, "a", "a request that fits goes to the first target");
    let health = engine.health().provider("a");
    assert_eq!(health.attempts(1).total, 1, "the skip counted nothing against a's health");
}

#[tokio::test(start_paused = true)]
async fn when_no_window_holds_the_request_the_client_gets_context_length_exceeded() {
    let config = config("", &[("a", ", context_window = 1000"), ("b", ", context_window = 2000")]);
    let scripted = Scripted::new();
    scripted.then("a", answers_after(1)).then("b", answers_after(1));
    let err = stream(&engine(&config, &scripted), &config, call(8000, Some(500))).await.err().expect("refused");
    assert_eq!((err.status(), err.kind()), (400, "context_length_exceeded"));
    let message = err.to_string();
    assert!(message.contains("about 2500 tokens"), "the estimate is named: {message}");
    assert!(message.contains("a (a) 1000") && message.contains("b (b) 2000"), "each window is named: {message}");
    assert!(scripted.opened().is_empty(), "nothing was sent");
}

#[tokio::test(start_paused = true)]
async fn a_target_too_small_is_never_tried_as_a_last_resort() {
    let config = config("", &[("a", ", context_window = 1000"), ("b", "")]);
    let scripted = Scripted::new();
    scripted.then("a", answers_after(1)).then("b", fails());
    let err = stream(&engine(&config, &scripted), &config, call(8000, None)).await.err().expect("all failed");
    assert_eq!(err.status(), 502, "b's failure decides the status, not a's skip: {err}");
    assert!(err.to_string().contains("context_window"), "the skip is listed: {err}");
    assert_eq!(scripted.opened_for("a"), 0, "a was not tried when b failed");
}

fn error_of(route: &str) -> (String, String) {
    let text = format!(
        "[[providers]]\nname = \"o\"\nkind = \"openai\"\nbase_url = \"http://o.invalid/v1\"\n\n\
         [[routes]]\nmodel = \"chat\"\naliases = [\"tier:fast\"]\ntargets = [{{ provider = \"o\", model = \"m\" }}]\n\n{route}"
    );
    match config::parse(&text, "t.toml", &|_| None) {
        Err(ConfigError::Invalid { key, message, line, .. }) => (format!("{line}: {key}"), message),
        Err(other) => panic!("one error expected, got {other}"),
        Ok(_) => panic!("expected an error for:\n{text}"),
    }
}

#[test]
fn routing_mistakes_are_named_by_their_key() {
    let second = |keys: &str| {
        format!("[[routes]]\nmodel = \"other\"\n{keys}\ntargets = [{{ provider = \"o\", model = \"n\" }}]\n")
    };
    let cases = [
        (second("strategy = \"random\""), "13: routes[1].strategy", "\"random\" is not a strategy"),
        (second("aliases = [\"tier:fast\"]"), "13: routes[1].aliases", "alias \"tier:fast\" already names route \"chat\""),
        (second("aliases = [\"chat\"]"), "13: routes[1].aliases", "already names route \"chat\""),
        (second("aliases = [\"x\", \"x\"]"), "13: routes[1].aliases", "listed twice"),
        (second("aliases = [\" \"]"), "13: routes[1].aliases", "must not be empty"),
        (
            "[[routes]]\nmodel = \"tier:fast\"\ntargets = [{ provider = \"o\", model = \"n\" }]\n".to_owned(),
            "12: routes[1].model",
            "already an alias of route \"chat\"",
        ),
        (
            "[[routes]]\nmodel = \"w\"\nstrategy = \"weighted\"\ntargets = [{ provider = \"o\", model = \"n\", weight = 0 }]\n"
                .to_owned(),
            "14: routes[1].targets[0].weight",
            "must be at least 1",
        ),
    ];
    for (route, at, needle) in cases {
        let (got, message) = error_of(&route);
        assert_eq!(got, at, "for {needle}: {message}");
        assert!(message.contains(needle), "expected {needle:?} in {message:?}");
    }
}

#[test]
fn a_route_answers_to_its_aliases_and_a_key_may_name_it_by_one() {
    let text = "[[keys]]\nname = \"fast\"\nkey = \"sk-fast-0123456789abcdef\"\nroutes = [\"tier:fast\", \"chat\"]\n\n\
                [[providers]]\nname = \"o\"\nkind = \"openai\"\nbase_url = \"http://o.invalid/v1\"\n\n\
                [[routes]]\nmodel = \"chat\"\naliases = [\"tier:fast\", \"gpt-4o-mini\"]\nstrategy = \"fastest\"\n\
                targets = [{ provider = \"o\", model = \"m\", weight = 2 }]\n";
    let (config, warnings) = config::parse_with_warnings(text, "t.toml", &|_| None).expect("valid");
    assert_eq!(config.route("gpt-4o-mini").map(|r| r.model.as_str()), Some("chat"));
    assert_eq!(config.route("tier:fast").map(|r| r.model.as_str()), Some("chat"));
    assert!(config.route("tier:slow").is_none());
    let key = &config.access.keys.keys()[0];
    assert_eq!(key.routes.as_deref(), Some(&["chat".to_owned()][..]), "an alias resolves to its route, once");
    assert!(key.allows("chat"));
    let all = warnings.join("\n");
    assert!(
        all.contains("t.toml:15: routes[0].targets[0].weight: unused, the route's strategy is \"fastest\""),
        "{all}"
    );
}
