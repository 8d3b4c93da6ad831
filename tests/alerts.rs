//! Alerts: a webhook receiver of the test's own on loopback gets each event
//! with its fields, signed when a secret is set, at most once a minute per
//! subject, again after a 5xx, and never a provider's words; a webhook that
//! never answers costs the requests nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use baton::config::{self, Secret};
use baton::mock::{Fault, MockProvider, Schedule};
use baton::observe::Metrics;
use baton::ops::alerts::{Alert, Alerts, QUEUE_ALERTS, sign};
use serde_json::json;
use support::{
    ChatConfig, Delivered, Proxy, RedisServer, Spawned, WebhookReceiver, chat_body, eventually, metrics, post_chat, run,
};

const HARD_LIMIT: Duration = Duration::from_secs(40);
/// Long enough for an alert on a loaded machine: the watcher looks every 250 ms.
const ARRIVES_WITHIN: Duration = Duration::from_secs(10);
const SECRET: &str = "whsec-0123456789abcdef";

/// Words the simulated providers write in their error bodies: none may reach an alert.
const PROVIDER_WORDS: [&str; 2] = ["mock5xx", "overloaded"];

fn assert_clean(delivered: &Delivered) {
    let body = String::from_utf8_lossy(&delivered.body);
    for word in PROVIDER_WORDS.iter().chain(&[SECRET]) {
        assert!(!body.contains(word), "{word:?} leaked into an alert: {body}");
    }
    for field in ["event", "time", "summary", "text"] {
        assert!(delivered.json[field].is_string(), "every alert has {field}: {body}");
    }
}

#[test]
fn breaker_alerts_arrive_signed_with_their_fields() {
    run(HARD_LIMIT, async {
        let hook = WebhookReceiver::start().await;
        let primary = MockProvider::openai()
            .marker("primary")
            .fault(Fault::Http5xx)
            .schedule(Schedule::FirstRequests(1))
            .spawned()
            .await;
        let spare = MockProvider::anthropic().marker("spare").spawned().await;
        let chat = ChatConfig::new()
            .top(&hook.toml(&["breaker_open", "breaker_closed"], Some(SECRET)))
            .mock("primary", &primary)
            .provider_keys("breaker = { failure_threshold = 1, cooldown_ms = 300 }")
            .mock("spare", &spare);
        let proxy = Proxy::start(&chat.toml()).await;

        assert_eq!(post_chat(&proxy, &chat_body(false)).await.header("x-baton-provider"), "spare");
        let opened = hook.next_event("breaker_open", ARRIVES_WITHIN).await;
        assert_clean(&opened);
        assert_eq!(opened.json["provider"], "primary");
        assert_eq!(opened.json["class"], "http_5xx", "the failure class, never its message");
        assert_eq!(opened.json["cooldown_s"], 0.3);
        assert_eq!(opened.header("x-baton-event"), "breaker_open");
        assert!(opened.json["text"].as_str().unwrap().contains("*baton* breaker open for provider primary"));
        let signature = opened.header("x-baton-signature");
        assert!(signature.starts_with("sha256=") && signature.len() == 71, "{signature}");
        assert!(sign::verify(&Secret::new(SECRET), &opened.body, signature), "the signature is of the exact body");
        assert!(!sign::verify(&Secret::new("another-secret"), &opened.body, signature));

        tokio::time::sleep(Duration::from_millis(300)).await; // the breaker's cooldown
        assert_eq!(post_chat(&proxy, &chat_body(false)).await.header("x-baton-provider"), "primary", "the probe");
        let closed = hook.next_event("breaker_closed", ARRIVES_WITHIN).await;
        assert_clean(&closed);
        assert_eq!(closed.json["provider"], "primary");
        assert!(sign::verify(&Secret::new(SECRET), &closed.body, closed.header("x-baton-signature")));
    });
}

