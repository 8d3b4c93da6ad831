//! OpenAI Chat Completions, the dialect of OpenAI and of every compatible
//! server (vLLM, Ollama, Groq and others).

mod decode;
pub(super) mod responses;
pub(super) mod simulated;

use bytes::Bytes;
use http::header::AUTHORIZATION;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Value, json};

use super::driver::{self, Set};
use super::simulate::Simulated;
use super::{Adapter, Decoder, ProviderError, Upstream};
use crate::request::{
    ChatRequest, ClientDialect, Field, LimitField, Message, Part, ResponseFormat, Role, Setting, Tool, ToolChoice,
};

/// The OpenAI adapter.
pub struct OpenAi;

impl Adapter for OpenAi {
    fn request(&self, upstream: Upstream<'_>, req: &ChatRequest) -> Result<http::Request<Bytes>, ProviderError> {
        let url = upstream.url("/chat/completions");
        let bearer = upstream.bearer();
        let headers: Vec<_> = bearer.iter().map(|value| (AUTHORIZATION, value.as_str())).collect();
        chat_request(url, &headers, upstream.model, req)
    }

    fn decoder(&self) -> Box<dyn Decoder> {
        chat_decoder()
    }

    fn simulated(&self) -> &'static dyn Simulated {
        &simulated::SimulatedOpenAi
    }

    fn dialect(&self) -> Option<crate::request::ClientDialect> {
        Some(crate::request::ClientDialect::ChatCompletions)
    }

    fn is_context_length(&self, message: &str) -> bool {
        is_too_long(message)
    }

    /// A Chat Completions request goes through whole, but what the answer
    /// would carry beyond the shared events — token log probabilities,
    /// audio — cannot come back through baton, so asking for it is named
    /// rather than quietly lost. A request of another dialect goes through
    /// translated: what it carries untranslated is named.
    fn unsupported(&self, req: &ChatRequest) -> Vec<Field> {
        chat_unsupported(req)
    }
}

/// A streaming Chat Completions request for `model` to `url` with
/// `headers`: the client's body as sent when it speaks Chat Completions,
/// else `req` translated. Shared with the kinds that serve the same API
/// at another address (Azure).
pub(super) fn chat_request(
    url: String,
    headers: &[(http::HeaderName, &str)],
    model: &str,
    req: &ChatRequest,
) -> Result<http::Request<Bytes>, ProviderError> {
    match req.native_in(ClientDialect::ChatCompletions) {
        Some(native) => driver::post_native(url, headers, native, &native_settings(model)),
        None => driver::post_json(url, headers, &body(model, req)),
    }
}

/// Whether a Chat Completions server's words say the prompt is too long.
pub(super) fn is_too_long(message: &str) -> bool {
    message.contains("context length") || message.contains("context_length_exceeded")
}

/// A fresh decoder of a Chat Completions stream.
pub(super) fn chat_decoder() -> Box<dyn Decoder> {
    Box::<decode::OpenAiDecoder>::default()
}

/// What of `req` a Chat Completions provider cannot honour (see [`Adapter::unsupported`]).
pub(super) fn chat_unsupported(req: &ChatRequest) -> Vec<Field> {
    match req.dialect {
        ClientDialect::ChatCompletions => unrelayed(req),
        _ => untranslated(req),
    }
}

