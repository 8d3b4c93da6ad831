//! Staying fast during an outage: circuit breakers, retries that honour
//! `Retry-After`, rate-limit cooldowns, hedged first tokens, per-target and
//! per-request deadlines, and the commit window — over real loopback TCP.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::{Duration, Instant};

use baton::mock::{Fault, MockHandle, MockProvider, Schedule};
use baton::resilience::BreakerState;
use support::{ChatConfig, Proxy, Received, Spawned, chat_body, closes_early_within, post_chat, run};

const HARD_LIMIT: Duration = Duration::from_secs(30);

/// A route "chat" over `targets`: each a provider name, its mock, extra
/// provider keys and extra target keys; `route` adds route keys.
fn config(route: &str, targets: &[(&str, &MockHandle, &str, &str)]) -> String {
    let config = targets.iter().fold(ChatConfig::new().keys(route), |config, (name, mock, provider, target)| {
        config.mock(name, mock).provider_keys(provider).target_keys(target)
    });
    config.toml()
}

/// `mock`, answering `fault` to its first `requests` requests and well after.
fn failing_first(mock: MockProvider, fault: Fault, requests: u64) -> MockProvider {
    mock.fault(fault).schedule(Schedule::FirstRequests(requests))
}

async fn healthy(marker: &str) -> MockHandle {
    MockProvider::openai().marker(marker).spawned().await
}

/// A proxy whose route tries `first` (name, mock, provider keys, target
/// keys) and then a healthy "spare", and the spare.
async fn before_spare(route: &str, first: (&str, &MockHandle, &str, &str)) -> (Proxy, MockHandle) {
    let spare = healthy("spare").await;
    (Proxy::start(&config(route, &[first, ("spare", &spare, "", "")])).await, spare)
}

fn answered_by(got: &Received) -> &str {
    assert_eq!(got.status, 200, "answered: {}", got.raw);
    got.header("x-baton-provider")
}

#[test]
fn an_open_breaker_stops_costing_the_deadline() {
    run(HARD_LIMIT, async {
        let dead = MockProvider::anthropic().fault(Fault::StallFirstToken).spawned().await;
        let (proxy, _spare) = before_spare(
            "first_token_timeout_ms = 200",
            ("dead", &dead, "breaker = { failure_threshold = 3, cooldown_ms = 60000 }", ""),
        )
        .await;
        for _ in 0..3 {
            let got = post_chat(&proxy, &chat_body(true)).await;
            assert_eq!(answered_by(&got), "spare");
            assert!(got.first_byte >= Duration::from_millis(200), "a closed breaker still waits for the deadline");
        }
        assert_eq!(proxy.engine.health().provider("dead").breaker.state(), BreakerState::Open);
        for _ in 0..5 {
            let got = post_chat(&proxy, &chat_body(true)).await;
            assert_eq!(answered_by(&got), "spare");
            assert_eq!(got.header("x-baton-attempts"), "1", "a skipped provider is not an attempt");
            assert!(
                got.first_byte < Duration::from_millis(200),
                "an open breaker skips at once, took {:?}",
                got.first_byte
            );
        }
        assert_eq!(dead.requests().len(), 3, "the dead provider saw only the requests that opened its breaker");
    });
}

/// As Envoy's panic threshold keeps a cluster answering, a route whose
/// every candidate is skipped tries them anyway, the soonest to recover
/// first, instead of failing a request that might have been answered.
#[test]
fn a_route_whose_every_breaker_is_open_still_tries_its_providers() {
    run(HARD_LIMIT, async {
        let flaky = failing_first(MockProvider::gemini().marker("back"), Fault::Http5xx, 2).spawned().await;
        let dead = MockProvider::gemini().fault(Fault::Http5xx).spawned().await;
        let breaker = "breaker = { failure_threshold = 2, cooldown_ms = 60000 }";
        let flaky_proxy = Proxy::start(&config("", &[("flaky", &flaky, breaker, "")])).await;
        let dead_proxy = Proxy::start(&config("", &[("dead", &dead, breaker, "")])).await;
        for proxy in [&flaky_proxy, &dead_proxy] {
            for _ in 0..2 {
                assert_eq!(post_chat(proxy, &chat_body(true)).await.status, 502);
            }
        }
        assert_eq!(flaky_proxy.engine.health().provider("flaky").breaker.state(), BreakerState::Open);

        let got = post_chat(&flaky_proxy, &chat_body(true)).await;
        assert_eq!(answered_by(&got), "flaky", "the open breaker's provider was tried as the last resort");
        assert_eq!(got.streamed_text(), flaky.provider().expected_text());
        assert_eq!(flaky.requests().len(), 3);
        assert_eq!(
            flaky_proxy.engine.health().provider("flaky").breaker.state(),
            BreakerState::Closed,
            "its answer closed the breaker, as a probe's would"
        );

        let got = post_chat(&dead_proxy, &chat_body(true)).await;
        assert_eq!(got.status, 502, "a provider that is really down still fails: {}", got.raw);
        assert!(got.raw.contains("breaker_open") && got.raw.contains("http_5xx"), "{}", got.raw);
        assert_eq!(dead.requests().len(), 3, "tried once more, as the last resort");
    });
}

