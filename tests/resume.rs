//! Mid-stream resume: a stream that breaks after it reached the client is
//! continued by the next candidate and spliced in, so the client holds one
//! complete answer and one `[DONE]` — whatever the continuing provider's
//! dialect, and whether it continues cleanly, repeats itself or restarts.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::mock::{Continuation, Fault, MockHandle, MockProvider, wire};
use baton::providers::ProviderKind;
use serde_json::Value;
use support::{ChatConfig, Proxy, Received, Spawned, chat_body, post_chat, run};

const HARD_LIMIT: Duration = Duration::from_secs(20);
const WORDS: usize = 10;

fn story(kind: ProviderKind) -> MockProvider {
    MockProvider::new(kind).marker("story").tokens(WORDS)
}

/// A route "chat" that resumes, over `targets` (name, mock, extra target keys).
fn resuming(route_extra: &str, targets: &[(&str, &MockHandle, &str)]) -> String {
    let route = ChatConfig::new().keys("idle_timeout_ms = 300\non_midstream_failure = \"resume\"").keys(route_extra);
    let route = targets.iter().fold(route, |route, (name, mock, extra)| route.mock(name, mock).target_keys(extra));
    route.toml()
}

fn assert_one_complete_answer(got: &Received, context: &str) {
    assert_eq!(got.status, 200, "{context}: {}", got.raw);
    assert_eq!(
        got.streamed_text(),
        wire::answer_text("story", WORDS),
        "{context}: every word once, in order: {}",
        got.raw
    );
    assert!(got.error_event().is_none(), "{context}: no error event: {}", got.raw);
    assert_eq!(got.data_events().iter().filter(|d| *d == "[DONE]").count(), 1, "{context}: one [DONE]");
    let finishes = got.chunks().iter().filter(|c| c["choices"][0]["finish_reason"].is_string()).count();
    assert_eq!(finishes, 1, "{context}: one finish reason");
}

#[test]
fn every_kind_continues_every_kind_of_seam() {
    run(HARD_LIMIT, async {
        let seams = [Continuation::Clean, Continuation::RepeatLast(2), Continuation::Restart];
        for kind in ProviderKind::ALL {
            for seam in seams {
                for fault in [Fault::MidstreamClose, Fault::MidstreamStall] {
                    let breaks = story(ProviderKind::OpenAi).fault(fault).tokens_before_fault(4).spawned().await;
                    let continues = story(kind).continuation(seam).spawned().await;
                    let proxy =
                        Proxy::start(&resuming("", &[("breaks", &breaks, ""), ("continues", &continues, "")])).await;
                    let got = post_chat(&proxy, &chat_body(true)).await;
                    let context = format!("{kind} continuing after {} with {seam:?}", fault.name());
                    assert_one_complete_answer(&got, &context);
                    assert_eq!(
                        got.header("x-baton-provider"),
                        "breaks",
                        "{context}: the headers name the first provider"
                    );
                    let asked = continues.requests().pop().expect("the continuing provider was asked");
                    assert!(
                        asked.body.to_string().contains("story0 story1 story2 story3"),
                        "{context}: it got the partial answer"
                    );
                }
            }
        }
    });
}

#[test]
fn malformed_and_error_events_after_commit_are_resumed_too() {
    run(HARD_LIMIT, async {
        for (fault, kind) in
            [(Fault::MidstreamClose, ProviderKind::Gemini), (Fault::MidstreamStall, ProviderKind::Anthropic)]
        {
            let breaks = story(kind).fault(fault).tokens_before_fault(2).spawned().await;
            let continues = story(ProviderKind::OpenAi).spawned().await;
            let proxy = Proxy::start(&resuming("", &[("breaks", &breaks, ""), ("continues", &continues, "")])).await;
            assert_one_complete_answer(&post_chat(&proxy, &chat_body(true)).await, fault.name());
        }
    });
}

fn last_message(body: &Value) -> (String, String) {
    let list = ["messages", "contents", "input"].iter().find_map(|list| body.get(*list));
    let messages = list.and_then(Value::as_array).expect("messages");
    let last = messages.last().expect("a message");
    let role = last["role"].as_str().unwrap_or_default().to_owned();
    let text = ["/content", "/parts/0/text", "/content/0/text"].iter().find_map(|at| last.pointer(at)?.as_str());
    let text = text.unwrap_or_default().to_owned();
    (role, text)
}

#[test]
fn prefill_is_used_only_where_declared() {
    run(HARD_LIMIT, async {
        for kind in ProviderKind::ALL {
            let breaks =
                story(ProviderKind::Gemini).fault(Fault::MidstreamClose).tokens_before_fault(3).spawned().await;
            let prefills = story(kind).spawned().await;
            let proxy =
                Proxy::start(&resuming("", &[("breaks", &breaks, ""), ("prefills", &prefills, "prefill = true")]))
                    .await;
            assert_one_complete_answer(&post_chat(&proxy, &chat_body(true)).await, &format!("{kind} prefill"));
            let (role, text) = last_message(&prefills.requests()[0].body);
            assert!(
                role == "assistant" || role == "model",
                "{kind}: the partial answer is prefilled as the model's own"
            );
            assert_eq!(text, "story0 story1 story2");

            let instructs = story(kind).spawned().await;
            let proxy = Proxy::start(&resuming("", &[("breaks", &breaks, ""), ("instructs", &instructs, "")])).await;
            assert_one_complete_answer(&post_chat(&proxy, &chat_body(true)).await, &format!("{kind} instruction"));
            let (role, text) = last_message(&instructs.requests()[0].body);
            assert_eq!(role, "user", "{kind}: without prefill, a final user message asks for the rest");
            assert!(text.contains("<partial>story0 story1 story2</partial>"), "{kind}: {text}");
        }
    });
}

