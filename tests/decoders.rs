//! The decoders on recorded transcripts of each provider's wire format
//! (`fixtures/<provider>/*.sse`): whole, split at every byte, and cut before
//! the provider's end marker, which must read as truncation.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "a test fails by panicking")]

use std::convert::Infallible;

use baton::event::{Event, FinishReason, ToolCallDelta, Usage};
use baton::providers::{ProviderKind, driver};
use futures_util::StreamExt;

fn fixture(kind: ProviderKind, name: &str) -> String {
    String::from_utf8(fixture_bytes(kind, name)).unwrap_or_else(|err| panic!("{kind}/{name}: {err}"))
}

/// A transcript's bytes: `<name>.sse`, or `<name>.eventstream` for a kind
/// that answers in AWS's event stream.
fn fixture_bytes(kind: ProviderKind, name: &str) -> Vec<u8> {
    let dir = format!("{}/fixtures/{}", env!("CARGO_MANIFEST_DIR"), kind.name());
    let sse = format!("{dir}/{name}.sse");
    let path = if std::path::Path::new(&sse).exists() { sse } else { format!("{dir}/{name}.eventstream") };
    std::fs::read(&path).unwrap_or_else(|err| panic!("{path}: {err}"))
}

/// Decodes `chunks` as one response body: the events, then the error that
/// ended it (its kind), if any.
async fn decode(kind: ProviderKind, chunks: Vec<Vec<u8>>) -> (Vec<Event>, Option<&'static str>) {
    let bytes = futures_util::stream::iter(chunks.into_iter().map(Ok::<_, Infallible>));
    let mut stream = driver::decode_as(kind, bytes);
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(err) => return (events, Some(err.kind())),
        }
    }
    (events, None)
}

/// Decodes the transcript whole, then split in two at every byte, then one
/// byte at a time: each must give the same result.
async fn replay(kind: ProviderKind, name: &str) -> (Vec<Event>, Option<&'static str>) {
    let bytes = &fixture_bytes(kind, name)[..];
    let whole = decode(kind, vec![bytes.to_vec()]).await;
    for cut in 1..bytes.len() {
        let split = decode(kind, vec![bytes[..cut].to_vec(), bytes[cut..].to_vec()]).await;
        assert_eq!(split, whole, "{kind}/{name}: split at byte {cut} decodes the same");
    }
    let trickle = decode(kind, bytes.iter().map(|b| vec![*b]).collect()).await;
    assert_eq!(trickle, whole, "{kind}/{name}: byte by byte decodes the same");
    whole
}

/// Cuts the transcript just before the event holding `marker` and expects the
/// events before it, then truncation.
async fn cut_before(kind: ProviderKind, name: &str, marker: &str) {
    let text = fixture(kind, name);
    let at = text.find(marker).unwrap_or_else(|| panic!("{kind}/{name}: no {marker:?}"));
    let event_start = text[..at].rfind("\n\n").map_or(0, |i| i + 2);
    let (events, error) = decode(kind, vec![text.as_bytes()[..event_start].to_vec()]).await;
    assert_eq!(error, Some("truncated"), "{kind}/{name}: a stream cut before {marker:?} is truncated");
    assert!(!events.iter().any(|e| matches!(e, Event::Finish(_))), "{kind}/{name}: no finish before the cut");
}

/// Replays the transcript `name` (see [`replay`]), which must decode without an error.
async fn answered(kind: ProviderKind, name: &str) -> Vec<Event> {
    let (events, error) = replay(kind, name).await;
    assert_eq!(error, None, "{kind}/{name} decodes without an error");
    events
}

/// Replays the transcript `error_event` (see [`replay`]), which must end in an error event.
async fn failed_with_error_event(kind: ProviderKind) -> Vec<Event> {
    let (events, error) = replay(kind, "error_event").await;
    assert_eq!(error, Some("error_event"), "{kind}/error_event ends in the provider's error event");
    events
}

/// Replays the transcript `error_event`, which must end in an error event with no events before it.
async fn error_event_alone(kind: ProviderKind) {
    let events = failed_with_error_event(kind).await;
    assert!(events.is_empty());
}

/// Usage with every count reported: input, output, cached input, reasoning.
fn usage_of(input: u64, output: u64, cached: u64, reasoning: u64) -> Usage {
    Usage {
        input_tokens: Some(input),
        output_tokens: Some(output),
        cached_input_tokens: Some(cached),
        reasoning_tokens: Some(reasoning),
    }
}

fn text_of(events: &[Event]) -> String {
    events.iter().filter_map(|e| if let Event::Text(t) = e { Some(t.as_str()) } else { None }).collect()
}

fn last_usage(events: &[Event]) -> Usage {
    let mut usage = Usage::default();
    for event in events {
        if let Event::Usage(u) = event {
            usage.merge(*u);
        }
    }
    usage
}