#[test]
fn half_open_lets_exactly_one_probe_through_and_recovers_within_a_cooldown() {
    run(HARD_LIMIT, async {
        let primary = failing_first(
            MockProvider::gemini().marker("primary").first_token_after(Duration::from_millis(300)),
            Fault::Http5xx,
            2,
        )
        .spawned()
        .await;
        let (proxy, _spare) =
            before_spare("", ("primary", &primary, "breaker = { failure_threshold = 2, cooldown_ms = 400 }", "")).await;
        for _ in 0..2 {
            assert_eq!(answered_by(&post_chat(&proxy, &chat_body(true)).await), "spare");
        }
        let health = proxy.engine.health().provider("primary");
        let breaker = &health.breaker;
        assert_eq!(breaker.state(), BreakerState::Open);
        tokio::time::sleep(Duration::from_millis(450)).await;
        assert_eq!(breaker.state(), BreakerState::HalfOpen, "the cooldown has passed");

        let body = chat_body(true);
        let burst: Vec<_> = (0..8).map(|_| post_chat(&proxy, &body)).collect();
        let results = futures_util::future::join_all(burst).await;
        let by_primary = results.iter().filter(|got| answered_by(got) == "primary").count();
        assert_eq!(by_primary, 1, "exactly one probe went to the recovering provider");
        assert_eq!(primary.requests().len(), 3, "two failures and one probe");
        assert_eq!(breaker.state(), BreakerState::Closed, "the probe's success closed the breaker");
        assert_eq!(answered_by(&post_chat(&proxy, &chat_body(true)).await), "primary", "traffic is back");
    });
}

#[test]
fn retries_stay_on_the_target_before_failing_over() {
    run(HARD_LIMIT, async {
        let wobbly = failing_first(MockProvider::anthropic().marker("wobbly"), Fault::Http5xx, 2).spawned().await;
        let (proxy, spare) = before_spare("retry_backoff_ms = 20", ("wobbly", &wobbly, "", "retries = 2")).await;
        let got = post_chat(&proxy, &chat_body(true)).await;
        assert_eq!(answered_by(&got), "wobbly", "the third try succeeded");
        assert_eq!(got.header("x-baton-attempts"), "3");
        assert_eq!(got.streamed_text(), wobbly.provider().expected_text());
        assert!(spare.requests().is_empty(), "no failover was needed");
    });
}

#[test]
fn connection_failures_are_retried_too() {
    run(HARD_LIMIT, async {
        let flaky = failing_first(MockProvider::gemini().marker("flaky"), Fault::Refuse, 1).spawned().await;
        let proxy = Proxy::start(&config("retry_backoff_ms = 10", &[("flaky", &flaky, "", "retries = 1")])).await;
        let got = post_chat(&proxy, &chat_body(false)).await;
        assert_eq!(answered_by(&got), "flaky");
        assert_eq!(got.header("x-baton-attempts"), "2");
    });
}

async fn retry_after_is_honoured(mock: MockProvider, at_least: Duration) {
    let limited = failing_first(mock, Fault::Http429, 1).spawned().await;
    let (proxy, spare) = before_spare("max_retry_wait_ms = 3000", ("limited", &limited, "", "retries = 1")).await;
    let started = Instant::now();
    let got = post_chat(&proxy, &chat_body(true)).await;
    assert_eq!(answered_by(&got), "limited", "the retry after the wait succeeded");
    assert!(started.elapsed() >= at_least, "waited {:?}, expected at least {at_least:?}", started.elapsed());
    assert!(spare.requests().is_empty());
}

#[test]
fn retry_after_in_seconds_is_honoured() {
    run(HARD_LIMIT, retry_after_is_honoured(MockProvider::openai().retry_after_secs(1), Duration::from_millis(990)));
}

#[test]
fn retry_after_as_a_date_is_honoured() {
    let mock = MockProvider::anthropic().retry_after_secs(2).retry_after_as_date();
    run(HARD_LIMIT, retry_after_is_honoured(mock, Duration::from_millis(990)));
}

