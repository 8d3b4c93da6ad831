//! The `baton` process as operators run it: JSON logs with the DESIGN.md §4
//! fields and no secrets, a drain on SIGTERM that never cuts a stream
//! silently, and a reload on SIGHUP.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use baton::mock::MockProvider;
use futures_util::StreamExt;
use serde_json::Value;
use support::{chat_body, provider_toml, within};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const HARD_LIMIT: Duration = Duration::from_secs(30);
const BATON: &str = env!("CARGO_BIN_EXE_baton");
const SECRET: &str = "sk-live-very-secret-0123456789";
const PROMPT: &str = "my confidential prompt about project nightingale";

struct Baton {
    child: Child,
    addr: SocketAddr,
    logs: Arc<Mutex<Vec<String>>>,
}

impl Baton {
    /// Starts `baton --log-format json serve --config path` and waits until it serves.
    async fn start(path: &PathBuf) -> Baton {
        let mut child = Command::new(BATON)
            .args(["--log-format", "json", "serve", "--config"])
            .arg(path)
            .env("RUST_LOG", "info")
            .env("TEST_PROVIDER_KEY", SECRET)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("baton starts");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let logs = Arc::new(Mutex::new(Vec::new()));
        let addr = loop {
            let line = lines.next_line().await.expect("read").expect("baton exited before serving");
            logs.lock().unwrap().push(line.clone());
            let parsed: Value = serde_json::from_str(&line).unwrap_or_else(|_| panic!("a JSON log line: {line}"));
            if parsed["message"] == "baton is serving" {
                break parsed["listen"].as_str().expect("listen").parse().expect("an address");
            }
        };
        let sink = Arc::clone(&logs);
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                sink.lock().unwrap().push(line);
            }
        });
        Baton { child, addr, logs }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn signal(&self, name: &str) {
        let pid = self.child.id().expect("running").to_string();
        let status = std::process::Command::new("kill").args([format!("-{name}"), pid]).status().expect("kill runs");
        assert!(status.success());
    }

    fn log_lines(&self) -> Vec<String> {
        self.logs.lock().unwrap().clone()
    }
}

fn single_route(mock: &baton::mock::MockHandle, extra_top: &str) -> String {
    format!(
        "listen = \"127.0.0.1:0\"\n{extra_top}\n{}\napi_key = \"${{TEST_PROVIDER_KEY}}\"\n\n[[routes]]\nmodel = \"chat\"\ntargets = [{{ provider = \"sim\", model = \"sim-model\" }}]\n",
        provider_toml("sim", mock.provider_kind(), &mock.base_url()).trim_end()
    )
}

