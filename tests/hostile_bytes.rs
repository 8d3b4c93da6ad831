//! Hostile bytes at baton's HTTP edge, both ways, over loopback: heads that
//! declare bodies they never send hold no share of the body budget, a bare
//! LF in a chunk extension smuggles no request, a request a provider read
//! before it closed is never sent again, an HTTP/1.0 request framed by
//! chunks is refused, each bad or foreign host is refused, spaced-out
//! interim answers end the attempt, a provider's early answer is read while
//! the body is still being sent, and `100 Continue` is sent only to a body
//! that is wanted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::{Duration, Instant};

use baton::mock::MockProvider;
use support::raw::{RawProvider, Step, openai_end, openai_text};
use support::{ChatConfig, Proxy, Spawned, chat_body, post_chat, run};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

const HARD_LIMIT: Duration = Duration::from_secs(60);

/// A chat request's head declaring a `length`-byte JSON body, with `extra` header lines.
fn chat_head(length: usize, extra: &str) -> String {
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: baton\r\ncontent-type: application/json\r\ncontent-length: {length}\r\n{extra}\r\n"
    )
}

/// Reads from `socket` until `bytes` have come.
async fn read_exactly(socket: &mut TcpStream, bytes: usize) -> String {
    let mut got = vec![0u8; bytes];
    socket.read_exact(&mut got).await.expect("read");
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn eight_heads_declaring_32_mib_and_sending_nothing_lock_out_no_post() {
    run(HARD_LIMIT, async {
        // The default budgets: 32 MiB a body, 256 MiB for all bodies in flight.
        let provider = MockProvider::openai().marker("w").tokens(3).spawned().await;
        let proxy = Proxy::start(&ChatConfig::new().deadlines(5000, 5000).mock("p", &provider).toml()).await;
        let mut held = Vec::new();
        for _ in 0..8 {
            let mut socket = TcpStream::connect(proxy.addr).await.expect("connect");
            let head = chat_head(32 * 1024 * 1024, "expect: 100-continue\r\n");
            socket.write_all(head.as_bytes()).await.expect("write the head");
            // The invitation comes once the handler asks for the body: past every check.
            assert_eq!(read_exactly(&mut socket, 25).await, "HTTP/1.1 100 Continue\r\n\r\n");
            held.push(socket);
        }
        let started = Instant::now();
        let answer = post_chat(&proxy, &chat_body(false)).await;
        assert_eq!(answer.status, 200, "a small POST is served beside eight held heads: {}", answer.raw);
        assert!(started.elapsed() < Duration::from_secs(5), "answered in {:?}", started.elapsed());
        drop(held);
    });
}

#[test]
fn a_bare_lf_in_a_chunk_extension_smuggles_no_request() {
    run(HARD_LIMIT, async {
        let provider = MockProvider::openai().spawned().await;
        let proxy = Proxy::start(&ChatConfig::new().mock("p", &provider).toml()).await;
        let wire = "POST /v1/chat/completions HTTP/1.1\r\nhost: baton\r\ncontent-type: application/json\r\n\
                    transfer-encoding: chunked\r\n\r\n2;\nZZ\r\n28\r\n0\r\n\r\nGET /SMUGGLED HTTP/1.1\r\nhost: baton\r\n\r\n";
        let answer = proxy.exchange(wire.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{answer}");
        assert!(answer.contains("bare LF"), "says what was wrong: {answer}");
        assert_eq!(answer.matches("HTTP/1.1 ").count(), 1, "one answer, none to a hidden request: {answer}");
        assert!(provider.requests().is_empty());
    });
}

#[test]
fn a_request_the_provider_read_before_it_closed_reaches_it_exactly_once() {
    run(HARD_LIMIT, async {
        // The first request is answered on a kept connection; the second is
        // read whole there, and then the provider closes without a word.
        let chunked = support::raw::chunked_answer(&(openai_text("one") + &openai_end()));
        let raw = RawProvider::start(move |n| match n {
            0 => vec![Step::Write(chunked.clone())],
            _ => vec![Step::Close],
        })
        .await;
        let config = ChatConfig::new().deadlines(5000, 5000).raw("p", &raw).toml();
        let proxy = Proxy::start(&config).await;
        assert_eq!(post_chat(&proxy, &chat_body(false)).await.status, 200, "the first request is answered");
        let second = post_chat(&proxy, &chat_body(false)).await;
        assert_eq!(second.status, 502, "{}", second.raw);
        assert!(second.raw.contains("no_response"), "classed as no response, not connect: {}", second.raw);
        assert_eq!(raw.requests(), 2, "each request reached the provider exactly once");
        assert_eq!(raw.connections(), 1, "no new connection carried it again");
    });
}

#[test]
fn an_http_1_0_request_framed_by_chunks_is_refused_and_closed() {
    run(HARD_LIMIT, async {
        let provider = MockProvider::openai().spawned().await;
        let proxy = Proxy::start(&ChatConfig::new().mock("p", &provider).toml()).await;
        let body = chat_body(false).to_string();
        let wire = format!(
            "POST /v1/chat/completions HTTP/1.0\r\ncontent-type: application/json\r\nconnection: keep-alive\r\n\
             transfer-encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\nGET /healthz HTTP/1.1\r\nhost: baton\r\n\r\n",
            body.len()
        );
        let answer = proxy.exchange(wire.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{answer}");
        assert!(answer.contains("HTTP/1.0"), "says why: {answer}");
        assert_eq!(answer.matches("HTTP/1.1 ").count(), 1, "the next request is not answered: {answer}");
        assert!(provider.requests().is_empty());
    });
}

#[test]
fn no_host_two_hosts_a_bad_host_and_a_foreign_absolute_target_are_refused() {
    run(HARD_LIMIT, async {
        let provider = MockProvider::openai().spawned().await;
        let proxy =
            Proxy::start(&ChatConfig::new().top("allowed_hosts = [\"localhost\"]").mock("p", &provider).toml()).await;
        let served =
            proxy.exchange(b"GET /v1/models HTTP/1.1\r\nhost: localhost:8080\r\nconnection: close\r\n\r\n").await;
        assert!(served.starts_with("HTTP/1.1 200 OK\r\n"), "an allowed host is served: {served}");
        for (wire, status) in [
            ("GET /v1/models HTTP/1.1\r\n\r\n", "400"),
            ("GET /v1/models HTTP/1.1\r\nhost: localhost\r\nhost: evil.example\r\n\r\n", "400"),
            ("GET /v1/models HTTP/1.1\r\nhost: a b@c/d\r\n\r\n", "400"),
            ("GET http://evil.example/v1/models HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n", "403"),
        ] {
            let answer = proxy.exchange(wire.as_bytes()).await;
            assert!(answer.starts_with(&format!("HTTP/1.1 {status} ")), "{wire:?}: {answer}");
        }
    });
}

#[test]
fn interim_answers_spaced_out_end_the_attempt_long_before_the_deadline() {
    run(HARD_LIMIT, async {
        // Thirty `100 Continue` heads 30 ms apart, then silence.
        let mut steps = Vec::new();
        for _ in 0..30 {
            steps.push(Step::Write(b"HTTP/1.1 100 Continue\r\n\r\n".to_vec()));
            steps.push(Step::Sleep(Duration::from_millis(30)));
        }
        let raw = RawProvider::start(move |_| steps.clone()).await;
        let steady = MockProvider::openai().marker("steady").tokens(2).spawned().await;
        let config = ChatConfig::new().deadlines(30_000, 30_000).raw("interim", &raw).mock("steady", &steady).toml();
        let proxy = Proxy::start(&config).await;
        let started = Instant::now();
        let answer = post_chat(&proxy, &chat_body(false)).await;
        assert_eq!(answer.status, 200, "{}", answer.raw);
        assert!(answer.raw.contains("steady0"), "the next target answered: {}", answer.raw);
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(10),
            "failed over at the ninth interim head, not the 30 s deadline: {took:?}"
        );
    });
}

#[test]
fn provider_requests_ask_for_no_content_coding() {
    run(HARD_LIMIT, async {
        let provider = MockProvider::openai().spawned().await;
        let proxy = Proxy::start(&ChatConfig::new().mock("p", &provider).toml()).await;
        assert_eq!(post_chat(&proxy, &chat_body(false)).await.status, 200);
        let seen = provider.requests();
        let coding = seen.first().and_then(|request| request.headers.get("accept-encoding").cloned());
        assert_eq!(coding.as_deref(), Some("identity"), "a compressed answer would read as garbage");
    });
}

#[test]
fn a_providers_early_answer_is_read_while_the_body_is_still_being_sent() {
    run(HARD_LIMIT, async {
        // A provider that reads the head only, answers 413 at once, and never
        // reads the 8 MiB body, with a receive buffer too small to take it.
        let socket = TcpSocket::new_v4().expect("socket");
        socket.set_recv_buffer_size(4096).expect("a small receive buffer");
        socket.bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
        let listener: TcpListener = socket.listen(8).expect("listen");
        let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") && socket.read(&mut byte).await.is_ok_and(|n| n == 1) {
                        head.push(byte[0]);
                    }
                    let body = r#"{"error":{"message":"request too large","type":"invalid_request_error"}}"#;
                    let answer = format!(
                        "HTTP/1.1 413 Payload Too Large\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = socket.write_all(answer.as_bytes()).await;
                    tokio::time::sleep(Duration::from_secs(50)).await;
                });
            }
        });
        let config = ChatConfig::new()
            .top("max_body_bytes = 67108864")
            .deadlines(40_000, 40_000)
            .provider("early", baton::providers::ProviderKind::OpenAi, &url)
            .toml();
        let proxy = Proxy::start(&config).await;
        let mut body = chat_body(false);
        body["messages"][0]["content"] = serde_json::json!("a".repeat(8 * 1024 * 1024));
        let started = Instant::now();
        let answer = post_chat(&proxy, &body).await;
        let took = started.elapsed();
        assert_eq!(
            answer.status,
            413,
            "the provider's answer, passed on: {}",
            &answer.raw[..answer.raw.len().min(300)]
        );
        assert!(took < Duration::from_secs(20), "read while the body was being sent, not at the deadline: {took:?}");
    });
}

#[test]
fn continue_is_not_sent_to_a_body_refused_from_the_head_alone() {
    run(HARD_LIMIT, async {
        let provider = MockProvider::openai().spawned().await;
        let proxy = Proxy::start(&ChatConfig::new().top("max_body_bytes = 1024").mock("p", &provider).toml()).await;
        let too_large = chat_head(4096, "expect: 100-continue\r\n");
        let wrong_type = chat_head(20, "expect: 100-continue\r\n").replace("application/json", "text/plain");
        for (head, status) in [(too_large, "413"), (wrong_type, "415")] {
            let answer = proxy.exchange(head.as_bytes()).await;
            assert!(answer.starts_with(&format!("HTTP/1.1 {status} ")), "the final answer at once: {answer}");
            assert!(!answer.contains("100 Continue"), "no body was invited: {answer}");
        }
    });
}