fn tool_calls(events: &[Event]) -> Vec<ToolCallDelta> {
    events.iter().filter_map(|e| if let Event::ToolCall(c) = e { Some(c.clone()) } else { None }).collect()
}

fn finish(events: &[Event]) -> Vec<FinishReason> {
    events.iter().filter_map(|e| if let Event::Finish(r) = e { Some(*r) } else { None }).collect()
}

fn assert_no_empty_text(events: &[Event]) {
    assert!(events.iter().all(|e| !matches!(e, Event::Text(t) if t.is_empty())), "empty deltas are dropped");
}

/// Replays `kind`'s `text` transcript: no empty deltas, `text`, a stop, then
/// `usage` (with its note); then truncation when cut before `marker`.
async fn text_case(kind: ProviderKind, text: &str, usage: (Usage, &str), marker: &str) -> Vec<Event> {
    let events = answered(kind, "text").await;
    assert_no_empty_text(&events);
    assert_eq!(text_of(&events), text);
    assert_eq!(finish(&events), vec![FinishReason::Stop]);
    let (usage, note) = usage;
    assert_eq!(last_usage(&events), usage, "{note}");
    cut_before(kind, "text", marker).await;
    events
}

#[tokio::test]
async fn openai_text_with_usage() {
    let text = "Hello! How can I help you today? 👋";
    let usage = (usage_of(19, 10, 0, 0), "the details are kept");
    let events = text_case(ProviderKind::OpenAi, text, usage, "\"finish_reason\":\"stop\"").await;
    assert_eq!(events.first(), Some(&Event::Text("Hello".into())), "the role-only chunk gives no event");
}

/// The fixtures' one call: `get_weather`, with `arguments` in fragments, then the end.
fn assert_one_weather_call(events: &[Event], arguments: &str) {
    let calls = tool_calls(events);
    assert_eq!(calls[0].id.as_deref(), Some("call_DdmO9pD3xa9XTPNJ32zg2hcA"));
    assert_eq!(calls[0].name.as_deref(), Some("get_weather"));
    let streamed: String = calls.iter().map(|c| c.arguments.as_str()).collect();
    assert_eq!(streamed, arguments);
    assert!(calls.iter().all(|c| c.index == 0));
    assert_eq!(finish(events), vec![FinishReason::ToolCalls]);
}

/// Replays `kind`'s `tool_call` transcript, expects the one weather call with
/// `arguments`, then truncation when cut before `marker`.
async fn weather_call_case(kind: ProviderKind, arguments: &str, marker: &str) {
    let events = answered(kind, "tool_call").await;
    assert_one_weather_call(&events, arguments);
    cut_before(kind, "tool_call", marker).await;
}

