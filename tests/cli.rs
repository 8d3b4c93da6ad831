//! The compiled `baton` binary as a user runs it: `check`, `serve` with
//! `curl -N`, `mock`, and `demo`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::mock::MockProvider;
use support::{Baton, Spawned, chat_body, mocks_toml, post_chat, run};
use tokio::process::Command;

const HARD_LIMIT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn check_prints_the_routes() {
    let config = "[[providers]]\nname = \"main\"\nkind = \"anthropic\"\nbase_url = \"https://api.anthropic.com\"\n\
                  api_key = \"${BATON_TEST_KEY}\"\n\n\
                  [[routes]]\nmodel = \"chat\"\nfirst_token_timeout_ms = 900\ntargets = [{ provider = \"main\", model = \"claude-x\" }]\n";
    let path = support::config_file("cli-check-ok", config);
    let out =
        Baton::once(&["check", "--config"]).arg(&path).env("BATON_TEST_KEY", "sk-very-secret").output().expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "check succeeds: {stdout} {}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("route \"chat\" (idle 30000 ms)"), "{stdout}");
    assert!(
        stdout.contains("1. main (anthropic, https://api.anthropic.com) model claude-x, first token 900 ms, 0 retries"),
        "{stdout}"
    );
    assert!(!stdout.contains("sk-very-secret"), "the key is never printed");
}

#[tokio::test]
async fn check_names_file_line_and_key_of_a_mistake() {
    let path = support::config_file(
        "cli-check-bad",
        "[[providers]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://x/v1\"\nretries = 3\n",
    );
    let out = Baton::once(&["check", "--config"]).arg(&path).output().expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a bad config fails");
    let expected = format!("baton: {}:5: retries: unknown field `retries`", path.display());
    assert!(stderr.contains(&expected), "expected {expected:?} in {stderr:?}");
}

#[test]
fn serve_streams_to_curl() {
    run(HARD_LIMIT, async {
        let provider = MockProvider::gemini().marker("gem").tokens(6).spawned().await;
        let config = format!("listen = \"127.0.0.1:0\"\n{}", mocks_toml(&[("gemini", &provider)], 2000, 2000));
        let path = support::config_file("cli-serve", &config);
        let baton = Baton::serve(&path).start().await;
        let body = r#"{"model": "chat", "stream": true, "messages": [{"role": "user", "content": "hi"}]}"#;
        let out = Command::new("curl")
            .args(["-sN", "-D", "-", "-H", "content-type: application/json", "-d", body])
            .arg(baton.url("/v1/chat/completions"))
            .output()
            .await
            .expect("curl runs (install curl)");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
        assert!(text.contains("x-baton-provider: gemini"), "{text}");
        assert!(text.contains("content-type: text/event-stream"), "{text}");
        let deltas: String = text
            .lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .filter_map(|data| serde_json::from_str::<serde_json::Value>(data).ok())
            .filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(deltas, "gem0 gem1 gem2 gem3 gem4 gem5");
        assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
    });
}

#[test]
fn mock_serves_its_wire_format() {
    run(HARD_LIMIT, async {
        let mock = Baton::command(&[
            "mock",
            "--kind",
            "anthropic",
            "--listen",
            "127.0.0.1:0",
            "--marker",
            "cli",
            "--tokens",
            "3",
            "--first-token-ms",
            "0",
            "--gap-ms",
            "0",
        ])
        .start()
        .await;
        let out = reqwest::Client::new()
            .post(mock.url("/v1/messages"))
            .json(&serde_json::json!({ "model": "claude", "max_tokens": 10, "messages": [] }))
            .send()
            .await
            .expect("mock answers")
            .text()
            .await
            .expect("body");
        assert!(out.starts_with("event: message_start"), "{out}");
        assert!(out.contains("\"text\":\"cli0\"") && out.contains("\"text\":\" cli2\""), "{out}");
        assert!(out.trim_end().ends_with("data: {\"type\":\"message_stop\"}"), "{out}");
    });
}

#[test]
fn demo_answers_every_request_and_fails_over() {
    run(HARD_LIMIT, async {
        let demo = Baton::command(&["demo", "--listen", "127.0.0.1:0"]).start().await;
        let mut providers = Vec::new();
        for _ in 0..10 {
            let got = post_chat(&demo, &chat_body(true)).await;
            assert_eq!(got.status, 200, "every demo request is answered");
            let provider = got.header("x-baton-provider").to_owned();
            let text = got.raw;
            assert!(text.trim_end().ends_with("data: [DONE]"), "complete answers only: {text}");
            let marker = if provider == "flaky-anthropic" { "flaky" } else { "steady" };
            let other = if marker == "flaky" { "steady" } else { "flaky" };
            assert!(text.contains(marker) && !text.contains(other), "one provider's words per answer: {text}");
            providers.push(provider);
        }
        assert!(
            providers.iter().any(|p| p == "steady-openai"),
            "the flaky primary failed over at least once: {providers:?}"
        );
        assert!(providers.iter().any(|p| p == "flaky-anthropic"), "the primary answered when healthy: {providers:?}");
        demo.signal("TERM");
        assert!(demo.exit_within(Duration::from_secs(20)).await.success(), "the demo stops, and cleans up, on SIGTERM");
    });
}