#[test]
fn route_exhausted_names_each_attempt_by_class_once_a_minute() {
    run(HARD_LIMIT, async {
        let hook = WebhookReceiver::start().await;
        let one = MockProvider::openai().fault(Fault::Http5xx).spawned().await;
        let two = MockProvider::gemini().fault(Fault::Http5xx).spawned().await;
        let chat = ChatConfig::new().top(&hook.toml(&["route_exhausted"], None)).mock("one", &one).mock("two", &two);
        let proxy = Proxy::start(&chat.toml()).await;

        let failed = post_chat(&proxy, &chat_body(true)).await;
        assert_eq!(failed.status, 502, "{}", failed.raw);
        let exhausted = hook.next_event("route_exhausted", ARRIVES_WITHIN).await;
        assert_clean(&exhausted);
        assert_eq!(exhausted.json["route"], "chat");
        assert_eq!(exhausted.json["status"], 502);
        let attempts = exhausted.json["attempts"].as_array().expect("attempts");
        let tried: Vec<(&str, &str)> =
            attempts.iter().map(|a| (a["provider"].as_str().unwrap(), a["class"].as_str().unwrap())).collect();
        assert_eq!(tried, [("one", "http_5xx"), ("two", "http_5xx")]);
        assert!(exhausted.header("x-baton-signature").is_empty(), "no secret, no signature");

        assert_eq!(post_chat(&proxy, &chat_body(false)).await.status, 502);
        let text = metrics(&proxy).await;
        assert!(
            text.contains(r#"baton_alerts_total{event="route_exhausted",result="deduplicated"} 1"#),
            "the second within a minute is held back: {text}"
        );
    });
}

#[test]
fn a_client_error_or_a_refusal_exhausts_no_route() {
    run(HARD_LIMIT, async {
        let hook = WebhookReceiver::start().await;
        let rejects = MockProvider::openai().fault(Fault::BadRequest).spawned().await;
        let chat = ChatConfig::new().top(&hook.toml(&["route_exhausted"], None)).mock("rejects", &rejects);
        let proxy = Proxy::start(&chat.toml()).await;
        assert_eq!(post_chat(&proxy, &chat_body(false)).await.status, 400, "the client's own mistake");

        let capped = ChatConfig::new()
            .top("max_usd_per_request = 0.000001")
            .top(&hook.toml(&["route_exhausted"], None))
            .mock("rejects", &rejects)
            .target_keys("price = { input_per_mtok = 1000.0, output_per_mtok = 1000.0 }");
        let refusing = Proxy::start(&capped.toml()).await;
        let refused = post_chat(&refusing, &chat_body(false)).await;
        assert_eq!(refused.status, 400, "refused by the cost cap: {}", refused.raw);
        assert!(hook.gets_any_within(Duration::from_secs(1)).await.is_none(), "neither is an exhausted route");
    });
}

#[test]
fn budget_threshold_fires_at_80_and_at_100_percent_once_per_window() {
    run(HARD_LIMIT, async {
        let hook = WebhookReceiver::start().await;
        let paid = MockProvider::openai().spawned().await;
        // The simulated provider reports 10 prompt tokens: $1 an answer at this price.
        let chat = ChatConfig::new()
            .top(&hook.toml(&["budget_threshold"], None))
            .mock("paid", &paid)
            .target_keys("price = { input_per_mtok = 100000.0, output_per_mtok = 0.0 }");
        let text = format!(
            "{}\n[[budgets]]\nscope = \"global\"\nwindow = \"1h\"\nusd = 2.2\naction = \"warn\"\n",
            chat.toml()
        );
        let proxy = Proxy::start(&text).await;

        assert_eq!(post_chat(&proxy, &chat_body(false)).await.status, 200);
        assert!(hook.gets_any_within(Duration::from_secs(1)).await.is_none(), "$1 of $2.20 is under 80 %");
        assert_eq!(post_chat(&proxy, &chat_body(false)).await.status, 200);
        let eighty = hook.next_event("budget_threshold", ARRIVES_WITHIN).await;
        assert_clean(&eighty);
        assert_eq!(
            (&eighty.json["scope"], &eighty.json["window"], &eighty.json["percent"], &eighty.json["usd"]),
            (&json!("global"), &json!("1h"), &json!(80), &json!(2.2))
        );
        assert_eq!((eighty.json["spent_usd"].as_f64(), &eighty.json["action"]), (Some(2.0), &json!("warn")));

        assert_eq!(post_chat(&proxy, &chat_body(false)).await.status, 200);
        let hundred = hook.next_event("budget_threshold", ARRIVES_WITHIN).await;
        assert_eq!((&hundred.json["percent"], hundred.json["spent_usd"].as_f64()), (&json!(100), Some(3.0)));
        assert_eq!(post_chat(&proxy, &chat_body(false)).await.status, 200);
        assert!(hook.gets_any_within(Duration::from_secs(1)).await.is_none(), "each threshold once per window");
    });
}

#[test]
fn state_down_arrives_when_the_shared_state_is_lost() {
    run(HARD_LIMIT, async {
        let hook = WebhookReceiver::start().await;
        let mut redis = RedisServer::start();
        let up = MockProvider::openai().spawned().await;
        let chat = ChatConfig::new().top(&hook.toml(&["state_down"], None)).mock("up", &up);
        let proxy = Proxy::start(&format!("{}\n{}", chat.toml(), redis.state_toml("alerts"))).await;
        let joined =
            eventually(ARRIVES_WITHIN, || async { metrics(&proxy).await.contains("baton_state_backend_up 1") });
        assert!(joined.await, "the replica reaches the test's redis-server");

        redis.kill();
        let down = hook.next_event("state_down", ARRIVES_WITHIN).await;
        assert_clean(&down);
        assert_eq!((&down.json["backend"], &down.json["since_start"]), (&json!("redis"), &json!(false)));
        assert!(!String::from_utf8_lossy(&down.body).contains("redis://"), "never the URL: it may hold a password");
        assert_eq!(post_chat(&proxy, &chat_body(false)).await.status, 200, "requests go on without Redis");
    });
}

#[test]
fn store_down_arrives_when_the_database_cannot_be_opened() {
    run(HARD_LIMIT, async {
        let hook = WebhookReceiver::start().await;
        let up = MockProvider::openai().spawned().await;
        let chat = ChatConfig::new().top(&hook.toml(&["store_down"], None)).mock("up", &up);
        let text = format!("{}\n[store]\nbackend = \"sqlite\"\npath = \"/dev/null/baton.db\"\n", chat.toml());
        let config = config::parse(&text, "test.toml", &|_| None).expect("valid");
        let (proxy, _state) = Proxy::start_recorded(config).await;
        let down = hook.next_event("store_down", ARRIVES_WITHIN).await;
        assert_clean(&down);
        assert_eq!(down.json["backend"], "sqlite");
        assert_eq!(post_chat(&proxy, &chat_body(false)).await.status, 200, "requests go on without the store");
    });
}

#[test]
fn a_delivery_answered_500_is_tried_again() {
    run(HARD_LIMIT, async {
        let hook = WebhookReceiver::answering(&[500]).await;
        let one = MockProvider::openai().fault(Fault::Http5xx).spawned().await;
        let chat = ChatConfig::new().top(&hook.toml(&["route_exhausted"], Some(SECRET))).mock("one", &one);
        let proxy = Proxy::start(&chat.toml()).await;
        assert_eq!(post_chat(&proxy, &chat_body(false)).await.status, 502);

        let first = hook.next(ARRIVES_WITHIN).await;
        assert_eq!((first.answered, &first.json["event"]), (500, &json!("route_exhausted")));
        let again = hook.next(ARRIVES_WITHIN).await;
        assert_eq!(again.answered, 200);
        assert_eq!(again.body, first.body, "the same alert, byte for byte");
        assert_eq!(again.header("x-baton-signature"), first.header("x-baton-signature"));
        let sent = eventually(ARRIVES_WITHIN, || async {
            metrics(&proxy).await.contains(r#"baton_alerts_total{event="route_exhausted",result="sent"} 1"#)
        });
        assert!(sent.await, "counted as sent once it arrived");
        assert!(hook.gets_any_within(Duration::from_millis(500)).await.is_none(), "and not sent a third time");
    });
}

#[test]
fn a_full_queue_drops_alerts_and_never_blocks() {
    run(HARD_LIMIT, async {
        let hook = WebhookReceiver::stalling().await;
        let text = format!(
            "{}\n{}",
            hook.toml(&[], None),
            ChatConfig::new().provider("p", baton::providers::ProviderKind::OpenAi, "http://127.0.0.1:9/v1").toml()
        );
        let config = config::parse(&text, "test.toml", &|_| None).expect("valid");
        let metrics = Arc::new(Metrics::new());
        let alerts = Alerts::start(&config.alerts, Arc::clone(&metrics));
        alerts.raise(Alert::breaker_closed("first"));
        hook.next(ARRIVES_WITHIN).await; // the delivery task holds it, waiting for an answer that never comes

        let raised = QUEUE_ALERTS + 100;
        let started = Instant::now();
        for i in 0..raised {
            alerts.raise(Alert::breaker_closed(&format!("provider-{i}")));
        }
        let took = started.elapsed();
        assert!(took < Duration::from_secs(1), "raising {raised} alerts took {took:?}: it must never wait");
        let dropped = metrics.ops().alerts("breaker_closed", "dropped");
        assert_eq!(dropped, 100, "what the queue could not hold is dropped and counted");
    });
}
