//! Drills on a schedule: on paused time with scripted providers, a drill
//! runs once per interval from a random offset, never twice at once, and
//! once per cluster when replicas share a state; over loopback, a drill
//! that fails the primary is answered by the fallback, charged to key
//! `drill`, and a drill of a dead route raises `drill_failed`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use baton::admission::RequestGate;
use baton::config::{self, Config};
use baton::core::Engine;
use baton::mock::{Fault, MockProvider, Schedule};
use baton::observe::RouteStats;
use baton::ops::alerts::Alerts;
use baton::ops::drills::{Board, DrillContext};
use baton::providers::ProviderKind;
use baton::providers::scripted::{Script, Scripted};
use baton::state::{MemoryState, Store, spawn_sync};
use serde_json::{Value, json};
use support::{ChatConfig, Proxy, RedisServer, Spawned, WebhookReceiver, eventually, metrics, run, within};
use tokio::time::Instant;

const HARD_LIMIT: Duration = Duration::from_secs(40);
/// A bound in virtual time for the paused-time tests: far past what they wait.
const VIRTUAL_LIMIT: Duration = Duration::from_secs(86_400);
const TOKEN: &str = "drill-admin-token-0123456789";
const SPARE: &str = "spare-model";

/// A route "chat" of two scripted providers, primary first, and `drills`.
fn scripted_config(drills: &str) -> Config {
    let unreachable = "http://127.0.0.1:9/v1";
    let chat = ChatConfig::new()
        .provider("primary", ProviderKind::OpenAi, unreachable)
        .provider("spare", ProviderKind::OpenAi, unreachable)
        .deadlines(10_000, 10_000);
    config::parse(&format!("{}\n{drills}", chat.toml()), "test.toml", &|_| None).expect("valid")
}

/// A replica's drill context over `scripted`, sharing `store` when given.
fn context(config: Config, scripted: &Arc<Scripted>, store: Option<Arc<Store>>) -> DrillContext {
    let engine = Engine::with_opener(&config, Arc::clone(scripted) as _).with_store(store.clone());
    let board = Arc::new(Board::new(&config.drills));
    DrillContext {
        gate: Arc::new(RequestGate::new(Arc::clone(engine.metrics())).with_store(store.clone())),
        engine,
        config: Arc::new(baton::store::Keyring::new(config)),
        records: None,
        routes: Arc::new(RouteStats::default()),
        store,
        alerts: Alerts::default(),
        board,
    }
}

fn spare_answers(scripted: &Scripted, opening: Duration) {
    scripted.then(SPARE, Script::answer().opening_after(opening).text("ok").finish());
}

/// When each drill reached the spare, in order.
fn runs(scripted: &Scripted) -> Vec<Instant> {
    scripted.opened().iter().filter(|opened| opened.model == SPARE).map(|opened| opened.at).collect()
}

