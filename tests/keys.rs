//! Client keys kept in the store, over real databases (a SQLite file, a
//! PostgreSQL server of the test's own) and real loopback TCP: made through
//! `POST /admin/keys` or `baton keys create` with a secret shown once, held
//! to their routes, limits and budgets, listed without secrets, revoked at
//! once on the replica that revoked them and within a second on another,
//! and kept across a restart.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::{Duration, Instant};

use baton::config;
use baton::mock::MockProvider;
use serde_json::{Value, json};
use support::backend::Backend;
use support::{Baton, ChatConfig, Proxy, Server, Spawned, chat_body, post_with, run};

const HARD_LIMIT: Duration = Duration::from_secs(60);
const TOKEN: &str = "admin-token-0123456789";
const WEB: &str = "sk-web-0123456789abcdef";
/// A token costs a dollar either way, so every answer's cost is its token count.
const PRICE: &str = "price = { input_per_mtok = 1000000.0, output_per_mtok = 1000000.0 }";
/// How soon a change on one replica must hold on another.
const ACROSS_REPLICAS: Duration = Duration::from_secs(1);

/// A route "chat" (also "fast") and "other", one priced provider, the
/// admin token, a config key "web", and `store`.
async fn keys_config(store: &str, top: &str) -> (String, baton::mock::MockHandle) {
    let provider = MockProvider::openai().spawned().await;
    let chat = ChatConfig::new()
        .top(&format!("admin_token = \"{TOKEN}\"\n{top}"))
        .keys("aliases = [\"fast\"]")
        .mock("p", &provider)
        .target_keys(PRICE)
        .toml();
    let other = format!(
        "[[routes]]\nmodel = \"other\"\ntargets = [{{ provider = \"p\", model = \"other-model\" }}]\n\n\
         [[keys]]\nname = \"web\"\nkey = \"{WEB}\"\n"
    );
    (format!("{chat}\n{other}\n{store}"), provider)
}

/// A SQLite store in a fresh directory named after `name`, and the config
/// over it, with `top` at its top.
async fn on_sqlite(name: &str, top: &str) -> (Backend, String, baton::mock::MockHandle) {
    let backend = Backend::sqlite(name);
    let (text, mocks) = keys_config(&backend.toml(), top).await;
    (backend, text, mocks)
}

/// The config of [`on_sqlite`] with the config text `line` taken out.
async fn on_sqlite_without(name: &str, top: &str, line: &str) -> (Backend, String, baton::mock::MockHandle) {
    let (backend, text, provider) = on_sqlite(name, top).await;
    (backend, text.replacen(line, "", 1), provider)
}

async fn start(text: &str) -> (Proxy, baton::AppState) {
    Proxy::start_recorded_text(text).await
}

