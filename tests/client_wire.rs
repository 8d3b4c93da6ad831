//! The HTTP/1.1 that clients speak to baton, on the wire: requests one
//! after another and pipelined on one connection, chunked request bodies,
//! `Expect: 100-continue`, HTTP/1.0 clients, and the framing a request
//! could be smuggled through, each refused with an answer that says why.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::mock::{MockHandle, MockProvider};
use support::{ChatConfig, Proxy, Spawned, chat_body, run};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const HARD_LIMIT: Duration = Duration::from_secs(30);

/// A proxy in front of one healthy provider writing 3 tokens, which lives
/// as long as the proxy is used.
async fn proxy() -> (Proxy, MockHandle) {
    let provider = MockProvider::openai().marker("w").tokens(3).spawned().await;
    let config = ChatConfig::new().deadlines(5000, 5000).mock("p", &provider).toml();
    (Proxy::start(&config).await, provider)
}

/// A chat request's head with `framing` (a content-length or
/// transfer-encoding line) and any `extra` header lines.
fn chat_head(framing: &str, extra: &str) -> String {
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: baton\r\ncontent-type: application/json\r\n{framing}\r\n{extra}\r\n"
    )
}

/// `body` as chunks of `size` bytes, ended by the last chunk.
fn chunked(body: &str, size: usize) -> String {
    let mut wire = String::new();
    for piece in body.as_bytes().chunks(size) {
        wire.push_str(&format!("{:x}\r\n{}\r\n", piece.len(), String::from_utf8_lossy(piece)));
    }
    wire + "0\r\n\r\n"
}

#[test]
fn pipelined_requests_are_answered_in_order_on_one_connection() {
    run(HARD_LIMIT, async {
        let (proxy, _provider) = proxy().await;
        let body = chat_body(false).to_string();
        let streamed = chat_body(true).to_string();
        let wire = format!(
            "GET /healthz HTTP/1.1\r\nhost: baton\r\n\r\n{}{body}{}{streamed}GET /healthz HTTP/1.1\r\nhost: baton\r\nconnection: close\r\n\r\n",
            chat_head(&format!("content-length: {}", body.len()), ""),
            chat_head(&format!("content-length: {}", streamed.len()), ""),
        );
        let answer = proxy.exchange(wire.as_bytes()).await;
        assert_eq!(answer.matches("HTTP/1.1 200 OK\r\n").count(), 4, "{answer}");
        let healthz = answer.find("\r\n\r\nok").expect("the first answer");
        let whole = answer.find("\"object\":\"chat.completion\"").expect("the whole answer");
        let stream = answer.find("data: [DONE]").expect("the streamed answer, ended");
        let last = answer.rfind("\r\n\r\nok").expect("the last answer");
        assert!(healthz < whole && whole < stream && stream < last, "answers in the order asked: {answer}");
        assert!(answer.contains("transfer-encoding: chunked\r\n"), "the stream is chunked: {answer}");
        assert!(answer.contains("\r\n0\r\n\r\n"), "the chunks end before the next answer: {answer}");
        assert!(answer.ends_with("connection: close\r\n\r\nok") || answer.ends_with("\r\n\r\nok"), "{answer}");
    });
}

#[test]
fn a_chunked_request_body_is_read_whatever_its_chunks() {
    run(HARD_LIMIT, async {
        let (proxy, provider) = proxy().await;
        let body = chat_body(false).to_string();
        for size in [1, 7, 4096] {
            let wire = chat_head("transfer-encoding: chunked", "connection: close\r\n") + &chunked(&body, size);
            let answer = proxy.exchange(wire.as_bytes()).await;
            assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "chunks of {size}: {answer}");
            assert!(answer.contains("w0 w1 w2"), "chunks of {size}: the provider's answer: {answer}");
        }
        assert_eq!(provider.requests().len(), 3, "each request reached the provider whole");
    });
}

#[test]
fn a_client_that_expects_100_continue_hears_it_before_sending_the_body() {
    run(HARD_LIMIT, async {
        let (proxy, _provider) = proxy().await;
        let body = chat_body(false).to_string();
        let head =
            chat_head(&format!("content-length: {}", body.len()), "expect: 100-continue\r\nconnection: close\r\n");
        let mut socket = TcpStream::connect(proxy.addr).await.expect("connect");
        socket.write_all(head.as_bytes()).await.expect("write the head");
        let mut interim = [0u8; 25];
        socket.read_exact(&mut interim).await.expect("the interim answer, before any body was sent");
        assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
        socket.write_all(body.as_bytes()).await.expect("write the body");
        let mut answer = String::new();
        socket.read_to_string(&mut answer).await.expect("read");
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n") && answer.contains("w0 w1 w2"), "{answer}");
    });
}

