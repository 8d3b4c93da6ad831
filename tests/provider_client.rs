//! The client against providers written on raw loopback TCP: framing, reuse,
//! stale and stray connections, and the heads and bodies it refuses.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use baton::egress::{Client, ClientError};
use support::raw::read_request;

/// Every test's hard limit.
const LIMIT: Duration = Duration::from_secs(10);

/// What the provider does for one request.
#[derive(Clone)]
enum Act {
    /// Writes these bytes, then waits a moment so they arrive in a read of their own.
    Write(&'static [u8]),
    /// Writes these owned bytes, then waits a moment.
    Owned(Vec<u8>),
    /// Closes the connection without another word.
    Close,
    /// Resets the connection (a close with a zero linger).
    Reset,
}

/// A provider that answers request `n` on each connection with `script(n)`,
/// counting the connections it accepts.
struct Provider {
    url: String,
    accepted: Arc<AtomicUsize>,
    /// Requests read whole, on every connection.
    read: Arc<AtomicUsize>,
}

impl Provider {
    async fn start(script: impl Fn(usize) -> Vec<Act> + Send + Sync + 'static) -> Provider {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/v1/chat", listener.local_addr().expect("addr"));
        let (accepted, read) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (counter, requests, script) = (Arc::clone(&accepted), Arc::clone(&read), Arc::new(script));
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(socket, Arc::clone(&script), Arc::clone(&requests)));
            }
        });
        Provider { url, accepted, read }
    }

    fn connections(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    fn requests(&self) -> usize {
        self.read.load(Ordering::SeqCst)
    }
}