#[test]
fn a_rejected_prefill_falls_back_to_an_instruction_and_is_never_the_clients_error() {
    run(HARD_LIMIT, async {
        let breaks = story(ProviderKind::OpenAi).fault(Fault::MidstreamClose).tokens_before_fault(5).spawned().await;
        let picky =
            story(ProviderKind::Anthropic).rejects_prefill().continuation(Continuation::RepeatLast(1)).spawned().await;
        let proxy = Proxy::start(&resuming("", &[("breaks", &breaks, ""), ("picky", &picky, "prefill = true")])).await;
        let got = post_chat(&proxy, &chat_body(true)).await;
        assert_one_complete_answer(&got, "prefill rejected");
        assert!(!got.raw.contains("prefill"), "the rejection never reaches the client");
        let requests = picky.requests();
        assert_eq!(requests.len(), 2, "a prefill, then an instruction");
        assert_eq!(last_message(&requests[0].body).0, "assistant");
        assert_eq!(last_message(&requests[1].body).0, "user");
    });
}

#[test]
fn resumes_are_bounded_by_max_resumes() {
    run(HARD_LIMIT, async {
        let first = story(ProviderKind::OpenAi).fault(Fault::MidstreamClose).tokens_before_fault(3).spawned().await;
        let second = story(ProviderKind::Gemini).fault(Fault::MidstreamClose).tokens_before_fault(3).spawned().await;
        let third = story(ProviderKind::Anthropic).spawned().await;
        let targets = [("first", &first, ""), ("second", &second, ""), ("third", &third, "")];

        let once = Proxy::start(&resuming("", &targets)).await;
        let got = post_chat(&once, &chat_body(true)).await;
        assert_eq!(
            got.streamed_text(),
            wire::answer_text("story", 6),
            "the first continuation went on, then broke too"
        );
        assert!(!got.saw_done(), "one resume allowed: the second break ends the stream");
        assert_eq!(got.error_event().expect("an error event")["error"]["code"], "truncated");

        let twice = Proxy::start(&resuming("max_resumes = 2", &targets)).await;
        assert_one_complete_answer(&post_chat(&twice, &chat_body(true)).await, "two resumes");
    });
}

#[test]
fn no_candidate_to_continue_ends_with_an_error() {
    run(HARD_LIMIT, async {
        let breaks = story(ProviderKind::Anthropic).fault(Fault::MidstreamClose).tokens_before_fault(3).spawned().await;
        let down = story(ProviderKind::OpenAi).fault(Fault::Http5xx).spawned().await;
        let proxy = Proxy::start(&resuming("", &[("breaks", &breaks, ""), ("down", &down, "")])).await;
        let got = post_chat(&proxy, &chat_body(true)).await;
        assert_eq!(got.streamed_text(), wire::answer_text("story", 3));
        assert!(!got.saw_done());
        let error = got.error_event().expect("an error event");
        assert_eq!(error["error"]["code"], "truncated", "the code says what broke the stream");
        assert!(error["error"]["message"].as_str().unwrap_or_default().contains("resuming failed"), "{error}");
    });
}

#[test]
fn answers_with_tool_calls_are_not_resumed() {
    run(HARD_LIMIT, async {
        let breaks =
            story(ProviderKind::OpenAi).tool_call().fault(Fault::MidstreamClose).tokens_before_fault(2).spawned().await;
        let continues = story(ProviderKind::Gemini).spawned().await;
        let proxy = Proxy::start(&resuming("", &[("breaks", &breaks, ""), ("continues", &continues, "")])).await;
        let got = post_chat(&proxy, &chat_body(true)).await;
        assert!(
            got.chunks().iter().any(|c| c["choices"][0]["delta"]["tool_calls"].is_array()),
            "the tool call reached the client"
        );
        assert!(got.error_event().is_some(), "an error event instead of a resume");
        assert!(continues.requests().is_empty(), "nobody was asked to continue");
    });
}

#[test]
fn usage_adds_up_across_a_resume() {
    run(HARD_LIMIT, async {
        let breaks = story(ProviderKind::OpenAi).fault(Fault::MidstreamClose).tokens_before_fault(4).spawned().await;
        let continues = story(ProviderKind::Anthropic).spawned().await;
        let proxy = Proxy::start(&resuming("", &[("breaks", &breaks, ""), ("continues", &continues, "")])).await;
        let mut body = chat_body(true);
        body["stream_options"] = serde_json::json!({ "include_usage": true });
        let got = post_chat(&proxy, &body).await;
        let usage = got.chunks().last().expect("chunks")["usage"].clone();
        assert_eq!(usage["completion_tokens"], 6, "the continuation's 6 words (the broken attempt reported none)");
        assert_eq!(usage["prompt_tokens"], 10, "the continuation's prompt");
    });
}
