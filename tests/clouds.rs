//! The clouds' credentials through baton, against the simulated clouds: a
//! token the provider no longer takes is dropped and another fetched,
//! rather than offered until it expires.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::mock::{Fault, MockHandle, MockProvider, Schedule};
use baton::providers::ProviderKind;
use support::{ChatConfig, Proxy, Spawned, chat_body, metrics, post_chat, run, sample_with};

const HARD_LIMIT: Duration = Duration::from_secs(20);

/// A simulated Vertex whose first request meets `fault`, then a spare
/// OpenAI-kind target, behind one route.
async fn vertex_then_spare(vertex: MockProvider, fault: Fault) -> (MockHandle, MockHandle, Proxy) {
    let vertex = vertex.fault(fault).schedule(Schedule::FirstRequests(1)).spawned().await;
    let spare = MockProvider::openai().marker("spare").spawned().await;
    let config = ChatConfig::new().mock("vertex", &vertex).mock("spare", &spare);
    let proxy = Proxy::start(&config.toml()).await;
    (vertex, spare, proxy)
}

#[test]
fn a_rejected_token_is_fetched_again_for_the_next_request() {
    run(HARD_LIMIT, async {
        let issuing = MockProvider::new(ProviderKind::Vertex).api_key("ya29.issued");
        let (vertex, _spare, proxy) = vertex_then_spare(issuing, Fault::Unauthorized).await;

        let first = post_chat(&proxy, &chat_body(true)).await;
        assert_eq!(first.status, 200, "{}", first.raw);
        assert_eq!(first.header("x-baton-provider"), "spare", "a 401 fails over");
        assert_eq!(vertex.side_requests().len(), 1, "one exchange so far");

        let second = post_chat(&proxy, &chat_body(true)).await;
        assert_eq!(second.header("x-baton-provider"), "vertex", "{}", second.raw);
        assert_eq!(second.streamed_text(), vertex.provider().expected_text());
        assert_eq!(vertex.side_requests().len(), 2, "the refused token was dropped and another fetched");
        let authorization = vertex.requests().last().map(|r| r.headers["authorization"].clone()).unwrap_or_default();
        assert_eq!(authorization, "Bearer ya29.issued");
    });
}

/// A route over a Bedrock model that is not Claude (Converse) at `bedrock`,
/// then `spare`.
fn converse_route(bedrock: &baton::mock::MockHandle, spare: &baton::mock::MockHandle) -> String {
    let sim = ProviderKind::Bedrock.simulated();
    format!(
        "[[providers]]\nname = \"nova\"\nkind = \"bedrock\"\nbase_url = \"{}\"\n{}\n\n\
         [[providers]]\nname = \"spare\"\nkind = \"openai\"\nbase_url = \"{}\"\n\n\
         [[routes]]\nmodel = \"chat\"\nfirst_token_timeout_ms = 2000\n\
         targets = [{{ provider = \"nova\", model = \"amazon.nova-pro-v1:0\" }}, {{ provider = \"spare\", model = \"s\" }}]\n",
        bedrock.base_url(),
        sim.config_keys(bedrock.addr()),
        spare.base_url()
    )
}

