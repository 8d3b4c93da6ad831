//! Several replicas, one state: baton proxies sharing one real Redis (a
//! `redis-server` of the test's own on a free loopback port, with a key
//! prefix of the test's own) hold a key's `rpm` across them, skip a
//! provider another replica's breaker opened, probe it once for the
//! cluster, and keep answering from their local state while Redis is gone.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::{Duration, Instant};

use baton::mock::{Fault, MockHandle, MockProvider};
use baton::resilience::BreakerState;
use futures_util::future::join_all;
use serde_json::{Value, json};
use support::{Baton, ChatConfig, Proxy, RedisServer, Server, Spawned, config_file, eventually, metrics, run};

const HARD_LIMIT: Duration = Duration::from_secs(60);
const SECRET: &str = "sk-web-0123456789abcdef";

async fn status_of(proxy: &impl Server) -> Value {
    reqwest::get(proxy.url("/admin/status")).await.unwrap().json().await.unwrap()
}

/// Whether `proxy` says the shared store answers, as its status and metric see it.
async fn shares(proxy: &impl Server) -> bool {
    let status = status_of(proxy).await;
    assert_eq!(status["state"]["backend"], "redis", "{}", status["state"]);
    status["state"]["reachable"] == true && metrics(proxy).await.contains("baton_state_backend_up 1")
}

/// Two replicas of `config` sharing `redis`, once both reach it.
async fn two_replicas(config: &str) -> (Proxy, Proxy) {
    let (a, b) = (Proxy::start(config).await, Proxy::start(config).await);
    let joined = eventually(Duration::from_secs(10), || async { shares(&a).await && shares(&b).await }).await;
    assert!(joined, "both replicas reach the test's redis-server");
    (a, b)
}

/// Asks route "chat" for an answer as key "web".
async fn ask(proxy: &impl Server) -> reqwest::Response {
    ask_for(proxy, 50).await
}

/// Asks as key "web" for an answer of at most `max_tokens`, which it reserves.
async fn ask_for(proxy: &impl Server, max_tokens: u32) -> reqwest::Response {
    let body = json!({ "model": "chat", "max_tokens": max_tokens, "messages": [{ "role": "user", "content": "hi" }] });
    let request = reqwest::Client::new().post(proxy.url("/v1/chat/completions")).json(&body).bearer_auth(SECRET);
    request.send().await.expect("the proxy answers")
}

fn keyed(chat: &ChatConfig, limits: &str, state: &str) -> String {
    format!("{}\n[[keys]]\nname = \"web\"\nkey = \"{SECRET}\"\n{limits}\n\n{state}", chat.toml())
}

/// Two replicas sharing one redis-server, both over one OpenAI provider,
/// whose key "web" has `limits`; the server's state is named after `name`.
async fn keyed_replicas(limits: &str, name: &str) -> (RedisServer, MockHandle, Proxy, Proxy) {
    let redis = RedisServer::start();
    let provider = MockProvider::openai().spawned().await;
    let chat = ChatConfig::new().deadlines(5000, 5000).mock("p", &provider);
    let (a, b) = two_replicas(&keyed(&chat, limits, &redis.state_toml(name))).await;
    (redis, provider, a, b)
}

#[test]
fn a_keys_rpm_holds_across_two_replicas_sharing_one_redis() {
    run(HARD_LIMIT, async {
        let (_redis, provider, a, b) = keyed_replicas("rpm = 5", "rpm").await;
        // Twelve at once, six on each: alone, each replica would let 5 through.
        let asks = (0..12).map(|i| ask(if i % 2 == 0 { &a } else { &b }));
        let statuses: Vec<u16> = join_all(asks).await.iter().map(|response| response.status().as_u16()).collect();
        let answered = statuses.iter().filter(|status| **status == 200).count();
        let limited = statuses.iter().filter(|status| **status == 429).count();
        assert_eq!((answered, limited), (5, 7), "exactly the key's rpm answered across both replicas: {statuses:?}");
        assert_eq!(provider.requests().len(), 5, "the refused requests reached no provider");
        let refused = ask(&b).await;
        assert!(refused.headers().get("retry-after").is_some(), "a refusal says when to come back");
    });
}

#[test]
fn a_keys_token_reservations_are_shared_and_settled_across_two_replicas() {
    run(HARD_LIMIT, async {
        let (_redis, _provider, a, b) = keyed_replicas("tpm = 3000", "tpm").await;
        // Each reserves 1 + 1,400 tokens: two fit in 3,000, on either replica or both.
        let statuses = |responses: Vec<reqwest::Response>| {
            let mut statuses: Vec<u16> = responses.iter().map(|r| r.status().as_u16()).collect();
            statuses.sort_unstable();
            statuses
        };
        let first = join_all([ask_for(&a, 1400), ask_for(&a, 1400), ask_for(&b, 1400), ask_for(&b, 1400)]).await;
        assert_eq!(
            statuses(first),
            [200, 200, 429, 429],
            "two reservations of 1,401 fit the key's 3,000, cluster-wide"
        );
        // The answers used 18 tokens each: once settled, there is room for two more.
        tokio::time::sleep(baton::state::BREAKER_SYNC_EVERY * 3).await;
        let second = join_all([ask_for(&b, 1400), ask_for(&a, 1400)]).await;
        assert_eq!(statuses(second), [200, 200], "the reservations were settled to the usage in Redis too");
    });
}

