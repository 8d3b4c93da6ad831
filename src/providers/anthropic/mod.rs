//! Anthropic Messages: system prompt outside the messages, `max_tokens`
//! required, named stream events.

mod decode;
pub(super) mod simulated;

use bytes::Bytes;
use http::HeaderName;
use serde_json::{Map, Value, json};

use super::driver::{self, Set};
use super::simulate::Simulated;
use super::{Adapter, Decoder, ProviderError, Upstream};
use crate::request::{
    ChatRequest, ClientDialect, Field, LimitField, Native, Part, ResponseFormat, Role, Setting, Tool, ToolChoice,
};

/// The API version baton's wire format follows.
const API_VERSION: &str = "2023-06-01";
/// The header that carries [`API_VERSION`].
const VERSION_HEADER: HeaderName = HeaderName::from_static("anthropic-version");
/// The header that carries the key.
const API_KEY: HeaderName = HeaderName::from_static("x-api-key");

/// What `max_tokens` becomes when the client leaves it out: Anthropic requires one.
const DEFAULT_MAX_TOKENS: u32 = 4096;

/// What a `json_object` request adds to the system prompt.
const JSON_OBJECT_INSTRUCTION: &str = "Answer with one JSON object and nothing else: no prose, no code fence.";

/// The Anthropic adapter.
pub struct Anthropic;

impl Adapter for Anthropic {
    fn request(&self, upstream: Upstream<'_>, req: &ChatRequest) -> Result<http::Request<Bytes>, ProviderError> {
        let url = upstream.url("/v1/messages");
        if let Some(native) = req.native_in(ClientDialect::Messages) {
            return native_request(url, upstream, native);
        }
        driver::post_json(url, &api_headers(upstream, None), &body(upstream.model, req))
    }

    fn decoder(&self) -> Box<dyn Decoder> {
        messages_decoder()
    }

    fn simulated(&self) -> &'static dyn Simulated {
        &simulated::SimulatedAnthropic
    }

    fn dialect(&self) -> Option<crate::request::ClientDialect> {
        Some(crate::request::ClientDialect::Messages)
    }

    /// `POST /v1/messages/count_tokens` with the client's body and model
    /// set: only a Messages client's body is what Anthropic would count.
    fn count_request(
        &self,
        upstream: Upstream<'_>,
        req: &ChatRequest,
    ) -> Option<Result<http::Request<Bytes>, ProviderError>> {
        let native = req.native_in(ClientDialect::Messages)?;
        let url = upstream.url("/v1/messages/count_tokens");
        Some(driver::post_native(
            url,
            &api_headers(upstream, Some(native)),
            native,
            &[("model", Set::Str(upstream.model))],
        ))
    }

    fn is_context_length(&self, message: &str) -> bool {
        is_too_long(message)
    }

    /// A Messages request goes as the client sent it, so Anthropic itself
    /// judges every field; one of another dialect is translated.
    fn unsupported(&self, req: &ChatRequest) -> Vec<Field> {
        messages_unsupported(req)
    }
}

/// The same-dialect path: the client's Messages body with only `model` and
/// `stream` set, and the client's `anthropic-version` and `anthropic-beta`
/// (else baton's version), so beta fields, `cache_control`, thinking
/// signatures and fields baton has never heard of all arrive.
fn native_request(url: String, upstream: Upstream<'_>, native: &Native) -> Result<http::Request<Bytes>, ProviderError> {
    let set = [("model", Set::Str(upstream.model)), ("stream", Set::Json("true"))];
    driver::post_native(url, &api_headers(upstream, Some(native)), native, &set)
}

/// The key, and baton's API version unless the client's own request, sent
/// on as it came (`native`), has its own.
fn api_headers<'a>(upstream: Upstream<'a>, native: Option<&Native>) -> Vec<(HeaderName, &'a str)> {
    let mut headers = Vec::new();
    if !native.is_some_and(|native| native.headers.iter().any(|(name, _)| *name == VERSION_HEADER)) {
        headers.push((VERSION_HEADER, API_VERSION));
    }
    headers.extend(upstream.api_key.map(|key| (API_KEY, key)));
    headers
}

