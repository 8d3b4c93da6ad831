//! Provider health for dashboards: how much of a provider's `rpm` is in
//! use, read at scrape time from this replica's quota, or the cluster's
//! when replicas share a Redis.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::mock::MockProvider;
use support::{ChatConfig, Proxy, RedisServer, Server, Spawned, chat_body, eventually, metrics, post_chat, run};

const HARD_LIMIT: Duration = Duration::from_secs(40);

/// The value of `baton_provider_quota_used_ratio` for `provider` and `unit`.
async fn quota_used(proxy: &impl Server, provider: &str, unit: &str) -> f64 {
    let text = metrics(proxy).await;
    let series = format!("baton_provider_quota_used_ratio{{provider=\"{provider}\",unit=\"{unit}\"}} ");
    let line = text.lines().find_map(|line| line.strip_prefix(&series));
    line.unwrap_or_else(|| panic!("no {series} in:\n{text}")).trim().parse().expect("a number")
}

#[test]
fn the_share_of_a_provider_s_rpm_in_use_follows_its_requests() {
    run(HARD_LIMIT, async {
        let limited = MockProvider::openai().spawned().await;
        let chat = ChatConfig::new().mock("limited", &limited).provider_keys("rpm = 10\ntpm = 2000");
        let proxy = Proxy::start(&chat.toml()).await;
        assert_eq!(quota_used(&proxy, "limited", "rpm").await, 0.0, "idle before any request");
        for _ in 0..4 {
            assert_eq!(post_chat(&proxy, &chat_body(false)).await.status, 200);
        }
        let used = quota_used(&proxy, "limited", "rpm").await;
        // One request of 10 a minute frees up every 6 s: the test is far quicker.
        assert!((0.3..=0.4).contains(&used), "4 of 10 requests a minute: {used}");
        let tokens = quota_used(&proxy, "limited", "tpm").await;
        assert!(tokens > 0.01 && tokens < 0.5, "the tokens of 4 small answers, of 2,000 a minute: {tokens}");
    });
}

#[test]
fn with_a_shared_redis_each_replica_reads_the_cluster_s_share() {
    run(HARD_LIMIT, async {
        let redis = RedisServer::start();
        let limited = MockProvider::openai().spawned().await;
        let chat = ChatConfig::new().mock("limited", &limited).provider_keys("rpm = 10");
        let text = format!("{}\n{}", redis.state_toml("quota-ratio"), chat.toml());
        let (a, b) = (Proxy::start(&text).await, Proxy::start(&text).await);
        let joined = eventually(Duration::from_secs(10), || async {
            metrics(&a).await.contains("baton_state_backend_up 1")
                && metrics(&b).await.contains("baton_state_backend_up 1")
        });
        assert!(joined.await, "both replicas reach the test's redis-server");
        for proxy in [&a, &a, &b, &b] {
            assert_eq!(post_chat(proxy, &chat_body(false)).await.status, 200);
        }
        for (name, proxy) in [("a", &a), ("b", &b)] {
            let used = quota_used(proxy, "limited", "rpm").await;
            assert!((0.3..=0.4).contains(&used), "replica {name} sees the cluster's 4 of 10, not its own 2: {used}");
        }
    });
}