#[test]
fn a_model_that_is_not_claude_answers_through_converse_and_its_faults_fail_over() {
    run(HARD_LIMIT, async {
        let bedrock = MockProvider::new(ProviderKind::Bedrock).spawned().await;
        let spare = MockProvider::openai().marker("spare").spawned().await;
        let proxy = Proxy::start(&converse_route(&bedrock, &spare)).await;
        for stream in [true, false] {
            let got = post_chat(&proxy, &chat_body(stream)).await;
            assert_eq!(got.header("x-baton-provider"), "nova", "{}", got.raw);
            let text = if stream {
                got.streamed_text()
            } else {
                got.json()["choices"][0]["message"]["content"].as_str().unwrap_or_default().to_owned()
            };
            assert_eq!(text, bedrock.provider().expected_text(), "stream {stream}");
        }
        let asked = bedrock.requests().pop().expect("asked");
        assert!(asked.path.ends_with("/model/amazon.nova-pro-v1%3A0/converse-stream"), "{}", asked.path);
        assert_eq!(asked.body["messages"][0]["content"][0]["text"], "say something");

        let mut body = chat_body(true);
        body["tools"] = serde_json::json!([{ "type": "function", "function": { "name": "get_weather",
            "parameters": { "type": "object", "properties": { "city": { "type": "string" } } } } }]);
        let got = post_chat(&proxy, &body).await;
        let calls: Vec<String> = got
            .chunks()
            .iter()
            .filter_map(|c| c.pointer("/choices/0/delta/tool_calls/0/function/name")?.as_str().map(str::to_owned))
            .collect();
        assert_eq!(calls, ["get_weather"], "{}", got.raw);

        for fault in [Fault::ErrorEvent, Fault::Malformed, Fault::Http429, Fault::ContentFilter] {
            let failing = MockProvider::new(ProviderKind::Bedrock).fault(fault).marker("leaky").spawned().await;
            let route = converse_route(&failing, &spare);
            let proxy = Proxy::start(&format!("{route}fail_over_on_refusal = true\n")).await;
            let got = post_chat(&proxy, &chat_body(true)).await;
            assert_eq!(got.header("x-baton-provider"), "spare", "{}: {}", fault.name(), got.raw);
            assert!(!got.raw.contains("leaky"), "{}: no byte of the failed attempt", fault.name());
        }
    });
}

/// A route over the simulated Bedrock at `bedrock` alone, signing with
/// `AKIDTEST` and `secret`.
fn signed_route(bedrock: &baton::mock::MockHandle, secret: &str) -> String {
    format!(
        "[[providers]]\nname = \"bedrock\"\nkind = \"bedrock\"\nregion = \"eu-west-3\"\nbase_url = \"{}\"\n\
         aws_access_key_id = \"AKIDTEST\"\naws_secret_access_key = \"{secret}\"\naws_session_token = \"session-1\"\n\n\
         [[routes]]\nmodel = \"chat\"\ntargets = [{{ provider = \"bedrock\", model = \"anthropic.claude-x-v1:0\" }}, \
         {{ provider = \"bedrock\", model = \"amazon.nova-pro-v1:0\" }}]\n",
        bedrock.base_url()
    )
}

#[test]
fn the_simulated_bedrock_recomputes_each_signature_and_refuses_a_wrong_one() {
    run(HARD_LIMIT, async {
        let bedrock = MockProvider::new(ProviderKind::Bedrock).api_key("AKIDTEST:test-secret").spawned().await;
        let proxy = Proxy::start(&signed_route(&bedrock, "test-secret")).await;
        let got = post_chat(&proxy, &chat_body(true)).await;
        assert_eq!(got.status, 200, "a signature by the right secret is taken: {}", got.raw);
        let sent = bedrock.requests().pop().expect("asked");
        assert!(sent.headers["authorization"].contains("SignedHeaders="), "{:?}", sent.headers);
        assert_eq!(sent.headers["x-amz-security-token"], "session-1");

        let wrong = MockProvider::new(ProviderKind::Bedrock).api_key("AKIDTEST:test-secret").spawned().await;
        let proxy = Proxy::start(&signed_route(&wrong, "not-the-secret")).await;
        let got = post_chat(&proxy, &chat_body(false)).await;
        assert_eq!(got.status, 502, "{}", got.raw);
        assert!(got.raw.contains("http_auth"), "both the Invoke and the Converse target refused: {}", got.raw);
        assert_eq!(wrong.requests().len(), 2);
        assert!(!got.raw.contains("not-the-secret"), "the secret never reaches the client");
    });
}

