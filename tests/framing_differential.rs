//! baton's server held to hyper's framing: the same bytes, made of
//! requests with every framing shape and then mutated at random, go to
//! baton's server and to hyper's over loopback, each behind a handler that
//! echoes the method, the target and a hash of the body it read whole.
//! baton may refuse what hyper serves, but every request baton serves must
//! be the one hyper served at the same place: baton never accepts what hyper
//! refuses and never finds a request boundary hyper does not.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use baton::h1::mutate::{SHARP, mutate};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use proptest::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How long a connection may stay silent before its answers are taken as all.
const QUIET: Duration = Duration::from_millis(400);

/// The line a handler answers a request it read whole with.
fn echo(method: &str, target: &str, body: &[u8]) -> String {
    // FNV-1a: any change to the body changes the line.
    let hash = body
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3));
    let target: String = target.bytes().map(|byte| format!("{byte:02x}")).collect();
    format!("ECHO {method} {target} {} {hash:016x}\n", body.len())
}

/// The echo lines in everything a server wrote back.
fn served(answers: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(answers).lines().filter(|line| line.starts_with("ECHO ")).map(str::to_owned).collect()
}

/// hyper's HTTP/1.1 server with its defaults, echoing.
async fn hyper_server() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let service = service_fn(|request: hyper::Request<hyper::body::Incoming>| async move {
                    let (parts, body) = request.into_parts();
                    let answer = match body.collect().await {
                        Ok(body) => echo(parts.method.as_str(), &parts.uri.to_string(), &body.to_bytes()),
                        Err(_) => "BROKEN\n".to_owned(),
                    };
                    Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from(answer))))
                });
                let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    addr
}

/// baton's server, echoing.
async fn baton_server() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let router = Router::new().fallback(|request: Request| async move {
        let (parts, body) = request.into_parts();
        match axum::body::to_bytes(body, 1 << 20).await {
            Ok(body) => echo(parts.method.as_str(), &parts.uri.to_string(), &body),
            Err(_) => "BROKEN\n".to_owned(),
        }
    });
    let metrics = Arc::new(baton::observe::Metrics::new());
    let limits = baton::http::server::ConnectionLimits::new(1000, Duration::from_secs(10), metrics);
    tokio::spawn(baton::http::server::serve(listener, router, limits, std::future::pending()));
    addr
}

/// Writes `wire` to `addr` and reads until the server closes or goes quiet.
async fn answers(addr: std::net::SocketAddr, wire: &[u8]) -> Vec<u8> {
    let mut socket = TcpStream::connect(addr).await.expect("connect");
    let _ = socket.write_all(wire).await;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(Ok(read @ 1..)) = tokio::time::timeout(QUIET, socket.read(&mut buf)).await {
        got.extend_from_slice(&buf[..read]);
    }
    got
}

/// One request's shape before mutation.
#[derive(Debug, Clone)]
struct Shape {
    post: bool,
    target: u8,
    http_1_0: bool,
    hosts: u8,
    framing: Framing,
    body: Vec<u8>,
    chunk: usize,
    extension: u8,
    trailer: bool,
    close: bool,
}

#[derive(Debug, Clone, Copy)]
enum Framing {
    None,
    Length,
    LengthWrong,
    LengthTwice,
    LengthList,
    Chunked,
    ChunkedAndLength,
    CodingsThenChunked,
    ChunkedThenCoding,
    ChunkedFolded,
    ChunkedSpacedName,
}

fn framing() -> impl Strategy<Value = Framing> {
    prop_oneof![
        Just(Framing::None),
        Just(Framing::Length),
        Just(Framing::LengthWrong),
        Just(Framing::LengthTwice),
        Just(Framing::LengthList),
        Just(Framing::Chunked),
        Just(Framing::ChunkedAndLength),
        Just(Framing::CodingsThenChunked),
        Just(Framing::ChunkedThenCoding),
        Just(Framing::ChunkedFolded),
        Just(Framing::ChunkedSpacedName),
    ]
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        (any::<bool>(), 0u8..4, prop::bool::weighted(0.15), prop_oneof![Just(1u8), Just(1), Just(1), Just(0), Just(2)]),
        (
            framing(),
            prop::collection::vec(any::<u8>(), 0..40),
            1usize..16,
            0u8..8,
            any::<bool>(),
            prop::bool::weighted(0.2),
        ),
    )
        .prop_map(|((post, target, http_1_0, hosts), (framing, body, chunk, extension, trailer, close))| Shape {
            post,
            target,
            http_1_0,
            hosts,
            framing,
            body,
            chunk,
            extension,
            trailer,
            close,
        })
}

