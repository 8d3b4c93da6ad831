//! OpenAI's Responses API (`POST {base_url}/responses`), for a provider
//! configured with `api = "responses"`: a Responses client's body goes as
//! sent; a request of another dialect is written as Responses input items.
//! Every request says `store: false`: baton keeps a conversation itself
//! (the Responses door), so any target, of any kind, can continue it.

mod decode;
mod simulated;

use bytes::Bytes;
use http::header::AUTHORIZATION;
use serde_json::{Map, Value, json};

use super::effort_for_budget;
use crate::providers::driver::{self, Set};
use crate::providers::simulate::Simulated;
use crate::providers::{Adapter, Decoder, ProviderError, Upstream};
use crate::request::{ChatRequest, ClientDialect, Field, Message, Part, ResponseFormat, Role, Setting, ToolChoice};

/// The Responses adapter.
pub struct OpenAiResponses;

impl Adapter for OpenAiResponses {
    fn request(&self, upstream: Upstream<'_>, req: &ChatRequest) -> Result<http::Request<Bytes>, ProviderError> {
        let url = upstream.url("/responses");
        let bearer = upstream.bearer();
        let headers: Vec<_> = bearer.iter().map(|value| (AUTHORIZATION, value.as_str())).collect();
        match req.native_in(ClientDialect::Responses) {
            Some(native) => {
                let set =
                    [("model", Set::Str(upstream.model)), ("stream", Set::Json("true")), ("store", Set::Json("false"))];
                driver::post_native(url, &headers, native, &set)
            }
            None => driver::post_json(url, &headers, &body(upstream.model, req)),
        }
    }

    fn decoder(&self) -> Box<dyn Decoder> {
        Box::<decode::ResponsesDecoder>::default()
    }

    fn simulated(&self) -> &'static dyn Simulated {
        &simulated::SimulatedResponses
    }

    fn dialect(&self) -> Option<crate::request::ClientDialect> {
        Some(crate::request::ClientDialect::Responses)
    }

    fn is_context_length(&self, message: &str) -> bool {
        message.contains("context window") || message.contains("context_length_exceeded")
    }

    /// A Responses request goes as sent, so OpenAI judges every field; one of
    /// another dialect is translated, and what has no Responses equivalent
    /// is named.
    fn unsupported(&self, req: &ChatRequest) -> Vec<Field> {
        if req.native_in(ClientDialect::Responses).is_some() {
            return Vec::new();
        }
        let mut out: Vec<Field> = match req.extra_in(ClientDialect::Responses) {
            Some(_) => Vec::new(),
            None => req.untranslated_fields(),
        };
        if !req.stop.is_empty() {
            out.push(req.field(Setting::Stop));
        }
        if req.top_k.is_some() {
            out.push(req.field(Setting::TopK));
        }
        let own = req.dialect == ClientDialect::Responses;
        for (i, message) in req.messages.iter().enumerate() {
            if !own {
                out.extend(req.untranslated_message_fields(i));
            }
            if message.name.is_some() {
                out.push(Field::message(i, "name"));
            }
            for (j, part) in message.content.iter().enumerate() {
                if matches!(part, Part::Other(_)) && !own {
                    out.push(Field::Part(i, j, "a part of another type"));
                }
            }
        }
        out
    }
}

/// A request of another dialect as a Responses body: its conversation as
/// input items, its settings under their Responses names.
fn body(model: &str, req: &ChatRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("input".into(), Value::Array(req.messages.iter().flat_map(|message| items(req, message)).collect()));
    body.insert("stream".into(), json!(true));
    body.insert("store".into(), json!(false));
    let mut put = |name: &str, value: Option<Value>| {
        if let Some(value) = value {
            body.insert(name.to_owned(), value);
        }
    };
    put("max_output_tokens", req.max_tokens.map(|max| json!(max)));
    put("temperature", req.temperature.map(|t| json!(t)));
    put("top_p", req.top_p.map(|p| json!(p)));
    put("parallel_tool_calls", req.parallel_tool_calls.map(|parallel| json!(parallel)));
    put("user", req.user.as_ref().map(|user| json!(user)));
    put("prompt_cache_key", req.cache_key.as_ref().map(|key| json!(key)));
    if !req.tools.is_empty() {
        let tools = req.tools.iter().map(|tool| {
            let mut wire = json!({ "type": "function", "name": tool.name });
            if !tool.parameters.is_null() {
                wire["parameters"] = tool.parameters.clone();
            }
            if let Some(description) = &tool.description {
                wire["description"] = json!(description);
            }
            if let Some(strict) = tool.strict {
                wire["strict"] = json!(strict);
            }
            wire
        });
        put("tools", Some(Value::Array(tools.collect())));
    }
    put("tool_choice", req.tool_choice.as_ref().map(tool_choice));
    put("text", req.response_format.as_ref().map(|format| json!({ "format": format_of(format) })));
    let effort = req.reasoning_effort.clone().or_else(|| req.thinking_budget.map(|b| effort_for_budget(b).to_owned()));
    put("reasoning", effort.map(|effort| json!({ "effort": effort })));
    // A Responses request rewritten (a resume, a dropped field) keeps what baton does not translate.
    for (name, value) in req.extra_in(ClientDialect::Responses).into_iter().flatten() {
        body.entry(name.clone()).or_insert_with(|| value.clone());
    }
    Value::Object(body)
}

