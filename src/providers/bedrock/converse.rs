//! Bedrock's models other than Claude, through `ConverseStream`
//! (`POST /model/{id}/converse-stream`): Bedrock's own request shape
//! (messages of content blocks, `system`, `inferenceConfig`, `toolConfig`)
//! and stream (`messageStart`, `contentBlockStart` / `Delta` / `Stop`,
//! `messageStop`, `metadata`), in the same event stream and signed the same
//! way as Claude's.

use bytes::Bytes;
use http::HeaderValue;
use http::header::{ACCEPT, AUTHORIZATION};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{EVENT_STREAM, path_segment};
use crate::event::{Event, FinishReason, ToolCallDelta, Usage};
use crate::providers::simulate::Simulated;
use crate::providers::{Adapter, Body, Decoder, Frames, ProviderError, SseEvent, Upstream, driver};
use crate::request::{ChatRequest, Field, Part, ResponseFormat, Role, Setting, ToolChoice};

/// Bedrock's Converse API, for a model that is not Claude.
pub struct Converse;

impl Adapter for Converse {
    fn request(&self, upstream: Upstream<'_>, req: &ChatRequest) -> Result<http::Request<Bytes>, ProviderError> {
        let url = upstream.url(&["/model/", &path_segment(upstream.model), "/converse-stream"].concat());
        let bearer = upstream.bearer();
        let headers: Vec<_> = bearer.iter().map(|value| (AUTHORIZATION, value.as_str())).collect();
        let mut request = driver::post_json(url, &headers, &body(req))?;
        request.headers_mut().insert(ACCEPT, HeaderValue::from_static(EVENT_STREAM));
        Ok(request)
    }

    fn decoder(&self) -> Box<dyn Decoder> {
        Box::<ConverseDecoder>::default()
    }

    fn simulated(&self) -> &'static dyn Simulated {
        &super::simulated::SimulatedConverse
    }

    fn content_type(&self) -> &'static str {
        EVENT_STREAM
    }

    fn frames(&self, body: Body, max_event_bytes: usize) -> Frames {
        super::frames::events(body, max_event_bytes)
    }

    fn is_context_length(&self, message: &str) -> bool {
        ["Input is too long", "too many input tokens", "context window"].iter().any(|words| message.contains(words))
    }

    /// What Converse has no place for: structured output, a reasoning
    /// effort or budget, `top_k` and other fields of another API, images
    /// by URL, a call or result another turn cannot match, `tool_choice`
    /// none (Converse can only leave tools out).
    fn unsupported(&self, req: &ChatRequest) -> Vec<Field> {
        let mut out = req.untranslated_fields();
        if matches!(req.response_format, Some(ResponseFormat::JsonObject | ResponseFormat::JsonSchema(_))) {
            out.push(req.field(Setting::ResponseFormat));
        }
        if req.reasoning_effort.is_some() {
            out.push(req.field(Setting::ReasoningEffort));
        }
        if req.thinking_budget.is_some() {
            out.push(req.field(Setting::ThinkingBudget));
        }
        if req.top_k.is_some() {
            out.push(req.field(Setting::TopK));
        }
        if req.parallel_tool_calls == Some(false) {
            out.push(req.field(Setting::ParallelToolCalls));
        }
        if req.tool_choice == Some(ToolChoice::None) && !req.tools.is_empty() {
            out.push(req.field(Setting::ToolChoice));
        }
        out.sort_by_cached_key(Field::to_string);
        for (i, message) in req.messages.iter().enumerate() {
            out.extend(req.untranslated_message_fields(i));
            if message.name.is_some() {
                out.push(Field::message(i, "name"));
            }
            if message.tool_calls.iter().any(|call| !matches!(arguments(&call.arguments), Some(Value::Object(_)))) {
                out.push(Field::message(i, "tool_calls"));
            }
            for (j, part) in message.content.iter().enumerate() {
                match part {
                    Part::Image(image) if image.inline().and_then(|inline| format(inline.media_type)).is_none() => out
                        .push(Field::Part(
                            i,
                            j,
                            "an image Converse does not take (by URL, or not PNG, JPEG, GIF or WebP)",
                        )),
                    Part::Other(_) => out.push(Field::Part(i, j, "a part of another type")),
                    _ => {}
                }
            }
        }
        out
    }
}

