#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

use super::*;
use crate::config::{Config, parse};

const ROUTE: &str = r#"
[[providers]]
name = "openai"
kind = "openai"
base_url = "http://127.0.0.1:9/v1"

[[providers]]
name = "claude"
kind = "anthropic"
base_url = "http://127.0.0.1:9"

[[routes]]
model = "chat"
aliases = ["tier:fast"]
targets = [{ provider = "openai", model = "m" }, { provider = "claude", model = "c" }]
"#;

fn load(ops: &str) -> Result<Config, String> {
    let text = format!("{ops}\n{ROUTE}");
    let env = |name: &str| (name == "ALERT_SECRET").then(|| "s3cret-value".to_owned());
    parse(&text, "t.toml", &env).map_err(|err| err.to_string())
}

#[test]
fn an_alert_takes_its_url_events_and_secret() {
    let config = load(
        "[[alerts]]\nurl = \"https://hooks.example/baton\"\nevents = [\"breaker_open\", \"drill_failed\"]\nsecret = \"${ALERT_SECRET}\"",
    )
    .expect("valid");
    let webhook = &config.alerts[0];
    assert_eq!(webhook.url.expose(), "https://hooks.example/baton");
    assert_eq!(webhook.host, "hooks.example");
    assert_eq!(webhook.events, vec![AlertEvent::BreakerOpen, AlertEvent::DrillFailed]);
    assert_eq!(webhook.secret.as_ref().map(Secret::expose), Some("s3cret-value"));
    let printed = format!("{config:?}");
    assert!(!printed.contains("s3cret-value") && !printed.contains("hooks.example/baton"), "{printed}");
    let every = load("[[alerts]]\nurl = \"http://127.0.0.1:9000/hook\"").expect("valid");
    assert_eq!(every.alerts[0].events, AlertEvent::ALL.to_vec(), "no events: every event");
}

#[test]
fn alert_mistakes_name_their_key_and_line() {
    for (ops, starts) in [
        ("[[alerts]]\nurl = \"ftp://x\"", "t.toml:2: alerts[0].url: \"ftp://x\" is not an http:// or https:// URL"),
        ("[[alerts]]\nurl = \"hooks.example\"", "t.toml:2: alerts[0].url:"),
        (
            "[[alerts]]\nurl = \"https://h.example\"\nevents = [\"breaker_open\", \"breaker_opened\"]",
            "t.toml:3: alerts[0].events: unknown event \"breaker_opened\"; known events are breaker_open, breaker_closed, route_exhausted, budget_threshold, drill_failed, drill_recovered, state_down, store_down",
        ),
        ("[[alerts]]\nurl = \"https://h.example\"\nevents = []", "t.toml:3: alerts[0].events: lists no events"),
        (
            "[[alerts]]\nurl = \"https://h.example\"\nsecret = \"${NOPE}\"",
            "t.toml:3: alerts[0].secret: environment variable NOPE is not set",
        ),
        ("[[alerts]]\nurl = \"https://h.example\"\nchannel = \"#ops\"", "t.toml:3: channel: unknown field `channel`"),
    ] {
        let err = load(ops).expect_err(ops);
        assert!(err.starts_with(starts), "{ops:?} gave {err:?}, expected {starts:?}");
    }
}

#[test]
fn a_drill_takes_its_route_interval_and_failures() {
    let config = load(
        "[[drills]]\nroute = \"tier:fast\"\nevery = \"30s\"\nfail = [\"claude=stall_first_token\"]\nexpect = \"answered\"\nprompt = \"Say ok.\"\nmax_tokens = 4",
    )
    .expect("valid");
    let drill = &config.drills[0];
    assert_eq!(drill.route, "chat", "an alias is resolved to its route");
    assert_eq!(drill.every, Duration::from_secs(30));
    assert_eq!(drill.fail_spec, "claude=stall_first_token");
    assert_eq!(drill.fail.for_provider("claude"), Some(crate::config::DrillFault::StallFirstToken));
    assert_eq!((drill.prompt.as_str(), drill.max_tokens, drill.expect), ("Say ok.", 4, DrillExpect::Answered));
    let plain = load("[[drills]]\nroute = \"chat\"\nevery = \"1d\"").expect("valid");
    let drill = &plain.drills[0];
    assert_eq!(drill.fail_spec, "openai=http_5xx", "by default the first target fails with http_5xx");
    assert_eq!((drill.every, drill.max_tokens), (Duration::from_secs(86_400), DEFAULT_DRILL_MAX_TOKENS));
    assert_eq!(drill.prompt, DEFAULT_DRILL_PROMPT);
}

#[test]
fn drill_mistakes_name_their_key_and_line() {
    for (ops, starts) in [
        ("[[drills]]\nroute = \"nope\"\nevery = \"1h\"", "t.toml:2: drills[0].route: no route is named \"nope\""),
        ("[[drills]]\nroute = \"chat\"\nevery = \"hourly\"", "t.toml:3: drills[0].every: \"hourly\" is not a duration"),
        ("[[drills]]\nroute = \"chat\"\nevery = \"0s\"", "t.toml:3: drills[0].every: \"0s\" is outside 1s to 30d"),
        ("[[drills]]\nroute = \"chat\"\nevery = \"90d\"", "t.toml:3: drills[0].every: \"90d\" is outside 1s to 30d"),
        ("[[drills]]\nroute = \"chat\"", "t.toml:1: [[drills]]: missing field `every`"),
        (
            "[[drills]]\nroute = \"chat\"\nevery = \"1h\"\nfail = [\"openai=explode\"]",
            "t.toml:4: drills[0].fail: unknown fault class \"explode\"",
        ),
        (
            "[[drills]]\nroute = \"chat\"\nevery = \"1h\"\nfail = [\"gemini=http_5xx\"]",
            "t.toml:4: drills[0].fail: \"gemini\" is not a target of route \"chat\"",
        ),
        (
            "[[drills]]\nroute = \"chat\"\nevery = \"1h\"\nexpect = \"failed\"",
            "t.toml:4: drills[0].expect: unknown expectation \"failed\"",
        ),
        (
            "[[drills]]\nroute = \"chat\"\nevery = \"1h\"\nmax_tokens = 0",
            "t.toml:4: drills[0].max_tokens: must be at least 1",
        ),
        ("[[drills]]\nroute = \"chat\"\nevery = \"1h\"\nhow = \"x\"", "t.toml:4: how: unknown field `how`"),
    ] {
        let err = load(ops).expect_err(ops);
        assert!(err.starts_with(starts), "{ops:?} gave {err:?}, expected {starts:?}");
    }
}
