//! The upstream connection, seen from a provider written against raw TCP:
//! keep-alive reuse, a connection the provider closed while it sat idle, and
//! events that arrive in one read leaving for the client in one write.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::providers::ProviderKind;
use support::raw::{RawProvider, Step, chunked_answer, openai_end, openai_text};
use support::{ChatConfig, Proxy, chat_body, eventually, post_chat, run};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const HARD_LIMIT: Duration = Duration::from_secs(20);

/// What the raw provider does after answering on a connection.
#[derive(Clone, Copy)]
enum AfterAnswer {
    KeepAlive,
    Close,
}

/// A provider that answers every request with `events` OpenAI text chunks in
/// one write.
async fn raw_provider(events: usize, after: AfterAnswer) -> RawProvider {
    RawProvider::start(move |_| match after {
        AfterAnswer::KeepAlive => vec![Step::Write(answer(events))],
        AfterAnswer::Close => vec![Step::Write(answer(events)), Step::Close],
    })
    .await
}

/// A whole chunked SSE answer: `events` tokens, a finish and `[DONE]`.
fn answer(events: usize) -> Vec<u8> {
    let mut body = String::new();
    let mut chunk = |data: String| {
        let event = format!("data: {data}\n\n");
        body.push_str(&format!("{:x}\r\n{event}\r\n", event.len()));
    };
    for i in 0..events {
        chunk(format!(
            r#"{{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{{"index":0,"delta":{{"content":" raw{i}"}},"finish_reason":null}}]}}"#
        ));
    }
    chunk(r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#.to_owned());
    chunk("[DONE]".to_owned());
    let mut out = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
    out.extend_from_slice(body.as_bytes());
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

fn config(base_url: &str) -> String {
    ChatConfig::new().deadlines(5000, 5000).provider("raw", ProviderKind::OpenAi, base_url).model("m").toml()
}

fn expected_text(events: usize) -> String {
    (0..events).map(|i| format!(" raw{i}")).collect()
}

#[test]
fn sequential_requests_reuse_one_upstream_connection() {
    run(HARD_LIMIT, async {
        let provider = raw_provider(5, AfterAnswer::KeepAlive).await;
        let proxy = Proxy::start(&config(&provider.base_url())).await;
        for _ in 0..3 {
            let received = post_chat(&proxy, &chat_body(true)).await;
            assert_eq!(received.status, 200, "{}", received.raw);
            assert_eq!(received.streamed_text(), expected_text(5));
        }
        assert_eq!(provider.connections(), 1, "one keep-alive connection carried all three requests");
    });
}

#[test]
fn a_connection_the_provider_closed_while_idle_is_not_reused() {
    run(HARD_LIMIT, async {
        let provider = raw_provider(5, AfterAnswer::Close).await;
        let proxy = Proxy::start(&config(&provider.base_url())).await;
        for round in 1..=3 {
            let received = post_chat(&proxy, &chat_body(true)).await;
            assert_eq!(received.status, 200, "request {round}: {}", received.raw);
            assert_eq!(received.header("x-baton-attempts"), "1", "no failover was needed");
            assert_eq!(received.streamed_text(), expected_text(5));
            // Let the close arrive before the next request takes the connection.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(provider.connections(), 3, "a new connection for each request");
    });
}

/// Counts the HTTP chunks of baton's streamed response and returns them with
/// the body they carry.
async fn chunks_from_baton(proxy: &Proxy) -> (usize, String) {
    let mut socket = TcpStream::connect(proxy.addr).await.expect("connect");
    let body = serde_json::to_vec(&chat_body(true)).expect("json");
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: baton\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    socket.write_all(head.as_bytes()).await.expect("write");
    socket.write_all(&body).await.expect("write");
    let mut raw = Vec::new();
    socket.read_to_end(&mut raw).await.expect("read");
    let raw = String::from_utf8(raw).expect("utf-8");
    let (head, mut rest) = raw.split_once("\r\n\r\n").expect("a head");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (mut count, mut text) = (0, String::new());
    loop {
        let (size, after) = rest.split_once("\r\n").expect("a chunk size");
        let size = usize::from_str_radix(size.trim(), 16).expect("hex size");
        if size == 0 {
            return (count, text);
        }
        count += 1;
        text.push_str(&after[..size]);
        rest = &after[size + 2..];
    }
}

#[test]
fn events_read_in_one_go_leave_in_few_writes() {
    run(HARD_LIMIT, async {
        let events = 60;
        let provider = raw_provider(events, AfterAnswer::KeepAlive).await;
        let proxy = Proxy::start(&config(&provider.base_url())).await;
        let (chunks, text) = chunks_from_baton(&proxy).await;
        let tokens = text.matches(" raw").count();
        assert_eq!(tokens, events, "every token arrived: {text}");
        assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
        assert!(chunks <= 6, "{events} events that arrived together left in {chunks} HTTP chunks");
    });
}

/// A TLS client's hello answered in plain HTTP, as a plain HTTP server does.
#[test]
fn an_https_provider_that_does_not_speak_tls_fails_with_a_tls_error() {
    run(HARD_LIMIT, async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let _ = socket.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n").await;
            }
        });
        let proxy = Proxy::start(&config(&format!("https://{addr}/v1"))).await;
        let received = post_chat(&proxy, &chat_body(true)).await;
        assert_eq!(received.status, 502, "{}", received.raw);
        assert!(received.raw.contains("tls"), "the attempt's error names TLS: {}", received.raw);
    });
}

#[test]
fn idle_connections_are_closed_after_the_idle_timeout_without_more_traffic() {
    run(HARD_LIMIT, async {
        let provider = RawProvider::start(|_| {
            vec![Step::Write(chunked_answer(&format!("{}{}", openai_text("hi"), openai_end())))]
        })
        .await;
        let client = baton::egress::Client::new(8, Duration::from_millis(200)).expect("client");
        let request = http::Request::post(format!("{}/v1/chat/completions", provider.url))
            .body(bytes::Bytes::from_static(b"{}"))
            .expect("request");
        let response = client.send(request).await.expect("an answer");
        let mut body = response.into_body();
        while futures_util::StreamExt::next(&mut body).await.is_some() {}
        drop(body);
        assert_eq!(provider.ended(), 0, "the connection is kept for the next request");
        let closed = eventually(Duration::from_secs(5), || async { provider.ended() == 1 }).await;
        assert!(closed, "the idle connection was closed by the reaper, with no request to notice it");
    });
}
