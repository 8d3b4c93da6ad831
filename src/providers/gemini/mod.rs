//! Google Gemini `streamGenerateContent?alt=sse`: roles `user`/`model`, the
//! system prompt in `systemInstruction`, sampling in `generationConfig`.

mod decode;
pub(super) mod simulated;

use bytes::Bytes;
use http::HeaderName;
use serde_json::{Map, Value, json};

use super::simulate::Simulated;
use super::{Adapter, Decoder, ProviderError, Upstream, driver};
use crate::request::{ChatRequest, ClientDialect, Field, Image, Part, ResponseFormat, Role, Setting, Tool, ToolChoice};

/// The header that carries the key.
const API_KEY: HeaderName = HeaderName::from_static("x-goog-api-key");

/// The Gemini adapter.
pub struct Gemini;

impl Adapter for Gemini {
    fn request(&self, upstream: Upstream<'_>, req: &ChatRequest) -> Result<http::Request<Bytes>, ProviderError> {
        let url = format!(
            "{}/v1beta/models/{}:streamGenerateContent?alt=sse",
            upstream.base_url.trim_end_matches('/'),
            upstream.model
        );
        let headers: Vec<_> = upstream.api_key.map(|key| (API_KEY, key)).into_iter().collect();
        gemini_request(url, &headers, req)
    }

    fn decoder(&self) -> Box<dyn Decoder> {
        gemini_decoder()
    }

    fn simulated(&self) -> &'static dyn Simulated {
        &simulated::SimulatedGemini
    }

    fn is_context_length(&self, message: &str) -> bool {
        is_too_long(message)
    }

    fn dialect(&self) -> Option<ClientDialect> {
        Some(ClientDialect::Gemini)
    }

    fn unsupported(&self, req: &ChatRequest) -> Vec<Field> {
        unsupported(req)
    }
}

/// A streaming `generateContent` request of `req` to `url` with `headers`:
/// shared with the kinds that serve Gemini at another address (Vertex AI).
/// A Gemini client's body goes as it came (the model is in the URL), so
/// its thought signatures, safety settings and fields baton has never
/// heard of all arrive; any other is translated.
pub(super) fn gemini_request(
    url: String,
    headers: &[(HeaderName, &str)],
    req: &ChatRequest,
) -> Result<http::Request<Bytes>, ProviderError> {
    match req.native_in(ClientDialect::Gemini) {
        Some(native) => driver::post_native(url, headers, native, &[]),
        None => driver::post_json(url, headers, &body(req)),
    }
}

/// A fresh decoder of a Gemini stream.
pub(super) fn gemini_decoder() -> Box<dyn Decoder> {
    Box::<decode::GeminiDecoder>::default()
}

/// What of `req` Gemini cannot honour (see [`Adapter::unsupported`]).
pub(super) fn gemini_unsupported(req: &ChatRequest) -> Vec<Field> {
    unsupported(req)
}

/// Whether Gemini's words say the prompt is too long for the model.
pub(super) fn is_too_long(message: &str) -> bool {
    message.contains("exceeds the maximum number of tokens")
}

/// The thinking budget for each `reasoning_effort` (`none` turns thinking
/// off where the model allows it).
fn thinking_budget(effort: &str) -> Option<u32> {
    match effort {
        "none" => Some(0),
        "minimal" => Some(512),
        "low" => Some(1024),
        "medium" => Some(8192),
        "high" => Some(24_576),
        _ => None,
    }
}

/// The signature Gemini documents for a function call it did not write
/// (a conversation from another model or client), which Gemini 3 otherwise
/// refuses for want of the signature of its own call.
const NO_THOUGHT_SIGNATURE: &str = "skip_thought_signature_validator";

/// Untranslated Chat Completions fields with a `generationConfig` equivalent.
const GENERATION_FIELDS: [(&str, &str); 3] =
    [("seed", "seed"), ("presence_penalty", "presencePenalty"), ("frequency_penalty", "frequencyPenalty")];

/// The untranslated field `name` when it has a `generationConfig` equivalent.
fn generation_field(req: &ChatRequest, name: &str) -> Option<&'static str> {
    req.extra_in(ClientDialect::ChatCompletions)?;
    GENERATION_FIELDS.iter().find(|(ours, _)| *ours == name).map(|(_, theirs)| *theirs)
}

