//! A provider's bytes are untrusted: endless lines, absurd numbers, stray
//! bytes after an answer and answers that never end must each fail one
//! attempt cleanly, never the process, never another request's answer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::mock::{MockHandle, MockProvider};
use support::raw::{RawProvider, SSE_HEAD, Step, chunked_answer, json_answer, openai_end, openai_text};
use support::{ChatConfig, Proxy, Spawned, chat_body, metrics, post_chat, run};

const HARD_LIMIT: Duration = Duration::from_secs(30);

/// A route "chat" over a raw OpenAI-kind provider "raw" and a healthy
/// simulated one, "spare"; `top` adds top-level keys.
fn config(top: &str, raw: &RawProvider, spare: &MockHandle) -> String {
    let route = ChatConfig::new().top(top).deadlines(5000, 5000).raw("raw", raw).model("m");
    route.mock("spare", spare).model("s").toml()
}

async fn spare() -> MockHandle {
    MockProvider::anthropic().marker("spare").tokens(3).spawned().await
}

fn attempt_classes(raw: &str) -> bool {
    raw.contains("event_too_large")
}

#[test]
fn a_provider_that_never_sends_a_newline_fails_over_at_the_event_cap() {
    run(HARD_LIMIT, async {
        let flood = RawProvider::start(|_| {
            vec![Step::Write(SSE_HEAD.to_vec()), Step::Write(b"data: ".to_vec()), Step::Flood(vec![b'x'; 16 * 1024])]
        })
        .await;
        let spare = spare().await;
        let proxy = Proxy::start(&config("max_event_bytes = 65536", &flood, &spare)).await;
        for stream in [true, false] {
            let got = post_chat(&proxy, &chat_body(stream)).await;
            assert_eq!(got.status, 200, "{}", got.raw);
            assert_eq!(got.header("x-baton-provider"), "spare", "the flood failed over");
            assert!(!got.raw.contains("xxxx"), "no byte of the flood reached the client");
        }
        let outcomes = metrics(&proxy).await;
        assert!(outcomes.contains("outcome=\"event_too_large\""), "the attempt's class is event_too_large");
    });
}

#[test]
fn an_endless_line_after_commit_ends_the_stream_with_an_error() {
    run(HARD_LIMIT, async {
        let flood = RawProvider::start(|_| {
            let start = format!("{}{}data: ", openai_text("one"), openai_text(" two"));
            vec![Step::Write(SSE_HEAD.to_vec()), Step::Write(start.into_bytes()), Step::Flood(vec![b'x'; 16 * 1024])]
        })
        .await;
        let spare = spare().await;
        let proxy = Proxy::start(&config("max_event_bytes = 65536", &flood, &spare)).await;
        let got = post_chat(&proxy, &chat_body(true)).await;
        assert_eq!(got.streamed_text(), "one two", "the tokens before the flood arrived");
        let error = got.error_event().expect("an error event");
        assert_eq!(error["error"]["code"], "event_too_large", "{}", got.raw);
        assert!(!got.saw_done(), "a broken stream never ends with [DONE]");
        assert!(attempt_classes(&got.raw));
    });
}

#[test]
fn an_absurd_retry_after_neither_panics_nor_disables_the_provider_for_long() {
    run(HARD_LIMIT, async {
        let limited = RawProvider::start(|_| {
            let body = r#"{"error":{"message":"slow down"}}"#;
            vec![Step::Write(json_answer("429 Too Many Requests", "retry-after: 18446744073709551615\r\n", body))]
        })
        .await;
        let spare = spare().await;
        let path = support::config_file("retry-after", &config("max_cooldown_ms = 5000", &limited, &spare));
        let proxy = Proxy::start_from_file(&path).await;
        let got = post_chat(&proxy, &chat_body(true)).await;
        assert_eq!(got.status, 200, "the fallback answered instead of a dropped connection: {}", got.raw);
        assert_eq!(got.header("x-baton-provider"), "spare");
        let status = |proxy: &Proxy| {
            let url = proxy.url("/admin/status");
            async move { reqwest::get(url).await.unwrap().json::<serde_json::Value>().await.unwrap() }
        };
        let cooldown = status(&proxy).await["providers"][0]["cooldown_ms"].as_u64().expect("a cooldown is shown");
        assert!(cooldown <= 5000, "the cooldown is capped at max_cooldown_ms, got {cooldown} ms");
        let reloaded = reqwest::Client::new().post(proxy.url("/admin/reload")).send().await.unwrap();
        assert_eq!(reloaded.status(), 200);
        assert!(status(&proxy).await["providers"][0]["cooldown_ms"].is_null(), "a reload clears the cooldown");
    });
}

