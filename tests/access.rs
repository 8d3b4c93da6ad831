//! Who may call: with `[[keys]]`, every `/v1` request needs one, by
//! `Authorization: Bearer` or `x-api-key`; a key may be held to some routes;
//! the provider's keys are never spent by a stranger.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::mock::MockProvider;
use support::{ChatConfig, Proxy, Spawned, chat_body, run};

const HARD_LIMIT: Duration = Duration::from_secs(30);

const KEYS: &str = "[[keys]]\nname = \"web\"\nkey = \"sk-web-0123456789abcdef\"\n\n\
                    [[keys]]\nname = \"batch\"\nkey = \"sk-batch-0123456789abcd\"\nroutes = [\"cheap\"]\n";

async fn ask(proxy: &Proxy, path: &str, header: Option<(&str, &str)>, model: &str) -> (u16, serde_json::Value) {
    let client = reqwest::Client::new();
    let mut body = chat_body(false);
    body["model"] = model.into();
    let request =
        if path.ends_with("models") { client.get(proxy.url(path)) } else { client.post(proxy.url(path)).json(&body) };
    let request = match header {
        Some((name, value)) => request.header(name, value),
        None => request,
    };
    let response = request.send().await.expect("the proxy answers");
    (response.status().as_u16(), response.json().await.unwrap_or_default())
}

#[test]
fn with_keys_every_request_needs_a_valid_one_for_its_route() {
    run(HARD_LIMIT, async {
        let provider = MockProvider::openai().spawned().await;
        let routes = ChatConfig::new().mock("p", &provider).toml();
        let cheap = routes.replace("model = \"chat\"", "model = \"cheap\"");
        let proxy = Proxy::start(&format!("{KEYS}\n{routes}\n{}", &cheap[cheap.find("[[routes]]").unwrap()..])).await;
        let chat = "/v1/chat/completions";

        let (status, body) = ask(&proxy, chat, None, "chat").await;
        assert_eq!((status, body["error"]["code"].as_str()), (401, Some("invalid_api_key")), "no key: {body}");
        let (status, body) = ask(&proxy, chat, Some(("authorization", "Bearer sk-wrong-0123456789")), "chat").await;
        assert_eq!(status, 401, "a wrong key: {body}");
        assert!(!body.to_string().contains("sk-wrong"), "the key sent is never echoed: {body}");
        assert_eq!(provider.requests().len(), 0, "nothing reached the provider");

        let (status, _) = ask(&proxy, chat, Some(("authorization", "Bearer sk-web-0123456789abcdef")), "chat").await;
        assert_eq!(status, 200, "a right key in Authorization");
        let (status, _) = ask(&proxy, chat, Some(("x-api-key", "sk-batch-0123456789abcd")), "cheap").await;
        assert_eq!(status, 200, "a right key in x-api-key, on its route");
        let (status, body) = ask(&proxy, chat, Some(("x-api-key", "sk-batch-0123456789abcd")), "chat").await;
        assert_eq!((status, body["error"]["code"].as_str()), (403, Some("route_not_allowed")), "{body}");

        let (status, _) = ask(&proxy, "/v1/models", None, "").await;
        assert_eq!(status, 401, "listing the models needs a key too");
        let (_, models) = ask(&proxy, "/v1/models", Some(("x-api-key", "sk-batch-0123456789abcd")), "").await;
        let ids: Vec<&str> = models["data"].as_array().unwrap().iter().filter_map(|m| m["id"].as_str()).collect();
        assert_eq!(ids, ["cheap"], "a key sees the routes it may use");

        let status = reqwest::get(proxy.url("/admin/status")).await.unwrap().text().await.unwrap();
        let keys: serde_json::Value = serde_json::from_str(&status).unwrap_or_default();
        let batch = &keys["keys"][1];
        assert_eq!((&batch["name"], &batch["routes"]), (&"batch".into(), &serde_json::json!(["cheap"])), "{status}");
        assert!(!status.contains("sk-web") && !status.contains("sk-batch"), "no secret in the status: {status}");
    });
}

#[test]
fn only_json_bodies_and_allowed_hosts_are_served() {
    run(HARD_LIMIT, async {
        let provider = MockProvider::openai().spawned().await;
        let routes = ChatConfig::new().mock("p", &provider).toml();
        let proxy = Proxy::start(&format!("allowed_hosts = [\"localhost\", \"127.0.0.1\"]\n{routes}")).await;
        let body = chat_body(false).to_string();
        let client = reqwest::Client::new();
        let form =
            client.post(proxy.url("/v1/chat/completions")).header("content-type", "text/plain").body(body.clone());
        let form = form.send().await.expect("answers");
        assert_eq!(form.status(), 415, "a cross-site form's text/plain is refused");
        let json =
            client.post(proxy.url("/v1/chat/completions")).header("content-type", "application/json; charset=utf-8");
        assert_eq!(
            json.body(body.clone()).send().await.expect("answers").status(),
            200,
            "JSON with a charset is served"
        );
        let rebound = client.get(proxy.url("/v1/models")).header("host", format!("evil.example:{}", proxy.addr.port()));
        let rebound = rebound.send().await.expect("answers");
        assert_eq!(rebound.status(), 403, "a foreign Host is refused");
        let text = rebound.text().await.unwrap_or_default();
        assert!(text.contains("host_not_allowed"), "{text}");
        assert_eq!(provider.requests().len(), 1, "only the JSON request reached the provider");
    });
}