/// The request's fields Gemini has no equivalent for: images by URL of a
/// type Gemini does not take, parts of other types, images in a tool result (a
/// `functionResponse` carries JSON), message names, a
/// `parallel_tool_calls: false`, tool-call arguments that are not a JSON
/// object, a result whose call is not in the conversation (Gemini wants
/// the function's name on it), and extra fields other than
/// [`GENERATION_FIELDS`]. A field set to `null` or `false` asks for nothing
/// and is honoured.
fn unsupported(req: &ChatRequest) -> Vec<Field> {
    // A Gemini client's body goes as sent: Gemini itself judges every field.
    if req.native_in(ClientDialect::Gemini).is_some() {
        return Vec::new();
    }
    let mut out: Vec<Field> = req
        .untranslated_fields()
        .into_iter()
        .filter(|field| !matches!(field, Field::Untranslated(name) if generation_field(req, name).is_some()))
        .collect();
    if req.parallel_tool_calls == Some(false) {
        out.push(req.field(Setting::ParallelToolCalls));
    }
    if req.reasoning_effort.as_deref().is_some_and(|effort| thinking_budget(effort).is_none()) {
        out.push(req.field(Setting::ReasoningEffort));
    }
    if req.user.is_some() {
        out.push(req.field(Setting::User));
    }
    // Top-level names in one order, whether translated or passed through.
    out.sort_by_cached_key(Field::to_string);
    for (i, message) in req.messages.iter().enumerate() {
        out.extend(req.untranslated_message_fields(i));
        if message.name.is_some() {
            out.push(Field::message(i, "name"));
        }
        if message.tool_calls.iter().any(|call| !matches!(arguments(&call.arguments), Some(Value::Object(_)))) {
            out.push(Field::message(i, "tool_calls"));
        }
        if message.role == Role::Tool
            && message.tool_call_id.as_deref().and_then(|id| function_named(req, id)).is_none()
        {
            out.push(Field::message(i, "tool_call_id"));
        }
        for (j, part) in message.content.iter().enumerate() {
            match part {
                Part::Image(_) if message.role == Role::Tool => {
                    out.push(Field::Part(i, j, "an image in a tool result"))
                }
                Part::Image(image) if image.inline().is_none() && url_media_type(&image.url).is_none() => {
                    out.push(Field::Part(i, j, "an image by URL of a type Gemini does not take"))
                }
                Part::Other(_) => out.push(Field::Part(i, j, "a part of another type")),
                _ => {}
            }
        }
    }
    out
}

/// The `generateContent` body: roles `user` and `model`, tool calls and
/// results as `functionCall` / `functionResponse` parts (a result's
/// function name looked up from its call id; the results of one turn's
/// calls sent back together; a call without the model's thought signature,
/// which an OpenAI conversation does not carry, marked as Gemini documents
/// for calls it did not write), images inline, structured output and thinking in
/// `generationConfig`, JSON Schemas as Gemini's `*JsonSchema` fields take
/// them, unconverted.
fn body(req: &ChatRequest) -> Value {
    let system: Vec<Value> =
        req.messages.iter().filter(|m| m.role == Role::System).map(|m| json!({ "text": m.joined_text() })).collect();
    let mut body = Map::new();
    body.insert("contents".into(), Value::Array(contents(req)));
    if !system.is_empty() {
        body.insert("systemInstruction".into(), json!({ "parts": system }));
    }
    body.insert("generationConfig".into(), generation_config(req));
    if !req.tools.is_empty() {
        let declarations: Vec<Value> = req.tools.iter().map(declaration).collect();
        body.insert("tools".into(), json!([{ "functionDeclarations": declarations }]));
    }
    if let Some(config) = tool_config(req.tool_choice.as_ref()) {
        body.insert("toolConfig".into(), config);
    }
    Value::Object(body)
}

fn contents(req: &ChatRequest) -> Vec<Value> {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    let mut previous = None;
    for message in &req.messages {
        let (role, parts) = match message.role {
            Role::System => continue,
            Role::User => ("user", message.content.iter().filter_map(part).collect()),
            Role::Assistant => {
                let mut parts: Vec<Value> = message.content.iter().filter_map(part).collect();
                parts.retain(|part| part.get("text").is_none_or(|text| text != ""));
                parts.extend(message.tool_calls.iter().enumerate().map(|(n, call)| {
                    let mut part = json!({ "functionCall": { "name": call.name, "args": arguments(&call.arguments) } });
                    // Gemini 3 refuses a step's first call without a signature.
                    if n == 0 {
                        part["thoughtSignature"] = json!(NO_THOUGHT_SIGNATURE);
                    }
                    part
                }));
                ("model", parts)
            }
            Role::Tool => {
                let name = message.tool_call_id.as_deref().and_then(|id| function_named(req, id)).unwrap_or_default();
                let text = message.joined_text();
                // An object is the output itself; anything else goes under
                // `output`, the key Gemini reads a function's output from.
                let response = match serde_json::from_str::<Value>(&text) {
                    Ok(object @ Value::Object(_)) => object,
                    _ => json!({ "output": text }),
                };
                ("user", vec![json!({ "functionResponse": { "name": name, "response": response } })])
            }
        };
        // Results of one turn's calls go back together, and a user's words
        // after them join that turn; other turns stay as the client sent them.
        let joins = previous == Some(Role::Tool) && matches!(message.role, Role::Tool | Role::User);
        previous = Some(message.role);
        match turns.last_mut() {
            Some((_, held)) if joins => held.extend(parts),
            _ => turns.push((role, parts)),
        }
    }
    turns.into_iter().map(|(role, parts)| json!({ "role": role, "parts": parts })).collect()
}