#[test]
fn the_demo_records_for_its_page_in_a_temporary_file_it_removes_when_it_stops() {
    run(HARD_LIMIT, async {
        let demo = Baton::command(&["demo", "--listen", "127.0.0.1:0"]).start().await;
        let dir = demo
            .log_lines()
            .iter()
            .find(|line| line.contains("records its requests"))
            .and_then(|line| line.split("path=").nth(1)?.split_whitespace().next().map(std::path::PathBuf::from))
            .expect("the demo says where it records");
        assert!(dir.starts_with(std::env::temp_dir()), "under the temporary directory, not where it ran: {dir:?}");
        for _ in 0..3 {
            assert_eq!(post_chat(&demo, &chat_body(false)).await.status, 200);
        }
        let drawn = support::eventually(Duration::from_secs(15), || async {
            let history: serde_json::Value =
                reqwest::get(demo.url("/admin/history?range=1h")).await.unwrap().json().await.unwrap();
            let groups = history["activity"]["data"].as_array().cloned().unwrap_or_default();
            groups.iter().filter_map(|group| group["requests"].as_i64()).sum::<i64>() == 3
        })
        .await;
        assert!(drawn, "the page's history holds the three requests, open on loopback without a token");
        assert!(dir.join("demo.db").exists(), "{dir:?}");
        demo.signal("TERM");
        assert!(demo.exit_within(Duration::from_secs(20)).await.success());
        assert!(!dir.exists(), "removed when the demo stopped: {dir:?}");
    });
}

#[test]
fn init_writes_a_starter_that_check_accepts_once_its_keys_are_set() {
    let dir = std::env::temp_dir().join(format!("baton-test-{}-init", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("baton.toml");
    let _ = std::fs::remove_file(&path);
    let out = Baton::once(&["init", "--out"]).arg(&path).output().expect("runs");
    assert!(out.status.success(), "init succeeds: {}", String::from_utf8_lossy(&out.stderr));
    let again = Baton::once(&["init", "--out"]).arg(&path).output().expect("runs");
    assert!(!again.status.success(), "init does not overwrite without --force");
    let unset = Baton::once(&["check", "--config"]).arg(&path).output().expect("runs");
    assert!(!unset.status.success(), "the keys are still unset");
    let check = Baton::once(&["check", "--config"])
        .arg(&path)
        .env("OPENAI_API_KEY", "sk-1")
        .env("ANTHROPIC_API_KEY", "sk-2")
        .env("GEMINI_API_KEY", "sk-3")
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "the starter is valid: {stdout} {}", String::from_utf8_lossy(&check.stderr));
    assert!(stdout.contains("route \"chat\""), "{stdout}");
    assert!(!stdout.contains("warning"), "and has nothing to warn about: {stdout}");
    let targets: Vec<&str> = stdout.lines().filter(|line| line.contains(" model ")).collect();
    assert_eq!(targets.len(), 3, "{stdout}");
    assert!(
        targets.iter().all(|line| line.contains(" out per Mtok")),
        "every target is priced, so spend is drawn: {stdout}"
    );
}

#[test]
fn mock_help_lists_every_fault_class() {
    let out = Baton::once(&["mock", "--help"]).output().expect("runs");
    let help = String::from_utf8_lossy(&out.stdout);
    for fault in baton::mock::Fault::ALL {
        assert!(
            help.lines().any(|line| line.trim_start().starts_with(fault.name())),
            "{} missing in:\n{help}",
            fault.name()
        );
    }
}

/// `baton drill --route chat` over the config at `path`, run to its end.
async fn drill_chat(path: &std::path::Path) -> std::process::Output {
    Command::from(Baton::once(&["drill", "--route", "chat", "--config"])).arg(path).output().await.expect("runs")
}

#[test]
fn drill_runs_one_now_and_fails_when_the_fallback_does_not_answer() {
    run(HARD_LIMIT, async {
        let primary = MockProvider::openai().spawned().await;
        let secondary = MockProvider::anthropic().spawned().await;
        let path = support::config_file(
            "cli-drill-ok",
            &mocks_toml(&[("primary", &primary), ("secondary", &secondary)], 2000, 2000),
        );
        let out = drill_chat(&path).await;
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "the fallback answered: {stdout} {}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains("primary=http_5xx") && stdout.contains("answered by secondary"), "{stdout}");
        assert!(primary.requests().is_empty(), "the failed provider is never called");
        let asked = secondary.requests().pop().expect("the fallback was asked").body;
        assert_eq!(asked["max_tokens"], 8, "a tiny drill: {asked}");

        let spared =
            Command::from(Baton::once(&["drill", "--route", "chat", "--fail", "secondary=http_5xx", "--config"]))
                .arg(&path)
                .output()
                .await
                .expect("runs");
        let stdout = String::from_utf8_lossy(&spared.stdout);
        assert!(spared.status.success(), "{stdout}");
        assert!(stdout.contains("answered by primary") && stdout.contains("no failover was exercised"), "{stdout}");

        let dead = MockProvider::anthropic().fault(baton::mock::Fault::Http5xx).spawned().await;
        let path =
            support::config_file("cli-drill-bad", &mocks_toml(&[("primary", &primary), ("dead", &dead)], 2000, 2000));
        let out = drill_chat(&path).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "a dead fallback fails the drill");
        assert!(stderr.contains("drill of \"chat\" (primary=http_5xx) failed"), "{stderr}");
        let out = Command::from(Baton::once(&["drill", "--route", "nope", "--config"]))
            .arg(&path)
            .output()
            .await
            .expect("runs");
        assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("no route \"nope\""));
    });
}
