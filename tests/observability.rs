//! What an operator sees: exact metric values after a scripted scenario, the
//! status API, and reloads that keep what baton learned about providers.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::mock::{Fault, MockHandle, MockProvider, Schedule};
use baton::resilience::BreakerState;
use serde_json::Value;
use support::{
    ChatConfig, Proxy, Spawned, chat_body, eventually, leave_after_first_chunk, metrics, open_chat, post_chat,
    provider_toml, run,
};

const HARD_LIMIT: Duration = Duration::from_secs(20);
const NO_BREAKER: &str = "breaker = { failure_threshold = 1000000, window = 1000000 }";

/// The value of the sample `name{labels}` in Prometheus text, whatever the label order.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().filter(|line| !line.starts_with('#')).find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let (series_name, rest) = series.split_once('{').unwrap_or((series, "}"));
        if series_name != name {
            return None;
        }
        let found: Vec<(&str, &str)> = rest
            .trim_end_matches('}')
            .split(',')
            .filter(|pair| !pair.is_empty())
            .filter_map(|pair| pair.split_once('=').map(|(k, v)| (k, v.trim_matches('"'))))
            .collect();
        let same = found.len() == labels.len() && labels.iter().all(|label| found.contains(label));
        same.then(|| value.parse().ok()).flatten()
    })
}

fn two_providers(primary: &MockHandle, secondary: &MockHandle, top: &str) -> String {
    let route = ChatConfig::new().top(top).mock("primary", primary).provider_keys(NO_BREAKER).model("p");
    route.mock("secondary", secondary).model("s").toml()
}

#[test]
fn metrics_count_a_scripted_failover_scenario_exactly() {
    run(HARD_LIMIT, async {
        let primary = MockProvider::anthropic().fault(Fault::Http5xx).spawned().await;
        let secondary = MockProvider::gemini().tokens(8).gap(Duration::from_millis(30)).spawned().await;
        let proxy = Proxy::start(&two_providers(&primary, &secondary, "")).await;
        for stream in [true, true, true, false] {
            assert_eq!(post_chat(&proxy, &chat_body(stream)).await.status, 200);
        }
        leave_after_first_chunk(&proxy).await;
        // Requests that never reach a route are not counted against one.
        let unknown = serde_json::json!({ "model": "nope", "messages": [{ "role": "user", "content": "x" }] });
        assert_eq!(post_chat(&proxy, &unknown).await.status, 404);

        let disconnect = [("route", "chat"), ("outcome", "client_disconnect")];
        // Generous: on a loaded machine the disconnect may take a while to be seen.
        eventually(Duration::from_secs(10), || async {
            sample(&metrics(&proxy).await, "baton_requests_total", &disconnect).is_some()
        })
        .await;
        let text = metrics(&proxy).await;
        let expect = |name: &str, labels: &[(&str, &str)], value: f64| {
            assert_eq!(sample(&text, name, labels), Some(value), "{name}{labels:?} in:\n{text}");
        };
        expect("baton_requests_total", &[("route", "chat"), ("outcome", "ok")], 4.0);
        expect("baton_requests_total", &[("route", "chat"), ("outcome", "client_disconnect")], 1.0);
        expect("baton_attempts_total", &[("provider", "primary"), ("outcome", "http_5xx")], 5.0);
        expect("baton_attempts_total", &[("provider", "secondary"), ("outcome", "committed")], 5.0);
        expect("baton_failovers_total", &[("from", "primary"), ("to", "secondary"), ("reason", "http_5xx")], 5.0);
        expect("baton_tokens_total", &[("provider", "secondary"), ("direction", "output")], 32.0);
        expect("baton_tokens_total", &[("provider", "secondary"), ("direction", "input")], 40.0);
        expect("baton_time_to_first_token_seconds_count", &[("provider", "secondary")], 5.0);
        expect("baton_request_duration_seconds_count", &[("route", "chat")], 5.0);
        expect("baton_breaker_state", &[("provider", "primary")], 0.0);
        expect("baton_inflight_streams", &[("provider", "secondary")], 0.0);
        // In seconds: each first token, milliseconds after its attempt began,
        // is under a second (a bound a loaded machine keeps; in milliseconds none would be).
        expect("baton_time_to_first_token_seconds_bucket", &[("le", "1.0"), ("provider", "secondary")], 5.0);
        expect("baton_request_duration_seconds_bucket", &[("le", "60.0"), ("route", "chat")], 5.0);
        assert!(!text.contains("nope"), "a client's model name never becomes a label");
    });
}