#[test]
fn a_long_retry_after_fails_over_and_cools_the_provider_without_tripping_its_breaker() {
    run(HARD_LIMIT, async {
        let limited = MockProvider::openai().fault(Fault::Http429).retry_after_secs(60).spawned().await;
        let (proxy, _spare) = before_spare(
            "max_retry_wait_ms = 2000",
            ("limited", &limited, "breaker = { failure_threshold = 1 }", "retries = 3"),
        )
        .await;
        let started = Instant::now();
        assert_eq!(answered_by(&post_chat(&proxy, &chat_body(true)).await), "spare");
        assert!(started.elapsed() < Duration::from_secs(2), "did not wait out a 60 s Retry-After");
        for _ in 0..3 {
            let got = post_chat(&proxy, &chat_body(true)).await;
            assert_eq!(answered_by(&got), "spare");
            assert_eq!(got.header("x-baton-attempts"), "1", "the cooling provider is skipped");
        }
        assert_eq!(limited.requests().len(), 1, "one 429, then left alone until its Retry-After");
        assert_eq!(
            proxy.engine.health().provider("limited").breaker.state(),
            BreakerState::Closed,
            "a 429 is not a breaker failure"
        );
    });
}

#[test]
fn a_persistent_429_without_retry_after_is_tried_a_bounded_number_of_times() {
    run(HARD_LIMIT, async {
        let limited = MockProvider::gemini().fault(Fault::Http429).retry_after_secs(0).spawned().await;
        let (proxy, _spare) = before_spare("retry_backoff_ms = 20", ("limited", &limited, "", "retries = 3")).await;
        assert_eq!(answered_by(&post_chat(&proxy, &chat_body(true)).await), "spare");
        assert_eq!(limited.requests().len(), 4, "one try and three retries, then failover");
    });
}

#[test]
fn timeouts_and_rejected_requests_are_never_retried() {
    run(HARD_LIMIT, async {
        for (fault, status) in [(Fault::StallFirstToken, 200), (Fault::SlowFirstToken, 200), (Fault::BadRequest, 400)] {
            let provider = MockProvider::anthropic().fault(fault).spawned().await;
            let (proxy, _spare) =
                before_spare("first_token_timeout_ms = 150", ("provider", &provider, "", "retries = 3")).await;
            let got = post_chat(&proxy, &chat_body(true)).await;
            assert_eq!(got.status, status, "{}: {}", fault.name(), got.raw);
            assert_eq!(provider.requests().len(), 1, "{} is not retried", fault.name());
        }
    });
}

#[test]
fn a_target_deadline_overrides_the_route() {
    run(HARD_LIMIT, async {
        let stalled = MockProvider::gemini().fault(Fault::StallFirstToken).spawned().await;
        let (proxy, _spare) =
            before_spare("first_token_timeout_ms = 10000", ("stalled", &stalled, "", "first_token_timeout_ms = 150"))
                .await;
        let got = post_chat(&proxy, &chat_body(true)).await;
        assert_eq!(answered_by(&got), "spare");
        assert!(
            got.first_byte >= Duration::from_millis(150) && got.first_byte < Duration::from_millis(1500),
            "{:?}",
            got.first_byte
        );
    });
}

#[test]
fn the_request_timeout_bounds_every_attempt() {
    run(HARD_LIMIT, async {
        let a = MockProvider::openai().fault(Fault::StallHeaders).spawned().await;
        let b = MockProvider::anthropic().fault(Fault::StallFirstToken).spawned().await;
        let proxy = Proxy::start(&config(
            "first_token_timeout_ms = 5000\nrequest_timeout_ms = 300",
            &[("a", &a, "", ""), ("b", &b, "", "")],
        ))
        .await;
        let started = Instant::now();
        let got = post_chat(&proxy, &chat_body(true)).await;
        assert_eq!(got.status, 504, "{}", got.raw);
        assert!(got.raw.contains("request_timeout"), "{}", got.raw);
        assert!(started.elapsed() < Duration::from_millis(2000), "took {:?}", started.elapsed());
    });
}

#[test]
fn a_hedge_races_the_next_candidate_and_drops_the_loser() {
    run(HARD_LIMIT, async {
        let slow = MockProvider::anthropic().marker("slow").first_token_after(Duration::from_secs(3)).spawned().await;
        let fast = MockProvider::gemini().marker("fast").first_token_after(Duration::from_millis(50)).spawned().await;
        let proxy = Proxy::start(&config(
            "first_token_timeout_ms = 10000\nhedge_after_ms = 100",
            &[("slow", &slow, "", ""), ("fast", &fast, "", "")],
        ))
        .await;
        let got = post_chat(&proxy, &chat_body(true)).await;
        assert_eq!(answered_by(&got), "fast");
        assert_eq!(got.streamed_text(), fast.provider().expected_text());
        assert!(!got.raw.contains("slow"), "no byte of the loser");
        assert_eq!(got.header("x-baton-attempts"), "1", "the loser did not fail; it was dropped");
        assert!(
            got.first_byte >= Duration::from_millis(150) && got.first_byte < Duration::from_millis(1000),
            "{:?}",
            got.first_byte
        );
        let dropped = closes_early_within(&slow, 0, Duration::from_millis(500)).await;
        assert!(dropped, "the loser's connection was closed, so it stops generating");
    });
}