#[test]
fn an_http_1_0_client_gets_a_stream_that_ends_at_the_close() {
    run(HARD_LIMIT, async {
        let (proxy, _provider) = proxy().await;
        let body = chat_body(true).to_string();
        let head = format!(
            "POST /v1/chat/completions HTTP/1.0\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        let answer = proxy.exchange(format!("{head}{body}").as_bytes()).await;
        let (head, events) = answer.split_once("\r\n\r\n").expect("a head");
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n") && head.contains("connection: close"), "{head}");
        assert!(!head.contains("transfer-encoding"), "HTTP/1.0 knows no chunks: {head}");
        assert!(events.starts_with("data: {") && events.ends_with("data: [DONE]\n\n"), "{events}");
    });
}

#[test]
fn framing_that_could_smuggle_a_request_is_refused_saying_why() {
    run(HARD_LIMIT, async {
        let (proxy, provider) = proxy().await;
        let body = chat_body(false).to_string();
        let cases = [
            (chat_head(&format!("transfer-encoding: chunked\r\ncontent-length: {}", body.len()), ""), "both"),
            (chat_head("transfer-encoding: gzip", ""), "transfer-encoding"),
            (chat_head("content-length: 12, 13", ""), "content-length"),
            (chat_head("content-length: -1", ""), "content-length"),
        ];
        for (head, says) in cases {
            let answer = proxy.exchange(format!("{head}{body}").as_bytes()).await;
            assert!(answer.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}: {answer}");
            assert!(answer.contains("connection: close"), "{head}: {answer}");
            let (_, json) = answer.split_once("\r\n\r\n").expect("a body");
            let error: serde_json::Value = serde_json::from_str(json).expect("a JSON error");
            assert_eq!(error["error"]["code"], "invalid_http", "{json}");
            assert!(error["error"]["message"].as_str().is_some_and(|m| m.contains(says)), "{says}: {json}");
        }
        assert!(provider.requests().is_empty(), "no refused request reached the provider");
    });
}

#[test]
fn a_broken_chunked_body_is_refused_in_the_doors_dialect_and_the_connection_closes() {
    run(HARD_LIMIT, async {
        let (proxy, provider) = proxy().await;
        let wire = chat_head("transfer-encoding: chunked", "") + "zz\r\n{}\r\n0\r\n\r\nGET /healthz HTTP/1.1\r\n\r\n";
        let answer = proxy.exchange(wire.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{answer}");
        assert!(answer.contains("chunk size that is not valid"), "says what was wrong: {answer}");
        assert_eq!(answer.matches("HTTP/1.1 ").count(), 1, "nothing after the broken body is read as a request");
        assert!(provider.requests().is_empty());
    });
}

#[test]
fn a_websocket_upgrade_on_the_responses_door_gets_426_and_http_still_answers() {
    run(HARD_LIMIT, async {
        let (proxy, provider) = proxy().await;
        let body = r#"{"model":"chat","input":"hi"}"#;
        let wire = format!(
            "GET /v1/responses HTTP/1.1\r\nhost: baton\r\nconnection: Upgrade\r\nupgrade: websocket\r\n\
             sec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n\
             POST /v1/responses HTTP/1.1\r\nhost: baton\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let answer = proxy.exchange(wire.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 426 Upgrade Required\r\n"), "the client falls back at once: {answer}");
        assert!(answer.contains("\"code\":\"websocket_not_supported\""), "{answer}");
        let (_, after) = answer.split_once("HTTP/1.1 426").expect("the refusal");
        assert!(after.contains("HTTP/1.1 200 OK\r\n") && after.contains("w0 w1 w2"), "then HTTP answers: {answer}");
        assert_eq!(provider.requests().len(), 1, "only the HTTP request reached the provider");
        let plain = proxy.exchange(b"GET /v1/responses HTTP/1.1\r\nhost: baton\r\nconnection: close\r\n\r\n").await;
        assert!(plain.starts_with("HTTP/1.1 405 "), "a GET without an upgrade is the wrong method: {plain}");
    });
}