/// How a cloud serves Claude's Messages API: the model in the path, not
/// the body, and the API version in the body as the cloud names it.
pub(super) struct Cloud {
    /// The body's `anthropic_version` (`bedrock-2023-05-31`).
    pub version: &'static str,
    /// Whether the body says `stream: true` (Vertex) or the path does (Bedrock).
    pub stream_in_body: bool,
    /// Whether the client's `anthropic-beta` header goes as the body's
    /// `anthropic_beta` list (Bedrock) rather than as a header.
    pub betas_in_body: bool,
}

/// A Messages request to a cloud at `url` with `headers`: a Messages
/// client's body as sent (its `cache_control`, thinking signatures and
/// fields baton has never heard of all arrive) but for `model`, `stream`
/// and the version; any other client's translated.
pub(super) fn cloud_request(
    url: String,
    headers: &[(HeaderName, &str)],
    req: &ChatRequest,
    cloud: &Cloud,
) -> Result<http::Request<Bytes>, ProviderError> {
    let version = serde_json::to_string(cloud.version).unwrap_or_default();
    let stream = if cloud.stream_in_body { Set::Json("true") } else { Set::Drop };
    let Some(native) = req.native_in(ClientDialect::Messages) else {
        let mut body = body("", req);
        if let Some(fields) = body.as_object_mut() {
            fields.remove("model");
            if !cloud.stream_in_body {
                fields.remove("stream");
            }
            fields.insert("anthropic_version".into(), json!(cloud.version));
        }
        return driver::post_json(url, headers, &body);
    };
    let is_beta = |name: &HeaderName| name.as_str() == "anthropic-beta";
    let betas: Vec<&str> = native
        .headers
        .iter()
        .filter(|(name, _)| is_beta(name))
        .filter_map(|(_, value)| value.to_str().ok())
        .flat_map(|value| value.split(',').map(str::trim).filter(|beta| !beta.is_empty()))
        .collect();
    let betas = serde_json::to_string(&betas).unwrap_or_default();
    let mut set = vec![("model", Set::Drop), ("stream", stream), ("anthropic_version", Set::Json(&version))];
    if cloud.betas_in_body && betas != "[]" {
        set.push(("anthropic_beta", Set::Json(&betas)));
    }
    let mut request = driver::post_native(url, headers, native, &set)?;
    // The version is in the body; the betas where the cloud reads them.
    request.headers_mut().remove(VERSION_HEADER);
    if cloud.betas_in_body {
        request.headers_mut().remove("anthropic-beta");
    }
    Ok(request)
}

/// A fresh decoder of a Messages stream.
pub(super) fn messages_decoder() -> Box<dyn Decoder> {
    Box::<decode::AnthropicDecoder>::default()
}

/// What of `req` a Messages provider cannot honour (see [`Adapter::unsupported`]).
pub(super) fn messages_unsupported(req: &ChatRequest) -> Vec<Field> {
    match req.native_in(ClientDialect::Messages) {
        Some(_) => Vec::new(),
        None => unsupported(req),
    }
}

/// Whether Anthropic's words say the prompt is too long for the model.
pub(super) fn is_too_long(message: &str) -> bool {
    ["prompt is too long", "exceed context limit", "context window", "Input is too long"]
        .iter()
        .any(|words| message.contains(words))
}

/// The thinking budget for each `reasoning_effort`: Anthropic's least is
/// 1,024 tokens; `minimal` and `none` leave thinking off.
fn thinking_budget(effort: &str) -> Option<u32> {
    match effort {
        "low" => Some(1024),
        "medium" => Some(4096),
        "high" => Some(16_384),
        _ => None,
    }
}

/// The efforts that leave thinking off.
const NO_THINKING: [&str; 2] = ["none", "minimal"];

