//! Fuzzing on stable Rust, as proptest properties, of the two parsers that read
//! bytes from outside: each provider's bytes → SSE → decoder pipeline
//! ([`driver::decode`]) and the client's request parser ([`openai::parse`]).
//! Inputs ([`inputs`]) are arbitrary bytes, mutated fixtures, and fixtures
//! with more bytes after their end marker, cut into chunks at random points.
//!
//! `cargo test` runs [`CASES`] cases per property; a long session is
//! `PROPTEST_CASES=100000 cargo test --release --test fuzz`. A failure is
//! shrunk to a minimal input, printed, and its seed saved in
//! `tests/fuzz.proptest-regressions`, which later runs replay first: commit
//! it with the fix, and a test below that names the input.

#![expect(clippy::panic, reason = "a test fails by panicking")]

#[path = "fuzz/inputs.rs"]
mod inputs;

use std::convert::Infallible;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use baton::dialect::openai;
use baton::event::{Event, FinishReason};
use baton::providers::{ProviderKind, driver};
use futures_util::{FutureExt, StreamExt};
use inputs::{Body, FIXTURES, REQUESTS, any_body, cuts, fixture, fixture_and_tail, mutate, mutation, sse_events};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{Index, select};
use proptest::test_runner::FileFailurePersistence;

/// Cases per property in `cargo test`; `PROPTEST_CASES` overrides it.
const CASES: u32 = 64;

/// How long one body may take to decode before its stream counts as endless.
const DEADLINE: Duration = Duration::from_secs(10);