/// What baton sets in a Chat Completions body it sends as the client wrote
/// it: the target's model, streaming, and usage at the end of the stream,
/// which baton counts whether or not the client asked to see it.
fn native_settings(model: &str) -> [(&'static str, Set<'_>); 3] {
    [
        ("model", Set::Str(model)),
        ("stream", Set::Json("true")),
        ("stream_options", Set::Json(r#"{"include_usage":true}"#)),
    ]
}

/// The fields and parts of a request of another dialect that have no Chat
/// Completions equivalent: its untranslated fields and parts, a thinking
/// budget that matches no effort (see [`effort_for_budget`]), and `top_k`
/// (OpenAI's API has none; a Chat Completions client's own `top_k` goes as
/// written, for the compatible servers that take it).
fn untranslated(req: &ChatRequest) -> Vec<Field> {
    let mut out = req.untranslated_fields();
    if req.top_k.is_some() {
        out.push(req.field(Setting::TopK));
    }
    for (i, message) in req.messages.iter().enumerate() {
        out.extend(req.untranslated_message_fields(i));
        for (j, part) in message.content.iter().enumerate() {
            if matches!(part, Part::Other(_)) {
                out.push(Field::Part(i, j, "a part of another type"));
            }
        }
    }
    if req.reasoning_effort.is_some() && req.thinking_budget.is_some() {
        out.push(req.field(Setting::ThinkingBudget));
    }
    out
}

/// The effort a thinking budget comes closest to, for a client that gave a
/// budget (Anthropic's `thinking.budget_tokens`): OpenAI takes efforts only.
fn effort_for_budget(budget: u32) -> &'static str {
    match budget {
        0..=2048 => "low",
        2049..=8192 => "medium",
        _ => "high",
    }
}

/// Fields whose answer baton's events cannot carry: `modalities` or
/// `audio` asking for spoken output. `null`, `false` and a text-only
/// `modalities` ask for nothing. (Log probabilities travel as
/// [`crate::event::Event::Logprobs`].)
fn unrelayed(req: &ChatRequest) -> Vec<Field> {
    let asks = |name: &str| match req.extra.get(name) {
        None | Some(Value::Null | Value::Bool(false)) => false,
        Some(Value::Array(modes)) if name == "modalities" => modes.iter().any(|mode| mode != "text"),
        Some(_) => true,
    };
    ["modalities", "audio"].into_iter().filter(|name| asks(name)).map(Field::top).collect()
}

/// The body an OpenAI-kind server gets: the client's request as it came,
/// every field baton does not translate passed through verbatim, and usage
/// always requested so the gateway can count tokens whether or not the
/// client asked to see it. Cache hints are left out (OpenAI caches by itself).
/// Written straight from the request, with no JSON tree built in between:
/// every attempt sends one.
struct Body<'a> {
    model: &'a str,
    req: &'a ChatRequest,
}

/// The keys baton writes itself. The dialect takes each of them out of the
/// client's fields, so an untranslated field never has one of these names;
/// if one did, it would not override what baton wrote.
const BODY_KEYS: [&str; 17] = [
    "model",
    "messages",
    "stream",
    "stream_options",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "stop",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "response_format",
    "reasoning_effort",
    "top_k",
    "user",
    "prompt_cache_key",
];

fn body<'a>(model: &'a str, req: &'a ChatRequest) -> Body<'a> {
    Body { model, req }
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let req = self.req;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("model", self.model)?;
        map.serialize_entry("messages", &Each(&req.messages))?;
        map.serialize_entry("stream", &true)?;
        map.serialize_entry("stream_options", &json!({ "include_usage": true }))?;
        if let Some(limit) = req.max_tokens {
            let field = match req.limit_field {
                LimitField::MaxTokens => "max_tokens",
                LimitField::MaxCompletionTokens => "max_completion_tokens",
            };
            map.serialize_entry(field, &limit)?;
        }
        if let Some(temperature) = req.temperature {
            map.serialize_entry("temperature", &temperature)?;
        }
        if let Some(top_p) = req.top_p {
            map.serialize_entry("top_p", &top_p)?;
        }
        if !req.stop.is_empty() {
            map.serialize_entry("stop", &req.stop)?;
        }
        if !req.tools.is_empty() {
            map.serialize_entry("tools", &Each(&req.tools))?;
        }
        if let Some(choice) = &req.tool_choice {
            map.serialize_entry("tool_choice", &tool_choice(choice))?;
        }
        if let Some(parallel) = req.parallel_tool_calls {
            map.serialize_entry("parallel_tool_calls", &parallel)?;
        }
        if let Some(format) = &req.response_format {
            map.serialize_entry("response_format", &response_format(format))?;
        }
        match (&req.reasoning_effort, req.thinking_budget) {
            (Some(effort), _) => map.serialize_entry("reasoning_effort", effort)?,
            (None, Some(budget)) => map.serialize_entry("reasoning_effort", effort_for_budget(budget))?,
            (None, None) => {}
        }
        if let Some(top_k) = req.top_k {
            map.serialize_entry("top_k", &top_k)?;
        }
        if let Some(user) = &req.user {
            map.serialize_entry("user", user)?;
        }
        if let Some(cache_key) = &req.cache_key {
            map.serialize_entry("prompt_cache_key", cache_key)?;
        }
        let extra = req.extra_in(ClientDialect::ChatCompletions).into_iter().flatten();
        for (name, value) in extra.filter(|(name, _)| !BODY_KEYS.contains(&name.as_str())) {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

/// A list written item by item with the item's own wire form.
struct Each<'a, T>(&'a [T]);

impl<T> Serialize for Each<'_, T>
where
    for<'b> Wire<'b, T>: Serialize,
{
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(Wire))
    }
}

