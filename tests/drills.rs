//! Drills: an operator makes a chosen provider fail on purpose, for requests
//! that carry the admin credential, and sees the fallback path work.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::{Duration, Instant};

use baton::mock::{MockHandle, MockProvider};
use baton::resilience::BreakerState;
use support::{CHAT, ChatConfig, Proxy, Received, Spawned, chat_body, read_response, run};

const HARD_LIMIT: Duration = Duration::from_secs(20);
const TOKEN: &str = "drill-token-0123456789";

async fn setup(admin: bool) -> (Proxy, MockHandle, MockHandle) {
    let primary = MockProvider::anthropic().marker("primary").spawned().await;
    let spare = MockProvider::gemini().marker("spare").spawned().await;
    let admin_token = if admin { format!("admin_token = \"{TOKEN}\"") } else { String::new() };
    let config = ChatConfig::new().top(&admin_token).mock("primary", &primary).mock("spare", &spare);
    (Proxy::start(&config.deadlines(300, 300).toml()).await, primary, spare)
}

async fn drilled(proxy: &Proxy, drill: &str, token: Option<&str>, stream: bool) -> Received {
    let mut request =
        reqwest::Client::new().post(proxy.url(CHAT)).json(&chat_body(stream)).header("x-baton-drill", drill);
    if let Some(token) = token {
        request = request.header("x-baton-admin-token", token);
    }
    let started = Instant::now();
    read_response(request.send().await.expect("answer"), started).await
}

#[test]
fn a_drill_without_the_credential_is_refused() {
    run(HARD_LIMIT, async {
        let (disabled, primary, _spare) = setup(false).await;
        let got = drilled(&disabled, "primary=http_5xx", Some(TOKEN), true).await;
        assert_eq!(got.status, 403, "{}", got.raw);
        assert!(got.raw.contains("no admin_token is configured"), "{}", got.raw);
        assert!(primary.requests().is_empty(), "a refused drill sends nothing upstream");

        let (enabled, primary, _spare) = setup(true).await;
        for token in [None, Some("drill-token-wrong-guess"), Some("")] {
            let got = drilled(&enabled, "primary=http_5xx", token, true).await;
            assert_eq!(got.status, 403, "token {token:?}: {}", got.raw);
            assert_eq!(got.json()["error"]["code"], "forbidden");
            assert!(!got.raw.contains(TOKEN), "the token is never echoed");
        }
        assert!(primary.requests().is_empty());
    });
}

#[test]
fn a_drilled_failure_fails_over_without_touching_the_provider_or_its_breaker() {
    run(HARD_LIMIT, async {
        let (proxy, primary, spare) = setup(true).await;
        for class in ["refuse", "http_5xx", "http_429", "malformed", "error_event", "close_before_token"] {
            for stream in [true, false] {
                let got = drilled(&proxy, &format!("primary={class}"), Some(TOKEN), stream).await;
                assert_eq!(got.status, 200, "{class}: {}", got.raw);
                assert_eq!(got.header("x-baton-provider"), "spare", "{class}: the fallback answered");
                assert!(!got.raw.contains("primary"), "{class}: nothing of the drilled provider");
            }
        }
        assert!(primary.requests().is_empty(), "pre-commit drills never call the provider");
        assert_eq!(spare.requests().len(), 12);
        assert_eq!(proxy.engine.health().provider("primary").breaker.state(), BreakerState::Closed);
    });
}

#[test]
fn a_stall_drill_waits_for_the_deadline() {
    run(HARD_LIMIT, async {
        let (proxy, _primary, _spare) = setup(true).await;
        let got = drilled(&proxy, "primary=stall_first_token", Some(TOKEN), true).await;
        assert_eq!(got.header("x-baton-provider"), "spare", "{}", got.raw);
        assert!(got.first_byte >= Duration::from_millis(300), "{:?}", got.first_byte);
    });
}

#[test]
fn a_midstream_drill_breaks_the_stream_after_it_started() {
    run(HARD_LIMIT, async {
        let (proxy, primary, _spare) = setup(true).await;
        let got = drilled(&proxy, "primary=midstream_close", Some(TOKEN), true).await;
        assert_eq!(got.header("x-baton-provider"), "primary");
        assert!(got.streamed_text().starts_with("primary0"), "{}", got.raw);
        assert!(!got.saw_done());
        assert_eq!(got.error_event().expect("an error event")["error"]["code"], "truncated");
        assert_eq!(primary.requests().len(), 1);
        assert_eq!(proxy.engine.health().provider("primary").breaker.state(), BreakerState::Closed);
        let got = drilled(&proxy, "primary=midstream_stall", Some(TOKEN), true).await;
        assert_eq!(got.error_event().expect("an error event")["error"]["code"], "idle_timeout");
    });
}

#[test]
fn an_unknown_drill_is_a_bad_request() {
    run(HARD_LIMIT, async {
        let (proxy, primary, _spare) = setup(true).await;
        let got = drilled(&proxy, "primary=meltdown", Some(TOKEN), true).await;
        assert_eq!(got.status, 400);
        assert!(got.raw.contains("unknown fault class"), "{}", got.raw);
        assert!(primary.requests().is_empty());
    });
}
