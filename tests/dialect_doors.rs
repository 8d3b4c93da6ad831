//! The Anthropic Messages door (`POST /v1/messages`) and the OpenAI Responses
//! door (`POST /v1/responses`) over real loopback TCP: the fault classes of
//! docs/architecture.md with each provider kind as the failing primary,
//! streamed and whole, answered in the door's own events and body with no byte
//! of the failed attempt, and a failure after commit ended with the door's own
//! failure event and never its end of a complete answer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::mock::{Fault, MockProvider};
use baton::providers::ProviderKind;
use serde_json::{Value, json};
use support::matrix::*;
use support::{Proxy, Received, Spawned, mocks_toml, post_with, within};

const FIRST_TOKEN_MS: u64 = 500;
const IDLE_MS: u64 = 500;
const SECONDARY_FIRST_TOKEN_MS: u64 = 50;
/// Slack for a loaded two-core machine; the bounds test behaviour, not speed.
const MARGIN_MS: u64 = 500;
const HARD_LIMIT: Duration = Duration::from_secs(20);
const PRIMARY_MARKER: &str = "leaky";

/// A client dialect's door: where it is, what its clients send, and how
/// they read an answer.
#[derive(Clone, Copy, PartialEq)]
enum Door {
    Messages,
    Responses,
}

impl Door {
    fn path(self) -> &'static str {
        match self {
            Door::Messages => "/v1/messages",
            Door::Responses => "/v1/responses",
        }
    }

    fn body(self, stream: bool) -> Value {
        match self {
            Door::Messages => json!({ "model": "chat", "max_tokens": 256, "stream": stream,
                "messages": [{ "role": "user", "content": "say something" }] }),
            Door::Responses => json!({ "model": "chat", "stream": stream, "input": "say something" }),
        }
    }

    /// The text a client of this door assembles from a streamed answer.
    fn streamed_text(self, events: &[(String, Value)]) -> String {
        let (name, field) = match self {
            Door::Messages => ("content_block_delta", "/delta/text"),
            Door::Responses => ("response.output_text.delta", "/delta"),
        };
        events.iter().filter(|(n, _)| n == name).filter_map(|(_, data)| data.pointer(field)?.as_str()).collect()
    }

    /// The text of a whole answer.
    fn whole_text(self, body: &Value) -> String {
        match self {
            Door::Messages => body.pointer("/content/0/text"),
            Door::Responses => body.pointer("/output/0/content/0/text"),
        }
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
    }

    /// A complete stream starts and ends as this door's clients expect.
    fn check_stream(self, events: &[(String, Value)], name: &str) {
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        let (first, last, model) = match self {
            Door::Messages => ("message_start", "message_stop", "/message/model"),
            Door::Responses => ("response.created", "response.completed", "/response/model"),
        };
        assert_eq!(names.first(), Some(&first), "{name}: {names:?}");
        assert_eq!(names.last(), Some(&last), "{name}: {names:?}");
        assert_eq!(events[0].1.pointer(model), Some(&json!("secondary-model")), "{name}: the model that answered");
        let usage = match self {
            Door::Messages => events.iter().find(|(n, _)| n == "message_delta").map(|(_, d)| &d["usage"]),
            Door::Responses => events.last().map(|(_, d)| &d["response"]["usage"]),
        };
        let output_tokens = usage.and_then(|usage| usage["output_tokens"].as_u64());
        assert!(output_tokens.is_some_and(|n| n > 0), "{name}: usage at the end: {usage:?}");
        if self == Door::Responses {
            let numbers: Vec<u64> = events.iter().filter_map(|(_, d)| d["sequence_number"].as_u64()).collect();
            assert_eq!(numbers, (0..events.len() as u64).collect::<Vec<_>>(), "{name}: every event numbered");
        }
    }

    /// A whole answer is one body of this door's shape.
    fn check_whole(self, body: &Value, name: &str) {
        let (kind, usage) = match self {
            Door::Messages => (("/type", "message"), "/usage/output_tokens"),
            Door::Responses => (("/object", "response"), "/usage/output_tokens"),
        };
        assert_eq!(body.pointer(kind.0), Some(&json!(kind.1)), "{name}: one body: {body}");
        assert_eq!(body["model"], "secondary-model", "{name}");
        assert!(body.pointer(usage).and_then(Value::as_u64).is_some_and(|n| n > 0), "{name}: usage: {body}");
    }

    /// A stream that broke after commit ends with this door's failure event.
    fn check_failure(self, events: &[(String, Value)], name: &str) {
        let (last, data) = events.last().cloned().unwrap_or_default();
        match self {
            Door::Messages => {
                assert!(events.iter().all(|(n, _)| n != "message_stop"), "{name}: no message_stop after a failure");
                assert_eq!(last, "error", "{name}: an error event ends the stream");
                assert_eq!(data["error"]["type"], "api_error", "{name}: {data}");
            }
            Door::Responses => {
                assert!(events.iter().all(|(n, _)| n != "response.completed"), "{name}: never completed");
                assert_eq!(last, "response.failed", "{name}: response.failed ends the stream");
                assert_eq!(data["response"]["status"], "failed", "{name}: {data}");
            }
        }
    }
}