async fn serve(mut socket: TcpStream, script: Arc<impl Fn(usize) -> Vec<Act>>, read: Arc<AtomicUsize>) {
    for n in 0.. {
        if !read_request(&mut socket).await {
            return;
        }
        read.fetch_add(1, Ordering::SeqCst);
        for act in script(n) {
            let bytes = match act {
                Act::Write(bytes) => bytes.to_vec(),
                Act::Owned(bytes) => bytes,
                Act::Close => return,
                Act::Reset => {
                    let _ = socket.set_zero_linger();
                    return;
                }
            };
            if socket.write_all(&bytes).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

fn client() -> Client {
    Client::new(8, Duration::from_secs(30)).expect("client")
}

/// Sends a POST to `url` and reads the whole answer: status and body, or
/// the first error.
async fn fetch(client: &Client, url: &str) -> Result<(u16, String), ClientError> {
    let request = http::Request::post(url).body(Bytes::from_static(b"{\"hi\":1}")).expect("request");
    let response = client.send(request).await?;
    let status = response.status().as_u16();
    let mut body = response.into_body();
    let mut text = Vec::new();
    while let Some(chunk) = body.next().await {
        text.extend_from_slice(&chunk?);
    }
    Ok((status, String::from_utf8(text).expect("utf-8")))
}

/// Runs `test` on a runtime of its own, failing it past [`LIMIT`].
fn run(test: impl Future<Output = ()>) {
    support::run(LIMIT, test);
}

const CHUNKED: &[u8] =
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n6\r\ndata: \r\n4;x=y\r\nhi\n\n\r\n0\r\nx-sum: 1\r\n\r\n";

#[test]
fn a_chunked_body_arrives_whole_whatever_byte_the_reads_split_it_at() {
    run(async {
        let provider = Provider::start(|n| {
            let (first, second) = CHUNKED.split_at(n % CHUNKED.len());
            vec![Act::Write(first), Act::Write(second)]
        })
        .await;
        let client = client();
        for cut in 0..CHUNKED.len() {
            let got = fetch(&client, &provider.url).await;
            assert_eq!(got.ok(), Some((200, "data: hi\n\n".to_owned())), "split at {cut}");
        }
        assert_eq!(provider.connections(), 1, "every answer ended cleanly, so one connection carried them all");
    });
}

#[test]
fn a_length_body_and_a_body_up_to_the_close_arrive_whole() {
    run(async {
        let provider = Provider::start(|n| match n {
            0 => vec![Act::Write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhel"), Act::Write(b"lo")],
            _ => vec![Act::Write(b"HTTP/1.1 200 OK\r\n\r\nuntil "), Act::Write(b"the close"), Act::Close],
        })
        .await;
        let client = client();
        assert_eq!(fetch(&client, &provider.url).await.ok(), Some((200, "hello".to_owned())));
        assert_eq!(fetch(&client, &provider.url).await.ok(), Some((200, "until the close".to_owned())));
        assert_eq!(fetch(&client, &provider.url).await.ok(), Some((200, "hello".to_owned())));
        assert_eq!(provider.connections(), 2, "a body up to the close leaves no connection to reuse");
    });
}

#[test]
fn keep_alive_reuses_the_connection_and_connection_close_does_not() {
    run(async {
        let alive = Provider::start(|_| vec![Act::Write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")]).await;
        let closing = Provider::start(|_| {
            vec![Act::Write(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok")]
        })
        .await;
        let client = client();
        for _ in 0..3 {
            assert_eq!(fetch(&client, &alive.url).await.ok(), Some((200, "ok".to_owned())));
            assert_eq!(fetch(&client, &closing.url).await.ok(), Some((200, "ok".to_owned())));
        }
        assert_eq!(alive.connections(), 1, "one keep-alive connection carried all three");
        assert_eq!(closing.connections(), 3, "`connection: close` is honoured");
    });
}

#[test]
fn a_pooled_connection_the_provider_closed_while_idle_is_replaced_without_an_error() {
    run(async {
        // Each connection answers once and then closes, before the next
        // request is written: the client finds it closed and uses a fresh one.
        let provider =
            Provider::start(|_| vec![Act::Write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"), Act::Close]).await;
        let client = client();
        for round in 0..3 {
            assert_eq!(fetch(&client, &provider.url).await.ok(), Some((200, "ok".to_owned())), "round {round}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(provider.connections(), 3, "each closed connection was replaced by a fresh one");
        assert_eq!(provider.requests(), 3, "each request was read once");
    });
}

#[test]
fn a_request_the_provider_read_before_closing_or_resetting_is_never_sent_again() {
    for (shape, act) in [("closes", Act::Close), ("resets", Act::Reset)] {
        run(async {
            // The second request on the kept connection is read whole, and
            // then the provider goes: it may have acted on it (RFC 9110 §9.2.2).
            let provider = Provider::start(move |n| match n {
                0 => vec![Act::Write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")],
                _ => vec![act.clone()],
            })
            .await;
            let client = client();
            assert_eq!(fetch(&client, &provider.url).await.ok(), Some((200, "ok".to_owned())));
            let second = fetch(&client, &provider.url).await;
            assert!(
                matches!(second, Err(ClientError::Http(ref why)) if why.contains("before the response") || why.contains("cannot read")),
                "{shape}: the failure is the attempt's: {second:?}"
            );
            assert_eq!(provider.requests(), 2, "{shape}: the second request reached the provider exactly once");
            assert_eq!(provider.connections(), 1, "{shape}: no connection was opened to send it again");
        });
    }
}

#[test]
fn bytes_after_a_complete_body_keep_the_connection_from_reuse() {
    run(async {
        let provider =
            Provider::start(|_| vec![Act::Write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n")])
                .await;
        let client = client();
        for _ in 0..2 {
            assert_eq!(fetch(&client, &provider.url).await.ok(), Some((200, "ok".to_owned())));
        }
        assert_eq!(provider.connections(), 2, "the stray bytes never passed for the next answer");
    });
}

#[test]
fn interim_responses_and_trailers_are_passed_over() {
    run(async {
        let provider = Provider::start(|_| {
            vec![
                Act::Write(b"HTTP/1.1 100 Continue\r\n\r\n"),
                Act::Write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n"),
                Act::Write(b"x-a: 1\r\nx-b: 2\r\n\r\n"),
            ]
        })
        .await;
        let client = client();
        assert_eq!(fetch(&client, &provider.url).await.ok(), Some((200, "ok".to_owned())));
        assert_eq!(fetch(&client, &provider.url).await.ok(), Some((200, "ok".to_owned())));
        assert_eq!(provider.connections(), 1, "the trailers ended the body, so the connection was kept");
    });
}

#[test]
fn an_oversized_head_or_a_malformed_chunk_fails_saying_why() {
    run(async {
        let huge = Provider::start(|_| {
            let header = format!("x-big: {}", "a".repeat(70 * 1024));
            vec![Act::Write(b"HTTP/1.1 200 OK\r\n"), Act::Owned(header.into_bytes())]
        })
        .await;
        let bad_chunk = Provider::start(|_| {
            vec![Act::Write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\nzz\r\n")]
        })
        .await;
        let client = client();
        let head = fetch(&client, &huge.url).await.map_err(|err| err.to_string());
        assert_eq!(head, Err("the response head is larger than 64 KiB".to_owned()));
        let chunk = fetch(&client, &bad_chunk.url).await.map_err(|err| err.to_string());
        assert_eq!(chunk, Err("the response has a chunk size that is not valid".to_owned()));
    });
}

#[test]
fn a_body_cut_short_by_the_close_is_an_error_not_an_end() {
    run(async {
        let provider =
            Provider::start(|_| vec![Act::Write(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhalf"), Act::Close])
                .await;
        let got = fetch(&client(), &provider.url).await.map_err(|err| err.to_string());
        assert_eq!(got, Err("the provider closed the connection before the body's end".to_owned()));
    });
}