#[test]
fn a_primary_that_wins_the_race_keeps_the_answer() {
    run(HARD_LIMIT, async {
        let primary =
            MockProvider::openai().marker("primary").first_token_after(Duration::from_millis(150)).spawned().await;
        let backup = MockProvider::gemini().marker("backup").first_token_after(Duration::from_secs(2)).spawned().await;
        let proxy =
            Proxy::start(&config("hedge_after_ms = 50", &[("primary", &primary, "", ""), ("backup", &backup, "", "")]))
                .await;
        let got = post_chat(&proxy, &chat_body(false)).await;
        assert_eq!(answered_by(&got), "primary");
        assert_eq!(got.json()["choices"][0]["message"]["content"], primary.provider().expected_text());
        assert_eq!(backup.requests().len(), 1, "the hedge was sent");
        assert!(closes_early_within(&backup, 0, Duration::from_millis(500)).await, "the losing hedge was dropped");
    });
}

#[test]
fn an_automatic_hedge_learns_the_primarys_latency() {
    run(HARD_LIMIT, async {
        let primary = MockProvider::anthropic()
            .marker("primary")
            .first_token_after(Duration::from_millis(20))
            .fault(Fault::SlowFirstToken)
            .slow_first_token(Duration::from_secs(5))
            .schedule(Schedule::AfterRequests(20))
            .spawned()
            .await;
        let backup =
            MockProvider::openai().marker("backup").first_token_after(Duration::from_millis(20)).spawned().await;
        let proxy = Proxy::start(&config(
            "first_token_timeout_ms = 8000\nhedge_after_ms = \"auto\"",
            &[("primary", &primary, "", ""), ("backup", &backup, "", "")],
        ))
        .await;
        for _ in 0..20 {
            assert_eq!(answered_by(&post_chat(&proxy, &chat_body(true)).await), "primary");
        }
        let got = post_chat(&proxy, &chat_body(true)).await;
        assert_eq!(answered_by(&got), "backup", "the slow primary was hedged");
        assert!(
            got.first_byte < Duration::from_millis(1500),
            "hedged near the primary's p95, not the 8 s deadline: {:?}",
            got.first_byte
        );
    });
}

#[test]
fn a_failure_inside_the_commit_window_still_fails_over_invisibly() {
    run(HARD_LIMIT, async {
        let breaks = MockProvider::anthropic()
            .marker("breaks")
            .fault(Fault::MidstreamClose)
            .tokens_before_fault(2)
            .spawned()
            .await;
        let spare = healthy("spare").await;
        let held =
            Proxy::start(&config("commit_after_tokens = 3", &[("breaks", &breaks, "", ""), ("spare", &spare, "", "")]))
                .await;
        let got = post_chat(&held, &chat_body(true)).await;
        assert_eq!(answered_by(&got), "spare");
        assert_eq!(got.streamed_text(), spare.provider().expected_text());
        assert!(!got.raw.contains("breaks"), "the two held tokens never reached the client: {}", got.raw);

        let eager = Proxy::start(&config("", &[("breaks", &breaks, "", ""), ("spare", &spare, "", "")])).await;
        let got = post_chat(&eager, &chat_body(true)).await;
        assert_eq!(answered_by(&got), "breaks", "without a window the first token commits");
        assert!(got.error_event().is_some());
    });
}

#[test]
fn a_time_window_holds_the_first_byte_back() {
    run(HARD_LIMIT, async {
        let steady = MockProvider::gemini().marker("steady").tokens(30).gap(Duration::from_millis(10)).spawned().await;
        let proxy = Proxy::start(&config("commit_after_ms = 150", &[("steady", &steady, "", "")])).await;
        let got = post_chat(&proxy, &chat_body(true)).await;
        assert_eq!(answered_by(&got), "steady");
        assert!(got.first_byte >= Duration::from_millis(150), "nothing before the window closed: {:?}", got.first_byte);
        assert_eq!(
            got.streamed_text(),
            steady.provider().expected_text(),
            "the held events are all delivered, in order"
        );
    });
}

#[test]
fn midstream_failures_count_against_the_breaker() {
    run(HARD_LIMIT, async {
        let breaks = MockProvider::openai().fault(Fault::MidstreamStall).spawned().await;
        let proxy = Proxy::start(&config(
            "idle_timeout_ms = 100",
            &[("breaks", &breaks, "breaker = { failure_threshold = 2, cooldown_ms = 60000 }", "")],
        ))
        .await;
        for _ in 0..2 {
            assert!(post_chat(&proxy, &chat_body(true)).await.error_event().is_some());
        }
        assert_eq!(proxy.engine.health().provider("breaks").breaker.state(), BreakerState::Open);
    });
}