/// Anthropic's highest temperature; OpenAI's goes to 2.
const MAX_TEMPERATURE: f64 = 1.0;

/// The lowest `top_p` Anthropic takes while thinking.
const MIN_THINKING_TOP_P: f64 = 0.95;
/// The one `temperature` Anthropic takes beside thinking.
const THINKING_TEMPERATURE: f64 = 1.0;

/// The request's fields Anthropic has no equivalent for; a field set to
/// `null` or `false` asks for nothing and is honoured.
fn unsupported(req: &ChatRequest) -> Vec<Field> {
    let mut out = req.untranslated_fields();
    if req.temperature.is_some_and(|t| t > MAX_TEMPERATURE) {
        out.push(req.field(Setting::Temperature));
    }
    for (i, message) in req.messages.iter().enumerate() {
        out.extend(req.untranslated_message_fields(i));
        if message.name.is_some() {
            out.push(Field::message(i, "name"));
        }
        for (j, part) in message.content.iter().enumerate() {
            if matches!(part, Part::Other(_)) {
                out.push(Field::Part(i, j, "a part of another type"));
            }
        }
    }
    out.extend(thinking_conflicts(req));
    out
}

/// What keeps `reasoning_effort` from becoming a `thinking` budget: an
/// effort Anthropic has no budget for, or a setting the API refuses beside
/// thinking — a limit no larger than the budget, a `temperature` other than
/// 1, a `top_p` below 0.95, a forced tool, or a tool call in the last
/// assistant turn (its thinking block, which Anthropic wants back, is not in
/// an OpenAI conversation). A `top_k` beside thinking is named on its own:
/// the request may go without that sampling cut and keep its thinking.
fn thinking_conflicts(req: &ChatRequest) -> Vec<Field> {
    let Some(effort) = req.reasoning_effort.as_deref() else { return Vec::new() };
    let Some(budget) = thinking_budget(effort) else {
        return if NO_THINKING.contains(&effort) { Vec::new() } else { vec![req.field(Setting::ReasoningEffort)] };
    };
    // Each named as the client wrote it (a Gemini client's `generationConfig.temperature`).
    let word = |setting| req.dialect.word(setting);
    let limit = match (req.dialect, req.limit_field) {
        (ClientDialect::ChatCompletions, LimitField::MaxCompletionTokens) => "max_completion_tokens",
        _ => word(Setting::MaxTokens),
    };
    let last_assistant = req.messages.iter().rev().find(|m| m.role == Role::Assistant);
    let conflicts = [
        (limit, req.max_tokens.is_some_and(|max| max <= budget)),
        (word(Setting::Temperature), req.temperature.is_some_and(|t| t != THINKING_TEMPERATURE)),
        (word(Setting::TopP), req.top_p.is_some_and(|p| p < MIN_THINKING_TOP_P)),
        (word(Setting::ToolChoice), matches!(req.tool_choice, Some(ToolChoice::Required | ToolChoice::Function(_)))),
        ("tool_calls", last_assistant.is_some_and(|m| !m.tool_calls.is_empty())),
    ];
    let mut out: Vec<Field> = conflicts
        .into_iter()
        .filter(|(_, conflicts)| *conflicts)
        .map(|(with, _)| Field::Together(word(Setting::ReasoningEffort).to_owned(), with.to_owned()))
        .collect();
    if req.top_k.is_some() {
        out.push(req.field(Setting::TopK));
    }
    out
}

