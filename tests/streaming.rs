//! A committed stream, end to end: the client going away, usage on request,
//! and what the client sees of a stream that breaks after it started.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::{Duration, Instant};

use baton::mock::{Fault, MockProvider};
use baton::providers::ProviderKind;
use serde_json::json;
use support::{
    CHAT, Proxy, Spawned, chat_body, closes_early_within, eventually, first_chunk, mocks_toml, open_chat, post_chat,
    run,
};

const HARD_LIMIT: Duration = Duration::from_secs(20);
/// How soon the provider must see its connection closed once the client leaves.
const CLOSE_BOUND: Duration = Duration::from_millis(200);

/// The client reads the first chunk, then goes away: the provider's connection
/// must close at once, so no more tokens are paid for.
async fn disconnect_mid_stream(kind: ProviderKind) {
    let provider = MockProvider::new(kind).marker("only").tokens(200).gap(Duration::from_millis(20)).spawned().await;
    let proxy = Proxy::start(&mocks_toml(&[("only", &provider)], 2000, 2000)).await;
    let mut response = open_chat(&proxy, &chat_body(true)).await;
    assert_eq!(response.status(), 200);
    let first = first_chunk(&mut response).await;
    assert!(String::from_utf8_lossy(&first).contains("only0"), "the stream had started");
    let before = provider.closed_early();
    drop(response);
    let closed = closes_early_within(&provider, before, CLOSE_BOUND).await;
    assert!(closed, "the provider's connection was still open {CLOSE_BOUND:?} after the client left");
    let requests = provider.requests().len();
    assert_eq!(requests, 1, "baton did not retry a stream the client abandoned");
}

#[test]
fn client_disconnect_closes_openai_upstream() {
    run(HARD_LIMIT, disconnect_mid_stream(ProviderKind::OpenAi));
}

#[test]
fn client_disconnect_closes_anthropic_upstream() {
    run(HARD_LIMIT, disconnect_mid_stream(ProviderKind::Anthropic));
}

#[test]
fn client_disconnect_closes_gemini_upstream() {
    run(HARD_LIMIT, disconnect_mid_stream(ProviderKind::Gemini));
}

/// A client that gives up while baton waits for the first token must not
/// leave an attempt running upstream.
#[test]
fn client_disconnect_before_commit_closes_upstream() {
    run(HARD_LIMIT, async {
        let provider = MockProvider::openai().fault(Fault::StallFirstToken).spawned().await;
        let proxy = Proxy::start(&mocks_toml(&[("only", &provider)], 10_000, 10_000)).await;
        let url = proxy.url(CHAT);
        let request = tokio::spawn(async move { reqwest::Client::new().post(url).json(&chat_body(true)).send().await });
        // Should the request never arrive, the hard limit fails the test.
        eventually(HARD_LIMIT, || async { !provider.requests().is_empty() }).await;
        let before = provider.closed_early();
        request.abort();
        let closed = closes_early_within(&provider, before, CLOSE_BOUND).await;
        assert!(closed, "the upstream attempt outlived the client by more than {CLOSE_BOUND:?}");
    });
}

#[test]
fn include_usage_adds_a_final_usage_chunk_before_done() {
    run(HARD_LIMIT, async {
        for kind in ProviderKind::ALL {
            let provider = MockProvider::new(kind).tokens(5).spawned().await;
            let proxy = Proxy::start(&mocks_toml(&[("only", &provider)], 2000, 2000)).await;
            let mut body = chat_body(true);
            body["stream_options"] = json!({ "include_usage": true });
            let got = post_chat(&proxy, &body).await;
            let chunks = got.chunks();
            let last = chunks.last().expect("chunks");
            assert_eq!(last["choices"], json!([]), "{kind}: the usage chunk has no choices");
            assert_eq!(last["usage"]["prompt_tokens"], 10, "{kind}: input tokens from the provider");
            assert_eq!(last["usage"]["completion_tokens"], 5, "{kind}: output tokens from the provider");
            assert_eq!(last["usage"]["total_tokens"], 15, "{kind}: total");
            assert!(got.saw_done(), "{kind}: [DONE] follows the usage chunk");
            let finish = chunks.iter().filter_map(|c| c["choices"][0]["finish_reason"].as_str()).collect::<Vec<_>>();
            assert_eq!(finish, vec!["stop"], "{kind}: one finish reason");

            let plain = post_chat(&proxy, &chat_body(true)).await;
            assert!(plain.chunks().iter().all(|c| c.get("usage").is_none()), "{kind}: no usage unless asked for");
        }
    });
}

#[test]
fn first_chunk_carries_the_assistant_role_and_content() {
    run(HARD_LIMIT, async {
        let provider = MockProvider::anthropic().marker("word").spawned().await;
        let proxy = Proxy::start(&mocks_toml(&[("only", &provider)], 2000, 2000)).await;
        let got = post_chat(&proxy, &chat_body(true)).await;
        let first = got.chunks().into_iter().next().expect("a chunk");
        assert_eq!(first["object"], "chat.completion.chunk");
        assert_eq!(first["choices"][0]["delta"], json!({ "role": "assistant", "content": "word0" }));
    });
}

/// The idle timeout bounds the silence between events, not the answer: an
/// answer that keeps coming runs well past it.
#[test]
fn a_steady_answer_outlasts_the_idle_timeout() {
    run(HARD_LIMIT, async {
        let provider = MockProvider::openai().tokens(12).gap(Duration::from_millis(50)).spawned().await;
        let proxy = Proxy::start(&mocks_toml(&[("only", &provider)], 2000, 250)).await;
        let started = Instant::now();
        let got = post_chat(&proxy, &chat_body(true)).await;
        assert!(got.saw_done(), "the whole answer arrived: {:?}", got.error_event());
        assert_eq!(got.streamed_text(), provider.provider().expected_text());
        assert!(started.elapsed() > Duration::from_millis(500), "longer than two idle timeouts");
    });
}

/// After commit a stall ends the stream with an error event within the idle
/// timeout, not a hang, even when the provider never closes.
#[test]
fn midstream_stall_ends_within_idle_timeout() {
    run(HARD_LIMIT, async {
        let provider = MockProvider::gemini().fault(Fault::MidstreamStall).spawned().await;
        let proxy = Proxy::start(&mocks_toml(&[("only", &provider)], 2000, 300)).await;
        let got = post_chat(&proxy, &chat_body(true)).await;
        assert!(!got.saw_done(), "no [DONE] after a stall");
        assert_eq!(got.error_event().expect("error event")["error"]["code"], "idle_timeout");
        assert!(got.total < Duration::from_millis(300 + 700), "ended after {:?}", got.total);
        let closed = closes_early_within(&provider, 0, CLOSE_BOUND).await;
        assert!(closed, "the stalled upstream connection was dropped");
    });
}