/// A `limited` provider with `keys`, then a `spare`, routed in that order.
async fn limited_then_spare(keys: &str) -> (MockHandle, MockHandle, ChatConfig) {
    let (limited, spare) = (MockProvider::openai().spawned().await, MockProvider::openai().spawned().await);
    let chat =
        ChatConfig::new().deadlines(5000, 5000).mock("limited", &limited).provider_keys(keys).mock("spare", &spare);
    (limited, spare, chat)
}

#[test]
fn a_providers_quota_holds_across_two_replicas_and_the_rest_fails_over() {
    run(HARD_LIMIT, async {
        let redis = RedisServer::start();
        let (limited, _spare, chat) = limited_then_spare("rpm = 4\ntpm = 100000").await;
        let (a, b) = two_replicas(&format!("{}\n{}", redis.state_toml("quota"), chat.toml())).await;
        // Ten at once, five on each: alone, each replica would send 4 to `limited`.
        let asks = (0..10).map(|i| ask_anonymous(if i % 2 == 0 { &a } else { &b }));
        let responses = join_all(asks).await;
        assert!(responses.iter().all(|r| r.status() == 200), "every request is answered");
        let by = |name: &str| responses.iter().filter(|r| r.headers()["x-baton-provider"] == name).count();
        assert_eq!((by("limited"), by("spare")), (4, 6), "exactly the provider's rpm went to it across both replicas");
        assert_eq!(limited.requests().len(), 4, "the provider never saw more than its quota");
        let mut skips = 0;
        for proxy in [&a, &b] {
            let text = metrics(proxy).await;
            let line = r#"baton_attempts_total{provider="limited",outcome="over_quota"} "#;
            skips += text.lines().find_map(|l| l.strip_prefix(line)).map_or(0, |n| n.parse::<u64>().unwrap());
        }
        assert_eq!(skips, 6, "each of the others skipped it as over_quota");
    });
}

#[test]
fn an_attempt_the_shared_quota_refused_takes_nothing_from_the_replicas_own() {
    run(HARD_LIMIT, async {
        let mut redis = RedisServer::start();
        let (_limited, _spare, chat) = limited_then_spare("rpm = 2").await;
        let (a, b) = two_replicas(&format!("{}\n{}", redis.state_toml("not-sent"), chat.toml())).await;
        for _ in 0..2 {
            assert_eq!(answered_by(&b).await, "limited", "B uses the cluster's quota");
        }
        for _ in 0..2 {
            assert_eq!(answered_by(&a).await, "spare", "the cluster's quota is spent: A fails over");
        }
        // Alone, A holds the quota to its own traffic: it sent nothing to `limited`,
        // so its own limiter has both requests of the minute left.
        redis.kill();
        let answers = [answered_by(&a).await, answered_by(&a).await, answered_by(&a).await];
        assert_eq!(answers, ["limited", "limited", "spare"], "the refused attempts were given back to A's own quota");
    });
}

#[test]
fn a_budget_is_summed_across_two_replicas() {
    run(HARD_LIMIT, async {
        let redis = RedisServer::start();
        let provider = MockProvider::openai().spawned().await;
        // $0.10 an input token and $0.20 an output token: the mock's 10 + 8 tokens cost $2.60.
        let price = "price = { input_per_mtok = 100000.0, output_per_mtok = 200000.0 }";
        let chat = ChatConfig::new().deadlines(5000, 5000).mock("p", &provider).target_keys(price);
        let budget = "[[budgets]]\nscope = \"global\"\nwindow = \"1h\"\nusd = 5.0\naction = \"block\"\n";
        let text = format!("{}\n{budget}\n{}", chat.toml(), redis.state_toml("budget"));
        let (a, b) = two_replicas(&text).await;
        assert_eq!(ask_anonymous(&a).await.status(), 200, "$2.60 of $5 spent");
        assert_eq!(ask_anonymous(&b).await.status(), 200, "$5.20: each replica alone has spent $2.60");
        // Spend goes out with a replica's next sync, and comes back to the other with its own.
        tokio::time::sleep(baton::state::BREAKER_SYNC_EVERY * 4).await;
        for proxy in [&a, &b] {
            let response = ask_anonymous(proxy).await;
            assert_eq!(response.status(), 429, "with the replicas' spend summed, the budget blocks on both");
            let body: Value = response.json().await.unwrap();
            assert_eq!(body["error"]["code"], "budget_exceeded", "{body}");
        }
        assert_eq!(provider.requests().len(), 2, "no request past the budget reached the provider");
        for proxy in [&a, &b] {
            let budget = status_of(proxy).await["budgets"][0].clone();
            assert_eq!(budget["spent_by"], "cluster", "{budget}");
            let spent = budget["spent_usd"].as_f64().unwrap();
            assert!((spent - 5.2).abs() < 1e-6, "each replica's status shows the cluster's $5.20: {budget}");
        }
    });
}