#[test]
fn an_open_breaker_and_a_stream_in_flight_show_as_gauges() {
    run(HARD_LIMIT, async {
        let dead = MockProvider::openai().fault(Fault::Http5xx).spawned().await;
        let slow = MockProvider::anthropic().tokens(100).gap(Duration::from_millis(50)).spawned().await;
        let config =
            ChatConfig::new().mock("dead", &dead).provider_keys("breaker = { failure_threshold = 1 }").model("d");
        let proxy = Proxy::start(&config.mock("slow", &slow).model("s").toml()).await;
        let response = open_chat(&proxy, &chat_body(true)).await;
        let text = metrics(&proxy).await;
        assert_eq!(sample(&text, "baton_breaker_state", &[("provider", "dead")]), Some(2.0), "open");
        assert_eq!(sample(&text, "baton_inflight_streams", &[("provider", "slow")]), Some(1.0), "one stream in flight");
        drop(response);
    });
}

#[test]
fn a_provider_is_down_after_failing_in_a_row_and_its_outage_is_measured_at_its_next_answer() {
    run(HARD_LIMIT, async {
        // Three failures in a row, then answers: an outage, then up again.
        let flaky = MockProvider::openai().fault(Fault::Http5xx).schedule(Schedule::FirstRequests(3)).spawned().await;
        let spare = MockProvider::anthropic().spawned().await;
        // Its breaker stays closed: down comes from the failures themselves.
        let config = ChatConfig::new()
            .mock("flaky", &flaky)
            .provider_keys("breaker = { failure_threshold = 100 }")
            .target_keys("retries = 0")
            .mock("spare", &spare)
            .toml();
        let proxy = Proxy::start(&config).await;
        let up = |text: &str| sample(text, "baton_provider_up", &[("provider", "flaky")]);
        assert_eq!(up(&metrics(&proxy).await), Some(1.0), "up before anything failed");
        for _ in 0..3 {
            assert_eq!(post_chat(&proxy, &chat_body(true)).await.header("x-baton-provider"), "spare");
        }
        let text = metrics(&proxy).await;
        assert_eq!(up(&text), Some(0.0), "down after three failures in a row:\n{text}");
        assert_eq!(sample(&text, "baton_provider_up", &[("provider", "spare")]), Some(1.0));
        assert_eq!(
            sample(&text, "baton_provider_outage_seconds_count", &[("provider", "flaky")]),
            Some(0.0),
            "still going"
        );
        assert_eq!(post_chat(&proxy, &chat_body(true)).await.header("x-baton-provider"), "flaky");
        let text = metrics(&proxy).await;
        assert_eq!(up(&text), Some(1.0), "up again at its next answer:\n{text}");
        assert_eq!(sample(&text, "baton_provider_outage_seconds_count", &[("provider", "flaky")]), Some(1.0));
        let within_a_minute = [("le", "60.0"), ("provider", "flaky")];
        assert_eq!(sample(&text, "baton_provider_outage_seconds_bucket", &within_a_minute), Some(1.0));
    });
}

#[test]
fn the_status_api_tells_who_is_serving_and_why() {
    run(HARD_LIMIT, async {
        let primary = MockProvider::anthropic().fault(Fault::Http5xx).spawned().await;
        let secondary = MockProvider::gemini().first_token_after(Duration::from_millis(20)).spawned().await;
        let token = "status-token-0123456789";
        let proxy = Proxy::start(&two_providers(&primary, &secondary, &format!("admin_token = \"{token}\""))).await;
        for _ in 0..3 {
            assert_eq!(post_chat(&proxy, &chat_body(true)).await.status, 200);
        }
        let client = reqwest::Client::new();
        let refused = client.get(proxy.url("/admin/status")).send().await.expect("answer");
        assert_eq!(refused.status(), 403, "the status API needs the admin token when one is set");
        let status: Value = client
            .get(proxy.url("/admin/status"))
            .header("x-baton-admin-token", token)
            .send()
            .await
            .expect("answer")
            .json()
            .await
            .expect("json");
        let providers = status["providers"].as_array().expect("providers");
        let primary_status = &providers[0];
        assert_eq!(primary_status["name"], "primary");
        assert_eq!(primary_status["breaker"], "closed");
        assert_eq!(primary_status["last_1m"], serde_json::json!({ "total": 3, "ok": 0, "failed": 3 }));
        assert_eq!(primary_status["last_15m"]["failed"], 3);
        assert_eq!(primary_status["last_failure"]["class"], "http_5xx");
        assert!(primary_status["last_failure"]["seconds_ago"].as_f64().is_some_and(|s| s < 10.0));
        let secondary_status = &providers[1];
        assert_eq!(secondary_status["last_1m"], serde_json::json!({ "total": 3, "ok": 3, "failed": 0 }));
        assert!(secondary_status["ttft_ms"]["p50"].as_f64().is_some_and(|ms| ms >= 20.0), "{secondary_status}");
        assert_eq!(secondary_status["inflight"], 0);
        assert!(secondary_status["last_failure"].is_null());
        let route = &status["routes"][0];
        assert_eq!(route["name"], "chat");
        assert_eq!(route["last_1m"], serde_json::json!({ "requests": 3, "answered": 3, "failovers": 3 }));
    });
}