impl Shape {
    fn wire(&self) -> Vec<u8> {
        let mut head = format!(
            "{} /e/{} {}\r\n",
            if self.post { "POST" } else { "GET" },
            self.target,
            if self.http_1_0 { "HTTP/1.0" } else { "HTTP/1.1" }
        );
        for n in 0..self.hosts {
            head.push_str(&format!("Host: h{n}\r\n"));
        }
        let length = self.body.len();
        let chunked = |name: &str| format!("{name}: chunked\r\n");
        head.push_str(&match self.framing {
            Framing::None => String::new(),
            Framing::Length => format!("Content-Length: {length}\r\n"),
            Framing::LengthWrong => format!("Content-Length: {}\r\n", length + 3),
            Framing::LengthTwice => format!("Content-Length: {length}\r\nContent-Length: {length}\r\n"),
            Framing::LengthList => format!("Content-Length: {length}, {length}\r\n"),
            Framing::Chunked => chunked("Transfer-Encoding"),
            Framing::ChunkedAndLength => format!("{}Content-Length: {length}\r\n", chunked("Transfer-Encoding")),
            Framing::CodingsThenChunked => "Transfer-Encoding: gzip, chunked\r\n".to_owned(),
            Framing::ChunkedThenCoding => "Transfer-Encoding: chunked, identity\r\n".to_owned(),
            Framing::ChunkedFolded => "Transfer-Encoding:\r\n chunked\r\n".to_owned(),
            Framing::ChunkedSpacedName => chunked("Transfer-Encoding "),
        });
        if self.close {
            head.push_str("Connection: close\r\n");
        }
        head.push_str("\r\n");
        let mut wire = head.into_bytes();
        let body_chunked = matches!(
            self.framing,
            Framing::Chunked
                | Framing::ChunkedAndLength
                | Framing::CodingsThenChunked
                | Framing::ChunkedThenCoding
                | Framing::ChunkedFolded
                | Framing::ChunkedSpacedName
        );
        if !body_chunked {
            if !matches!(self.framing, Framing::None) {
                wire.extend_from_slice(&self.body);
            }
            return wire;
        }
        let extension: &[u8] = match self.extension {
            0 => b"",
            1 => b";a=1",
            2 => b" ; q=\"x;y\"",
            3 => b";\n",
            4 => b";a\rb",
            5 => b" ",
            6 => b";a=\x01",
            _ => b";a",
        };
        for piece in self.body.chunks(self.chunk) {
            wire.extend_from_slice(format!("{:x}", piece.len()).as_bytes());
            wire.extend_from_slice(extension);
            wire.extend_from_slice(b"\r\n");
            wire.extend_from_slice(piece);
            wire.extend_from_slice(b"\r\n");
        }
        wire.extend_from_slice(b"0\r\n");
        if self.trailer {
            wire.extend_from_slice(b"x-sum: 1\r\n");
        }
        wire.extend_from_slice(b"\r\n");
        wire
    }
}

fn wire() -> impl Strategy<Value = Vec<u8>> {
    let mutations = prop::collection::vec((any::<usize>(), 0u8..3, prop::sample::select(SHARP)), 0..3);
    (prop::collection::vec(shape(), 1..4), mutations)
        .prop_map(|(shapes, mutations)| mutate(shapes.iter().flat_map(Shape::wire).collect(), &mutations))
}

proptest! {
    // 32 cases of 8 connections each, unless PROPTEST_CASES asks for a longer run.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|cases| cases.parse().ok()).unwrap_or(32),
        ..ProptestConfig::default()
    })]

    #[test]
    fn baton_serves_no_request_hyper_does_not_and_finds_no_other_boundary(
        wires in prop::collection::vec(wire(), 8)
    ) {
        let outcomes = support::run(Duration::from_secs(60), async {
            let (hyper, baton) = (hyper_server().await, baton_server().await);
            let exchanges = wires.iter().map(|wire| async move {
                let (by_hyper, by_baton) = tokio::join!(answers(hyper, wire), answers(baton, wire));
                (served(&by_hyper), served(&by_baton))
            });
            futures_util::future::join_all(exchanges).await
        });
        for (wire, (by_hyper, by_baton)) in wires.iter().zip(outcomes) {
            prop_assert!(
                by_hyper.starts_with(&by_baton),
                "baton served what hyper did not, or found another boundary\nwire: {:?}\nhyper: {:?}\nbaton: {:?}",
                String::from_utf8_lossy(wire), by_hyper, by_baton
            );
        }
    }
}

#[test]
fn the_harness_sees_what_each_server_serves() {
    // Two valid pipelined requests: both servers serve both, alike, so the
    // property compares real answers. A bare LF hiding a request in a chunk
    // extension, and a length listed twice in two spellings (the property's
    // first find, on the code before these rules): baton serves neither.
    let valid = b"POST /e/1 HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}GET /e/2 HTTP/1.1\r\nHost: h\r\n\r\n";
    let smuggling = b"POST /e/1 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2;\nZZ\r\n28\r\n0\r\n\r\nGET /SMUGGLED HTTP/1.1\r\nHost: h\r\n\r\n";
    support::run(Duration::from_secs(30), async {
        let (hyper, baton) = (hyper_server().await, baton_server().await);
        let (by_hyper, by_baton) = (served(&answers(hyper, valid).await), served(&answers(baton, valid).await));
        assert_eq!(by_hyper.len(), 2, "{by_hyper:?}");
        assert_eq!(by_baton, by_hyper, "the same two requests, the same bodies");
        for server in [hyper, baton] {
            let got = served(&answers(server, smuggling).await);
            assert!(got.is_empty(), "{got:?}");
        }
        let listed = b"POST /e/0 HTTP/1.1\r\nHost: h\r\nContent-Length: 14,014\r\n\r\n0123456789abcd";
        let (by_hyper, by_baton) = (served(&answers(hyper, listed).await), served(&answers(baton, listed).await));
        assert!(by_baton.is_empty() && by_hyper.starts_with(&by_baton), "hyper: {by_hyper:?}, baton: {by_baton:?}");
    });
}
