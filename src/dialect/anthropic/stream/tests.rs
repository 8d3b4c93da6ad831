//! The encoder's events, checked against Anthropic's sequence. Reading them
//! back with baton's own Anthropic decoder needs the providers, a module
//! beside this one, so that test is `tests/encoder_round_trip.rs`.

use serde_json::{Value, json};

use super::*;
use crate::dialect::test_support::{call, encoded, named_events as events};

fn encode(answer: Vec<Event>) -> BytesMut {
    encoded(MessageEncoder::new("msg_1", "claude-x"), answer)
}

#[test]
fn a_text_answer_is_anthropics_exact_sequence() {
    let out = encode(vec![
        Event::Usage(Usage { input_tokens: Some(12), output_tokens: Some(1), ..Usage::default() }),
        Event::Text("Hel\"lo".into()),
        Event::Text(" you".into()),
        Event::Usage(Usage { output_tokens: Some(5), ..Usage::default() }),
        Event::Finish(FinishReason::Stop),
    ]);
    let got = events(&out);
    let names: Vec<&str> = got.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(
        got[0].1,
        json!({ "type": "message_start", "message": { "id": "msg_1", "type": "message", "role": "assistant",
            "model": "claude-x", "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": { "input_tokens": 12, "output_tokens": 1 } } })
    );
    assert_eq!(
        got[2].1,
        json!({ "type": "content_block_start", "index": 0, "content_block": { "type": "text", "text": "" } })
    );
    assert_eq!(
        got[3].1,
        json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "text_delta", "text": "Hel\"lo" } })
    );
    assert_eq!(got[5].1, json!({ "type": "content_block_stop", "index": 0 }));
    assert_eq!(
        got[6].1,
        json!({ "type": "message_delta", "delta": { "stop_reason": "end_turn", "stop_sequence": null },
            "usage": { "input_tokens": 12, "output_tokens": 5 } }),
        "the final usage is cumulative"
    );
    assert_eq!(got[7].1, json!({ "type": "message_stop" }));
}

#[test]
fn thinking_then_text_then_tools_are_blocks_in_order() {
    let out = encode(vec![
        Event::Reasoning("hmm".into()),
        Event::Signature("sig".into()),
        Event::Text("Let me check.".into()),
        call(0, Some("toolu_a"), Some("get_weather"), ""),
        call(0, None, None, "{\"city\":\"Paris\"}"),
        call(1, Some("toolu_b"), Some("get_time"), "{}"),
        Event::Finish(FinishReason::ToolCalls),
    ]);
    let got = events(&out);
    let starts: Vec<(&Value, &Value)> = got
        .iter()
        .filter(|(name, _)| name == "content_block_start")
        .map(|(_, data)| (&data["index"], &data["content_block"]))
        .collect();
    assert_eq!(
        starts,
        [
            (&json!(0), &json!({ "type": "thinking", "thinking": "", "signature": "" })),
            (&json!(1), &json!({ "type": "text", "text": "" })),
            (&json!(2), &json!({ "type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {} })),
            (&json!(3), &json!({ "type": "tool_use", "id": "toolu_b", "name": "get_time", "input": {} })),
        ]
    );
    let deltas: Vec<&Value> =
        got.iter().filter(|(name, _)| name == "content_block_delta").map(|(_, data)| &data["delta"]).collect();
    assert_eq!(
        deltas,
        [
            &json!({ "type": "thinking_delta", "thinking": "hmm" }),
            &json!({ "type": "signature_delta", "signature": "sig" }),
            &json!({ "type": "text_delta", "text": "Let me check." }),
            &json!({ "type": "input_json_delta", "partial_json": "{\"city\":\"Paris\"}" }),
            &json!({ "type": "input_json_delta", "partial_json": "{}" }),
        ]
    );
    let stops = got.iter().filter(|(name, _)| name == "content_block_stop").count();
    assert_eq!(stops, 4, "every block is closed");
    let delta = got.iter().find(|(name, _)| name == "message_delta").map(|(_, data)| &data["delta"]["stop_reason"]);
    assert_eq!(delta, Some(&json!("tool_use")));
}

#[test]
fn an_answer_of_usage_only_still_starts_and_ends_the_message() {
    let got = events(&encode(vec![Event::Usage(Usage::default()), Event::Finish(FinishReason::Stop)]));
    let names: Vec<&str> = got.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["message_start", "ping", "message_delta", "message_stop"]);
}
