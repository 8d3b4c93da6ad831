//! The `baton` process as operators run it: JSON logs with the fields
//! docs/operating.md lists and no secrets, a drain on SIGTERM that never cuts a
//! stream silently, and a reload on SIGHUP.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use baton::mock::{Fault, MockHandle, MockProvider};
use serde_json::Value;
use support::{Baton, ChatConfig, Spawned, chat_body, eventually, first_chunk, open_chat, post_chat, run, within};

const HARD_LIMIT: Duration = Duration::from_secs(30);
const SECRET: &str = "sk-live-very-secret-0123456789";
const PROMPT: &str = "my confidential prompt about project nightingale";

/// `baton --log-format json serve --config path`, with the providers' key in
/// its environment, started and serving.
async fn start(path: &Path) -> Baton {
    Baton::serve(path).json_logs().env("TEST_PROVIDER_KEY", SECRET).start().await
}

/// The listen and key lines every config here starts with, and `extra_top`.
fn listening(extra_top: &str) -> ChatConfig {
    ChatConfig::new().top("listen = \"127.0.0.1:0\"").top(extra_top)
}

const KEY_FROM_ENV: &str = "api_key = \"${TEST_PROVIDER_KEY}\"";

fn single_route(mock: &MockHandle, extra_top: &str) -> String {
    listening(extra_top).mock("sim", mock).provider_keys(KEY_FROM_ENV).toml()
}

/// What is left of a streamed answer, read to its end or to a failed read.
async fn rest_of(response: &mut reqwest::Response) -> String {
    let mut rest = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        rest.extend_from_slice(&chunk);
    }
    String::from_utf8(rest).expect("utf-8")
}

/// Two log lines a request, about 450 bytes together: 400 requests write
/// nearly three times what a pipe holds (64 KiB), far less than the log
/// queue holds. A worker that wrote to stderr itself stopped at the 152nd.
const REQUESTS_PAST_A_FULL_PIPE: usize = 400;

#[test]
fn a_stderr_nobody_reads_does_not_stall_the_streams() {
    run(Duration::from_secs(120), async {
        let mock = MockProvider::openai().marker("tok").tokens(3).spawned().await;
        let path = support::config_file("lifecycle-unread-logs", &single_route(&mock, ""));
        let baton = Baton::serve(&path).env("TEST_PROVIDER_KEY", SECRET).unread_logs().start().await;
        let client = reqwest::Client::new();
        let body = chat_body(true);
        for sent in 0..REQUESTS_PAST_A_FULL_PIPE {
            let answer = within(Duration::from_secs(10), async {
                let response = client.post(baton.url("/v1/chat/completions")).json(&body).send().await.expect("answer");
                response.text().await.expect("body")
            })
            .await;
            assert!(answer.ends_with("data: [DONE]\n\n"), "request {sent} was answered whole: {answer}");
        }
        assert_eq!(mock.requests().len(), REQUESTS_PAST_A_FULL_PIPE);
    });
}

#[test]
fn an_all_failed_request_s_log_line_counts_its_attempts() {
    run(HARD_LIMIT, async {
        let first = MockProvider::anthropic().fault(Fault::Http5xx).spawned().await;
        let second = MockProvider::openai().fault(Fault::Http5xx).spawned().await;
        let config = listening("").mock("first", &first).mock("second", &second);
        let baton = start(&support::config_file("lifecycle-all-failed", &config.toml())).await;
        let got = post_chat(&baton, &chat_body(false)).await;
        assert_eq!(got.status, 502, "{}", got.raw);
        let id = got.header("x-request-id");
        let request_line = || {
            baton
                .log_lines()
                .iter()
                .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                .find(|line| line["message"] == "request" && line["request_id"] == *id)
        };
        eventually(Duration::from_secs(2), || async { request_line().is_some() }).await;
        let request_line = request_line().expect("one request line");
        assert_eq!(request_line["outcome"], "all_failed", "{request_line}");
        assert_eq!(request_line["attempt"], 2, "both attempts were sent: {request_line}");
        assert_eq!(request_line["fallback_count"], 1, "{request_line}");
    });
}