/// One message as input items: the message itself (if it says anything),
/// then each of its tool calls; a tool's result is its own item.
fn items(req: &ChatRequest, message: &Message) -> Vec<Value> {
    let own = req.dialect == ClientDialect::Responses;
    if message.role == Role::Tool {
        let call_id = message.tool_call_id.clone().unwrap_or_default();
        return vec![json!({ "type": "function_call_output", "call_id": call_id, "output": tool_output(message) })];
    }
    let (role, text_type) = match message.role {
        Role::System => ("developer", "input_text"),
        Role::Assistant => ("assistant", "output_text"),
        Role::User | Role::Tool => ("user", "input_text"),
    };
    let mut out = Vec::new();
    let mut content = Vec::new();
    for part in &message.content {
        match part {
            Part::Text { text, .. } => content.push(json!({ "type": text_type, "text": text })),
            Part::Image(image) => {
                let mut wire = json!({ "type": "input_image", "image_url": image.url });
                if let Some(detail) = &image.detail {
                    wire["detail"] = json!(detail);
                }
                content.push(wire);
            }
            // Only OpenAI's own encrypted reasoning can go back to it.
            Part::Thinking { text, signature: Some(encrypted) } if own => out.push(json!({
                "type": "reasoning",
                "summary": if text.is_empty() { json!([]) } else { json!([{ "type": "summary_text", "text": text }]) },
                "encrypted_content": encrypted,
            })),
            Part::Other(part) if own && is_content_part(part) => content.push(part.clone()),
            // A built-in tool's call or output, an item of its own.
            Part::Other(item) if own => out.push(item.clone()),
            Part::Thinking { .. } | Part::RedactedThinking(_) | Part::Other(_) => {}
        }
    }
    if !content.is_empty() {
        let mut item = json!({ "type": "message", "role": role, "content": content });
        if own && let Some(fields) = item.as_object_mut() {
            for (name, value) in &message.extra {
                fields.entry(name.clone()).or_insert_with(|| value.clone());
            }
        }
        out.push(item);
    }
    out.extend(message.tool_calls.iter().map(
        |call| json!({ "type": "function_call", "call_id": call.id, "name": call.name, "arguments": call.arguments }),
    ));
    out
}

/// A tool's result: its text, or its parts when it has more than text
/// (an image, say), which `function_call_output` takes as input parts.
fn tool_output(message: &Message) -> Value {
    let texts: Option<String> = message
        .content
        .iter()
        .map(|part| match part {
            Part::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    if let Some(text) = texts {
        return json!(text);
    }
    let parts = message.content.iter().filter_map(|part| match part {
        Part::Text { text, .. } => Some(json!({ "type": "input_text", "text": text })),
        Part::Image(image) => Some(json!({ "type": "input_image", "image_url": image.url })),
        Part::Other(part) if is_content_part(part) => Some(part.clone()),
        Part::Thinking { .. } | Part::RedactedThinking(_) | Part::Other(_) => None,
    });
    Value::Array(parts.collect())
}

/// Whether an untranslated Responses value is a content part (`input_file`,
/// `input_audio`, `refusal`…) rather than an item of its own.
fn is_content_part(value: &Value) -> bool {
    value["type"]
        .as_str()
        .is_some_and(|kind| kind.starts_with("input_") || kind.starts_with("output_") || kind == "refusal")
}

fn tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Function(name) => json!({ "type": "function", "name": name }),
    }
}

/// `text.format`: the schema flat beside its name, as the Responses API has it.
fn format_of(format: &ResponseFormat) -> Value {
    match format {
        ResponseFormat::Text => json!({ "type": "text" }),
        ResponseFormat::JsonObject => json!({ "type": "json_object" }),
        ResponseFormat::JsonSchema(schema) => {
            let mut wire = json!({ "type": "json_schema", "name": schema.name, "schema": schema.schema });
            if let Some(description) = &schema.description {
                wire["description"] = json!(description);
            }
            if let Some(strict) = schema.strict {
                wire["strict"] = json!(strict);
            }
            wire
        }
    }
}

#[cfg(test)]
mod tests;