#[test]
fn token_counts_near_the_top_of_u64_saturate_instead_of_wrapping() {
    run(HARD_LIMIT, async {
        let huge = RawProvider::start(|_| {
            let usage = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":18446744073709551615,\"completion_tokens\":5,\"total_tokens\":4}}\n\n";
            vec![Step::Write(chunked_answer(&format!("{}{usage}{}", openai_text("hi"), openai_end())))]
        })
        .await;
        let spare = spare().await;
        let proxy = Proxy::start(&config("", &huge, &spare)).await;
        let got = post_chat(&proxy, &chat_body(false)).await;
        assert_eq!(got.status, 200, "{}", got.raw);
        assert_eq!(got.json()["usage"]["total_tokens"], u64::MAX, "saturated, not wrapped: {}", got.raw);
    });
}

#[test]
fn a_whole_answer_that_never_ends_fails_over_at_the_answer_cap() {
    run(HARD_LIMIT, async {
        let endless = RawProvider::start(|_| {
            vec![Step::Write(SSE_HEAD.to_vec()), Step::Flood(openai_text("endless words ").into_bytes())]
        })
        .await;
        let spare = spare().await;
        let proxy = Proxy::start(&config("max_answer_bytes = 100000", &endless, &spare)).await;
        let got = post_chat(&proxy, &chat_body(false)).await;
        assert_eq!(got.status, 200, "{}", got.raw);
        assert_eq!(got.header("x-baton-provider"), "spare", "the endless answer failed over");
        assert!(!got.raw.contains("endless"), "no word of it reached the client");
    });
}

#[test]
fn bytes_a_provider_sends_after_its_answer_never_become_the_next_answer() {
    run(HARD_LIMIT, async {
        // Only the first answer has a stray one behind it: once seen, the
        // provider's connections are not kept, though its later ones are clean.
        let stray = RawProvider::start(|n| {
            let answer = |word: &str| chunked_answer(&format!("{}{}", openai_text(word), openai_end()));
            let mut steps = vec![Step::Write(answer(&format!("answer{n}")))];
            if n == 0 {
                steps.extend([Step::Sleep(Duration::from_millis(20)), Step::Write(answer("stray"))]);
            }
            steps
        })
        .await;
        let spare = spare().await;
        let proxy = Proxy::start(&config("", &stray, &spare)).await;
        for round in 0..4 {
            let got = post_chat(&proxy, &chat_body(true)).await;
            assert_eq!(got.status, 200, "{}", got.raw);
            assert!(!got.raw.contains("stray"), "round {round}: another answer's bytes reached the client");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(stray.requests(), 4);
        assert_eq!(stray.connections(), 4, "after stray bytes, the provider's connections are not reused");
    });
}

#[test]
fn a_providers_words_never_reach_other_clients_and_its_echoed_key_never_anyone() {
    run(HARD_LIMIT, async {
        let status_with = |status: &'static str, message: &'static str| {
            move |_: usize| {
                let body = format!(r#"{{"error":{{"message":"{message}"}}}}"#);
                vec![Step::Write(json_answer(status, "", &body))]
            }
        };
        let echo =
            RawProvider::start(status_with("401 Unauthorized", "bad key sk-live-secret-4242 for user alice")).await;
        let broken =
            RawProvider::start(status_with("503 Service Unavailable", "db at 10.0.0.7 said: prompt was ...")).await;
        let route = ChatConfig::new().raw("echo", &echo).provider_keys("api_key = \"sk-live-secret-4242\"").model("m");
        let text = route.raw("broken", &broken).model("m").toml();
        let proxy = Proxy::start(&text).await;
        let got = post_chat(&proxy, &chat_body(true)).await;
        assert_eq!(got.status, 502, "{}", got.raw);
        for foreign in ["sk-live-secret", "alice", "10.0.0.7", "prompt was"] {
            assert!(!got.raw.contains(foreign), "{foreign:?} reached the client: {}", got.raw);
        }
        assert!(got.raw.contains("http_auth") && got.raw.contains("http 401"), "class and status stay: {}", got.raw);
        assert!(got.raw.contains("http_5xx") && got.raw.contains("http 503"), "{}", got.raw);

        let rejecting =
            RawProvider::start(status_with("400 Bad Request", "max_tokens too large for key sk-live-secret-4242"))
                .await;
        let text = text.replace(&echo.url, &rejecting.url);
        let proxy = Proxy::start(&text).await;
        let got = post_chat(&proxy, &chat_body(true)).await;
        assert_eq!(got.status, 400, "a rejected request is the client's own: {}", got.raw);
        assert!(got.raw.contains("max_tokens too large"), "its own error comes back: {}", got.raw);
        assert!(!got.raw.contains("sk-live-secret"), "but never the key: {}", got.raw);
    });
}
