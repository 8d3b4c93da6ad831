//! OpenAI Chat Completions, the dialect of OpenAI and of every compatible
//! server (vLLM, Ollama, Groq, Azure and others).

mod decode;

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::{Adapter, Decoder, ProviderError, Upstream, driver};
use crate::request::{ChatRequest, Field, LimitField, Message, Part, ResponseFormat, Role, Tool, ToolChoice};

/// The OpenAI adapter.
pub struct OpenAi;

impl Adapter for OpenAi {
    fn request(&self, upstream: Upstream<'_>, req: &ChatRequest) -> Result<http::Request<Bytes>, ProviderError> {
        let url = format!("{}/chat/completions", upstream.base_url.trim_end_matches('/'));
        let bearer = upstream.api_key.map(|key| format!("Bearer {key}"));
        let headers: Vec<_> = bearer.iter().map(|value| ("authorization", value.as_str())).collect();
        driver::post_json(url, &headers, &body(upstream.model, req))
    }

    fn decoder(&self) -> Box<dyn Decoder> {
        Box::<decode::OpenAiDecoder>::default()
    }

    fn is_context_length(&self, message: &str) -> bool {
        message.contains("context length") || message.contains("context_length_exceeded")
    }

    /// Everything goes through, but what the answer would carry beyond the
    /// shared events — token log probabilities, audio — cannot come back
    /// through baton, so asking for it is named rather than quietly lost.
    fn unsupported(&self, req: &ChatRequest) -> Vec<Field> {
        unrelayed(req)
    }
}

/// Fields whose answer baton's events cannot carry: `logprobs` and
/// `top_logprobs` (log probabilities per token), and `modalities` or
/// `audio` asking for spoken output. `null`, `false` and a text-only
/// `modalities` ask for nothing.
fn unrelayed(req: &ChatRequest) -> Vec<Field> {
    let asks = |name: &str| match req.extra.get(name) {
        None | Some(Value::Null | Value::Bool(false)) => false,
        Some(Value::Array(modes)) if name == "modalities" => modes.iter().any(|mode| mode != "text"),
        Some(_) => true,
    };
    ["logprobs", "top_logprobs", "modalities", "audio"].into_iter().filter(|name| asks(name)).map(Field::top).collect()
}

/// The body an OpenAI-kind server gets: the client's request as it came,
/// every field baton does not translate passed through verbatim, and usage
/// always requested so the gateway can count tokens whether or not the
/// client asked to see it. Cache hints are left out (OpenAI caches by itself).
fn body(model: &str, req: &ChatRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), req.messages.iter().map(message).collect());
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({ "include_usage": true }));
    if let Some(limit) = req.max_tokens {
        let field = match req.limit_field {
            LimitField::MaxTokens => "max_tokens",
            LimitField::MaxCompletionTokens => "max_completion_tokens",
        };
        body.insert(field.into(), json!(limit));
    }
    let optional = [
        ("temperature", req.temperature.map(|t| json!(t))),
        ("top_p", req.top_p.map(|p| json!(p))),
        ("stop", (!req.stop.is_empty()).then(|| json!(req.stop))),
        ("tools", (!req.tools.is_empty()).then(|| req.tools.iter().map(tool).collect())),
        ("tool_choice", req.tool_choice.as_ref().map(tool_choice)),
        ("parallel_tool_calls", req.parallel_tool_calls.map(Value::Bool)),
        ("response_format", req.response_format.as_ref().map(response_format)),
        ("reasoning_effort", req.reasoning_effort.as_ref().map(|effort| json!(effort))),
    ];
    for (name, value) in optional {
        if let Some(value) = value {
            body.insert(name.into(), value);
        }
    }
    for (name, value) in &req.extra {
        body.entry(name.clone()).or_insert_with(|| value.clone());
    }
    Value::Object(body)
}

fn message(message: &Message) -> Value {
    let role = match message.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let mut out = Map::new();
    out.insert("role".into(), json!(role));
    let content = match message.content.as_slice() {
        [] if !message.tool_calls.is_empty() => Value::Null,
        [] => json!(""),
        [Part::Text { text, .. }] => json!(text),
        parts => parts.iter().map(part).collect(),
    };
    out.insert("content".into(), content);
    if !message.tool_calls.is_empty() {
        let calls = message.tool_calls.iter().map(|call| {
            json!({ "id": call.id, "type": "function", "function": { "name": call.name, "arguments": call.arguments } })
        });
        out.insert("tool_calls".into(), calls.collect());
    }
    if let Some(id) = &message.tool_call_id {
        out.insert("tool_call_id".into(), json!(id));
    }
    if let Some(name) = &message.name {
        out.insert("name".into(), json!(name));
    }
    for (name, value) in &message.extra {
        out.entry(name.clone()).or_insert_with(|| value.clone());
    }
    Value::Object(out)
}

fn part(part: &Part) -> Value {
    match part {
        Part::Text { text, .. } => json!({ "type": "text", "text": text }),
        Part::Image(image) => {
            let mut url = json!({ "url": image.url });
            if let Some(detail) = &image.detail {
                url["detail"] = json!(detail);
            }
            json!({ "type": "image_url", "image_url": url })
        }
        Part::Other(value) => value.clone(),
    }
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