#[test]
fn a_throttled_token_exchange_is_an_auth_failure_that_fails_over_at_once() {
    run(HARD_LIMIT, async {
        let (vertex, _spare, proxy) =
            vertex_then_spare(MockProvider::new(ProviderKind::Vertex), Fault::TokenThrottled).await;

        let first = post_chat(&proxy, &chat_body(true)).await;
        assert_eq!(first.header("x-baton-provider"), "spare", "{}", first.raw);
        assert!(vertex.requests().is_empty(), "no request leaves without a token");
        assert!(!first.raw.contains("mock429"), "the exchange's words stay in baton: {}", first.raw);
        let text = metrics(&proxy).await;
        let failover = [("from", "vertex"), ("to", "spare"), ("reason", "auth")];
        assert_eq!(sample_with(&text, "baton_failovers_total", &failover), Some(1.0), "{text}");

        let second = post_chat(&proxy, &chat_body(true)).await;
        assert_eq!(second.header("x-baton-provider"), "vertex", "{}", second.raw);
        assert_eq!(vertex.side_requests().len(), 2, "a refused exchange caches nothing: the next request tries again");
    });
}

#[test]
fn the_clouds_are_counted_priced_drilled_and_shown_like_any_kind() {
    run(HARD_LIMIT, async {
        let bedrock = MockProvider::new(ProviderKind::Bedrock)
            .fault(Fault::Http429)
            .retry_after_secs(0)
            .schedule(Schedule::FirstRequests(1))
            .spawned()
            .await;
        let vertex = MockProvider::new(ProviderKind::Vertex).spawned().await;
        let azure = MockProvider::new(ProviderKind::Azure).spawned().await;
        let token = "cloud-admin-token-0123456789";
        let price = "price = { input_per_mtok = 3, output_per_mtok = 15 }";
        let config = ChatConfig::new()
            .top(&format!("admin_token = \"{token}\""))
            .mock("bedrock", &bedrock)
            .target_keys(price)
            .mock("vertex", &vertex)
            .target_keys(price)
            .mock("azure", &azure)
            .target_keys(price);
        let proxy = Proxy::start(&config.toml()).await;

        let throttled = post_chat(&proxy, &chat_body(true)).await;
        assert_eq!(throttled.header("x-baton-provider"), "vertex", "{}", throttled.raw);
        assert_eq!(throttled.streamed_text(), vertex.provider().expected_text());
        let answered = post_chat(&proxy, &chat_body(true)).await;
        assert_eq!(answered.header("x-baton-provider"), "bedrock", "{}", answered.raw);

        let drill = reqwest::Client::new()
            .post(proxy.url(support::CHAT))
            .json(&chat_body(true))
            .header("x-baton-drill", "bedrock=http_5xx,vertex=refuse")
            .header("x-baton-admin-token", token)
            .send()
            .await
            .expect("an answer");
        assert_eq!(drill.headers()["x-baton-provider"], "azure", "the drill walks the route to its last cloud");
        let drilled = drill.text().await.expect("the stream");
        assert!(drilled.contains("[DONE]"), "{drilled}");

        let text = metrics(&proxy).await;
        let count = |name: &str, labels: &[(&str, &str)]| sample_with(&text, name, labels);
        assert_eq!(
            count("baton_failovers_total", &[("from", "bedrock"), ("to", "vertex"), ("reason", "http_429")]),
            Some(1.0)
        );
        for provider in ["bedrock", "vertex", "azure"] {
            assert_eq!(
                count("baton_attempts_total", &[("provider", provider), ("outcome", "committed")]),
                Some(1.0),
                "{provider}: {text}"
            );
            let cost = count("baton_cost_usd_total", &[("provider", provider)]).unwrap_or_default();
            assert!(cost > 0.0, "{provider}'s answer is priced: {text}");
            assert!(
                count("baton_time_to_first_token_seconds_count", &[("provider", provider)]).is_some(),
                "{provider}"
            );
        }

        let (status, state) = support::admin_get(&proxy, "/admin/status", Some(token)).await;
        assert_eq!(status, 200, "{state}");
        let providers = state["providers"].as_array().expect("providers");
        let shown = |name: &str| providers.iter().find(|p| p["name"] == name).cloned().unwrap_or_default();
        assert_eq!(shown("bedrock")["last_failure"]["class"], "http_429", "{state}");
        assert_eq!(shown("vertex")["last_1m"]["ok"], 1, "{state}");
        assert_eq!(shown("azure")["last_1m"]["ok"], 1, "{state}");
        assert_eq!(bedrock.requests().len(), 2, "the drill's request did not reach the drilled Bedrock");
    });
}
