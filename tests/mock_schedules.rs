//! The simulated providers' schedules and per-request faults, as the tests,
//! the demo and `baton mock` rely on them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::mock::{Fault, MockProvider, Schedule};
use support::{ChatConfig, Proxy, Spawned, chat_body, mocks_toml, post_chat, run};

const HARD_LIMIT: Duration = Duration::from_secs(20);

#[test]
fn a_primary_failing_its_first_requests_gets_traffic_back_after() {
    run(HARD_LIMIT, async {
        let primary =
            MockProvider::anthropic().fault(Fault::Http5xx).schedule(Schedule::FirstRequests(2)).spawned().await;
        let secondary = MockProvider::openai().spawned().await;
        let proxy = Proxy::start(&mocks_toml(&[("primary", &primary), ("secondary", &secondary)], 1000, 1000)).await;
        let mut answered_by = Vec::new();
        for _ in 0..4 {
            let got = post_chat(&proxy, &chat_body(true)).await;
            assert_eq!(got.status, 200);
            answered_by.push(got.header("x-baton-provider").to_owned());
        }
        assert_eq!(answered_by, ["secondary", "secondary", "primary", "primary"]);
    });
}

#[test]
fn a_seeded_schedule_repeats_itself() {
    run(HARD_LIMIT, async {
        let faults = [Fault::Http5xx, Fault::Http429, Fault::Malformed];
        let draw = |seed| {
            MockProvider::gemini()
                .faults(&faults)
                .retry_after_secs(0)
                .schedule(Schedule::Random { probability: 0.5, seed })
        };
        let mut runs = Vec::new();
        for provider in [draw(42), draw(42), draw(43)] {
            let provider = provider.spawned().await;
            let spare = MockProvider::openai().spawned().await;
            // Every request must reach the flaky provider, so its breaker never opens here.
            let config = ChatConfig::new()
                .deadlines(1000, 1000)
                .mock("flaky", &provider)
                .provider_keys("breaker = { failure_threshold = 1000000, window = 1000000 }")
                .mock("spare", &spare);
            let proxy = Proxy::start(&config.toml()).await;
            for _ in 0..30 {
                assert_eq!(post_chat(&proxy, &chat_body(false)).await.status, 200, "every request is answered");
            }
            runs.push(provider.requests().iter().map(|r| r.fault).collect::<Vec<_>>());
        }
        assert_eq!(runs[0], runs[1], "the same seed injects the same faults in the same order");
        assert_ne!(runs[0], runs[2], "another seed draws differently");
        let injected = runs[0].iter().filter(|f| f.is_some()).count();
        assert!((5..=25).contains(&injected), "about half of 30 requests get a fault, got {injected}");
        for fault in faults {
            assert!(runs[0].contains(&Some(fault)), "{} is drawn", fault.name());
        }
    });
}

#[test]
fn per_request_faults_outside_the_matrix_fail_over() {
    run(HARD_LIMIT, async {
        for fault in [Fault::Refuse, Fault::NotSse] {
            let primary = MockProvider::openai().marker("wrong").fault(fault).spawned().await;
            let secondary = MockProvider::anthropic().marker("good").spawned().await;
            let proxy =
                Proxy::start(&mocks_toml(&[("primary", &primary), ("secondary", &secondary)], 1000, 1000)).await;
            for stream in [true, false] {
                let got = post_chat(&proxy, &chat_body(stream)).await;
                assert_eq!(got.status, 200, "{}: {}", fault.name(), got.raw);
                assert_eq!(got.header("x-baton-provider"), "secondary", "{}", fault.name());
                assert!(
                    !got.raw.contains("wrong") && !got.raw.contains("mock"),
                    "{}: nothing leaked: {}",
                    fault.name(),
                    got.raw
                );
            }
        }
    });
}