/// `method path` with `body` and the admin token (or `token`), as (status, body).
async fn admin(
    server: &impl Server,
    method: &str,
    path: &str,
    body: Option<Value>,
    token: Option<&str>,
) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
    let mut request = reqwest::Client::new().request(method, server.url(path));
    if let Some(token) = token {
        request = request.header("x-baton-admin-token", token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("baton answers");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn create(server: &impl Server, body: Value) -> (u16, Value) {
    admin(server, "POST", "/admin/keys", Some(body), Some(TOKEN)).await
}

/// A chat request on `model` with `key`: its status.
async fn ask(server: &impl Server, key: &str, model: &str) -> u16 {
    let mut body = chat_body(false);
    body["model"] = json!(model);
    let auth = format!("Bearer {key}");
    post_with(server, "/v1/chat/completions", &body, &[("authorization", &auth)]).await.status
}

/// How long until `key` gets `status` from `server`, checked every 20 ms; none within `limit`.
async fn until_status(server: &impl Server, key: &str, status: u16, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() <= limit {
        if ask(server, key, "chat").await == status {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

async fn keys_are_made_held_listed_and_revoked(backend: Backend) {
    let (text, _provider) = keys_config(&backend.toml(), "").await;
    let (proxy, _state) = start(&text).await;

    let (status, made) = create(&proxy, json!({ "name": "ci", "routes": ["fast"], "rpm": 2 })).await;
    assert_eq!(status, 201, "{made}");
    let secret = made["key"].as_str().expect("the secret, shown once").to_owned();
    assert!(secret.starts_with("sk-baton-") && secret.len() > 60, "a long random secret: {secret}");
    assert_eq!((&made["name"], &made["routes"], &made["rpm"]), (&json!("ci"), &json!(["chat"]), &json!(2)), "{made}");

    assert_eq!(ask(&proxy, &secret, "chat").await, 200, "the new key works at once");
    assert_eq!(ask(&proxy, &secret, "other").await, 403, "only on its routes");
    assert_eq!(ask(&proxy, &secret, "chat").await, 200, "a refused route took nothing from its rpm");
    assert_eq!(ask(&proxy, &secret, "chat").await, 429, "two requests a minute");
    assert_eq!(ask(&proxy, WEB, "chat").await, 200, "the config's key keeps working beside it");

    let (status, listed) = admin(&proxy, "GET", "/admin/keys", None, Some(TOKEN)).await;
    assert_eq!(status, 200, "{listed}");
    let names: Vec<(&str, &str)> = listed["data"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|key| (key["name"].as_str().unwrap(), key["source"].as_str().unwrap()))
        .collect();
    assert_eq!(names, [("web", "config"), ("ci", "store")], "{listed}");
    let hash = baton::access::ClientKey::hash(&secret).iter().map(|b| format!("{b:02x}")).collect::<String>();
    let shown = listed.to_string();
    assert!(!shown.contains(&secret) && !shown.contains(&hash), "no secret and no hash is listed: {shown}");

    let (status, revoked) = admin(&proxy, "DELETE", "/admin/keys/ci", None, Some(TOKEN)).await;
    assert_eq!((status, revoked["revoked_at"].is_string()), (200, true), "{revoked}");
    assert_eq!(ask(&proxy, &secret, "chat").await, 401, "revoked: refused at once on this replica");
    assert_eq!(admin(&proxy, "DELETE", "/admin/keys/ci", None, Some(TOKEN)).await.0, 404, "revoked already");

    let (status, again) = create(&proxy, json!({ "name": "ci" })).await;
    assert_eq!(status, 201, "a revoked key's name may be given again: {again}");
    let renewed = again["key"].as_str().expect("a new secret");
    assert_ne!(renewed, secret);
    assert_eq!(ask(&proxy, renewed, "other").await, 200, "every route, this time");
    assert_eq!(ask(&proxy, &secret, "chat").await, 401, "the old secret stays refused");
}

on_each_backend!(keys_are_made_held_listed_and_revoked within HARD_LIMIT => keys_are_made_held_listed_and_revoked_sqlite("keys"), keys_are_made_held_listed_and_revoked_postgres);

#[test]
fn a_bad_key_request_is_refused_with_what_was_wrong() {
    run(HARD_LIMIT, async {
        let (_backend, text, _provider) = on_sqlite("bad-keys", "").await;
        let (proxy, _state) = start(&text).await;
        let cases = [
            (json!({ "name": "web" }), 409, "config file"),
            (json!({ "name": "drill" }), 400, "reserved"),
            (json!({ "name": "a b" }), 400, "letters, digits"),
            (json!({ "name": "x", "routes": ["nope"] }), 400, "no route is named \\\"nope\\\""),
            (json!({ "name": "x", "routes": [] }), 400, "at least one route"),
            (json!({ "name": "x", "rpm": 0 }), 400, "rpm must be at least 1"),
            (json!({ "name": "x", "budget": {} }), 400, "usd_per_minute, usd_per_hour or usd_per_day"),
            (json!({ "name": "x", "budget": { "usd_per_day": -1.0 } }), 400, "budget.usd_per_day"),
            (json!({ "name": "x", "secret": "mine" }), 400, "unknown field `secret`"),
        ];
        for (body, status, says) in cases {
            let (got, answer) = create(&proxy, body.clone()).await;
            assert_eq!(got, status, "{body}: {answer}");
            assert!(answer["error"]["message"].to_string().contains(says), "{body}: {answer} should say {says:?}");
        }
        let (status, _) = create(&proxy, json!({ "name": "dup" })).await;
        assert_eq!(status, 201);
        assert_eq!(create(&proxy, json!({ "name": "dup" })).await.0, 409, "a live key's name is taken");
        assert_eq!(admin(&proxy, "DELETE", "/admin/keys/web", None, Some(TOKEN)).await.0, 409, "set in the file");

        let form = reqwest::Client::new()
            .post(proxy.url("/admin/keys"))
            .header("x-baton-admin-token", TOKEN)
            .header("content-type", "application/x-www-form-urlencoded")
            .body("name=evil")
            .send()
            .await
            .expect("answers");
        assert_eq!(form.status().as_u16(), 415, "only JSON: a cross-site form cannot mint a key");
        let (status, _) = admin(&proxy, "POST", "/admin/keys", Some(json!({ "name": "x" })), Some("wrong")).await;
        assert_eq!(status, 403, "a wrong admin token");
        assert_eq!(admin(&proxy, "GET", "/admin/keys", None, None).await.0, 403, "no admin token");
    });
}

#[test]
fn without_an_admin_token_the_keys_endpoints_are_off_even_on_loopback() {
    run(HARD_LIMIT, async {
        let (_backend, text, _provider) =
            on_sqlite_without("keys-off", "", &format!("admin_token = \"{TOKEN}\"\n")).await;
        let (proxy, _state) = start(&text).await;
        for (method, path) in [("POST", "/admin/keys"), ("GET", "/admin/keys"), ("DELETE", "/admin/keys/x")] {
            let (status, body) = admin(&proxy, method, path, Some(json!({ "name": "x" })), None).await;
            assert!(status == 403 && body.to_string().contains("no admin_token"), "{method} {path}: {status} {body}");
        }
    });
}

/// Two replicas of one database: a key made on one works on the other,
/// and a key revoked on one is refused by the other within a second.
async fn a_change_on_one_replica_holds_on_another_within_a_second(backend: Backend) {
    let (text, _provider) = keys_config(&backend.toml(), "").await;
    let (one, _one) = start(&text).await;
    let (two, _two) = start(&text).await;
    let (status, made) = create(&one, json!({ "name": "shared" })).await;
    assert_eq!(status, 201, "{made}");
    let secret = made["key"].as_str().expect("a secret");
    let accepted = until_status(&two, secret, 200, Duration::from_secs(10)).await;
    assert!(accepted.is_some_and(|took| took <= ACROSS_REPLICAS), "made on one, taken by the other in {accepted:?}");

    assert_eq!(admin(&one, "DELETE", "/admin/keys/shared", None, Some(TOKEN)).await.0, 200);
    let refused = until_status(&two, secret, 401, Duration::from_secs(10)).await;
    assert!(refused.is_some_and(|took| took <= ACROSS_REPLICAS), "revoked on one, refused by the other in {refused:?}");
}

on_each_backend!(a_change_on_one_replica_holds_on_another_within_a_second within HARD_LIMIT => a_change_on_one_replica_holds_on_another_within_a_second_sqlite("replicas"), a_change_on_one_replica_holds_on_another_within_a_second_postgres);

#[test]
fn a_restart_keeps_keys_and_their_spend() {
    run(HARD_LIMIT, async {
        let (_backend, text, _provider) = on_sqlite("keys-restart", "").await;
        let secret = {
            let (proxy, state) = start(&text).await;
            let (status, made) = create(&proxy, json!({ "name": "capped", "budget": { "usd_per_hour": 5.0 } })).await;
            assert_eq!(status, 201, "{made}");
            let secret = made["key"].as_str().expect("a secret").to_owned();
            assert_eq!(ask(&proxy, &secret, "chat").await, 200, "one answer spends the $5 budget");
            assert_eq!(ask(&proxy, &secret, "chat").await, 429, "spent");
            let records = state.records().expect("a store").clone();
            drop((proxy, state));
            assert!(records.drain(Duration::from_secs(10)).await, "the rows are written before the restart");
            secret
        };
        let (proxy, _state) = start(&text).await;
        let refused = post_with(
            &proxy,
            "/v1/chat/completions",
            &chat_body(false),
            &[("authorization", &format!("Bearer {secret}"))],
        )
        .await;
        assert_eq!(
            refused.status, 429,
            "the key is known after the restart, and its budget still spent: {}",
            refused.raw
        );
        assert_eq!(refused.json()["error"]["code"], "budget_exceeded");
    });
}

#[test]
fn open_to_the_network_with_a_store_and_no_key_baton_starts_closed_until_one_is_made() {
    run(HARD_LIMIT, async {
        let web = format!("[[keys]]\nname = \"web\"\nkey = \"{WEB}\"\n");
        let (backend, text, _provider) = on_sqlite_without("closed", "listen = \"0.0.0.0:8080\"\n", &web).await;
        let (proxy, _state) = start(&text).await;
        let refused = post_with(&proxy, "/v1/chat/completions", &chat_body(false), &[]).await;
        assert_eq!(refused.status, 401, "no key yet, and none needed would be an open relay: {}", refused.raw);
        let (status, made) = create(&proxy, json!({ "name": "first" })).await;
        assert_eq!(status, 201, "{made}");
        assert_eq!(ask(&proxy, made["key"].as_str().expect("a secret"), "chat").await, 200);

        let without_store = text.replacen(&backend.toml(), "[store]\nbackend = \"none\"\n", 1);
        let refused = config::parse(&without_store, "open.toml", &|_| None).expect_err("an open relay");
        assert!(refused.to_string().contains("allow_unauthenticated"), "{refused}");
    });
}

#[test]
fn baton_keys_makes_lists_and_revokes_for_a_running_baton() {
    run(HARD_LIMIT, async {
        let (_backend, text, _provider) = on_sqlite("keys-cli", "").await;
        let config = support::config_file(&format!("keys-cli-{:08x}", fastrand::u32(..)), &text);
        let path = config.display().to_string();
        let baton = Baton::serve(&config).start().await;

        let made = cli(&["keys", "create", "--config", &path, "cli-key", "--route", "chat", "--usd-per-day", "50"]);
        assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
        let secret = String::from_utf8(made.stdout).expect("text").trim().to_owned();
        assert!(secret.starts_with("sk-baton-") && !secret.contains(' '), "the secret alone on stdout: {secret:?}");
        let told = String::from_utf8_lossy(&made.stderr);
        assert!(told.contains("only time") && !told.contains(&secret), "what was made, on stderr: {told}");
        let taken = until_status(&baton, &secret, 200, Duration::from_secs(10)).await;
        assert!(taken.is_some_and(|took| took <= ACROSS_REPLICAS), "the running baton took it in {taken:?}");

        let listed = cli(&["keys", "list", "--config", &path]);
        let listed = String::from_utf8(listed.stdout).expect("text");
        assert!(listed.contains("web") && listed.contains("cli-key") && !listed.contains(&secret), "{listed}");
        assert!(listed.contains("usd_per_day"), "{listed}");

        let in_config = cli(&["keys", "revoke", "--config", &path, "web"]);
        assert!(!in_config.status.success(), "a config key is revoked in the config");
        let revoked = cli(&["keys", "revoke", "--config", &path, "cli-key"]);
        assert!(revoked.status.success(), "{}", String::from_utf8_lossy(&revoked.stderr));
        let refused = until_status(&baton, &secret, 401, Duration::from_secs(10)).await;
        assert!(refused.is_some_and(|took| took <= ACROSS_REPLICAS), "refused in {refused:?}");
        let unknown = cli(&["keys", "revoke", "--config", &path, "cli-key"]);
        assert!(!unknown.status.success() && String::from_utf8_lossy(&unknown.stderr).contains("no key named"));
        let _ = std::fs::remove_dir_all(config.parent().expect("a directory"));
    });
}

#[test]
fn revoking_the_last_stored_key_leaves_the_gateway_closed() {
    run(HARD_LIMIT, async {
        // Loopback, the store's keys only: open until the first key is made.
        let web = format!("[[keys]]\nname = \"web\"\nkey = \"{WEB}\"\n");
        let (_backend, text, _provider) = on_sqlite_without("last-key", "", &web).await;
        let config = support::config_file(&format!("last-key-{:08x}", fastrand::u32(..)), &text);
        let path = config.display().to_string();
        let baton = Baton::serve(&config).start().await;
        assert_eq!(until_status(&baton, "", 200, Duration::from_secs(5)).await.map(|_| ()), Some(()), "open at first");

        let made = cli(&["keys", "create", "--config", &path, "only"]);
        assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
        let secret = String::from_utf8(made.stdout).expect("text").trim().to_owned();
        assert!(until_status(&baton, "", 401, Duration::from_secs(10)).await.is_some(), "closed once a key exists");

        let revoked = cli(&["keys", "revoke", "--config", &path, "only"]);
        assert!(revoked.status.success(), "{}", String::from_utf8_lossy(&revoked.stderr));
        let told = String::from_utf8_lossy(&revoked.stderr);
        assert!(told.contains("last key") && told.contains("stays closed"), "the command says what follows: {told}");
        assert!(until_status(&baton, &secret, 401, Duration::from_secs(10)).await.is_some(), "the key is refused");
        // Past the second in which every replica takes a revoke, still closed.
        tokio::time::sleep(ACROSS_REPLICAS * 2).await;
        assert_eq!(ask(&baton, "", "chat").await, 401, "a revoke never opens the gateway");
        assert_eq!(ask(&baton, &secret, "chat").await, 401);
        let _ = std::fs::remove_dir_all(config.parent().expect("a directory"));
    });
}

#[test]
fn baton_keys_needs_none_of_the_providers_secrets() {
    run(HARD_LIMIT, async {
        let (_backend, text, _provider) = on_sqlite("keys-no-secrets", "").await;
        let unset = "BATON_TEST_PROVIDER_KEY_NEVER_SET";
        let text = format!(
            "{text}\n[[providers]]\nname = \"spare\"\nkind = \"openai\"\nbase_url = \"https://api.openai.com/v1\"\napi_key = \"${{{unset}}}\"\n"
        );
        let config = support::config_file(&format!("keys-no-secrets-{:08x}", fastrand::u32(..)), &text);
        let path = config.display().to_string();
        let checked = cli(&["check", "--config", &path]);
        assert!(!checked.status.success(), "serving still needs the provider's key");
        assert!(String::from_utf8_lossy(&checked.stderr).contains(unset), "and says which");
        for args in [
            &["keys", "create", "--config", &path, "night"][..],
            &["keys", "list", "--config", &path],
            &["keys", "revoke", "--config", &path, "night"],
        ] {
            let done = cli(args);
            assert!(done.status.success(), "{args:?}: {}", String::from_utf8_lossy(&done.stderr));
        }
        let _ = std::fs::remove_dir_all(config.parent().expect("a directory"));
    });
}

/// Runs the binary with `args` to its end.
fn cli(args: &[&str]) -> std::process::Output {
    Baton::once(args).output().expect("baton runs")
}