#[tokio::test]
async fn json_logs_carry_the_fields_and_never_the_secrets() {
    within(HARD_LIMIT, async {
        let flaky = MockProvider::anthropic().api_key(SECRET).fault(baton::mock::Fault::Http5xx).spawn().await.expect("mock");
        let good = MockProvider::openai().api_key(SECRET).spawn().await.expect("mock");
        let config = format!(
            "listen = \"127.0.0.1:0\"\n{}\napi_key = \"${{TEST_PROVIDER_KEY}}\"\n\n{}\napi_key = \"${{TEST_PROVIDER_KEY}}\"\n\n[[routes]]\nmodel = \"chat\"\ntargets = [{{ provider = \"flaky\", model = \"f\" }}, {{ provider = \"good\", model = \"g\" }}]\n",
            provider_toml("flaky", flaky.provider_kind(), &flaky.base_url()).trim_end(),
            provider_toml("good", good.provider_kind(), &good.base_url()).trim_end(),
        );
        let baton = Baton::start(&support::config_file("lifecycle-logs", &config)).await;
        let body = serde_json::json!({ "model": "chat", "stream": true, "messages": [{ "role": "user", "content": PROMPT }] });
        let response = reqwest::Client::new()
            .post(baton.url("/v1/chat/completions"))
            .header("x-request-id", "req-from-client-42")
            .json(&body)
            .send()
            .await
            .expect("answer");
        assert_eq!(response.headers()["x-request-id"], "req-from-client-42", "the request id is echoed");
        assert!(response.text().await.expect("body").ends_with("data: [DONE]\n\n"));
        let other = reqwest::Client::new().post(baton.url("/v1/chat/completions")).json(&chat_body(false)).send().await.expect("answer");
        let generated = other.headers()["x-request-id"].to_str().expect("text").to_owned();
        assert!(!generated.is_empty(), "a request without an id gets one");

        let mut request_line = None;
        for _ in 0..100 {
            request_line = baton
                .log_lines()
                .iter()
                .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                .find(|line| line["message"] == "request" && line["request_id"] == "req-from-client-42");
            if request_line.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let request_line = request_line.expect("one request line");
        for (field, value) in [
            ("route", "chat"),
            ("provider", "good"),
            ("model", "g"),
            ("outcome", "ok"),
        ] {
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
    })
    .await;
}

#[tokio::test]
async fn sigterm_lets_streams_finish_within_the_grace_and_ends_the_rest_with_an_error() {
    within(HARD_LIMIT, async {
        let long = MockProvider::openai()
            .marker("long")
            .tokens(200)
            .gap(Duration::from_millis(20))
            .spawn()
            .await
            .expect("mock");
        let baton =
            Baton::start(&support::config_file("lifecycle-drain", &single_route(&long, "shutdown_grace_ms = 600")))
                .await;
        let client = reqwest::Client::new();
        let response =
            client.post(baton.url("/v1/chat/completions")).json(&chat_body(true)).send().await.expect("answer");
        assert_eq!(response.status(), 200);
        let mut body = response.bytes_stream();
        body.next().await.expect("a first chunk").expect("readable");
        let signalled = Instant::now();
        baton.signal("TERM");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            reqwest::Client::new().get(baton.url("/healthz")).send().await.is_err(),
            "no new connections once shutting down"
        );
        let mut rest = Vec::new();
        while let Some(Ok(chunk)) = body.next().await {
            rest.extend_from_slice(&chunk);
        }
        let rest = String::from_utf8(rest).expect("utf-8");
        let ended = signalled.elapsed();
        assert!(rest.contains("long5"), "the stream went on during the grace period");
        assert!(rest.contains("\"code\":\"shutting_down\""), "the cut stream ends with an error event: {rest}");
        assert!(!rest.contains("[DONE]"), "no [DONE] on a cut stream");
        assert!(ended >= Duration::from_millis(550) && ended < Duration::from_secs(5), "ended after {ended:?}");
        let mut child = baton.child;
        let status =
            tokio::time::timeout(Duration::from_secs(5), child.wait()).await.expect("baton exits").expect("status");
        assert!(status.success(), "a clean exit: {status}");
    })
    .await;
}

#[tokio::test]
async fn a_stream_that_ends_within_the_grace_completes() {
    within(HARD_LIMIT, async {
        let short = MockProvider::gemini()
            .marker("short")
            .tokens(10)
            .gap(Duration::from_millis(30))
            .spawn()
            .await
            .expect("mock");
        let baton =
            Baton::start(&support::config_file("lifecycle-grace", &single_route(&short, "shutdown_grace_ms = 5000")))
                .await;
        let response = reqwest::Client::new()
            .post(baton.url("/v1/chat/completions"))
            .json(&chat_body(true))
            .send()
            .await
            .expect("answer");
        baton.signal("TERM");
        let text = response.text().await.expect("body");
        assert!(text.contains("short9") && text.ends_with("data: [DONE]\n\n"), "{text}");
        let mut child = baton.child;
        let status =
            tokio::time::timeout(Duration::from_secs(5), child.wait()).await.expect("baton exits").expect("status");
        assert!(status.success());
    })
    .await;
}

#[tokio::test]
async fn sighup_reloads_a_good_config_and_keeps_the_old_one_over_a_bad_one() {
    within(HARD_LIMIT, async {
        let sim = MockProvider::openai().spawn().await.expect("mock");
        let path = support::config_file("lifecycle-hup", &single_route(&sim, ""));
        let baton = Baton::start(&path).await;
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
        let mut seen = Vec::new();
        for _ in 0..100 {
            seen = models().await;
            if seen.len() == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(seen, ["chat", "chat2"], "SIGHUP applied the new config");

        std::fs::write(&path, "this is = = not toml").expect("write");
        baton.signal("HUP");
        let mut refused = false;
        for _ in 0..100 {
            refused = baton.log_lines().iter().any(|line| line.contains("config reload refused"));
            if refused {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(refused, "the bad config was logged");
        assert_eq!(models().await, ["chat", "chat2"], "the running config stays");
    })
    .await;
}

/// A thread per core, each with its own runtime accepting from the one
/// listener: streams over many connections are all answered whole, and a
/// stop ends every thread and closes the listener.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_threads_share_one_listener_and_stop_together() {
    within(HARD_LIMIT, async {
        let mock = MockProvider::openai().marker("tok").tokens(20).spawn().await.expect("mock");
        let config =
            baton::config::parse(&single_route(&mock, ""), "test.toml", &|_| Some("key".to_owned())).expect("config");
        let state = baton::AppState::new(config).expect("state");
        let listener = baton::http::server::bind("127.0.0.1:0".parse().unwrap()).expect("bind");
        let addr = listener.local_addr().unwrap();
        let listener = listener.into_std().unwrap();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let serving = tokio::task::spawn_blocking(move || baton::serve_threads(listener, state, 3, stopped));

        let streams = (0..12).map(|_| async move {
            // A client per stream: a connection per stream, spread over the threads.
            let response = reqwest::Client::new()
                .post(format!("http://{addr}/v1/chat/completions"))
                .json(&chat_body(true))
                .send()
                .await
                .expect("answer");
            assert_eq!(response.status(), 200);
            response.text().await.expect("body")
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