/// The Messages body: system prompts outside the conversation, tool calls
/// and results as `tool_use` / `tool_result` blocks (the results of one turn's calls
/// sent back together in one user turn), images as
/// `image` blocks, cache hints kept.
fn body(model: &str, req: &ChatRequest) -> Value {
    let budget = req.thinking_budget.or_else(|| req.reasoning_effort.as_deref().and_then(thinking_budget));
    // Thinking counts against `max_tokens`: without a client limit, the
    // answer keeps the default on top of the budget.
    let max_tokens = req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS + budget.unwrap_or(0));
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("max_tokens".into(), json!(max_tokens));
    if let Some(system) = system(req) {
        body.insert("system".into(), system);
    }
    body.insert("messages".into(), Value::Array(conversation(req)));
    body.insert("stream".into(), json!(true));
    let optional = [
        ("temperature", req.temperature.map(|t| json!(t))),
        ("top_p", req.top_p.map(|p| json!(p))),
        ("top_k", req.top_k.map(|k| json!(k))),
        ("stop_sequences", (!req.stop.is_empty()).then(|| json!(req.stop))),
        ("tools", (!req.tools.is_empty()).then(|| req.tools.iter().map(tool).collect())),
        ("tool_choice", tool_choice(req)),
        ("metadata", req.user.as_ref().map(|user| json!({ "user_id": user }))),
        ("output_config", output_format(req)),
        ("thinking", budget.map(|budget| json!({ "type": "enabled", "budget_tokens": budget }))),
    ];
    for (name, value) in optional {
        if let Some(value) = value {
            body.insert(name.into(), value);
        }
    }
    Value::Object(body)
}

/// The system messages' text, as one string, or as blocks when one carries
/// a cache hint; a `json_object` request's instruction comes last.
fn system(req: &ChatRequest) -> Option<Value> {
    let json_object = (req.response_format == Some(ResponseFormat::JsonObject)).then_some(JSON_OBJECT_INSTRUCTION);
    let parts: Vec<&Part> = req.messages.iter().filter(|m| m.role == Role::System).flat_map(|m| &m.content).collect();
    if parts.iter().any(|part| matches!(part, Part::Text { cache: Some(_), .. })) {
        let mut blocks: Vec<Value> = parts.into_iter().filter_map(content_block).collect();
        blocks.extend(json_object.map(|text| json!({ "type": "text", "text": text })));
        return Some(Value::Array(blocks));
    }
    let mut texts: Vec<String> =
        req.messages.iter().filter(|m| m.role == Role::System).map(|m| m.joined_text()).collect();
    texts.extend(json_object.map(str::to_owned));
    (!texts.is_empty()).then(|| json!(texts.join("\n\n")))
}