/// The function of the assistant's call `id`, which Gemini wants on its result.
fn function_named<'a>(req: &'a ChatRequest, id: &str) -> Option<&'a str> {
    req.messages.iter().flat_map(|m| &m.tool_calls).find(|call| call.id == id).map(|call| call.name.as_str())
}

/// A tool call's arguments as the object Gemini wants (empty means none).
fn arguments(arguments: &str) -> Option<Value> {
    if arguments.trim().is_empty() {
        return Some(json!({}));
    }
    serde_json::from_str(arguments).ok()
}

/// A content part as Gemini's; earlier reasoning is another provider's and
/// goes without (see [`Part::is_reasoning`]).
fn part(part: &Part) -> Option<Value> {
    match part {
        Part::Text { text, .. } => Some(json!({ "text": text })),
        Part::Image(image) => image_part(image),
        Part::Thinking { .. } | Part::RedactedThinking(_) | Part::Other(_) => None,
    }
}

/// An image inline, or by its public URL as `fileData`, which Gemini
/// fetches itself.
fn image_part(image: &Image) -> Option<Value> {
    match image.inline() {
        Some(inline) => Some(json!({ "inlineData": { "mimeType": inline.media_type, "data": inline.data } })),
        None => {
            url_media_type(&image.url).map(|mime| json!({ "fileData": { "mimeType": mime, "fileUri": image.url } }))
        }
    }
}

/// The media type of an image by `http(s)` URL, from its extension: Gemini
/// wants one with a `fileUri`, and takes PNG, JPEG, WebP, HEIC and HEIF.
fn url_media_type(url: &str) -> Option<&'static str> {
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"))?;
    let path = rest.split(['?', '#']).next().unwrap_or_default();
    let (_, extension) = path.rsplit_once('/')?.1.rsplit_once('.')?;
    match extension.to_ascii_lowercase().as_str() {
        "png" => Some("image/png"),
        "jpg" | "jpeg" => Some("image/jpeg"),
        "webp" => Some("image/webp"),
        "heic" => Some("image/heic"),
        "heif" => Some("image/heif"),
        _ => None,
    }
}

fn generation_config(req: &ChatRequest) -> Value {
    let mut config = Map::new();
    let optional = [
        ("maxOutputTokens", req.max_tokens.map(|max| json!(max))),
        ("temperature", req.temperature.map(|t| json!(t))),
        ("topP", req.top_p.map(|p| json!(p))),
        ("stopSequences", (!req.stop.is_empty()).then(|| json!(req.stop))),
    ];
    for (name, value) in optional {
        if let Some(value) = value {
            config.insert(name.into(), value);
        }
    }
    if let Some(top_k) = req.top_k {
        config.insert("topK".into(), json!(top_k));
    }
    for (name, value) in req.extra.iter().filter(|(_, value)| !value.is_null()) {
        if let Some(theirs) = generation_field(req, name) {
            config.insert(theirs.into(), value.clone());
        }
    }
    match &req.response_format {
        Some(ResponseFormat::JsonObject) => {
            config.insert("responseMimeType".into(), json!("application/json"));
        }
        Some(ResponseFormat::JsonSchema(schema)) => {
            config.insert("responseMimeType".into(), json!("application/json"));
            if !schema.schema.is_null() {
                config.insert("responseJsonSchema".into(), schema.schema.clone());
            }
        }
        Some(ResponseFormat::Text) | None => {}
    }
    let budget = req.thinking_budget.or_else(|| req.reasoning_effort.as_deref().and_then(thinking_budget));
    if let Some(budget) = budget {
        config.insert("thinkingConfig".into(), json!({ "thinkingBudget": budget, "includeThoughts": budget > 0 }));
    }
    Value::Object(config)
}

fn declaration(tool: &Tool) -> Value {
    let mut out = json!({ "name": tool.name });
    if let Some(description) = &tool.description {
        out["description"] = json!(description);
    }
    if !tool.parameters.is_null() {
        out["parametersJsonSchema"] = tool.parameters.clone();
    }
    out
}

fn tool_config(choice: Option<&ToolChoice>) -> Option<Value> {
    let config = match choice? {
        ToolChoice::Auto => json!({ "mode": "AUTO" }),
        ToolChoice::None => json!({ "mode": "NONE" }),
        ToolChoice::Required => json!({ "mode": "ANY" }),
        ToolChoice::Function(name) => json!({ "mode": "ANY", "allowedFunctionNames": [name] }),
    };
    Some(json!({ "functionCallingConfig": config }))
}

#[cfg(test)]
mod tests;
