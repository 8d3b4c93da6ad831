//! What the Messages door's encoder writes, read back by baton's own
//! Anthropic decoder: what an anthropic-kind provider says comes out of the
//! Messages door as it went in. The dialects and the providers sit side by
//! side in the crate, so a test that uses both lives here, outside them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

use baton::dialect::anthropic::MessageEncoder;
use baton::dialect::test_support::{call, encoded, named_events as events};
use baton::event::{Event, FinishReason, Usage};
use baton::providers::{ProviderKind, SseEvent};
use bytes::BytesMut;

fn encode(answer: Vec<Event>) -> BytesMut {
    encoded(MessageEncoder::new("msg_1", "claude-x"), answer)
}

#[test]
fn anthropics_own_decoder_reads_back_what_the_encoder_wrote() {
    let answer = vec![
        Event::Usage(Usage { input_tokens: Some(7), output_tokens: Some(0), ..Usage::default() }),
        Event::Reasoning("think".into()),
        Event::Signature("sig".into()),
        Event::Text("one".into()),
        Event::Text(" two".into()),
        call(0, Some("toolu_a"), Some("f"), ""),
        call(0, None, None, "{\"x\":"),
        call(0, None, None, "1}"),
        Event::Usage(Usage { output_tokens: Some(9), ..Usage::default() }),
        Event::Finish(FinishReason::ToolCalls),
    ];
    let out = encode(answer.clone());
    let mut decoder = ProviderKind::Anthropic.adapter().decoder();
    let mut back = Vec::new();
    for (name, data) in events(&out) {
        let sse = SseEvent::new(&name, &data.to_string());
        decoder.on_event(&sse, &mut back).unwrap_or_default();
    }
    assert!(decoder.is_done(), "message_stop ends it");
    let usage_free = |events: &[Event]| -> Vec<Event> {
        events.iter().filter(|event| !matches!(event, Event::Usage(_))).cloned().collect()
    };
    assert_eq!(usage_free(&back), usage_free(&answer));
    let last_usage = back.iter().rev().find_map(|event| match event {
        Event::Usage(usage) => Some(*usage),
        _ => None,
    });
    assert_eq!(last_usage.map(|u| (u.input_tokens, u.output_tokens)), Some((Some(7), Some(9))));
}
