//! The fault classes of docs/architecture.md over real loopback TCP: every
//! fault class, with each provider kind as the failing primary, streamed and
//! whole. The client must get exactly the healthy secondary's text, never a
//! byte of the failed attempt, and in time. Every fault before commit is also
//! run for a request that offers tools (the secondary answers with a tool call)
//! and one in JSON mode.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

mod support;

use std::time::Duration;

use baton::mock::{Fault, MockHandle};
use baton::providers::ProviderKind;
use serde_json::{Value, json};
use support::matrix::*;
use support::{Proxy, Received, chat_body, post_chat, within};

/// What the client asks for.
#[derive(Clone, Copy, PartialEq)]
enum Ask {
    /// Prose.
    Text,
    /// Prose, with a tool offered; the secondary calls it.
    Tools,
    /// Any JSON object.
    Json,
}

impl Ask {
    fn body(self, stream: bool) -> Value {
        let mut body = chat_body(stream);
        match self {
            Ask::Text => {}
            Ask::Tools => {
                body["tools"] = json!([{ "type": "function", "function": { "name": "get_weather",
                    "parameters": { "type": "object", "properties": { "city": { "type": "string" } } } } }]);
            }
            Ask::Json => body["response_format"] = json!({ "type": "json_object" }),
        }
        body
    }
}

/// The id the secondary's tool call reaches the client with.
fn call_id(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenAi | ProviderKind::OpenAiResponses | ProviderKind::Azure => "call_mock",
        ProviderKind::Anthropic | ProviderKind::Bedrock => "toolu_mock",
        // Gemini's calls have no id: baton numbers them (Vertex's Gemini too).
        ProviderKind::Gemini | ProviderKind::Vertex => "call_0",
    }
}

async fn run(kind: ProviderKind, fault: Fault, stream: bool) {
    run_asking(kind, fault, stream, Ask::Text).await;
}

async fn run_asking(kind: ProviderKind, fault: Fault, stream: bool, ask: Ask) {
    within(HARD_LIMIT, async {
        let healthy = secondary(kind);
        let healthy = if ask == Ask::Tools { healthy.tool_call() } else { healthy };
        let (primary, secondary, config) = primary_then(kind, fault, healthy).await;
        let proxy = Proxy::start(&config).await;
        let got = post_chat(&proxy, &ask.body(stream)).await;

        let midstream = matches!(fault, Fault::MidstreamStall | Fault::MidstreamClose);
        if midstream && stream {
            expect_midstream_error(&got, fault);
        } else if ask == Ask::Tools {
            expect_tool_call(
                &got,
                fault,
                stream,
                call_id(secondary.provider_kind()),
                &secondary.provider().expected_text(),
            );
        } else if ask == Ask::Json {
            // The secondary answers a JSON object naming itself, which baton checks and passes on.
            expect_failover(&got, fault, stream, &answered_by(&secondary), json!({ "answer": "clean" }).to_string());
        } else {
            expect_failover(&got, fault, stream, &answered_by(&secondary), secondary.provider().expected_text());
        }
        if ask != Ask::Text && fault != Fault::Refuse {
            let sent = primary.requests().pop().expect("the primary was tried");
            let asked = sent.body.to_string().to_lowercase();
            let carried = if ask == Ask::Tools { "get_weather" } else { "json" };
            assert!(asked.contains(carried), "{}: the primary was sent the request whole: {asked}", fault.name());
        }
    })
    .await;
}

/// The model the secondary is asked for, in its kind's form.
fn answered_by(secondary: &MockHandle) -> String {
    secondary.provider_kind().simulated().model_named("secondary-model")
}

fn expect_failover(got: &Received, fault: Fault, stream: bool, model: &str, expected: String) {
    let fault = fault.name();
    assert_eq!(got.status, 200, "{fault}: the secondary answers; body: {}", got.raw);
    assert_eq!(got.header("x-baton-provider"), "secondary", "{fault}: the secondary answered");
    assert_eq!(got.header("x-baton-model"), model, "{fault}: upstream model header");
    assert_eq!(got.header("x-baton-attempts"), "2", "{fault}: two attempts were made");
    assert!(!got.raw.contains(PRIMARY_MARKER), "{fault}: a byte of the failed attempt leaked: {}", got.raw);
    assert!(!got.raw.contains("mock"), "{fault}: the primary's error leaked: {}", got.raw);
    if stream {
        assert_eq!(got.header("content-type"), "text/event-stream", "{fault}: an SSE answer");
        assert_eq!(got.streamed_text(), expected, "{fault}: the client assembles exactly the secondary's text");
        assert!(got.saw_done(), "{fault}: a complete stream ends with [DONE]");
        assert!(got.error_event().is_none(), "{fault}: no error event in a good stream");
        for chunk in got.chunks() {
            assert_eq!(chunk["model"], model, "{fault}: every chunk names the model that answered");
        }
    } else {
        let body = got.json();
        assert_eq!(body["object"], "chat.completion", "{fault}: one completion body");
        assert_eq!(body["choices"][0]["message"]["content"], expected.as_str(), "{fault}: the secondary's whole text");
        assert_eq!(body["model"], model, "{fault}: the body names the model that answered");
        assert_eq!(body["choices"][0]["finish_reason"], "stop", "{fault}: finish reason");
        assert!(body["usage"]["completion_tokens"].as_u64().is_some_and(|n| n > 0), "{fault}: usage is in the body");
    }
    let bound = if waits_for_deadline_name(fault) {
        FIRST_TOKEN_MS + SECONDARY_FIRST_TOKEN_MS + MARGIN_MS
    } else {
        FIRST_TOKEN_MS
    };
    if stream {
        assert!(
            got.first_byte <= Duration::from_millis(bound),
            "{fault}: first byte after {:?}, expected at most {bound} ms",
            got.first_byte
        );
    }
    if waits_for_deadline_name(fault) {
        assert!(
            got.first_byte >= Duration::from_millis(FIRST_TOKEN_MS),
            "{fault}: failover waited for the first-token deadline, yet the first byte came after only {:?}",
            got.first_byte
        );
    }
}