#[test]
fn json_logs_carry_the_fields_and_never_the_secrets() {
    run(HARD_LIMIT, async {
        let flaky = MockProvider::anthropic().api_key(SECRET).fault(Fault::Http5xx).spawned().await;
        let good = MockProvider::openai().api_key(SECRET).spawned().await;
        let config = listening("")
            .mock("flaky", &flaky)
            .provider_keys(KEY_FROM_ENV)
            .model("f")
            .mock("good", &good)
            .provider_keys(KEY_FROM_ENV)
            .model("g");
        let baton = start(&support::config_file("lifecycle-logs", &config.toml())).await;
        let body =
            serde_json::json!({ "model": "chat", "stream": true, "messages": [{ "role": "user", "content": PROMPT }] });
        let response = reqwest::Client::new()
            .post(baton.url("/v1/chat/completions"))
            .header("x-request-id", "req-from-client-42")
            .json(&body)
            .send()
            .await
            .expect("answer");
        assert_eq!(response.headers()["x-request-id"], "req-from-client-42", "the request id is echoed");
        assert!(response.text().await.expect("body").ends_with("data: [DONE]\n\n"));
        let other = post_chat(&baton, &chat_body(false)).await;
        let generated = other.header("x-request-id");
        assert!(!generated.is_empty(), "a request without an id gets one");

        let request_line = || {
            baton
                .log_lines()
                .iter()
                .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                .find(|line| line["message"] == "request" && line["request_id"] == "req-from-client-42")
        };
        eventually(Duration::from_secs(2), || async { request_line().is_some() }).await;
        let request_line = request_line().expect("one request line");
        for (field, value) in [("route", "chat"), ("provider", "good"), ("model", "g"), ("outcome", "ok")] {
            assert_eq!(request_line[field], value, "request line field {field}: {request_line}");
        }
        assert_eq!(request_line["attempt"], 2);
        assert_eq!(request_line["fallback_count"], 1);
        assert_eq!(request_line["output_tokens"], 8);
        assert_eq!(request_line["input_tokens"], 10);
        assert!(request_line["ttft_ms"].is_u64() && request_line["latency_ms"].is_u64(), "{request_line}");

        let lines = baton.log_lines();
        let attempts: Vec<Value> = lines
            .iter()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|line| line["message"] == "attempt" && line["request_id"] == "req-from-client-42")
            .collect();
        assert_eq!(attempts.len(), 2, "one line per attempt");
        assert_eq!(attempts[0]["provider"], "flaky");
        assert_eq!(attempts[0]["failure_class"], "http_5xx");
        assert_eq!(attempts[1]["outcome"], "committed");
        assert!(attempts[1]["ttft_ms"].is_u64());
        for line in &lines {
            assert!(serde_json::from_str::<Value>(line).is_ok(), "every line is JSON: {line}");
            assert!(!line.contains(SECRET), "a log line carries the API key: {line}");
            assert!(!line.contains("nightingale"), "a log line carries the prompt: {line}");
        }
    });
}

#[test]
fn sigterm_lets_streams_finish_within_the_grace_and_ends_the_rest_with_an_error() {
    run(HARD_LIMIT, async {
        let long = MockProvider::openai().marker("long").tokens(200).gap(Duration::from_millis(20)).spawned().await;
        let baton =
            start(&support::config_file("lifecycle-drain", &single_route(&long, "shutdown_grace_ms = 600"))).await;
        let mut response = open_chat(&baton, &chat_body(true)).await;
        assert_eq!(response.status(), 200);
        first_chunk(&mut response).await;
        let signalled = Instant::now();
        baton.signal("TERM");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            reqwest::Client::new().get(baton.url("/healthz")).send().await.is_err(),
            "no new connections once shutting down"
        );
        let rest = rest_of(&mut response).await;
        let ended = signalled.elapsed();
        assert!(rest.contains("long5"), "the stream went on during the grace period");
        assert!(rest.contains("\"code\":\"shutting_down\""), "the cut stream ends with an error event: {rest}");
        assert!(!rest.contains("[DONE]"), "no [DONE] on a cut stream");
        assert!(ended >= Duration::from_millis(550) && ended < Duration::from_secs(5), "ended after {ended:?}");
        let status = baton.exit_within(Duration::from_secs(5)).await;
        assert!(status.success(), "a clean exit: {status}");
    });
}

