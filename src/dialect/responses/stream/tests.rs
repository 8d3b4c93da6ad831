//! The encoder's events against the Responses API's sequence: items opened,
//! filled and closed in order, every event numbered, the final response
//! whole; and a failure that ends with `response.failed`.

use serde_json::{Map, Value, json};

use super::*;
use crate::dialect::test_support::{call, named_events};
use crate::dialect::{ApiError, Encoder};

fn options() -> Options {
    Options { echo: Map::new(), ..Options::default() }
}

/// Each SSE event of `bytes`, each one's type its name.
fn events(bytes: &[u8]) -> Vec<(String, Value)> {
    let events = named_events(bytes);
    for (name, data) in &events {
        assert_eq!(data["type"], json!(name), "each event's type is its name");
    }
    events
}

fn encode(answer: Vec<Event>) -> (Vec<(String, Value)>, ResponseEncoder) {
    let mut encoder = ResponseEncoder::new("gpt-x", options());
    let mut out = BytesMut::new();
    for event in answer {
        encoder.write_event(event, &mut out);
    }
    encoder.write_done(&mut out);
    (events(&out), encoder)
}

#[test]
fn a_text_answer_is_the_apis_exact_sequence() {
    let (got, _) = encode(vec![
        Event::Usage(Usage { input_tokens: Some(12), ..Usage::default() }),
        Event::Text("Hel\"lo".into()),
        Event::Text(" you".into()),
        Event::Usage(Usage { output_tokens: Some(5), ..Usage::default() }),
        Event::Finish(FinishReason::Stop),
    ]);
    let names: Vec<&str> = got.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let numbers: Vec<u64> = got.iter().filter_map(|(_, data)| data["sequence_number"].as_u64()).collect();
    assert_eq!(numbers, (0..10).collect::<Vec<_>>());
    let item_id = got[2].1["item"]["id"].clone();
    assert!(item_id.as_str().is_some_and(|id| id.starts_with("msg_")), "{item_id}");
    assert_eq!(
        got[4].1,
        json!({ "type": "response.output_text.delta", "sequence_number": 4, "item_id": item_id,
            "output_index": 0, "content_index": 0, "delta": "Hel\"lo", "logprobs": [] })
    );
    assert_eq!(got[6].1["text"], "Hel\"lo you");
    let response = &got[9].1["response"];
    assert_eq!(response["status"], "completed");
    assert_eq!(response["store"], false);
    assert_eq!(response["model"], "gpt-x");
    assert_eq!(response["output"][0]["content"][0]["text"], "Hel\"lo you");
    assert_eq!(
        response["usage"],
        json!({ "input_tokens": 12, "input_tokens_details": { "cached_tokens": 0 }, "output_tokens": 5,
            "output_tokens_details": { "reasoning_tokens": 0 }, "total_tokens": 17 })
    );
    assert_eq!(got[0].1["response"]["status"], "in_progress");
}

#[test]
fn reasoning_text_and_calls_are_items_in_order() {
    let (got, _) = encode(vec![
        Event::Reasoning("think".into()),
        Event::Text("Checking.".into()),
        call(0, Some("call_a"), Some("get_weather"), ""),
        call(0, None, None, "{\"city\":"),
        call(0, None, None, "\"Paris\"}"),
        call(1, Some("call_b"), Some("get_time"), "{}"),
        Event::Finish(FinishReason::ToolCalls),
    ]);
    let added: Vec<&Value> = got
        .iter()
        .filter(|(name, _)| name == "response.output_item.added")
        .map(|(_, data)| &data["item"]["type"])
        .collect();
    assert_eq!(added, [&json!("reasoning"), &json!("message"), &json!("function_call"), &json!("function_call")]);
    let arguments: String = got
        .iter()
        .filter(|(name, data)| name == "response.function_call_arguments.delta" && data["output_index"] == 2)
        .filter_map(|(_, data)| data["delta"].as_str())
        .collect();
    assert_eq!(arguments, "{\"city\":\"Paris\"}");
    let delta = got.iter().find(|(name, _)| name == "response.function_call_arguments.delta").map(|(_, d)| d);
    assert_eq!(delta.and_then(|d| d.get("content_index")), None, "a call's delta has no part index");
    let response = got.last().map(|(_, data)| data["response"].clone()).unwrap_or_default();
    let output = response["output"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        output[0],
        json!({ "id": output[0]["id"], "type": "reasoning",
        "summary": [{ "type": "summary_text", "text": "think" }] })
    );
    assert_eq!(output[2]["call_id"], "call_a");
    assert_eq!(output[2]["arguments"], "{\"city\":\"Paris\"}");
    assert_eq!(output[3]["name"], "get_time");
    assert_eq!(got.last().map(|(name, _)| name.as_str()), Some("response.completed"));
}