/// A failover whose answer is the secondary's tool call and text; the
/// failed attempt's bytes are checked as for any failover.
fn expect_tool_call(got: &Received, fault: Fault, stream: bool, id: &str, text: &str) {
    let name = fault.name();
    assert_eq!(got.status, 200, "{name}: the secondary answers; body: {}", got.raw);
    assert_eq!(got.header("x-baton-provider"), "secondary", "{name}: the secondary answered");
    assert_eq!(got.header("x-baton-attempts"), "2", "{name}: two attempts were made");
    assert!(!got.raw.contains(PRIMARY_MARKER), "{name}: a byte of the failed attempt leaked: {}", got.raw);
    assert!(!got.raw.contains("mock5xx") && !got.raw.contains("mock429"), "{name}: the error leaked: {}", got.raw);
    let calls: Vec<Value> = if stream {
        assert!(got.saw_done(), "{name}: a complete stream ends with [DONE]");
        assert!(got.error_event().is_none(), "{name}: no error event in a good stream");
        assert_eq!(got.streamed_text(), text, "{name}: the secondary's text after its call");
        got.chunks().iter().filter_map(|chunk| chunk.pointer("/choices/0/delta/tool_calls/0").cloned()).collect()
    } else {
        assert_eq!(got.json()["choices"][0]["message"]["content"], text, "{name}: the secondary's text");
        got.json().pointer("/choices/0/message/tool_calls/0").cloned().into_iter().collect()
    };
    let first = calls.first().unwrap_or_else(|| panic!("{name}: the tool call reached the client: {}", got.raw));
    assert_eq!(first["id"], id, "{name}: the secondary's call, by its id");
    assert_eq!(first["function"]["name"], "get_weather", "{name}");
    let arguments: String = calls.iter().filter_map(|c| c.pointer("/function/arguments")?.as_str()).collect();
    let arguments: Value = serde_json::from_str(&arguments).unwrap_or_default();
    assert_eq!(arguments, json!({ "city": "Paris" }), "{name}: the call's arguments, whole");
}

fn waits_for_deadline_name(name: &str) -> bool {
    Fault::from_name(name).is_some_and(waits_for_deadline)
}

fn expect_midstream_error(got: &Received, fault: Fault) {
    let fault_name = fault.name();
    assert_eq!(got.status, 200, "{fault_name}: the primary committed");
    assert_eq!(got.header("x-baton-provider"), "primary", "{fault_name}: the primary answered first");
    assert_eq!(
        got.streamed_text(),
        baton::mock::wire::answer_text(PRIMARY_MARKER, 3),
        "{fault_name}: the tokens before the fault"
    );
    assert!(!got.saw_done(), "{fault_name}: no [DONE] after a failed stream: {}", got.raw);
    let error =
        got.error_event().unwrap_or_else(|| panic!("{fault_name}: an error event ends the stream: {}", got.raw));
    let code = error["error"]["code"].as_str().unwrap_or_default();
    let expected = if fault == Fault::MidstreamStall { "idle_timeout" } else { "truncated" };
    assert_eq!(code, expected, "{fault_name}: the error names the failure");
    let last = got.data_events().last().cloned().unwrap_or_default();
    assert!(last.contains("\"error\""), "{fault_name}: the error event is the last event");
    let bound = Duration::from_millis(IDLE_MS + MARGIN_MS);
    assert!(got.total <= bound, "{fault_name}: the stream ended after {:?}, expected within {bound:?}", got.total);
}

macro_rules! matrix {
    ($($kind_name:ident => $kind:expr),* $(,)?) => {
        $(
            mod $kind_name {
                use super::*;
                mod tool_call {
                    use super::*;
                    matrix!(@before_commit $kind, Ask::Tools);
                }
                mod json_mode {
                    use super::*;
                    matrix!(@before_commit $kind, Ask::Json);
                }
                crate::with_faults!(all, matrix!(@faults $kind;));
            }
        )*
    };
    (@before_commit $kind:expr, $ask:expr) => {
        crate::with_faults!(before_commit, matrix!(@asking $kind, $ask;));
    };
    (@asking $kind:expr, $ask:expr; $($name:ident => $fault:expr),* $(,)?) => {
        mod streamed {
            use super::*;
            $( #[tokio::test] async fn $name() { run_asking($kind, $fault, true, $ask).await; } )*
        }
        mod whole {
            use super::*;
            $( #[tokio::test] async fn $name() { run_asking($kind, $fault, false, $ask).await; } )*
        }
    };
    (@faults $kind:expr; $($name:ident => $fault:expr),* $(,)?) => {
        mod streamed {
            use super::*;
            $( #[tokio::test] async fn $name() { run($kind, $fault, true).await; } )*
        }
        mod whole {
            use super::*;
            $( #[tokio::test] async fn $name() { run($kind, $fault, false).await; } )*
        }
    };
}

matrix! {
    openai_primary => ProviderKind::OpenAi,
    openai_responses_primary => ProviderKind::OpenAiResponses,
    anthropic_primary => ProviderKind::Anthropic,
    gemini_primary => ProviderKind::Gemini,
    azure_primary => ProviderKind::Azure,
    bedrock_primary => ProviderKind::Bedrock,
    vertex_primary => ProviderKind::Vertex,
}