#[tokio::test]
async fn openai_tool_call() {
    weather_call_case(ProviderKind::OpenAi, r#"{"location": "Paris, France"}"#, "\"finish_reason\":\"tool_calls\"")
        .await;
}

#[tokio::test]
async fn openai_compatible_server_without_done_is_complete_at_finish_reason() {
    let (events, error) = replay(ProviderKind::OpenAi, "no_done").await;
    assert_eq!(error, None, "a finish_reason is enough to call the answer complete");
    assert_eq!(text_of(&events), "Short answer.");
    assert_eq!(finish(&events), vec![FinishReason::Length]);
}

#[tokio::test]
async fn openai_error_event() {
    let events = failed_with_error_event(ProviderKind::OpenAi).await;
    assert!(events.is_empty(), "nothing before the error: {events:?}");
}

#[tokio::test]
async fn anthropic_text_with_usage() {
    let usage = (Usage { input_tokens: Some(25), output_tokens: Some(15), ..Usage::default() }, "");
    let events = text_case(ProviderKind::Anthropic, "Hello! Ça va? 👋", usage, "event: message_stop").await;
    assert_eq!(events.last(), Some(&Event::Finish(FinishReason::Stop)), "finish comes at message_stop");
}

#[tokio::test]
async fn anthropic_tool_call() {
    let events = answered(ProviderKind::Anthropic, "tool_call").await;
    assert_eq!(text_of(&events), "Let me check the weather.");
    let calls = tool_calls(&events);
    assert_eq!(calls[0].id.as_deref(), Some("toolu_01T1x1fJ34qAmk2tNTrN7Up6"));
    assert_eq!(calls[0].name.as_deref(), Some("get_weather"));
    assert!(calls.iter().all(|c| c.index == 0), "the first tool block is tool call 0");
    let arguments: String = calls.iter().map(|c| c.arguments.as_str()).collect();
    assert_eq!(arguments, r#"{"location": "Paris, France"}"#);
    assert_eq!(finish(&events), vec![FinishReason::ToolCalls]);
    cut_before(ProviderKind::Anthropic, "tool_call", "event: message_stop").await;
}

#[tokio::test]
async fn anthropic_error_event() {
    let events = failed_with_error_event(ProviderKind::Anthropic).await;
    assert!(events.iter().all(|e| !e.is_content()), "ping and message_start are not tokens: {events:?}");
}

#[tokio::test]
async fn gemini_text_with_usage() {
    let usage = (Usage { input_tokens: Some(8), output_tokens: Some(11), ..Usage::default() }, "");
    text_case(ProviderKind::Gemini, "Hello! How can I help you today? 👋", usage, "\"finishReason\"").await;
}

#[tokio::test]
async fn gemini_thoughts_are_not_answer_text() {
    let events = answered(ProviderKind::Gemini, "thought").await;
    assert_eq!(text_of(&events), "Hi there.");
    assert_eq!(reasoning_of(&events), "**Planning the reply** The user greets me.", "thoughts are reasoning events");
    assert_eq!(finish(&events), vec![FinishReason::Length]);
    let usage = last_usage(&events);
    assert_eq!((usage.output_tokens, usage.reasoning_tokens), (Some(35), Some(32)), "thoughts count as output");
}

#[tokio::test]
async fn anthropic_thinking_is_reasoning_and_cache_reads_count_in_the_prompt() {
    let (text, reasoning) = ("27 × 453 = 12,231.", "The user wants 27 * 453. 27 * 453 = 12231.");
    let events = reasoning_case(ProviderKind::Anthropic, "thinking_cached", text, reasoning).await;
    let signatures = signatures_of(&events);
    assert_eq!(
        signatures,
        [&Event::Signature("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds".into())],
        "the thinking block's signature comes through, for a client to send back"
    );
    let usage = last_usage(&events);
    assert_eq!((usage.input_tokens, usage.cached_input_tokens), (Some(2060), Some(2048)));
    assert_eq!(usage.output_tokens, Some(58));
}

#[tokio::test]
async fn openai_compatible_reasoning_content_is_reasoning_and_usage_keeps_its_details() {
    let events = answered(ProviderKind::OpenAi, "reasoning_cached").await;
    assert_eq!(reasoning_of(&events), "9.11 has 11 hundredths, 9.8 has 80.");
    assert_eq!(text_of(&events), "9.8 is greater.", "reasoning is never answer text");
    let usage = last_usage(&events);
    assert_eq!((usage.cached_input_tokens, usage.reasoning_tokens), (Some(16), Some(88)));
    assert_eq!((usage.input_tokens, usage.output_tokens), (Some(18), Some(96)));
}

#[tokio::test]
async fn gemini_cached_content_is_counted_among_the_prompt() {
    let events = answered(ProviderKind::Gemini, "cached").await;
    let usage = last_usage(&events);
    assert_eq!((usage.input_tokens, usage.cached_input_tokens), (Some(40210), Some(40000)));
    assert_eq!(usage.output_tokens, Some(9));
}

/// Replays the transcript `name`, whose answer is `text` after `reasoning`.
async fn reasoning_case(kind: ProviderKind, name: &str, text: &str, reasoning: &str) -> Vec<Event> {
    let events = answered(kind, name).await;
    assert_eq!(text_of(&events), text);
    assert_eq!(reasoning_of(&events), reasoning);
    events
}

fn signatures_of(events: &[Event]) -> Vec<&Event> {
    events.iter().filter(|event| matches!(event, Event::Signature(_))).collect()
}

fn reasoning_of(events: &[Event]) -> String {
    events.iter().filter_map(|e| if let Event::Reasoning(t) = e { Some(t.as_str()) } else { None }).collect()
}

#[tokio::test]
async fn gemini_tool_call() {
    let events = answered(ProviderKind::Gemini, "tool_call").await;
    let calls = tool_calls(&events);
    assert_eq!(calls.len(), 1, "Gemini sends a call whole");
    assert_eq!(calls[0].name.as_deref(), Some("get_weather"));
    assert!(calls[0].id.is_some(), "an id is made up for OpenAI clients");
    let arguments: serde_json::Value = serde_json::from_str(&calls[0].arguments).expect("arguments are JSON");
    assert_eq!(arguments, serde_json::json!({ "location": "Paris, France" }));
    assert_eq!(finish(&events), vec![FinishReason::ToolCalls]);
    cut_before(ProviderKind::Gemini, "tool_call", "\"finishReason\"").await;
}

#[tokio::test]
async fn gemini_error_event() {
    error_event_alone(ProviderKind::Gemini).await;
}

#[tokio::test]
async fn responses_text_with_usage() {
    let text = "Hello! How can I help you today? 👋";
    let usage = (usage_of(19, 10, 0, 0), "");
    text_case(ProviderKind::OpenAiResponses, text, usage, "\"type\":\"response.completed\"").await;
}

#[tokio::test]
async fn responses_tool_call() {
    // The call's id is its `call_id`, not its item's id.
    weather_call_case(
        ProviderKind::OpenAiResponses,
        r#"{"location":"Paris, France"}"#,
        "\"type\":\"response.completed\"",
    )
    .await;
}

#[tokio::test]
async fn responses_reasoning_summary_is_reasoning_with_its_encrypted_form() {
    let (text, reasoning) = ("2 + 2 = 4.", "**Adding numbers**\n\nThe user asks for 2+2; that is 4.");
    let events = reasoning_case(ProviderKind::OpenAiResponses, "reasoning_cached", text, reasoning).await;
    let signatures = signatures_of(&events);
    assert_eq!(signatures, [&Event::Signature("gAAAAABor0KzQ2VuY3J5cHRlZC1yZWFzb25pbmctZml4dHVyZQ==".into())]);
    let usage = last_usage(&events);
    assert_eq!((usage.input_tokens, usage.cached_input_tokens), (Some(2048), Some(1920)));
    assert_eq!((usage.output_tokens, usage.reasoning_tokens), (Some(150), Some(128)));
}

#[tokio::test]
async fn responses_failed_is_an_error_event() {
    error_event_alone(ProviderKind::OpenAiResponses).await;
}

#[tokio::test]
async fn azure_reads_past_the_prompt_filter_chunk_and_passes_its_content_filter_on() {
    let events =
        text_case(ProviderKind::Azure, "Hello there!", (usage_of_counts(12, 3), "usage"), "\"finish_reason\":\"stop\"")
            .await;
    assert!(!events.is_empty());
    let filtered = answered(ProviderKind::Azure, "content_filter").await;
    assert_eq!(text_of(&filtered), "Here is the story");
    assert_eq!(finish(&filtered), vec![FinishReason::ContentFilter], "the filter's verdict is the answer's end");
}

/// Usage with input and output only.
fn usage_of_counts(input: u64, output: u64) -> Usage {
    Usage { input_tokens: Some(input), output_tokens: Some(output), ..Usage::default() }
}

#[tokio::test]
async fn bedrock_chunks_are_claude_s_events_and_its_exceptions_fail_the_stream() {
    let events = answered(ProviderKind::Bedrock, "text").await;
    assert_no_empty_text(&events);
    assert_eq!(text_of(&events), "Hello there!");
    assert_eq!(finish(&events), vec![FinishReason::Stop]);
    assert_eq!(last_usage(&events), usage_of_counts(12, 6));
    let (events, error) = replay(ProviderKind::Bedrock, "error_event").await;
    assert_eq!(error, Some("error_event"), "a model stream error");
    assert!(text_of(&events).is_empty());
    let (events, error) = replay(ProviderKind::Bedrock, "throttled").await;
    assert_eq!((events.len(), error), (0, Some("http_429")), "a throttling exception is a rate limit");
    // Cut before the last message: truncated; a flipped byte: malformed.
    let bytes = fixture_bytes(ProviderKind::Bedrock, "text");
    let mut starts = vec![0];
    while let Some(length) = bytes.get(starts[starts.len() - 1]..).and_then(|rest| rest.get(..4)) {
        let next = starts[starts.len() - 1] + u32::from_be_bytes([length[0], length[1], length[2], length[3]]) as usize;
        starts.push(next);
    }
    let last = starts[starts.len() - 2];
    let (events, error) = decode(ProviderKind::Bedrock, vec![bytes[..last].to_vec()]).await;
    assert_eq!(text_of(&events), "Hello there!", "every chunk before the cut is read");
    assert!(finish(&events).is_empty(), "no finish without message_stop");
    assert_eq!(error, Some("truncated"));
    for at in [0, 9, 20, 100, bytes.len() - 1] {
        let mut corrupt = bytes.clone();
        corrupt[at] ^= 0x40;
        let (_, error) = decode(ProviderKind::Bedrock, vec![corrupt]).await;
        assert!(matches!(error, Some("malformed" | "event_too_large")), "byte {at} flipped: {error:?}");
    }
}

#[tokio::test]
async fn garbage_is_malformed_for_every_provider() {
    let sse = ProviderKind::ALL.into_iter().filter(|kind| kind.adapter().content_type() == "text/event-stream");
    for kind in sse {
        let (events, error) = decode(kind, vec![b"data: {\"oops\": \n\n".to_vec()]).await;
        assert_eq!(error, Some("malformed"), "{kind}: undecodable JSON");
        assert!(events.is_empty());
        let (_, error) = decode(kind, vec![b"data: \xff\xfe\n\n".to_vec()]).await;
        assert_eq!(error, Some("malformed"), "{kind}: invalid utf-8");
        let (_, error) = decode(kind, vec![Vec::new()]).await;
        assert_eq!(error, Some("truncated"), "{kind}: an empty body is truncated");
    }
}