/// A route trying `flaky` (failing with 503, breaker after 2 failures,
/// cooling down `cooldown_ms`) and then `good`.
fn breaker_config(flaky: &MockHandle, good: &MockHandle, cooldown_ms: u64, state: &str) -> String {
    let chat = ChatConfig::new()
        .deadlines(5000, 5000)
        .mock("flaky", flaky)
        .provider_keys(&format!("breaker = {{ failure_threshold = 2, cooldown_ms = {cooldown_ms} }}"))
        .target_keys("retries = 0")
        .mock("good", good);
    format!("{state}\n{}", chat.toml())
}

async fn answered_by(proxy: &Proxy) -> String {
    let response = ask_anonymous(proxy).await;
    assert_eq!(response.status(), 200, "every request is answered");
    response.headers()["x-baton-provider"].to_str().unwrap().to_owned()
}

async fn ask_anonymous(proxy: &Proxy) -> reqwest::Response {
    let body = json!({ "model": "chat", "messages": [{ "role": "user", "content": "hi" }] });
    reqwest::Client::new().post(proxy.url("/v1/chat/completions")).json(&body).send().await.expect("the proxy answers")
}

#[test]
fn a_breaker_opened_on_one_replica_skips_the_provider_on_the_other_within_a_second_and_one_probe_serves_the_cluster() {
    run(HARD_LIMIT, async {
        let redis = RedisServer::start();
        let flaky = MockProvider::openai().fault(Fault::Http5xx).spawned().await;
        let good = MockProvider::openai().spawned().await;
        let cooldown = Duration::from_millis(3000);
        let (a, b) = two_replicas(&breaker_config(&flaky, &good, 3000, &redis.state_toml("breaker"))).await;
        for _ in 0..2 {
            assert_eq!(answered_by(&a).await, "good", "A fails over from flaky");
        }
        assert_eq!(a.engine.health().provider("flaky").breaker.state(), BreakerState::Open);
        let opened = Instant::now();
        let b_breaker = b.engine.health().provider("flaky").breaker.clone();
        let reached = eventually(Duration::from_secs(1), || async { b_breaker.state() == BreakerState::Open }).await;
        let took = opened.elapsed();
        assert!(reached, "B saw A's opening within a second");
        eprintln!("a breaker opening reached the other replica in {took:?}");
        for _ in 0..3 {
            assert_eq!(answered_by(&b).await, "good");
        }
        assert_eq!(flaky.requests().len(), 2, "B never tried the provider A found failing");

        // After the cooldown, requests to both replicas for a second and a half:
        // one probe for the cluster, which fails and opens both again.
        tokio::time::sleep_until((opened + cooldown).into()).await;
        let until = Instant::now() + Duration::from_millis(1500);
        while Instant::now() < until {
            answered_by(&a).await;
            answered_by(&b).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(flaky.requests().len(), 3, "exactly one probe reached the provider, from one replica");
        let both_open = eventually(Duration::from_secs(1), || async {
            let states = [&a, &b].map(|proxy| proxy.engine.health().provider("flaky").breaker.state());
            states == [BreakerState::Open, BreakerState::Open]
        });
        assert!(both_open.await, "the failed probe opened the breaker on both replicas");
    });
}

#[test]
fn a_cooldown_one_replica_was_asked_for_skips_the_provider_on_the_other() {
    run(HARD_LIMIT, async {
        let redis = RedisServer::start();
        let limited = MockProvider::openai().fault(Fault::Http429).retry_after_secs(30).spawned().await;
        let good = MockProvider::openai().spawned().await;
        let chat = ChatConfig::new().deadlines(5000, 5000).mock("limited", &limited).mock("good", &good);
        let (a, b) = two_replicas(&format!("{}\n{}", redis.state_toml("cooldown"), chat.toml())).await;
        assert_eq!(answered_by(&a).await, "good", "A fails over from the provider that answered 429");
        assert_eq!(limited.requests().len(), 1);
        let b_health = b.engine.health().provider("limited");
        let heard = eventually(Duration::from_secs(1), || async { b_health.rate_limited_until().is_some() }).await;
        assert!(heard, "B heard of the Retry-After within a second");
        for _ in 0..3 {
            assert_eq!(answered_by(&b).await, "good");
        }
        assert_eq!(limited.requests().len(), 1, "B never asked the provider that asked A to wait");
        let left = status_of(&b).await["providers"][0]["cooldown_ms"].as_u64().unwrap();
        assert!((25_000..=30_000).contains(&left), "B's cooldown is what the provider asked A for: {left} ms");
    });
}

#[test]
fn with_redis_gone_both_replicas_answer_from_local_state_and_rejoin_when_it_returns() {
    run(HARD_LIMIT, async {
        let mut redis = RedisServer::start();
        let provider = MockProvider::openai().spawned().await;
        let chat = ChatConfig::new().deadlines(5000, 5000).mock("p", &provider);
        let (a, b) = two_replicas(&keyed(&chat, "rpm = 1000", &redis.state_toml("fallback"))).await;
        for proxy in [&a, &b] {
            assert_eq!(ask(proxy).await.status(), 200);
        }

        redis.kill();
        let mut slowest = Duration::ZERO;
        for i in 0..20 {
            let started = Instant::now();
            let status = ask(if i % 2 == 0 { &a } else { &b }).await.status();
            slowest = slowest.max(started.elapsed());
            assert_eq!(status, 200, "request {i} with Redis gone is answered from local state");
        }
        eprintln!("with Redis gone, the slowest request took {slowest:?}");
        assert!(slowest < Duration::from_secs(1), "no request waits on a dead Redis: {slowest:?}");
        for proxy in [&a, &b] {
            let down = eventually(Duration::from_secs(5), || async {
                metrics(proxy).await.contains("baton_state_backend_up 0")
            });
            assert!(down.await, "the metric shows the fallback");
            assert_eq!(status_of(proxy).await["state"]["reachable"], false);
        }

        redis.restart();
        for proxy in [&a, &b] {
            assert!(eventually(Duration::from_secs(10), || shares(proxy)).await, "the replica rejoins Redis");
            assert_eq!(ask(proxy).await.status(), 200);
        }
    });
}

/// Asks as the key with `secret`.
async fn ask_as(proxy: &impl Server, secret: &str) -> u16 {
    let body = json!({ "model": "chat", "max_tokens": 50, "messages": [{ "role": "user", "content": "hi" }] });
    let request = reqwest::Client::new().post(proxy.url("/v1/chat/completions")).json(&body).bearer_auth(secret);
    request.send().await.expect("the proxy answers").status().as_u16()
}

fn logged(baton: &Baton, message: &str) -> usize {
    baton.log_lines().iter().filter(|line| line.contains(message)).count()
}

#[test]
fn two_baton_processes_share_a_keys_rpm_and_log_the_fallback_once() {
    run(HARD_LIMIT, async {
        let mut redis = RedisServer::start();
        let provider = MockProvider::openai().spawned().await;
        let chat = ChatConfig::new().top("listen = \"127.0.0.1:0\"").deadlines(5000, 5000).mock("p", &provider);
        const BULK: &str = "sk-bulk-0123456789abcdef";
        let keys = format!("\n[[keys]]\nname = \"bulk\"\nkey = \"{BULK}\"\n");
        let text = format!("{}{keys}\n{}", keyed(&chat, "rpm = 4", ""), redis.state_toml("processes"));
        let path = config_file("shared-state-processes", &text);
        let (a, b) = (Baton::serve(&path).start().await, Baton::serve(&path).start().await);
        let joined = eventually(Duration::from_secs(10), || async { shares(&a).await && shares(&b).await });
        assert!(joined.await, "both processes reach the test's redis-server");
        let asks = (0..10).map(|i| ask_as(if i % 2 == 0 { &a } else { &b }, SECRET));
        let statuses = join_all(asks).await;
        let answered = statuses.iter().filter(|status| **status == 200).count();
        assert_eq!(answered, 4, "the key's rpm of 4 held across two processes: {statuses:?}");

        redis.kill();
        for i in 0..20 {
            assert_eq!(ask_as(if i % 2 == 0 { &a } else { &b }, BULK).await, 200, "request {i} without Redis");
        }
        for baton in [&a, &b] {
            let down = eventually(Duration::from_secs(5), || async {
                metrics(baton).await.contains("baton_state_backend_up 0")
            });
            assert!(down.await, "each process shows the fallback");
        }
        tokio::time::sleep(Duration::from_millis(600)).await;
        for baton in [&a, &b] {
            assert_eq!(logged(baton, "shared state unavailable"), 1, "logged once, not per request or ping");
        }

        redis.restart();
        for baton in [&a, &b] {
            assert!(eventually(Duration::from_secs(10), || shares(baton)).await, "each process rejoins");
            assert_eq!(logged(baton, "shared state reachable"), 2, "at start, and once back");
        }
    });
}
