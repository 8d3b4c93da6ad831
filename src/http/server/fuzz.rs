//! Fuzzing, as proptest properties, of what reads a client's bytes: the
//! request head ([`take_head`]) and the body after it ([`BodyState`]), fed
//! as the connection feeds them, in reads split at random points. Inputs are
//! well-framed pipelined requests of every framing, mutated at a few bytes
//! where framing turns, and arbitrary bytes. Every input ends in a verdict,
//! never a panic; what a client can make baton hold stays within the head
//! limit and one read; and the requests found do not depend on where the
//! reads split the bytes, so no client can move a request boundary by
//! timing its writes.
//!
//! `cargo test` runs 64 cases per property; a long run is
//! `PROPTEST_CASES=200000 cargo test --release --lib http::server::fuzz`.

use bytes::BytesMut;
use proptest::prelude::*;
use proptest::sample::Index;

use super::head::{HEAD_LIMIT, take_head};
use crate::h1::mutate::{fuzz_config, mutated_or_any};
use crate::h1::{BodyState, Step};

/// The most bytes one read adds, as the connection reads.
const READ: usize = 4096;

/// The requests found in a connection's bytes, and how reading them ended.
#[derive(Debug, PartialEq, Eq)]
struct Framed {
    /// Each request's method, target and whole body.
    requests: Vec<(String, String, Vec<u8>)>,
    /// The refusal or framing error that ended the connection, if any.
    end: Option<String>,
}

/// Reads `wire`, fed in the pieces `cuts` make, as a connection does.
fn frame(wire: &[u8], cuts: &[Index]) -> Framed {
    let mut edges: Vec<usize> = cuts.iter().map(|cut| cut.index(wire.len() + 1)).collect();
    edges.sort_unstable();
    edges.push(wire.len());
    let (mut fed, mut buf) = (0, BytesMut::new());
    let mut framed = Framed { requests: Vec::new(), end: None };
    let mut body: Option<(String, String, Vec<u8>, BodyState, bool)> = None;
    for edge in edges {
        while fed < edge {
            let to = edge.min(fed + READ);
            buf.extend_from_slice(&wire[fed..to]);
            fed = to;
            loop {
                assert!(buf.len() <= HEAD_LIMIT + READ, "held {} bytes", buf.len());
                if let Some((method, target, data, state, keep_alive)) = &mut body {
                    match state.step(&mut buf) {
                        Ok(Step::Data(piece)) => data.extend_from_slice(&piece),
                        Ok(Step::More) => break,
                        Ok(Step::End) => {
                            let again = *keep_alive;
                            framed.requests.push((method.clone(), target.clone(), std::mem::take(data)));
                            body = None;
                            if !again {
                                return framed;
                            }
                        }
                        Err(err) => {
                            framed.end = Some(err.describe("the request", "the client"));
                            return framed;
                        }
                    }
                    continue;
                }
                match take_head(&mut buf) {
                    Ok(Some(head)) => {
                        let (method, target) = (head.request.method().to_string(), head.request.uri().to_string());
                        let state = BodyState::new(head.framing);
                        body = Some((method, target, Vec::new(), state, head.keep_alive));
                    }
                    Ok(None) => break,
                    Err(refusal) => {
                        framed.end = Some(String::from_utf8_lossy(&refusal.answer()).into_owned());
                        return framed;
                    }
                }
            }
        }
    }
    framed
}

/// A well-framed request with one of the framings a client may use.
fn request() -> impl Strategy<Value = Vec<u8>> {
    (0u8..5, prop::collection::vec(any::<u8>(), 0..64), 1usize..20, any::<bool>()).prop_map(
        |(framing, body, chunk, close)| {
            let close = if close { "connection: close\r\n" } else { "" };
            match framing {
                0 => format!("GET /healthz HTTP/1.1\r\nhost: baton\r\n{close}\r\n").into_bytes(),
                1 => b"GET /healthz HTTP/1.0\r\nconnection: keep-alive\r\n\r\n".to_vec(),
                2 | 3 => {
                    let head = format!(
                        "POST /v1/chat/completions HTTP/1.1\r\nhost: baton\r\n{close}content-length: {}\r\n\r\n",
                        body.len()
                    );
                    [head.into_bytes(), body.clone()].concat()
                }
                _ => {
                    let mut wire = format!(
                        "POST /v1/chat/completions HTTP/1.1\r\nhost: baton\r\n{close}transfer-encoding: chunked\r\n\r\n"
                    )
                    .into_bytes();
                    for piece in body.chunks(chunk) {
                        wire.extend_from_slice(format!("{:x};ext=\"q\"\r\n", piece.len()).as_bytes());
                        wire.extend_from_slice(piece);
                        wire.extend_from_slice(b"\r\n");
                    }
                    wire.extend_from_slice(b"0\r\nx-trailer: 1\r\n\r\n");
                    wire
                }
            }
        },
    )
}

/// Pipelined requests, mutated at a few bytes where framing turns, or bytes of any kind.
fn wire() -> impl Strategy<Value = Vec<u8>> {
    mutated_or_any(prop::collection::vec(request(), 1..4).prop_map(|requests| requests.concat()))
}

proptest! {
    #![proptest_config(fuzz_config())]

    #[test]
    fn requests_are_found_alike_whatever_the_reads(wire in wire(), cuts in prop::collection::vec(any::<Index>(), 0..8)) {
        let whole = frame(&wire, &[]);
        let split = frame(&wire, &cuts);
        prop_assert_eq!(&split, &whole, "the same requests, the same end, however the bytes came");
    }
}

#[test]
fn a_head_that_never_ends_is_refused_within_the_limit() {
    let endless = [b"GET / HTTP/1.1\r\nx-a: ".as_slice(), &[b'a'; 3 * HEAD_LIMIT]].concat();
    let framed = frame(&endless, &[]);
    assert!(framed.requests.is_empty());
    assert!(framed.end.is_some_and(|end| end.contains("431")), "refused as too large");
}
