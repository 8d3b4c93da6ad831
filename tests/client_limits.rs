//! What a client can hold, and for how long: a body that trickles in, a
//! declared body over the limit, a client that stops reading, and more
//! connections than the cap each get a clear answer or are let go — never
//! a wait without end.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::{Duration, Instant};

use baton::mock::{MockHandle, MockProvider};
use support::raw::{RawProvider, SSE_HEAD, Step, openai_text};
use support::{ChatConfig, Proxy, Spawned, chat_body, eventually, metrics, run};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const HARD_LIMIT: Duration = Duration::from_secs(30);

/// Top-level keys `top` over a route "chat" with 5 s deadlines.
fn config(top: &str) -> ChatConfig {
    ChatConfig::new().top(top).deadlines(5000, 5000)
}

/// A proxy with the top-level keys `top` in front of one healthy provider,
/// which lives as long as the proxy is used.
async fn proxy(top: &str) -> (Proxy, MockHandle) {
    let provider = MockProvider::openai().spawned().await;
    (Proxy::start(&config(top).mock("p", &provider).toml()).await, provider)
}

fn chat_head(content_length: usize) -> String {
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: baton\r\ncontent-type: application/json\r\ncontent-length: {content_length}\r\n\r\n"
    )
}

#[test]
fn a_body_that_trickles_in_is_answered_408_at_the_body_timeout() {
    run(HARD_LIMIT, async {
        let (proxy, _provider) = proxy("body_read_timeout_ms = 300").await;
        let started = Instant::now();
        let socket = TcpStream::connect(proxy.addr).await.expect("connect");
        let (mut reader, mut writer) = socket.into_split();
        writer.write_all(chat_head(1000).as_bytes()).await.expect("write");
        let trickle = async {
            for _ in 0..100 {
                if writer.write_all(b" ").await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        let mut answer = vec![0u8; 4096];
        let read = tokio::select! {
            () = trickle => panic!("the proxy kept reading a trickling body for 10 s"),
            read = async { tokio::time::sleep(Duration::from_millis(50)).await; reader.read(&mut answer).await } => read,
        };
        let answer = String::from_utf8_lossy(&answer[..read.expect("an answer")]).into_owned();
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.contains("\"code\":\"body_timeout\""), "an OpenAI-shaped error: {answer}");
        assert!(started.elapsed() < Duration::from_secs(5), "answered near the timeout, took {:?}", started.elapsed());
        let metrics = metrics(&proxy).await;
        assert!(metrics.contains("baton_client_faults_total{kind=\"body_timeout\"} 1"), "{metrics}");
    });
}

#[test]
fn a_declared_body_over_the_limit_is_refused_before_it_is_read() {
    run(HARD_LIMIT, async {
        let (proxy, _provider) = proxy("max_body_bytes = 1000").await;
        let started = Instant::now();
        let answer = proxy.exchange(format!("{}{{\"model\":", chat_head(100_000_000)).as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
        assert!(answer.contains("request_too_large"), "{answer}");
        assert!(started.elapsed() < Duration::from_secs(5), "refused at once, took {:?}", started.elapsed());
    });
}

#[test]
fn a_client_that_stops_reading_is_dropped_with_its_upstream() {
    run(HARD_LIMIT, async {
        let flood = RawProvider::start(|_| {
            let words = openai_text("words that fill every socket buffer between the provider and the client ");
            vec![Step::Write(SSE_HEAD.to_vec()), Step::Flood(words.repeat(64).into_bytes())]
        })
        .await;
        let proxy = Proxy::start(&config("client_stall_timeout_ms = 500").raw("p", &flood).toml()).await;
        let socket = TcpSocket::new_v4().expect("socket");
        socket.set_recv_buffer_size(4096).expect("small receive buffer");
        let mut client = socket.connect(proxy.addr).await.expect("connect");
        let body = chat_body(true).to_string();
        client.write_all(format!("{}{body}", chat_head(body.len())).as_bytes()).await.expect("write");
        let mut first = [0u8; 256];
        let read = client.read(&mut first).await.expect("the answer starts");
        assert!(String::from_utf8_lossy(&first[..read]).starts_with("HTTP/1.1 200"));
        // From here on the client reads nothing.
        let dropped = eventually(Duration::from_secs(20), || async { flood.broken() == 1 }).await;
        assert!(dropped, "the provider's connection was closed once the client stalled");
        let metrics = metrics(&proxy).await;
        assert!(metrics.contains("baton_client_faults_total{kind=\"client_stalled\"} 1"), "{metrics}");
        assert!(metrics.contains("outcome=\"client_stalled\""), "the request ended as client_stalled: {metrics}");
        drop(client);
    });
}

#[test]
fn connections_past_the_cap_are_answered_503_at_once() {
    run(HARD_LIMIT, async {
        let (proxy, _provider) = proxy("max_connections = 2").await;
        let mut held = Vec::new();
        for _ in 0..2 {
            let mut socket = TcpStream::connect(proxy.addr).await.expect("connect");
            socket.write_all(b"GET /healthz HTTP/1.1\r\nhost: baton\r\n\r\n").await.expect("write");
            let mut ok = [0u8; 64];
            let read = socket.read(&mut ok).await.expect("served");
            assert!(String::from_utf8_lossy(&ok[..read]).starts_with("HTTP/1.1 200"));
            held.push(socket);
        }
        let started = Instant::now();
        let answer = proxy.exchange(b"GET /healthz HTTP/1.1\r\nhost: baton\r\n\r\n").await;
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        assert!(answer.to_ascii_lowercase().contains("retry-after: 1"), "{answer}");
        assert!(answer.contains("too_many_connections"), "an OpenAI-shaped error: {answer}");
        assert!(started.elapsed() < Duration::from_secs(2), "never left hanging, took {:?}", started.elapsed());
        drop(held);
        let served = eventually(Duration::from_secs(5), || async {
            reqwest::get(proxy.url("/healthz")).await.is_ok_and(|r| r.status() == 200)
        })
        .await;
        assert!(served, "a freed slot serves the next client");
    });
}

#[test]
fn the_http_layers_own_errors_have_bodies_openai_and_anthropic_clients_read() {
    run(HARD_LIMIT, async {
        let (proxy, _provider) = proxy("").await;
        let garbage = proxy.exchange(b"NOT A REQUEST\r\n\r\n").await;
        assert!(garbage.starts_with("HTTP/1.1 400 "), "{garbage}");
        assert!(garbage.ends_with(r#""type":"invalid_request_error","code":"invalid_http"}}"#), "{garbage}");
        let huge_head = format!("GET /healthz HTTP/1.1\r\nhost: baton\r\nx-big: {}\r\n\r\n", "a".repeat(20_000));
        let too_large = proxy.exchange(huge_head.as_bytes()).await;
        assert!(too_large.starts_with("HTTP/1.1 431 "), "{too_large}");
        let body: serde_json::Value =
            serde_json::from_str(too_large.split_once("\r\n\r\n").map_or("", |(_, body)| body)).unwrap_or_default();
        assert_eq!(body["error"]["code"], "headers_too_large", "{too_large}");
        assert_eq!(body["error"]["type"], "invalid_request_error", "both APIs' type for a bad request");
        assert_eq!(body["type"], "error", "Anthropic's SDKs read an error by its top-level type");
    });
}

#[test]
fn bodies_past_the_in_flight_budget_get_503_until_the_bytes_are_freed() {
    run(HARD_LIMIT, async {
        let (proxy, _provider) = proxy("max_body_bytes_in_flight = 8192\nbody_read_timeout_ms = 20000").await;
        // A client declares 7 KiB and sends 6 KiB of it: what it sent is held while it sends the rest.
        let mut slow = TcpStream::connect(proxy.addr).await.expect("connect");
        let sent = format!("{{\"model\":\"chat\",\"pad\":\"{}", "a".repeat(6 * 1024));
        slow.write_all(format!("{}{sent}", chat_head(7 * 1024)).as_bytes()).await.expect("write");
        let padded = format!("{:<4096}", chat_body(false).to_string());
        let closing =
            format!("{}{padded}", chat_head(padded.len()).replace("\r\n\r\n", "\r\nconnection: close\r\n\r\n"));
        let last = std::cell::RefCell::new(String::new());
        let no_room = eventually(Duration::from_secs(5), || async {
            let answer = proxy.exchange(closing.as_bytes()).await;
            let refused = answer.starts_with("HTTP/1.1 503");
            *last.borrow_mut() = answer;
            refused
        })
        .await;
        let refused = last.into_inner();
        assert!(no_room, "no room for 4 KiB more once the slow client's 6 KiB have come: {refused}");
        assert!(refused.to_lowercase().contains("retry-after: 1"), "{refused}");
        assert!(refused.contains("\"code\":\"too_many_body_bytes\""), "{refused}");
        drop(slow);
        let freed = eventually(Duration::from_secs(5), || async {
            proxy.exchange(closing.as_bytes()).await.starts_with("HTTP/1.1 200")
        })
        .await;
        assert!(freed, "once the slow client is gone its bytes are free again");
    });
}
