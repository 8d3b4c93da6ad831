//! What the store's tests share: a priced route whose primary fails once,
//! two client keys and an admin token, and ways to ask through a proxy and
//! read back its log.

use std::time::Duration;

use baton::mock::{Fault, MockProvider, Schedule};
use serde_json::Value;

use super::backend::Backend;
use super::{ChatConfig, Proxy, Received, Server, Spawned, admin_get as admin, chat_body, eventually, post_with};

/// How long any one of these tests may take.
pub const HARD_LIMIT: Duration = Duration::from_secs(60);
/// How long a row may take to be visible: one batch interval, on a loaded machine.
pub const ROWS_WITHIN: Duration = Duration::from_secs(15);
/// The admin token of every config here.
pub const TOKEN: &str = "admin-token-0123456789";
/// Key `web`'s secret.
pub const WEB: &str = "sk-web-0123456789abcdef";
/// Key `batch`'s secret.
pub const BATCH: &str = "sk-batch-0123456789abcd";
/// Keys `web` and `batch`.
pub const KEYS: &str = "[[keys]]\nname = \"web\"\nkey = \"sk-web-0123456789abcdef\"\n\n\
                    [[keys]]\nname = \"batch\"\nkey = \"sk-batch-0123456789abcd\"\n";
/// A token costs a dollar either way, so every answer's cost is its token count.
pub const PRICE: &str = "price = { input_per_mtok = 1000000.0, output_per_mtok = 1000000.0 }";

/// A route "chat" whose primary fails its first request (a failover) and
/// whose secondary always answers, both priced; the keys, the admin token
/// and `store`.
pub async fn proxy_config(store: &str, extra_top: &str) -> (String, Vec<baton::mock::MockHandle>) {
    let primary = MockProvider::openai().fault(Fault::Http5xx).schedule(Schedule::FirstRequests(1)).spawned().await;
    let secondary = MockProvider::openai().spawned().await;
    let routes = ChatConfig::new()
        .top(&format!("admin_token = \"{TOKEN}\"\n{extra_top}"))
        .mock("primary", &primary)
        .target_keys(PRICE)
        .mock("secondary", &secondary)
        .target_keys(PRICE)
        .toml();
    (format!("{routes}\n{KEYS}\n{store}"), vec![primary, secondary])
}

/// A SQLite store in a fresh directory named after `name`, and the config
/// over it, with `top` at its top.
pub async fn on_sqlite(name: &str, top: &str) -> (Backend, String, Vec<baton::mock::MockHandle>) {
    let backend = Backend::sqlite(name);
    let (text, mocks) = proxy_config(&backend.toml(), top).await;
    (backend, text, mocks)
}

/// A proxy on `text`, recording to its store.
pub async fn start(text: &str) -> (Proxy, baton::AppState) {
    Proxy::start_recorded_text(text).await
}

/// A chat request as key `key` (none: no key) with request id `id`.
pub async fn ask(server: &impl Server, key: Option<&str>, id: &str, body: &Value) -> u16 {
    let auth = key.map(|key| format!("Bearer {key}"));
    let mut headers = vec![("x-request-id", id)];
    if let Some(auth) = &auth {
        headers.push(("authorization", auth.as_str()));
    }
    post_with(server, "/v1/chat/completions", body, &headers).await.status
}

/// A chat request from the web key straight to `server`.
pub async fn post_as_web(server: &impl Server) -> Received {
    post_with(server, "/v1/chat/completions", &chat_body(false), &[("authorization", "Bearer sk-web-0123456789abcdef")])
        .await
}

/// The log's rows for `query` once there are at least `count` of them.
pub async fn rows_eventually(server: &impl Server, query: &str, count: usize) -> Vec<Value> {
    let path = format!("/admin/requests{query}");
    let enough = eventually(ROWS_WITHIN, || async {
        let (status, body) = admin(server, &path, Some(TOKEN)).await;
        status == 200 && body["data"].as_array().is_some_and(|rows| rows.len() >= count)
    })
    .await;
    let (status, body) = admin(server, &path, Some(TOKEN)).await;
    assert!(enough, "{count} rows for {query:?} within {ROWS_WITHIN:?}; got {status} {body}");
    body["data"].as_array().cloned().unwrap_or_default()
}

/// The row of request `id` among `rows`.
pub fn by_id<'a>(rows: &'a [Value], id: &str) -> &'a Value {
    rows.iter().find(|row| row["id"] == id).unwrap_or_else(|| panic!("a row for {id} in {rows:?}"))
}

/// The value of an unlabelled metric line, as `name value`.
pub fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}