#[test]
fn a_cut_answer_is_incomplete_and_a_broken_one_failed() {
    let (got, _) = encode(vec![Event::Text("partial".into()), Event::Finish(FinishReason::Length)]);
    let (name, last) = got.last().cloned().unwrap_or_default();
    assert_eq!(name, "response.incomplete");
    assert_eq!(last["response"]["incomplete_details"], json!({ "reason": "max_output_tokens" }));

    let mut encoder = ResponseEncoder::new("gpt-x", options());
    let mut out = BytesMut::new();
    encoder.write_event(Event::Text("partial".into()), &mut out);
    let failed = ApiError::new(http::StatusCode::BAD_GATEWAY, crate::dialect::ErrorKind::Upstream, "truncated", "cut");
    encoder.write_failure(&failed, &mut out);
    let got = events(&out);
    let (name, last) = got.last().cloned().unwrap_or_default();
    assert_eq!(name, "response.failed");
    assert_eq!(last["response"]["status"], "failed");
    assert_eq!(last["response"]["error"], json!({ "code": "server_error", "message": "cut" }));
    assert!(got.iter().all(|(name, _)| name != "response.completed"));
    let panicked = events(&ResponseEncoder::panicked());
    assert_eq!(panicked[0].0, "response.failed");
}

#[test]
fn log_probabilities_ride_on_their_text_delta_and_in_the_done_part() {
    let logprobs = |json: &str| {
        let raw = serde_json::value::RawValue::from_string(json.to_owned()).unwrap_or_else(|err| panic!("{err}"));
        Event::Logprobs(Logprobs::from_list(raw).unwrap_or_else(|| panic!("a list")))
    };
    let (got, _) = encode(vec![
        logprobs(r#"[{"token":"Hel","logprob":-0.5,"top_logprobs":[]}]"#),
        Event::Text("Hel".into()),
        Event::Text("lo".into()),
        Event::Finish(FinishReason::Stop),
    ]);
    let deltas: Vec<&Value> = got
        .iter()
        .filter(|(name, _)| name == "response.output_text.delta")
        .map(|(_, data)| &data["logprobs"])
        .collect();
    let first = json!([{ "token": "Hel", "logprob": -0.5, "top_logprobs": [] }]);
    assert_eq!(deltas, [&first, &json!([])], "each delta carries its own tokens' log probabilities");
    let done = got.iter().find(|(name, _)| name == "response.output_text.done").map(|(_, data)| &data["logprobs"]);
    assert_eq!(done, Some(&first));
    let completed = &got.last().map(|(_, data)| data["response"]["output"][0]["content"][0]["logprobs"].clone());
    assert_eq!(completed.as_ref(), Some(&first));
}

#[test]
fn an_output_item_s_id_names_its_response() {
    let mut encoder = ResponseEncoder::new("m", options());
    let mut out = BytesMut::new();
    encoder.write_event(Event::Text("hi".into()), &mut out);
    encoder.write_event(Event::Finish(FinishReason::Stop), &mut out);
    let response = encoder.into_response();
    let item = response["output"][0]["id"].as_str().expect("an item id").to_owned();
    assert_eq!(response_of_item(&item).as_deref(), response["id"].as_str(), "{item}");
    assert_eq!(response_of_item("msg_123"), None, "an id baton did not make names none");
    assert_eq!(response_of_item("rs_zz"), None);
}