#[test]
fn a_reload_replaces_routes_and_keeps_what_was_learned() {
    run(HARD_LIMIT, async {
        let dead = MockProvider::openai().fault(Fault::Http5xx).spawned().await;
        let slow = MockProvider::anthropic().marker("old").tokens(20).gap(Duration::from_millis(20)).spawned().await;
        let fresh = MockProvider::gemini().marker("new").spawned().await;
        let providers = format!(
            "{}\nbreaker = {{ failure_threshold = 1, cooldown_ms = 60000 }}\n\n{}{}",
            provider_toml("dead", dead.provider_kind(), &dead.base_url()).trim_end(),
            provider_toml("slow", slow.provider_kind(), &slow.base_url()),
            provider_toml("fresh", fresh.provider_kind(), &fresh.base_url()),
        );
        let before = format!(
            "{providers}[[routes]]\nmodel = \"chat\"\ntargets = [{{ provider = \"dead\", model = \"d\" }}, {{ provider = \"slow\", model = \"s\" }}]\n"
        );
        let path = support::config_file("reload", &before);
        let proxy = Proxy::start_from_file(&path).await;

        // The dead provider's breaker opens, and a slow stream is in flight.
        let in_flight = open_chat(&proxy, &chat_body(true)).await;
        assert_eq!(in_flight.headers()["x-baton-provider"], "slow");
        assert_eq!(proxy.engine.health().provider("dead").breaker.state(), BreakerState::Open);

        let after = format!(
            "{providers}[[routes]]\nmodel = \"chat\"\ntargets = [{{ provider = \"dead\", model = \"d\" }}, {{ provider = \"fresh\", model = \"f\" }}]\n\n[[routes]]\nmodel = \"chat2\"\ntargets = [{{ provider = \"fresh\", model = \"f\" }}]\n"
        );
        std::fs::write(&path, &after).expect("write");
        let reloaded = reqwest::Client::new().post(proxy.url("/admin/reload")).send().await.expect("answer");
        assert_eq!(reloaded.status(), 200);

        let text = in_flight.text().await.expect("the in-flight stream finished");
        assert!(
            text.contains("old19") && text.trim_end().ends_with("data: [DONE]"),
            "it ran on the old config: {text}"
        );
        let got = post_chat(&proxy, &chat_body(true)).await;
        assert_eq!(got.header("x-baton-provider"), "fresh", "new requests take the new route");
        assert_eq!(got.header("x-baton-attempts"), "1", "the dead provider's breaker stayed open across the reload");
        assert_eq!(dead.requests().len(), 1);

        std::fs::write(&path, "[[routes]]\nmodel = \"broken\"\ntargets = []\n").expect("write");
        let refused = reqwest::Client::new().post(proxy.url("/admin/reload")).send().await.expect("answer");
        assert_eq!(refused.status(), 400);
        let message = refused.text().await.expect("body");
        assert!(message.contains("at least one target"), "{message}");
        let models: Value = reqwest::get(proxy.url("/v1/models")).await.expect("models").json().await.expect("json");
        let names: Vec<&str> =
            models["data"].as_array().expect("data").iter().filter_map(|m| m["id"].as_str()).collect();
        assert_eq!(names, ["chat", "chat2"], "a bad config leaves the running one in place");
    });
}

#[test]
fn requests_for_endpoints_baton_lacks_are_counted_by_method_never_by_path() {
    run(HARD_LIMIT, async {
        let provider = MockProvider::openai().spawned().await;
        let proxy = Proxy::start(&ChatConfig::new().mock("p", &provider).toml()).await;
        for wire in [
            &b"GET /chat/completions HTTP/1.1\r\nhost: baton\r\nconnection: close\r\n\r\n"[..],
            b"GET /nope HTTP/1.1\r\nhost: baton\r\nconnection: close\r\n\r\n",
            b"GET /v1/responses HTTP/1.1\r\nhost: baton\r\nupgrade: websocket\r\nconnection: close\r\n\r\n",
            b"POST /healthz HTTP/1.1\r\nhost: baton\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        ] {
            let answer = proxy.exchange(wire).await;
            assert!(["404", "405", "426"].iter().any(|status| answer[9..12] == **status), "{answer}");
        }
        let text = metrics(&proxy).await;
        assert!(text.contains("baton_unknown_endpoint_total{method=\"GET\"} 3"), "{text}");
        assert!(text.contains("baton_unknown_endpoint_total{method=\"POST\"} 1"), "{text}");
        assert!(!text.contains("/nope"), "no path as a label");
    });
}