/// A tool call's arguments as the object Converse wants (empty means none).
fn arguments(arguments: &str) -> Option<Value> {
    if arguments.trim().is_empty() {
        return Some(json!({}));
    }
    serde_json::from_str(arguments).ok()
}

/// Converse's image format for a media type.
fn format(media_type: &str) -> Option<&'static str> {
    match media_type {
        "image/png" => Some("png"),
        "image/jpeg" | "image/jpg" => Some("jpeg"),
        "image/gif" => Some("gif"),
        "image/webp" => Some("webp"),
        _ => None,
    }
}

/// The `ConverseStream` body: system prompts apart, turns of content
/// blocks that alternate (tool results and the user's words after them one
/// user turn), calls as `toolUse`, results as `toolResult`, images inline.
pub(super) fn body(req: &ChatRequest) -> Value {
    let mut body = Map::new();
    body.insert("messages".into(), Value::Array(messages(req)));
    let system: Vec<Value> =
        req.messages.iter().filter(|m| m.role == Role::System).map(|m| json!({ "text": m.joined_text() })).collect();
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    let mut config = Map::new();
    let optional = [
        ("maxTokens", req.max_tokens.map(|max| json!(max))),
        ("temperature", req.temperature.map(|t| json!(t))),
        ("topP", req.top_p.map(|p| json!(p))),
        ("stopSequences", (!req.stop.is_empty()).then(|| json!(req.stop))),
    ];
    config.extend(optional.into_iter().filter_map(|(name, value)| Some((name.to_owned(), value?))));
    if !config.is_empty() {
        body.insert("inferenceConfig".into(), Value::Object(config));
    }
    if !req.tools.is_empty() && req.tool_choice != Some(ToolChoice::None) {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|tool| {
                let mut spec = json!({ "name": tool.name, "inputSchema": { "json": tool.parameters } });
                if let Some(description) = &tool.description {
                    spec["description"] = json!(description);
                }
                json!({ "toolSpec": spec })
            })
            .collect();
        let mut tool_config = json!({ "tools": tools });
        match &req.tool_choice {
            Some(ToolChoice::Required) => tool_config["toolChoice"] = json!({ "any": {} }),
            Some(ToolChoice::Function(name)) => tool_config["toolChoice"] = json!({ "tool": { "name": name } }),
            Some(ToolChoice::Auto) => tool_config["toolChoice"] = json!({ "auto": {} }),
            Some(ToolChoice::None) | None => {}
        }
        body.insert("toolConfig".into(), tool_config);
    }
    Value::Object(body)
}