/// The conversation without its system messages, one block list per turn.
fn conversation(req: &ChatRequest) -> Vec<Value> {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    let mut previous = None;
    for message in &req.messages {
        let (role, blocks) = match message.role {
            Role::System => continue,
            Role::User => ("user", message.content.iter().filter_map(content_block).collect()),
            Role::Assistant => {
                // Reasoning goes back only to the provider that signed it.
                let signed_here = req.dialect == ClientDialect::Messages;
                let parts = message.content.iter().filter(|part| signed_here || !part.is_reasoning());
                let mut blocks: Vec<Value> = parts.filter_map(content_block).collect();
                blocks.retain(|block| block.get("text").is_none_or(|text| text != ""));
                blocks.extend(message.tool_calls.iter().map(tool_use));
                ("assistant", blocks)
            }
            Role::Tool => {
                // Anthropic refuses empty text blocks; an empty result has no content.
                let content: Vec<Value> = message
                    .content
                    .iter()
                    .filter(|part| !matches!(part, Part::Text { text, .. } if text.is_empty()))
                    .filter_map(content_block)
                    .collect();
                let mut result = json!({ "type": "tool_result", "tool_use_id": message.tool_call_id });
                if !content.is_empty() {
                    result["content"] = Value::Array(content);
                }
                ("user", vec![result])
            }
        };
        // Results of one turn's calls go back together, and a user's words
        // after them join that turn; other turns stay as the client sent them.
        let joins = previous == Some(Role::Tool) && matches!(message.role, Role::Tool | Role::User);
        previous = Some(message.role);
        match turns.last_mut() {
            Some((_, held)) if joins => held.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    turns.into_iter().map(|(role, content)| json!({ "role": role, "content": plain(content) })).collect()
}

/// An earlier tool call as a `tool_use` block.
fn tool_use(call: &crate::request::ToolCall) -> Value {
    json!({ "type": "tool_use", "id": call.id, "name": call.name, "input": arguments(&call.arguments) })
}

/// A turn that is one plain text block, as a string: what most turns are.
fn plain(mut blocks: Vec<Value>) -> Value {
    let one_text = blocks.len() == 1
        && blocks[0].get("type").is_some_and(|kind| kind == "text")
        && blocks[0].get("cache_control").is_none();
    match blocks.pop() {
        Some(mut block) if one_text => block["text"].take(),
        Some(block) => {
            blocks.push(block);
            Value::Array(blocks)
        }
        None => Value::Array(blocks),
    }
}

/// A content part as a block; parts of other types are refused before
/// this (see [`unsupported`]).
fn content_block(part: &Part) -> Option<Value> {
    let (mut block, cache) = match part {
        Part::Text { text, cache } => (json!({ "type": "text", "text": text }), cache),
        Part::Image(image) => {
            let source = match image.inline() {
                Some(inline) => json!({ "type": "base64", "media_type": inline.media_type, "data": inline.data }),
                None => json!({ "type": "url", "url": image.url }),
            };
            (json!({ "type": "image", "source": source }), &image.cache)
        }
        Part::Thinking { text, signature } => {
            return Some(json!({ "type": "thinking", "thinking": text, "signature": signature }));
        }
        Part::RedactedThinking(data) => return Some(json!({ "type": "redacted_thinking", "data": data })),
        Part::Other(_) => return None,
    };
    if let Some(cache) = cache {
        block["cache_control"] = cache.clone();
    }
    Some(block)
}

/// A tool call's arguments as the JSON object Anthropic wants; arguments
/// that are not one (a model's broken JSON) go as a string inside one.
fn arguments(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(value @ Value::Object(_)) => value,
        _ if arguments.trim().is_empty() => json!({}),
        _ => json!({ "arguments": arguments }),
    }
}

/// A tool; one declared without parameters takes none (`input_schema`
/// is required).
fn tool(tool: &Tool) -> Value {
    let schema = if tool.parameters.is_null() { json!({ "type": "object" }) } else { tool.parameters.clone() };
    let mut out = json!({ "name": tool.name, "input_schema": schema });
    if let Some(description) = &tool.description {
        out["description"] = json!(description);
    }
    if let Some(strict) = tool.strict {
        out["strict"] = json!(strict);
    }
    if let Some(cache) = &tool.cache {
        out["cache_control"] = cache.clone();
    }
    out
}

/// `tool_choice`, with `parallel_tool_calls: false` as `disable_parallel_tool_use`.
fn tool_choice(req: &ChatRequest) -> Option<Value> {
    let mut choice = match &req.tool_choice {
        None if req.parallel_tool_calls == Some(false) => json!({ "type": "auto" }),
        None => return None,
        Some(ToolChoice::Auto) => json!({ "type": "auto" }),
        Some(ToolChoice::None) => return Some(json!({ "type": "none" })),
        Some(ToolChoice::Required) => json!({ "type": "any" }),
        Some(ToolChoice::Function(name)) => json!({ "type": "tool", "name": name }),
    };
    if req.parallel_tool_calls == Some(false) {
        choice["disable_parallel_tool_use"] = json!(true);
    }
    Some(choice)
}

/// Structured output: a schema as Anthropic's native `output_config.format`
/// (which works beside tools). Anthropic has no "any JSON object" mode, so
/// `json_object` is asked for in the system prompt ([`JSON_OBJECT_INSTRUCTION`])
/// and the answer checked like a schema's.
fn output_format(req: &ChatRequest) -> Option<Value> {
    let Some(ResponseFormat::JsonSchema(schema)) = &req.response_format else { return None };
    Some(json!({ "format": { "type": "json_schema", "schema": schema.schema } }))
}

#[cfg(test)]
mod tests;