/// One message or tool in its OpenAI wire form.
struct Wire<'a, T>(&'a T);

/// The keys a message's own fields are written under; an untranslated
/// field of the same name never overrides one.
const MESSAGE_KEYS: [&str; 5] = ["role", "content", "tool_calls", "tool_call_id", "name"];

impl Serialize for Wire<'_, Message> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let message = self.0;
        let role = match message.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        };
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("role", role)?;
        // Earlier reasoning is another provider's, with its signature: no OpenAI model takes it back.
        let parts: Vec<&Part> = message.content.iter().filter(|part| !part.is_reasoning()).collect();
        match parts.as_slice() {
            [] if !message.tool_calls.is_empty() => map.serialize_entry("content", &())?,
            [] => map.serialize_entry("content", "")?,
            [Part::Text { text, .. }] => map.serialize_entry("content", text)?,
            parts => map.serialize_entry("content", &Value::Array(parts.iter().copied().filter_map(part).collect()))?,
        }
        if !message.tool_calls.is_empty() {
            let calls: Vec<Value> = message
                .tool_calls
                .iter()
                .map(|call| {
                    json!({ "id": call.id, "type": "function", "function": { "name": call.name, "arguments": call.arguments } })
                })
                .collect();
            map.serialize_entry("tool_calls", &calls)?;
        }
        if let Some(id) = &message.tool_call_id {
            map.serialize_entry("tool_call_id", id)?;
        }
        if let Some(name) = &message.name {
            map.serialize_entry("name", name)?;
        }
        // Another dialect's untranslated fields were refused or dropped before this (see `untranslated`).
        for (name, value) in message.extra.iter().filter(|(name, _)| !MESSAGE_KEYS.contains(&name.as_str())) {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl Serialize for Wire<'_, Tool> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        tool(self.0).serialize(serializer)
    }
}

/// A content part in OpenAI's form; reasoning has none.
fn part(part: &Part) -> Option<Value> {
    Some(match part {
        Part::Text { text, .. } => json!({ "type": "text", "text": text }),
        Part::Image(image) => {
            let mut url = json!({ "url": image.url });
            if let Some(detail) = &image.detail {
                url["detail"] = json!(detail);
            }
            json!({ "type": "image_url", "image_url": url })
        }
        Part::Other(value) => value.clone(),
        Part::Thinking { .. } | Part::RedactedThinking(_) => return None,
    })
}

/// A function tool; `parameters` is optional and left out when the client left it out.
fn tool(tool: &Tool) -> Value {
    let mut function = json!({ "name": tool.name });
    if !tool.parameters.is_null() {
        function["parameters"] = tool.parameters.clone();
    }
    if let Some(description) = &tool.description {
        function["description"] = json!(description);
    }
    if let Some(strict) = tool.strict {
        function["strict"] = json!(strict);
    }
    json!({ "type": "function", "function": function })
}

fn tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Function(name) => json!({ "type": "function", "function": { "name": name } }),
    }
}

fn response_format(format: &ResponseFormat) -> Value {
    match format {
        ResponseFormat::Text => json!({ "type": "text" }),
        ResponseFormat::JsonObject => json!({ "type": "json_object" }),
        ResponseFormat::JsonSchema(schema) => {
            let mut inner = json!({ "name": schema.name });
            if !schema.schema.is_null() {
                inner["schema"] = schema.schema.clone();
            }
            if let Some(description) = &schema.description {
                inner["description"] = json!(description);
            }
            if let Some(strict) = schema.strict {
                inner["strict"] = json!(strict);
            }
            json!({ "type": "json_schema", "json_schema": inner })
        }
    }
}

#[cfg(test)]
mod tests;