/// A stream whose provider has gone quiet is ended at the grace's end too:
/// nothing but the drain itself wakes it.
#[test]
fn sigterm_ends_a_stream_waiting_on_a_silent_provider_at_the_grace() {
    run(HARD_LIMIT, async {
        let silent = MockProvider::openai().marker("quiet").tokens(3).gap(Duration::from_secs(20)).spawned().await;
        let baton =
            start(&support::config_file("lifecycle-drain-silent", &single_route(&silent, "shutdown_grace_ms = 300")))
                .await;
        let mut response = open_chat(&baton, &chat_body(true)).await;
        assert_eq!(response.status(), 200);
        first_chunk(&mut response).await;
        let signalled = Instant::now();
        baton.signal("TERM");
        let rest = rest_of(&mut response).await;
        let ended = signalled.elapsed();
        assert!(rest.contains("\"code\":\"shutting_down\""), "the silent stream ends with an error event: {rest}");
        assert!(ended >= Duration::from_millis(250) && ended < Duration::from_secs(5), "ended after {ended:?}");
        let status = baton.exit_within(Duration::from_secs(5)).await;
        assert!(status.success(), "a clean exit: {status}");
    });
}

#[test]
fn a_stream_that_ends_within_the_grace_completes() {
    run(HARD_LIMIT, async {
        let short = MockProvider::gemini().marker("short").tokens(10).gap(Duration::from_millis(30)).spawned().await;
        let grace = single_route(&short, "shutdown_grace_ms = 5000");
        let baton = start(&support::config_file("lifecycle-grace", &grace)).await;
        let response = open_chat(&baton, &chat_body(true)).await;
        baton.signal("TERM");
        let text = response.text().await.expect("body");
        assert!(text.contains("short9") && text.ends_with("data: [DONE]\n\n"), "{text}");
        let status = baton.exit_within(Duration::from_secs(5)).await;
        assert!(status.success());
    });
}

#[test]
fn sighup_reloads_a_good_config_and_keeps_the_old_one_over_a_bad_one() {
    run(HARD_LIMIT, async {
        let sim = MockProvider::openai().spawned().await;
        let path = support::config_file("lifecycle-hup", &single_route(&sim, ""));
        let baton = start(&path).await;
        let models = || async {
            let list: Value = reqwest::get(baton.url("/v1/models")).await.expect("models").json().await.expect("json");
            list["data"]
                .as_array()
                .expect("data")
                .iter()
                .filter_map(|m| m["id"].as_str().map(str::to_owned))
                .collect::<Vec<_>>()
        };
        assert_eq!(models().await, ["chat"]);
        let grown = format!(
            "{}\n[[routes]]\nmodel = \"chat2\"\ntargets = [{{ provider = \"sim\", model = \"other\" }}]\n",
            single_route(&sim, "")
        );
        std::fs::write(&path, grown).expect("write");
        baton.signal("HUP");
        eventually(Duration::from_secs(2), || async { models().await.len() == 2 }).await;
        assert_eq!(models().await, ["chat", "chat2"], "SIGHUP applied the new config");

        std::fs::write(&path, "this is = = not toml").expect("write");
        baton.signal("HUP");
        let refused = eventually(Duration::from_secs(2), || async {
            baton.log_lines().iter().any(|line| line.contains("config reload refused"))
        })
        .await;
        assert!(refused, "the bad config was logged");
        assert_eq!(models().await, ["chat", "chat2"], "the running config stays");
    });
}

/// A thread per core, each with its own runtime accepting from the one
/// listener: streams over many connections are all answered whole, and a
/// stop ends every thread and closes the listener.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_threads_share_one_listener_and_stop_together() {
    within(HARD_LIMIT, async {
        let mock = MockProvider::openai().marker("tok").tokens(20).spawned().await;
        let key = |name: &str| (name == "TEST_PROVIDER_KEY").then(|| "key".to_owned());
        let config = baton::config::parse(&single_route(&mock, ""), "test.toml", &key).expect("config");
        let state = support::over_http(config).build();
        let listener = baton::http::server::bind("127.0.0.1:0".parse().unwrap()).expect("bind");
        let addr = listener.local_addr().unwrap();
        let listener = listener.into_std().unwrap();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let serving = tokio::task::spawn_blocking(move || baton::serve_threads(listener, state, 3, stopped));

        let streams = (0..12).map(|_| async move {
            // A client per stream: a connection per stream, spread over the threads.
            let got = post_chat(&addr, &chat_body(true)).await;
            assert_eq!(got.status, 200);
            got.raw
        });
        for body in futures_util::future::join_all(streams).await {
            assert!(body.trim_end().ends_with("data: [DONE]"), "a whole answer: {body}");
            assert_eq!(body.matches("tok").count(), 20, "every token once: {body}");
        }
        assert_eq!(mock.requests().len(), 12);

        stop.send(true).unwrap();
        serving.await.expect("the threads ended").expect("served without error");
        let refused = tokio::net::TcpStream::connect(addr).await;
        assert!(refused.is_err(), "no thread listens after the stop");
    })
    .await;
}