/// [`CASES`] unless `PROPTEST_CASES` says otherwise (the default config reads
/// it); failures saved next to this file.
fn config() -> ProptestConfig {
    let default = ProptestConfig::default();
    ProptestConfig {
        cases: if std::env::var_os("PROPTEST_CASES").is_some() { default.cases } else { CASES },
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..default
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_bytes_end_in_a_verdict(kind in select(ProviderKind::ALL.to_vec()), body in any_body(), cuts in cuts()) {
        let outcome = decode(kind, &body.0, &cuts);
        assert_verdict(kind, &body.0, &outcome);
    }

    #[test]
    fn mutated_fixtures_end_in_a_verdict(
        fixture in select(FIXTURES.as_slice()),
        mutations in vec(mutation(), 1..6),
        cuts in cuts(),
    ) {
        let body = mutate(&fixture.bytes, &mutations);
        let outcome = decode(fixture.kind, &body, &cuts);
        assert_verdict(fixture.kind, &body, &outcome);
    }

    #[test]
    fn nothing_after_the_end_marker_is_decoded((fixture, tail) in fixture_and_tail(), cuts in cuts()) {
        let kind = fixture.kind;
        let alone = decode(kind, &fixture.bytes, &[]);
        let body = [fixture.bytes.as_slice(), tail.0.as_slice()].concat();
        let both = decode(kind, &body, &cuts);
        assert_verdict(kind, &body, &both);
        // Anthropic's `message_stop` and OpenAI's `[DONE]` end reading, as an
        // error does; Gemini's `finishReason` and a `finish_reason` without
        // `[DONE]` complete the answer, but reading goes on for a late usage.
        let ends_reading = alone.last().is_some_and(Result::is_err)
            || matches!(kind, ProviderKind::Anthropic | ProviderKind::Bedrock)
            || contains(&fixture.bytes, b"[DONE]");
        if ends_reading {
            assert_eq!(both, alone, "{fixture:?} then {tail:?}: nothing after the end marker is read");
        } else {
            assert_eq!(both.get(..alone.len()), Some(&alone[..]), "{fixture:?} then {tail:?}: the answer is kept whole");
            let after = &both[alone.len()..];
            assert!(
                after.iter().all(|item| matches!(item, Ok(Event::Usage(_)) | Err(_))),
                "{fixture:?} then {tail:?}: after the finish only usage (or an error) is read, got {after:?}"
            );
        }
    }

    #[test]
    fn any_request_body_is_parsed_or_refused(body in any_body()) {
        assert_parsed_or_refused(&body.0);
    }

    #[test]
    fn mutated_requests_are_parsed_or_refused(request in select(REQUESTS), mutations in vec(mutation(), 1..6)) {
        assert_parsed_or_refused(&mutate(request.as_bytes(), &mutations));
    }
}

#[test]
fn the_requests_to_mutate_are_valid() {
    for request in REQUESTS {
        assert!(openai::parse(request.as_bytes()).is_ok(), "the unmutated request parses: {request}");
    }
}

// ---- what fuzzing found ----

/// Found by `mutated_fixtures_end_in_a_verdict`: Gemini's last event sent
/// twice gave its text twice, the second time after the finish.
#[test]
fn gemini_reads_only_usage_after_the_finish() {
    let answer = &fixture(ProviderKind::Gemini, "thought").bytes;
    let last = sse_events(answer).pop().unwrap_or_default();
    let body = [answer.as_slice(), &last].concat();
    let outcome = decode(ProviderKind::Gemini, &body, &[]);
    assert_verdict(ProviderKind::Gemini, &body, &outcome);
    assert_eq!(text_of(&outcome), "Hi there.", "the repeated last event adds no text");
}

/// Found by `nothing_after_the_end_marker_is_decoded`: an OpenAI-compatible
/// answer without `[DONE]` followed by a second answer gave the second's text
/// after the first's finish.
#[test]
fn openai_reads_only_usage_after_a_finish_reason() {
    let answer = &fixture(ProviderKind::OpenAi, "no_done").bytes;
    let body = [answer.as_slice(), answer].concat();
    let outcome = decode(ProviderKind::OpenAi, &body, &[]);
    assert_verdict(ProviderKind::OpenAi, &body, &outcome);
    assert_eq!(text_of(&outcome), "Short answer.", "the second answer adds no text");
    assert_eq!(outcome.last(), Some(&Ok(Event::Finish(FinishReason::Length))), "the first finish is the end");
}

fn text_of(outcome: &Outcome) -> String {
    outcome
        .iter()
        .filter_map(|item| if let Ok(Event::Text(text)) = item { Some(text.as_str()) } else { None })
        .collect()
}

// ---- what must hold ----

/// Every item one body gave, errors as `kind: message` so outcomes compare.
type Outcome = Vec<Result<Event, String>>;

/// What holds for every decoded body, whatever its bytes: an error is the last
/// item; text is never empty; one finish at most, followed by usage only; and a
/// stream ends without an error only once the provider said the answer is over.
fn assert_verdict(kind: ProviderKind, body: &[u8], outcome: &Outcome) {
    let body = Body(body.to_vec());
    if let Some(at) = outcome.iter().position(Result::is_err) {
        assert_eq!(at + 1, outcome.len(), "{kind}: nothing follows an error; {body:?} gave {outcome:?}");
    }
    let events: Vec<&Event> = outcome.iter().filter_map(|item| item.as_ref().ok()).collect();
    assert!(
        !events.iter().any(|event| matches!(event, Event::Text(text) if text.is_empty())),
        "{kind}: text is never empty; {body:?} gave {outcome:?}"
    );
    let finish = events.iter().position(|event| matches!(event, Event::Finish(_)));
    if let Some(at) = finish {
        assert!(
            events[at + 1..].iter().all(|event| matches!(event, Event::Usage(_))),
            "{kind}: after the finish only usage follows; {body:?} gave {outcome:?}"
        );
    }
    if outcome.last().is_none_or(Result::is_ok) {
        let said_done = matches!(kind, ProviderKind::OpenAi | ProviderKind::Azure) && contains(&body.0, b"[DONE]");
        assert!(
            finish.is_some() || said_done,
            "{kind}: a stream ends without an error only after the answer's end; {body:?} gave {outcome:?}"
        );
    }
}

/// A body is a chat request with at least one message, or it is refused with
/// a 400: never a panic and never a server error.
fn assert_parsed_or_refused(body: &[u8]) {
    match openai::parse(body) {
        Ok(parsed) => {
            assert!(!parsed.request.messages.is_empty(), "a parsed request has a message: {:?}", Body(body.to_vec()));
        }
        Err(err) => {
            let status = err.into_response().status();
            assert_eq!(status, StatusCode::BAD_REQUEST, "a bad body is refused with 400: {:?}", Body(body.to_vec()));
        }
    }
}

// ---- running the decoder ----

/// Decodes `body` cut at `cuts` on another thread under [`DEADLINE`], so a
/// stream that never ends fails the case instead of hanging the test.
fn decode(kind: ProviderKind, body: &[u8], cuts: &[Index]) -> Outcome {
    let chunks = split(body, cuts);
    let (answer, answered) = mpsc::channel();
    let worker = thread::spawn(move || {
        // The receiver is gone only once the deadline passed and the case failed.
        let _ = answer.send(drain(kind, chunks));
    });
    match answered.recv_timeout(DEADLINE) {
        Ok(outcome) => outcome,
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{kind}: {:?} was still decoding after {DEADLINE:?}", Body(body.to_vec()))
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => panic!("{kind}: the decoding thread ended without an outcome"),
        },
    }
}

/// Reads the decoded stream to its end. All its input is there, so every
/// poll must be ready (a pending one would wait for ever), and a stream that
/// gives more items than its body has bytes is not going to end.
fn drain(kind: ProviderKind, chunks: Vec<Vec<u8>>) -> Outcome {
    let limit = chunks.iter().map(Vec::len).sum::<usize>() + 1;
    let bytes = futures_util::stream::iter(chunks.into_iter().map(Ok::<_, Infallible>));
    let mut stream = driver::decode_as(kind, bytes);
    let mut outcome = Vec::new();
    loop {
        let Some(next) = stream.next().now_or_never() else {
            panic!("{kind}: the stream is pending although its whole body is ready");
        };
        let Some(item) = next else { return outcome };
        outcome.push(item.map_err(|err| format!("{}: {err}", err.kind())));
        assert!(outcome.len() <= limit, "{kind}: more items than body bytes, the stream does not end: {outcome:?}");
    }
}

/// `body` as chunks, cut at each of `cuts` (empty chunks included).
fn split(body: &[u8], cuts: &[Index]) -> Vec<Vec<u8>> {
    let mut ends: Vec<usize> = cuts.iter().map(|cut| cut.index(body.len() + 1)).collect();
    ends.sort_unstable();
    ends.push(body.len());
    let mut start = 0;
    ends.into_iter()
        .map(|end| {
            let chunk = body[start..end].to_vec();
            start = end;
            chunk
        })
        .collect()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle)
}