#[tokio::test(start_paused = true)]
async fn a_drill_runs_once_per_interval_from_a_random_offset() {
    within(VIRTUAL_LIMIT, async {
        let scripted = Scripted::new();
        spare_answers(&scripted, Duration::ZERO);
        let running = context(scripted_config("[[drills]]\nroute = \"chat\"\nevery = \"1m\""), &scripted, None).start();

        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(runs(&scripted).len(), 1, "one run within the first interval");
        tokio::time::sleep(Duration::from_secs(540)).await;
        let at = runs(&scripted);
        assert!((9..=10).contains(&at.len()), "ten minutes of a one-minute drill: {} runs", at.len());
        for gap in at.windows(2).map(|pair| pair[1] - pair[0]) {
            assert!(
                gap >= Duration::from_secs(60) && gap < Duration::from_secs(66),
                "an interval plus jitter: {gap:?}"
            );
        }
        assert_eq!(scripted.opened_for("primary-model"), 0, "the drilled provider is never called");
        let status = running.board.status();
        assert_eq!((status[0]["runs"].as_u64(), &status[0]["result"]), (Some(at.len() as u64), &json!("passed")));
        let text = running.engine.metrics().render(running.engine.health());
        let passed = format!("baton_drill_runs_total{{route=\"chat\",result=\"passed\"}} {}", at.len());
        assert!(text.contains(&passed), "{text}");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_drill_slower_than_its_interval_is_not_started_again() {
    within(VIRTUAL_LIMIT, async {
        let scripted = Scripted::new();
        spare_answers(&scripted, Duration::from_millis(2500));
        let _running =
            context(scripted_config("[[drills]]\nroute = \"chat\"\nevery = \"1s\""), &scripted, None).start();

        tokio::time::sleep(Duration::from_secs(20)).await;
        let at = runs(&scripted);
        assert!((5..=8).contains(&at.len()), "a 2.5 s drill every second runs every ~3 s: {} runs", at.len());
        for gap in at.windows(2).map(|pair| pair[1] - pair[0]) {
            assert!(gap >= Duration::from_millis(2500), "a run started while the last was running: {gap:?}");
        }
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn replicas_sharing_a_state_run_each_drill_once_per_interval() {
    within(VIRTUAL_LIMIT, async {
        let (shared, scripted) = (MemoryState::new(), Scripted::new());
        spare_answers(&scripted, Duration::ZERO);
        let replicas: Vec<DrillContext> = (0..2)
            .map(|_| {
                let config = scripted_config("[[drills]]\nroute = \"chat\"\nevery = \"1m\"");
                let metrics = Arc::new(baton::observe::Metrics::new());
                let store = Store::new(Arc::new(shared.replica()), "memory", Duration::from_millis(50), metrics);
                context(config, &scripted, Some(store))
            })
            .collect();
        for replica in &replicas {
            let store = replica.store.clone().unwrap();
            spawn_sync(Arc::clone(&store), Arc::downgrade(replica.engine.health_handle()));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(replicas.iter().all(|replica| replica.store.as_ref().unwrap().is_up()), "both reach the shared state");
        let _running: Vec<_> = replicas.into_iter().map(DrillContext::start).collect();

        tokio::time::sleep(Duration::from_secs(600)).await;
        let at = runs(&scripted);
        assert!(
            (9..=11).contains(&at.len()),
            "one run per interval for the cluster, not one per replica: {}",
            at.len()
        );
        for gap in at.windows(2).map(|pair| pair[1] - pair[0]) {
            assert!(gap >= Duration::from_secs(60), "two runs within one interval: {gap:?}");
        }
    })
    .await;
}

#[test]
fn replicas_sharing_a_redis_run_each_drill_once_per_interval() {
    run(HARD_LIMIT, async {
        let redis = RedisServer::start();
        let scripted = Scripted::new();
        spare_answers(&scripted, Duration::ZERO);
        let mut replicas = Vec::new();
        for _ in 0..2 {
            let config = scripted_config(&format!(
                "{}\n[[drills]]\nroute = \"chat\"\nevery = \"1s\"",
                redis.state_toml("drills")
            ));
            let store =
                Store::from_config(&config.state, Arc::new(baton::observe::Metrics::new())).expect("a redis store");
            let replica = context(config, &scripted, Some(Arc::clone(&store)));
            spawn_sync(store, Arc::downgrade(replica.engine.health_handle()));
            replicas.push(replica);
        }
        let joined = eventually(Duration::from_secs(10), || async {
            replicas.iter().all(|replica| replica.store.as_ref().unwrap().is_up())
        });
        assert!(joined.await, "both replicas reach the test's redis-server");
        let _running: Vec<_> = replicas.into_iter().map(DrillContext::start).collect();

        tokio::time::sleep(Duration::from_millis(5500)).await;
        let at = runs(&scripted);
        // One replica alone runs 5 or 6 times in 5.5 s; two without the lease, about 11.
        assert!((3..=7).contains(&at.len()), "one run per second for the cluster: {} runs", at.len());
        for gap in at.windows(2).map(|pair| pair[1] - pair[0]) {
            assert!(gap >= Duration::from_millis(900), "two runs within one interval: {gap:?}");
        }
    });
}

/// A directory of the test's own for the SQLite store, removed when dropped.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let path =
            std::env::temp_dir().join(format!("baton-drills-{}-{name}-{:08x}", std::process::id(), fastrand::u32(..)));
        std::fs::create_dir_all(&path).expect("temp dir");
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A proxy of `text` with its store and its drills running.
async fn drilled_proxy(text: &str) -> Proxy {
    let config = config::parse(text, "test.toml", &|_| None).expect("valid");
    Proxy::serve(support::over_http(config).build().with_records().await.with_drills()).await
}

async fn admin_json(proxy: &Proxy, path: &str) -> Value {
    let request = reqwest::Client::new().get(proxy.url(path)).header("x-baton-admin-token", TOKEN);
    request.send().await.expect("the proxy answers").json().await.expect("json")
}

#[test]
fn a_drill_fails_the_primary_and_the_fallback_answers_charged_to_key_drill() {
    run(HARD_LIMIT, async {
        let primary = MockProvider::openai().marker("primary").spawned().await;
        let spare = MockProvider::anthropic().marker("spare").spawned().await;
        let dir = TempDir::new("ok");
        let chat = ChatConfig::new()
            .top(&format!("admin_token = \"{TOKEN}\""))
            .mock("primary", &primary)
            .mock("spare", &spare)
            .target_keys("price = { input_per_mtok = 1000.0, output_per_mtok = 1000.0 }");
        let store = format!("[store]\npath = \"{}\"\n", dir.0.join("baton.db").display());
        let proxy =
            drilled_proxy(&format!("{}\n{store}\n[[drills]]\nroute = \"chat\"\nevery = \"1s\"\n", chat.toml())).await;

        let ran = eventually(Duration::from_secs(10), || async {
            admin_json(&proxy, "/admin/status").await["drills"][0]["runs"].as_u64() >= Some(1)
        });
        assert!(ran.await, "the drill ran within its first interval");
        let drill = admin_json(&proxy, "/admin/status").await["drills"][0].clone();
        assert_eq!(
            (&drill["route"], &drill["every"], &drill["fail"]),
            (&json!("chat"), &json!("1s"), &json!("primary=http_5xx"))
        );
        assert_eq!(
            (&drill["result"], &drill["answered_by"], &drill["attempts"]),
            (&json!("passed"), &json!("spare"), &json!(2)),
            "the drilled attempt counts, as in x-baton-attempts"
        );
        assert!(drill["ms"].is_u64() && drill["last_run"].as_str().is_some_and(|at| at.ends_with('Z')), "{drill}");

        assert!(primary.requests().is_empty(), "the failed provider is never called");
        let asked = spare.requests().first().expect("the fallback was asked").body.clone();
        assert_eq!(asked["max_tokens"], 8, "a tiny drill: {asked}");
        assert!(asked.to_string().contains("Reply with the word ok."), "{asked}");

        let text = metrics(&proxy).await;
        assert!(text.contains(r#"baton_drill_runs_total{route="chat",result="passed"}"#), "{text}");
        assert!(text.contains(r#"baton_drill_last_success_timestamp_seconds{route="chat"}"#), "{text}");
        assert!(text.contains(r#"baton_cost_usd_total{route="chat",provider="spare",key="drill"}"#), "{text}");
        let rows = eventually(Duration::from_secs(10), || async {
            admin_json(&proxy, "/admin/requests?key=drill").await["data"]
                .as_array()
                .is_some_and(|rows| !rows.is_empty())
        });
        assert!(rows.await, "the drill's request is in the log under key drill");
        let row = admin_json(&proxy, "/admin/requests?key=drill").await["data"][0].clone();
        assert_eq!(
            (&row["route"], &row["provider"], &row["outcome"]),
            (&json!("chat"), &json!("spare"), &json!("ok")),
            "{row}"
        );
        assert!(row["cost_usd"].as_f64().is_some_and(|usd| usd > 0.0), "charged: {row}");
    });
}

#[test]
fn a_drill_of_a_dead_route_raises_drill_failed_then_drill_recovered() {
    run(HARD_LIMIT, async {
        let hook = WebhookReceiver::start().await;
        let primary = MockProvider::openai().spawned().await;
        let fallback =
            MockProvider::gemini().fault(Fault::Http5xx).schedule(Schedule::FirstRequests(1)).spawned().await;
        let chat = ChatConfig::new()
            .top(&hook.toml(&["drill_failed", "drill_recovered"], None))
            .mock("primary", &primary)
            .mock("fallback", &fallback);
        let proxy = drilled_proxy(&format!("{}\n[[drills]]\nroute = \"chat\"\nevery = \"1s\"\n", chat.toml())).await;

        let failed = hook.next_event("drill_failed", Duration::from_secs(10)).await;
        assert_eq!((&failed.json["route"], &failed.json["fail"]), (&json!("chat"), &json!("primary=http_5xx")));
        assert_eq!((&failed.json["outcome"], &failed.json["attempts"]), (&json!("all_failed"), &json!(2)));
        assert!(!String::from_utf8_lossy(&failed.body).contains("mock5xx"), "never the provider's words");
        let recovered = hook.next_event("drill_recovered", Duration::from_secs(10)).await;
        assert_eq!((&recovered.json["route"], &recovered.json["provider"]), (&json!("chat"), &json!("fallback")));
        assert!(primary.requests().is_empty());
        let text = metrics(&proxy).await;
        assert!(text.contains(r#"baton_drill_runs_total{route="chat",result="failed"} 1"#), "{text}");
    });
}
