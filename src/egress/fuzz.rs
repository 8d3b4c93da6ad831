//! Fuzzing, as proptest properties, of what reads a provider's bytes: the
//! response head ([`take_head`], interim heads included) and the body after
//! it ([`BodyState`]), fed in reads split at random points. Inputs are
//! well-framed responses of every framing, mutated at a few bytes where
//! framing turns, and arbitrary bytes. Every input ends in a verdict, never a
//! panic; what a provider can make baton hold stays within the head limit
//! and one read; and where a response and its body end does not depend on
//! where the reads split the bytes.
//!
//! `cargo test` runs 64 cases per property; a long run is
//! `PROPTEST_CASES=200000 cargo test --release --lib egress::fuzz`.

use bytes::BytesMut;
use http::Method;
use proptest::prelude::*;
use proptest::sample::Index;

use super::wire::{HEAD_LIMIT, take_head};
use crate::h1::mutate::{fuzz_config, mutated_or_any};
use crate::h1::{BodyState, Step};

/// The most bytes one read adds, as a connection reads at its largest.
const READ: usize = 64 * 1024;

/// The response found in a provider's bytes: status, body, what followed it,
/// and how reading ended.
#[derive(Debug, PartialEq, Eq)]
struct Taken {
    status: Option<u16>,
    body: Vec<u8>,
    after: usize,
    end: Option<String>,
}

/// Reads one response from `wire`, fed in the pieces `cuts` make.
fn take(wire: &[u8], cuts: &[Index]) -> Taken {
    let mut edges: Vec<usize> = cuts.iter().map(|cut| cut.index(wire.len() + 1)).collect();
    edges.sort_unstable();
    edges.push(wire.len());
    let (mut fed, mut buf, mut interim) = (0, BytesMut::new(), 0);
    let mut taken = Taken { status: None, body: Vec::new(), after: 0, end: None };
    let mut state: Option<BodyState> = None;
    for edge in edges {
        while fed < edge {
            let to = edge.min(fed + READ);
            buf.extend_from_slice(&wire[fed..to]);
            fed = to;
            loop {
                assert!(buf.len() <= HEAD_LIMIT + READ, "held {} bytes", buf.len());
                let Some(body) = &mut state else {
                    match take_head(&mut buf, &Method::POST, &mut interim) {
                        Ok(Some(head)) => {
                            taken.status = Some(head.status.as_u16());
                            state = Some(BodyState::new(head.framing));
                            continue;
                        }
                        Ok(None) => break,
                        Err(err) => {
                            taken.end = Some(err.to_string());
                            return taken;
                        }
                    }
                };
                match body.step(&mut buf) {
                    Ok(Step::Data(data)) => taken.body.extend_from_slice(&data),
                    Ok(Step::More) => break,
                    Ok(Step::End) => {
                        taken.after = buf.len() + wire.len() - fed;
                        return taken;
                    }
                    Err(err) => {
                        taken.end = Some(err.describe("the response", "the provider"));
                        return taken;
                    }
                }
            }
        }
    }
    if let Some(body) = &mut state {
        match body.at_close() {
            Ok(_) => taken.end = Some("closed at its end".to_owned()),
            Err(err) => taken.end = Some(err.describe("the response", "the provider")),
        }
    }
    taken
}

/// A well-framed response with one of the framings a provider may use.
fn response() -> impl Strategy<Value = Vec<u8>> {
    (0u8..5, prop::collection::vec(any::<u8>(), 0..64), 1usize..20, 0usize..3).prop_map(
        |(framing, body, chunk, interim)| {
            let mut wire = b"HTTP/1.1 100 Continue\r\n\r\n".repeat(interim);
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n";
            match framing {
                0 => wire.extend_from_slice(format!("{head}\r\n").as_bytes()),
                1 | 2 => wire.extend_from_slice(format!("{head}content-length: {}\r\n\r\n", body.len()).as_bytes()),
                3 => wire.extend_from_slice(b"HTTP/1.1 204 No Content\r\n\r\n"),
                _ => {
                    wire.extend_from_slice(format!("{head}transfer-encoding: chunked\r\n\r\n").as_bytes());
                    for piece in body.chunks(chunk) {
                        wire.extend_from_slice(format!("{:x};e=1\r\n", piece.len()).as_bytes());
                        wire.extend_from_slice(piece);
                        wire.extend_from_slice(b"\r\n");
                    }
                    wire.extend_from_slice(b"0\r\n\r\n");
                    return wire;
                }
            }
            if framing != 3 {
                wire.extend_from_slice(&body);
            }
            wire
        },
    )
}

/// A response with bytes after it, mutated at a few bytes where framing
/// turns, or bytes of any kind.
fn wire() -> impl Strategy<Value = Vec<u8>> {
    let whole = (response(), prop::collection::vec(any::<u8>(), 0..16));
    mutated_or_any(whole.prop_map(|(response, tail)| [response, tail].concat()))
}

proptest! {
    #![proptest_config(fuzz_config())]

    #[test]
    fn a_response_is_taken_alike_whatever_the_reads(wire in wire(), cuts in prop::collection::vec(any::<Index>(), 0..8)) {
        let whole = take(&wire, &[]);
        let split = take(&wire, &cuts);
        prop_assert_eq!(&split, &whole, "the same response, the same end, however the bytes came");
    }
}

#[test]
fn nine_interim_heads_end_the_response() {
    let wire = ["HTTP/1.1 102 Processing\r\n\r\n".repeat(9), "HTTP/1.1 200 OK\r\n\r\n".to_owned()].concat();
    let taken = take(wire.as_bytes(), &[]);
    assert_eq!(taken.status, None);
    assert!(taken.end.is_some_and(|end| end.contains("interim")), "refused at the ninth");
}
