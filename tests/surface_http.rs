//! The request surface at the HTTP edge, over loopback: CORS for pages on
//! other origins, `GET /v1/models/{id}`, and the capability rule's 400 and
//! `x-baton-dropped-params` as clients see them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::mock::MockProvider;
use serde_json::{Value, json};
use support::{ChatConfig, Proxy, Spawned, post_chat, run};

const HARD_LIMIT: Duration = Duration::from_secs(20);

async fn proxy(top: &str, route: &str) -> (Proxy, baton::mock::MockHandle) {
    let provider = MockProvider::gemini().spawned().await;
    let config = ChatConfig::new().top(top).keys(route).mock("g", &provider).toml();
    (Proxy::start(&format!("{config}aliases = [\"tier:fast\"]\n")).await, provider)
}

async fn preflight(proxy: &Proxy, origin: &str) -> reqwest::Response {
    reqwest::Client::new()
        .request(reqwest::Method::OPTIONS, proxy.url("/v1/chat/completions"))
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "authorization, content-type")
        .send()
        .await
        .expect("answered")
}

#[test]
fn an_allowed_origin_gets_its_preflight_and_reads_the_baton_headers() {
    run(HARD_LIMIT, async {
        let (proxy, _provider) = proxy("cors_origins = [\"https://app.example\"]", "").await;
        let answer = preflight(&proxy, "https://app.example").await;
        assert_eq!(answer.status(), 204);
        let headers = answer.headers();
        assert_eq!(headers["access-control-allow-origin"], "https://app.example");
        assert_eq!(headers["access-control-allow-headers"], "authorization, content-type");
        assert!(headers["access-control-allow-methods"].to_str().unwrap().contains("POST"));
        assert_eq!(headers["vary"], "origin");

        let chat = reqwest::Client::new()
            .post(proxy.url("/v1/chat/completions"))
            .header("origin", "https://app.example")
            .json(&json!({ "model": "chat", "messages": [{ "role": "user", "content": "hi" }] }))
            .send()
            .await
            .expect("answered");
        assert_eq!(chat.status(), 200);
        assert_eq!(chat.headers()["access-control-allow-origin"], "https://app.example");
        let exposed = chat.headers()["access-control-expose-headers"].to_str().unwrap().to_owned();
        assert!(exposed.contains("x-baton-provider") && exposed.contains("x-request-id"), "{exposed}");

        let foreign = preflight(&proxy, "https://evil.example").await;
        assert_eq!(foreign.status(), 403, "another origin's preflight is refused");
        assert!(foreign.headers().get("access-control-allow-origin").is_none());
    });
}

#[test]
fn any_origin_may_call_with_a_star_and_none_without_cors_origins() {
    run(HARD_LIMIT, async {
        let (open, _provider) = proxy("cors_origins = [\"*\"]", "").await;
        let answer = preflight(&open, "https://anywhere.example").await;
        assert_eq!(
            (answer.status().as_u16(), &answer.headers()["access-control-allow-origin"]),
            (204, &"*".parse().unwrap())
        );

        let (closed, _provider) = proxy("", "").await;
        let answer = preflight(&closed, "https://app.example").await;
        assert_eq!(answer.status(), 405, "no CORS without cors_origins");
        assert!(answer.headers().get("access-control-allow-origin").is_none());
    });
}

#[test]
fn a_bad_origin_in_the_config_is_named() {
    let text = "cors_origins = [\"https://ok.example\", \"app.example/path\"]\n[[providers]]\nname = \"p\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n[[routes]]\nmodel = \"chat\"\ntargets = [{ provider = \"p\", model = \"m\" }]\n";
    let Err(err) = baton::config::parse(text, "cors.toml", &|_| None) else { panic!("refused") };
    let err = err.to_string();
    assert!(err.contains("cors_origins[1]") && err.contains("app.example/path"), "{err}");
}

#[test]
fn a_model_is_found_by_its_route_name_or_alias() {
    run(HARD_LIMIT, async {
        let (proxy, _provider) = proxy("", "").await;
        for id in ["chat", "tier:fast"] {
            let got = reqwest::get(proxy.url(&format!("/v1/models/{id}"))).await.expect("answered");
            assert_eq!(got.status(), 200, "{id}");
            let body: Value = got.json().await.expect("json");
            assert_eq!((body["id"].as_str(), body["object"].as_str()), (Some(id), Some("model")));
        }
        let missing = reqwest::get(proxy.url("/v1/models/gpt-9")).await.expect("answered");
        assert_eq!(missing.status(), 404);
        let body: Value = missing.json().await.expect("json");
        assert_eq!(body["error"]["code"], "model_not_found");
    });
}

#[test]
fn a_field_no_target_can_honour_is_a_400_naming_it_and_a_dropping_route_says_what_it_dropped() {
    run(HARD_LIMIT, async {
        let request = json!({
            "model": "chat",
            "stream": true,
            "logit_bias": { "50256": -100 },
            "messages": [{ "role": "user", "content": "hi" }],
        });
        let (strict, provider) = proxy("", "").await;
        let got = post_chat(&strict, &request).await;
        assert_eq!(got.status, 400, "{}", got.raw);
        let error = &got.json()["error"];
        assert_eq!(error["code"], "unsupported_parameter");
        assert!(error["message"].as_str().unwrap().contains("logit_bias"), "{error}");
        assert!(provider.requests().is_empty(), "nothing was sent");

        let (lenient, provider) = proxy("", "unsupported_params = \"drop\"").await;
        let got = post_chat(&lenient, &request).await;
        assert_eq!(got.status, 200, "{}", got.raw);
        assert_eq!(got.header("x-baton-dropped-params"), "logit_bias");
        let sent = &provider.requests()[0].body;
        assert!(sent.get("logit_bias").is_none() && sent["generationConfig"].get("logitBias").is_none());
    });
}