fn messages(req: &ChatRequest) -> Vec<Value> {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in &req.messages {
        let (role, blocks): (&'static str, Vec<Value>) = match message.role {
            Role::System => continue,
            Role::User => ("user", message.content.iter().filter_map(block).collect()),
            Role::Assistant => {
                let mut blocks: Vec<Value> = message.content.iter().filter_map(block).collect();
                blocks.retain(|block| block.get("text").is_none_or(|text| text != ""));
                blocks.extend(message.tool_calls.iter().map(|call| {
                    json!({ "toolUse": { "toolUseId": call.id, "name": call.name,
                        "input": arguments(&call.arguments).unwrap_or_else(|| json!({})) } })
                }));
                ("assistant", blocks)
            }
            Role::Tool => {
                let id = message.tool_call_id.clone().unwrap_or_default();
                let result = json!({ "toolResult": { "toolUseId": id,
                    "content": [{ "text": message.joined_text() }], "status": "success" } });
                ("user", vec![result])
            }
        };
        // Converse takes turns that alternate: one role's turns in a row join.
        match turns.last_mut() {
            Some((last, held)) if *last == role => held.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    turns.into_iter().map(|(role, content)| json!({ "role": role, "content": content })).collect()
}

/// A content part as a Converse block; earlier reasoning is another
/// provider's and goes without.
fn block(part: &Part) -> Option<Value> {
    match part {
        Part::Text { text, .. } => Some(json!({ "text": text })),
        Part::Image(image) => {
            let inline = image.inline()?;
            Some(json!({ "image": { "format": format(inline.media_type)?, "source": { "bytes": inline.data } } }))
        }
        Part::Thinking { .. } | Part::RedactedThinking(_) | Part::Other(_) => None,
    }
}

/// Reads a `ConverseStream`: text and reasoning deltas, tool calls opened
/// by `contentBlockStart` and filled by `input` deltas, the stop reason,
/// then `metadata` with the usage, which ends it.
#[derive(Default)]
pub(super) struct ConverseDecoder {
    /// The content block index of each tool call, in the order they opened.
    calls: Vec<u64>,
    finished: bool,
    done: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Payload {
    content_block_index: Option<u64>,
    start: Option<Start>,
    delta: Option<Delta>,
    stop_reason: Option<String>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Start {
    tool_use: Option<ToolUseStart>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolUseStart {
    tool_use_id: String,
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Delta {
    text: Option<String>,
    tool_use: Option<ToolUseDelta>,
    reasoning_content: Option<Reasoning>,
}

#[derive(Deserialize)]
struct ToolUseDelta {
    input: String,
}

#[derive(Deserialize)]
struct Reasoning {
    text: Option<String>,
    signature: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
}

impl ConverseDecoder {
    /// The answer's position of the call in content block `block`.
    fn call_index(&self, block: u64) -> Option<u32> {
        self.calls.iter().position(|known| *known == block).and_then(|i| u32::try_from(i).ok())
    }
}

impl Decoder for ConverseDecoder {
    fn on_event(&mut self, sse: &SseEvent, out: &mut Vec<Event>) -> Result<(), ProviderError> {
        let payload: Payload =
            serde_json::from_str(&sse.data).map_err(|err| ProviderError::Malformed(err.to_string()))?;
        match &*sse.event {
            "messageStart" | "contentBlockStop" => {}
            "contentBlockStart" => {
                if let (Some(use_), Some(block)) =
                    (payload.start.and_then(|start| start.tool_use), payload.content_block_index)
                {
                    self.calls.push(block);
                    let index = self.call_index(block).unwrap_or_default();
                    out.push(Event::ToolCall(ToolCallDelta {
                        index,
                        id: Some(use_.tool_use_id),
                        name: Some(use_.name),
                        arguments: String::new(),
                    }));
                }
            }
            "contentBlockDelta" => {
                let delta = payload.delta.ok_or_else(|| ProviderError::Malformed("a delta without `delta`".into()))?;
                if let Some(text) = delta.text.filter(|text| !text.is_empty()) {
                    out.push(Event::Text(text));
                }
                if let Some(input) = delta.tool_use {
                    let block = payload.content_block_index.unwrap_or_default();
                    let index = self
                        .call_index(block)
                        .ok_or_else(|| ProviderError::Malformed("tool input for a block that opened no call".into()))?;
                    out.push(Event::ToolCall(ToolCallDelta { index, id: None, name: None, arguments: input.input }));
                }
                if let Some(reasoning) = delta.reasoning_content {
                    out.extend(reasoning.text.filter(|text| !text.is_empty()).map(Event::Reasoning));
                    out.extend(reasoning.signature.map(Event::Signature));
                }
            }
            "messageStop" => {
                self.finished = true;
                out.push(Event::Finish(match payload.stop_reason.as_deref() {
                    Some("tool_use") => FinishReason::ToolCalls,
                    Some("max_tokens" | "model_context_window_exceeded") => FinishReason::Length,
                    Some("guardrail_intervened" | "content_filtered") => FinishReason::ContentFilter,
                    _ => FinishReason::Stop,
                }));
            }
            "metadata" => {
                self.done = true;
                if let Some(usage) = payload.usage {
                    out.push(Event::Usage(Usage {
                        input_tokens: usage.input_tokens,
                        output_tokens: usage.output_tokens,
                        cached_input_tokens: usage.cache_read_input_tokens,
                        reasoning_tokens: None,
                    }));
                }
            }
            // An event of a later API version: nothing baton reads.
            _ => {}
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn finish(&self) -> Result<(), ProviderError> {
        if self.finished { Ok(()) } else { Err(ProviderError::Truncated) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ConverseStream's events as Bedrock documents them, text then a tool call.
    const STREAM: &[(&str, &str)] = &[
        ("messageStart", r#"{"p":"abcdefghijk","role":"assistant"}"#),
        ("contentBlockDelta", r#"{"contentBlockIndex":0,"delta":{"text":"Let me check"},"p":"abc"}"#),
        ("contentBlockStop", r#"{"contentBlockIndex":0,"p":"abcdefghijklmnop"}"#),
        (
            "contentBlockStart",
            r#"{"contentBlockIndex":1,"p":"abcdef","start":{"toolUse":{"name":"get_weather","toolUseId":"tooluse_kZJ"}}}"#,
        ),
        ("contentBlockDelta", r#"{"contentBlockIndex":1,"delta":{"toolUse":{"input":"{\"city\":"}},"p":"abc"}"#),
        ("contentBlockDelta", r#"{"contentBlockIndex":1,"delta":{"toolUse":{"input":"\"Paris\"}"}},"p":"ab"}"#),
        ("contentBlockStop", r#"{"contentBlockIndex":1,"p":"abcdefghijklmnopqrstu"}"#),
        ("messageStop", r#"{"p":"abcdefghij","stopReason":"tool_use"}"#),
        (
            "metadata",
            r#"{"metrics":{"latencyMs":1243},"p":"abc","usage":{"inputTokens":412,"outputTokens":58,"totalTokens":470}}"#,
        ),
    ];

    #[test]
    fn text_a_tool_call_its_stop_and_usage() {
        let mut decoder = ConverseDecoder::default();
        let mut events = Vec::new();
        for (name, data) in STREAM {
            decoder.on_event(&SseEvent::new(name, data), &mut events).unwrap_or_else(|err| panic!("{name}: {err}"));
        }
        let call = |id: Option<&str>, name: Option<&str>, arguments: &str| {
            Event::ToolCall(ToolCallDelta {
                index: 0,
                id: id.map(str::to_owned),
                name: name.map(str::to_owned),
                arguments: arguments.to_owned(),
            })
        };
        assert_eq!(
            events,
            vec![
                Event::Text("Let me check".to_owned()),
                call(Some("tooluse_kZJ"), Some("get_weather"), ""),
                call(None, None, "{\"city\":"),
                call(None, None, "\"Paris\"}"),
                Event::Finish(FinishReason::ToolCalls),
                Event::Usage(Usage {
                    input_tokens: Some(412),
                    output_tokens: Some(58),
                    cached_input_tokens: None,
                    reasoning_tokens: None
                }),
            ]
        );
        assert!(decoder.is_done() && decoder.finish().is_ok());
        let mut cut = ConverseDecoder::default();
        cut.on_event(&SseEvent::new(STREAM[1].0, STREAM[1].1), &mut Vec::new()).unwrap_or_default();
        assert_eq!(cut.finish(), Err(ProviderError::Truncated), "no messageStop: truncated");
        let orphan =
            SseEvent::new("contentBlockDelta", r#"{"contentBlockIndex":7,"delta":{"toolUse":{"input":"{}"}}}"#);
        assert!(matches!(
            ConverseDecoder::default().on_event(&orphan, &mut Vec::new()),
            Err(ProviderError::Malformed(_))
        ));
    }
}