async fn run(door: Door, kind: ProviderKind, fault: Fault, stream: bool) {
    within(HARD_LIMIT, async {
        let (_primary, secondary, config) = primary_then(kind, fault, secondary(kind)).await;
        let proxy = Proxy::start(&config).await;
        let got = post_with(&proxy, door.path(), &door.body(stream), &[]).await;
        let name = fault.name();
        if matches!(fault, Fault::MidstreamStall | Fault::MidstreamClose) && stream {
            return expect_midstream_failure(door, &got, fault);
        }
        assert_eq!(got.status, 200, "{name}: the secondary answers; body: {}", got.raw);
        assert_eq!(got.header("x-baton-provider"), "secondary", "{name}: the secondary answered");
        assert_eq!(got.header("x-baton-attempts"), "2", "{name}: two attempts were made");
        assert!(!got.raw.contains(PRIMARY_MARKER), "{name}: a byte of the failed attempt leaked: {}", got.raw);
        assert!(!got.raw.contains("mock"), "{name}: the primary's error leaked: {}", got.raw);
        let expected = secondary.provider().expected_text();
        if stream {
            assert_eq!(got.header("content-type"), "text/event-stream", "{name}: an SSE answer");
            let events = got.named_events();
            assert_eq!(door.streamed_text(&events), expected, "{name}: exactly the secondary's text");
            door.check_stream(&events, name);
            let bound = if waits_for_deadline(fault) {
                FIRST_TOKEN_MS + SECONDARY_FIRST_TOKEN_MS + MARGIN_MS
            } else {
                FIRST_TOKEN_MS
            };
            assert!(got.first_byte <= Duration::from_millis(bound), "{name}: first byte after {:?}", got.first_byte);
        } else {
            assert_eq!(door.whole_text(&got.json()), expected, "{name}: the secondary's whole text");
            door.check_whole(&got.json(), name);
        }
        if waits_for_deadline(fault) {
            assert!(got.first_byte >= Duration::from_millis(FIRST_TOKEN_MS), "{name}: held until the deadline");
        }
    })
    .await;
}

fn expect_midstream_failure(door: Door, got: &Received, fault: Fault) {
    let name = fault.name();
    assert_eq!(got.status, 200, "{name}: the primary committed");
    assert_eq!(got.header("x-baton-provider"), "primary", "{name}");
    let events = got.named_events();
    let before = baton::mock::wire::answer_text(PRIMARY_MARKER, 3);
    assert_eq!(door.streamed_text(&events), before, "{name}: the tokens before the fault");
    door.check_failure(&events, name);
    let bound = Duration::from_millis(IDLE_MS + MARGIN_MS);
    assert!(got.total <= bound, "{name}: the stream ended after {:?}", got.total);
}

macro_rules! matrix {
    ($($door_name:ident => $door:expr),* $(,)?) => {
        $(
            mod $door_name {
                use super::*;
                matrix!(@kinds $door;
                    openai_primary => ProviderKind::OpenAi,
                    openai_responses_primary => ProviderKind::OpenAiResponses,
                    anthropic_primary => ProviderKind::Anthropic,
                    gemini_primary => ProviderKind::Gemini,
                );
            }
        )*
    };
    (@kinds $door:expr; $($kind_name:ident => $kind:expr),* $(,)?) => {
        $(
            mod $kind_name {
                use super::*;
                crate::with_faults!(all, matrix!(@faults $door, $kind;));
            }
        )*
    };
    (@faults $door:expr, $kind:expr; $($name:ident => $fault:expr),* $(,)?) => {
        mod streamed {
            use super::*;
            $( #[tokio::test] async fn $name() { run($door, $kind, $fault, true).await; } )*
        }
        mod whole {
            use super::*;
            $( #[tokio::test] async fn $name() { run($door, $kind, $fault, false).await; } )*
        }
    };
}

matrix! {
    messages => Door::Messages,
    responses => Door::Responses,
}

/// A Responses client that asks for a reasoning summary sees any provider's
/// reasoning as one, before the answer; one that does not, sees none.
#[tokio::test]
async fn a_reasoning_summary_asked_for_comes_from_any_kind() {
    within(HARD_LIMIT, async {
        let claude = MockProvider::anthropic().reasoning(2).spawned().await;
        let proxy = Proxy::start(&mocks_toml(&[("claude", &claude)], FIRST_TOKEN_MS, IDLE_MS)).await;
        let mut body = Door::Responses.body(true);
        let plain = post_with(&proxy, "/v1/responses", &body, &[]).await.named_events();
        assert!(plain.iter().all(|(name, _)| !name.contains("reasoning")), "not asked for: {plain:?}");
        body["reasoning"] = json!({ "effort": "low", "summary": "auto" });
        let events = post_with(&proxy, "/v1/responses", &body, &[]).await.named_events();
        let items: Vec<&Value> = events
            .iter()
            .filter(|(name, _)| name == "response.output_item.done")
            .map(|(_, data)| &data["item"]["type"])
            .collect();
        assert_eq!(items, [&json!("reasoning"), &json!("message")], "{events:?}");
        assert_eq!(Door::Responses.streamed_text(&events), claude.provider().expected_text());
    })
    .await;
}
