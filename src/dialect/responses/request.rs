//! OpenAI Responses requests, checked and turned into the normalised
//! [`ChatRequest`]: `input` as text or items, `instructions`, function tools
//! and their outputs, `text.format`, `reasoning`. `previous_response_id`
//! and `store` are read into the options: the door keeps turns and rebuilds
//! a conversation from them ([`continue_from`]); `conversation` (OpenAI's
//! Conversations API, which baton does not have) is refused by name. What
//! has no translation stays in the request's `extra` under the Responses
//! API's names, to be refused by name.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::Options;
use crate::dialect::fields::Fields;
use crate::dialect::{ApiError, Ingress};
use crate::request::{
    ChatRequest, ClientDialect, FREEFORM_INPUT, Image, JsonSchema, LimitField, Message, Part, ReasoningShown,
    ResponseFormat, Role, Tool, ToolCall, ToolChoice,
};

/// The request fields a `response` object echoes back.
const ECHOED: [&str; 12] = [
    "instructions",
    "max_output_tokens",
    "metadata",
    "parallel_tool_calls",
    "previous_response_id",
    "reasoning",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_p",
    "user",
];

/// What `include` may ask for that a target which returns no such data
/// honours: encrypted reasoning, to send back on the next turn.
const HONOURED_INCLUDES: [&str; 1] = ["reasoning.encrypted_content"];

/// One earlier turn of a stored conversation, as [`continue_from`] takes it.
pub struct StoredTurn {
    /// The turn's input items, as its client sent them.
    pub input: Vec<Value>,
    /// The output items of the response it got.
    pub output: Vec<Value>,
    /// The provider that wrote that response.
    pub maker: Arc<str>,
}

/// Parses and checks a `POST /v1/responses` body.
pub fn parse(body: Bytes) -> Result<Ingress<Options>, ApiError> {
    let value: Value = crate::dialect::fields::json_body(&body)?;
    let mut fields = Fields::new(value, "")?;
    if fields.map.get("conversation").is_some_and(|v| !v.is_null()) {
        return Err(ApiError::bad_request(
            "`conversation` is not supported: this gateway has no Conversations API; \
             chain turns with `previous_response_id`, or send the whole conversation in `input`",
        ));
    }
    let echo: Map<String, Value> =
        ECHOED.iter().filter_map(|name| Some(((*name).to_owned(), fields.map.get(*name)?.clone()))).collect();
    let model: String = fields.need("model")?;
    let stream = fields.take("stream")?.unwrap_or(false);
    fields.map.remove("stream_options");
    let previous = fields.take::<String>("previous_response_id")?;
    // OpenAI keeps a response unless asked not to; so does baton, where it has a store.
    let store = fields.take::<bool>("store")?.unwrap_or(true);
    // The client's ids for its own bookkeeping (Codex's session and turn): they ask nothing of the answer.
    fields.map.remove("client_metadata");
    let instructions = fields.take::<String>("instructions")?;
    let items = input_items(fields.need::<Value>("input")?)?;
    let mut references = Vec::new();
    let own = items.into_iter().enumerate().map(|(i, item)| (format!("input[{i}]"), item, None));
    let mut request = ChatRequest {
        messages: conversation(instructions, own, Lookup::Collect(&mut references))?,
        max_tokens: fields.take("max_output_tokens")?,
        limit_field: LimitField::MaxCompletionTokens,
        temperature: fields.take("temperature")?,
        top_p: fields.take("top_p")?,
        parallel_tool_calls: fields.take("parallel_tool_calls")?,
        user: fields.take("user")?,
        cache_key: fields.take("prompt_cache_key")?,
        dialect: ClientDialect::Responses,
        ..ChatRequest::default()
    };
    let custom_tools = tools(&mut fields, &mut request)?;
    tool_choice(&mut fields, &mut request)?;
    text(&mut fields, &mut request)?;
    reasoning(&mut fields, &mut request)?;
    include(&mut fields)?;
    if fields.map.get("truncation").is_some_and(|v| v == "disabled") {
        fields.map.remove("truncation");
    }
    request.extra = std::mem::take(&mut fields.map);
    let options = Options { echo, body, previous, references, store, custom_tools, keeper: None, maker: None };
    Ok(Ingress { model, stream, request, options })
}

/// `input` as items: text is one user message.
fn input_items(input: Value) -> Result<Vec<Value>, ApiError> {
    match input {
        Value::String(text) => Ok(vec![json!({
            "type": "message", "role": "user", "content": [{ "type": "input_text", "text": text }]
        })]),
        Value::Array(items) => Ok(items),
        _ => Err(ApiError::bad_request("`input` must be a string or a list of items")),
    }
}

/// The input items of the request `body` (already parsed once, so known
/// good): what a kept turn keeps.
pub fn request_input(body: &[u8]) -> Vec<Value> {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|mut value| input_items(value.get_mut("input")?.take()).ok())
        .unwrap_or_default()
}

/// Earlier output items the request's `item_reference`s name, found in
/// kept turns: each item by its id, with the provider that wrote it.
pub type Referenced = HashMap<String, (Value, Arc<str>)>;

/// What an `item_reference` becomes while a conversation is built: its id
/// collected (the first reading, before the store is asked), or the item
/// it names.
enum Lookup<'a> {
    Collect(&'a mut Vec<String>),
    Found(&'a Referenced),
}

/// Continues a stored conversation: the earlier `turns`, oldest first (each
/// turn's input, then its response's output, which its maker wrote), go
/// before this request's own input, in which each `item_reference` is the
/// `referenced` item it names. The instructions stay this request's alone,
/// as OpenAI's API has it. What goes upstream is now baton's rewrite, so no
/// target is sent the client's body as it came.
pub fn continue_from(
    request: &mut ChatRequest,
    options: &Options,
    turns: Vec<StoredTurn>,
    referenced: &Referenced,
) -> Result<(), ApiError> {
    let mut fields = Fields::new(serde_json::from_slice(&options.body).unwrap_or_default(), "")?;
    let instructions = fields.take::<String>("instructions")?;
    let own = input_items(fields.need::<Value>("input")?)?;
    let mut items = Vec::new();
    for (t, turn) in turns.into_iter().enumerate() {
        let at = |what: &str, i: usize| format!("the stored turn {t}'s {what}[{i}]");
        items.extend(turn.input.into_iter().enumerate().map(|(i, item)| (at("input", i), item, None)));
        let maker = Some(turn.maker);
        items.extend(turn.output.into_iter().enumerate().map(|(i, item)| (at("output", i), item, maker.clone())));
    }
    items.extend(own.into_iter().enumerate().map(|(i, item)| (format!("input[{i}]"), item, None)));
    request.messages = conversation(instructions, items, Lookup::Found(referenced))?;
    request.native = None;
    Ok(())
}

/// The conversation of `instructions` and `items`, each item named by
/// where it is (for errors) and with the provider that wrote it, if baton
/// kept it from an answer.
fn conversation(
    instructions: Option<String>,
    items: impl IntoIterator<Item = (String, Value, Option<Arc<str>>)>,
    mut lookup: Lookup<'_>,
) -> Result<Vec<Message>, ApiError> {
    let mut messages = Vec::new();
    if let Some(instructions) = instructions {
        messages.push(Message::text(Role::System, instructions));
    }
    for (at, item, maker) in items {
        let (item, maker) = match item.get("type").and_then(Value::as_str) {
            Some("item_reference") => {
                let id = item.get("id").and_then(Value::as_str);
                let id = id.ok_or_else(|| ApiError::bad_request(format!("`{at}.id`: field required")))?;
                match &mut lookup {
                    Lookup::Collect(ids) => {
                        ids.push(id.to_owned());
                        continue;
                    }
                    Lookup::Found(referenced) => {
                        let (item, maker) = referenced.get(id).ok_or_else(|| {
                            ApiError::bad_request(format!("`{at}` refers to item {id}, which no kept response holds"))
                        })?;
                        (item.clone(), Some(Arc::clone(maker)))
                    }
                }
            }
            _ => (item, maker),
        };
        let start = messages.len();
        input_item(&at, item, &mut messages)?;
        if let Some(maker) = maker {
            // The item's own message, or the assistant message it joined.
            let from = if messages.len() > start { start } else { start.saturating_sub(1) };
            for message in messages[from..].iter_mut().filter(|message| message.role == Role::Assistant) {
                message.made_by = Some(Arc::clone(&maker));
            }
        }
    }
    Ok(messages)
}

/// The input item at `at` (`input[3]`), appended to `messages`: a message,
/// a function call (on the assistant message before it, or a new one), a
/// call's output, or earlier reasoning.
fn input_item(at: &str, item: Value, messages: &mut Vec<Message>) -> Result<(), ApiError> {
    let mut fields = Fields::new(item, &format!("{at}."))?;
    let kind = fields.take::<String>("type")?.unwrap_or_else(|| "message".to_owned());
    match kind.as_str() {
        "message" => messages.push(message(at, fields)?),
        "function_call" => {
            let arguments = fields.take("arguments")?.unwrap_or_default();
            push_call(messages, ToolCall { id: fields.need("call_id")?, name: fields.need("name")?, arguments });
        }
        // A freeform tool's call: its input is the one string its function takes.
        "custom_tool_call" => {
            let arguments = json!({ FREEFORM_INPUT: fields.need::<String>("input")? }).to_string();
            push_call(messages, ToolCall { id: fields.need("call_id")?, name: fields.need("name")?, arguments });
        }
        "function_call_output" | "custom_tool_call_output" => {
            let id: String = fields.need("call_id")?;
            let content = match fields.need::<Value>("output")? {
                Value::String(text) => vec![Part::Text { text, cache: None }],
                Value::Array(parts) => content_parts(at, parts)?,
                _ => return Err(ApiError::bad_request(format!("`{at}.output` must be a string or a list of parts"))),
            };
            messages.push(Message { content, tool_call_id: Some(id), ..Message::text(Role::Tool, "") });
        }
        "reasoning" => {
            let summary: Vec<Value> = fields.take("summary")?.unwrap_or_default();
            let text = summary.iter().filter_map(|part| part["text"].as_str()).collect::<Vec<_>>().join("\n\n");
            let signature = fields.take("encrypted_content")?;
            let part = Part::Thinking { text, signature };
            match messages.last_mut() {
                Some(last) if last.role == Role::Assistant && last.tool_calls.is_empty() => last.content.push(part),
                _ => messages.push(Message { content: vec![part], ..assistant() }),
            }
        }
        // Found in the kept turns before this (see [`conversation`]); one inside another is not.
        "item_reference" => {
            return Err(ApiError::bad_request(format!("`{at}` is an item_reference to an item_reference")));
        }
        // Built-in tools' calls and outputs: kept as sent.
        _ => {
            fields.map.insert("type".into(), Value::String(kind));
            let part = Part::Other(Value::Object(fields.map));
            messages.push(Message { content: vec![part], ..assistant() });
        }
    }
    Ok(())
}

/// `call` on the assistant message before it, or on a new one.
fn push_call(messages: &mut Vec<Message>, call: ToolCall) {
    match messages.last_mut() {
        Some(last) if last.role == Role::Assistant => last.tool_calls.push(call),
        _ => messages.push(Message { content: Vec::new(), tool_calls: vec![call], ..assistant() }),
    }
}

/// An empty assistant message.
fn assistant() -> Message {
    Message { content: Vec::new(), ..Message::text(Role::Assistant, "") }
}

fn message(at: &str, mut fields: Fields) -> Result<Message, ApiError> {
    let role = match fields.need::<String>("role")?.as_str() {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "system" | "developer" => Role::System,
        other => {
            return Err(ApiError::bad_request(format!(
                "`{at}.role` {other:?} is not one of user, assistant, system, developer"
            )));
        }
    };
    let content = match fields.need::<Value>("content")? {
        Value::String(text) => vec![Part::Text { text, cache: None }],
        Value::Array(parts) => content_parts(at, parts)?,
        _ => return Err(ApiError::bad_request(format!("`{at}.content` must be a string or a list of parts"))),
    };
    // An item's own id and status say nothing to a model.
    fields.map.remove("id");
    fields.map.remove("status");
    Ok(Message { content, extra: std::mem::take(&mut fields.map), ..Message::text(role, "") })
}

/// Content parts: text in and out, images by URL, anything else as sent.
fn content_parts(at: &str, parts: Vec<Value>) -> Result<Vec<Part>, ApiError> {
    parts
        .into_iter()
        .enumerate()
        .map(|(j, part)| {
            let original = part.clone();
            let mut part = Fields::new(part, &format!("{at}.content[{j}]."))?;
            let kind: String = part.need("type")?;
            Ok(match kind.as_str() {
                "input_text" | "output_text" => Part::Text { text: part.need("text")?, cache: None },
                "input_image" if part.map.contains_key("image_url") => Part::Image(Image {
                    url: part.need("image_url")?,
                    detail: part.take::<String>("detail")?.filter(|detail| detail != "auto"),
                    cache: None,
                }),
                _ => Part::Other(original),
            })
        })
        .collect()
}

/// Function tools are translated, and so are freeform (`custom`) tools,
/// as functions taking one string (see [`freeform_parameters`]); the API's
/// built-in tools (web search, file search, computer use…) and Codex's
/// `namespace` of functions stay in `extra` as `tools`, so only a target
/// that speaks Responses natively takes them. The custom tools' names.
fn tools(fields: &mut Fields, request: &mut ChatRequest) -> Result<Vec<String>, ApiError> {
    let Some(wire) = fields.take::<Vec<Value>>("tools")? else { return Ok(Vec::new()) };
    let mut built_in = Vec::new();
    let mut custom = Vec::new();
    for (i, tool) in wire.into_iter().enumerate() {
        let mut tool = Fields::new(tool, &format!("tools[{i}]."))?;
        match tool.need::<String>("type")?.as_str() {
            "function" => request.tools.push(Tool {
                name: tool.need("name")?,
                description: tool.take("description")?,
                parameters: tool.take("parameters")?.unwrap_or(Value::Null),
                strict: tool.take("strict")?,
                cache: None,
            }),
            "custom" => {
                let name: String = tool.need("name")?;
                let parameters = freeform_parameters(tool.take::<Value>("format")?.as_ref());
                request.tools.push(Tool {
                    name: name.clone(),
                    description: tool.take("description")?,
                    parameters,
                    strict: None,
                    cache: None,
                });
                custom.push(name);
            }
            kind => {
                tool.map.insert("type".into(), Value::String(kind.to_owned()));
                built_in.push(Value::Object(tool.map));
            }
        }
    }
    if !built_in.is_empty() {
        fields.map.insert("tools".into(), Value::Array(built_in));
    }
    Ok(custom)
}

/// A freeform tool's input as a function's parameters: one string,
/// described by the tool's `format` (a grammar is given to the model in
/// the description, since a function cannot hold it).
fn freeform_parameters(format: Option<&Value>) -> Value {
    let grammar = format.filter(|format| format["type"] == "grammar");
    let description = match grammar {
        Some(grammar) => format!(
            "The tool's whole input, as free text in this {} grammar:\n{}",
            grammar["syntax"].as_str().unwrap_or("given"),
            grammar["definition"].as_str().unwrap_or_default()
        ),
        None => "The tool's whole input, as free text.".to_owned(),
    };
    json!({
        "type": "object",
        "properties": { FREEFORM_INPUT: { "type": "string", "description": description } },
        "required": [FREEFORM_INPUT],
        "additionalProperties": false,
    })
}

fn tool_choice(fields: &mut Fields, request: &mut ChatRequest) -> Result<(), ApiError> {
    let Some(choice) = fields.map.remove("tool_choice") else { return Ok(()) };
    request.tool_choice = match &choice {
        Value::Null => None,
        Value::String(mode) if mode == "auto" => Some(ToolChoice::Auto),
        Value::String(mode) if mode == "none" => Some(ToolChoice::None),
        Value::String(mode) if mode == "required" => Some(ToolChoice::Required),
        Value::Object(named) if named.get("type").is_some_and(|t| t == "function" || t == "custom") => {
            let name = named.get("name").and_then(Value::as_str);
            Some(ToolChoice::Function(
                name.ok_or_else(|| ApiError::bad_request("`tool_choice.name`: field required"))?.to_owned(),
            ))
        }
        // Built-in and allowed-tools choices: kept as sent.
        _ => {
            fields.map.insert("tool_choice".into(), choice);
            None
        }
    };
    Ok(())
}

/// `text.format` is the answer's form; the rest of `text` stays as sent.
fn text(fields: &mut Fields, request: &mut ChatRequest) -> Result<(), ApiError> {
    let Some(text) = fields.take::<Value>("text")? else { return Ok(()) };
    let mut text = Fields::new(text, "text.")?;
    if let Some(format) = text.take::<Value>("format")? {
        let mut format = Fields::new(format, "text.format.")?;
        request.response_format = Some(match format.need::<String>("type")?.as_str() {
            "text" => ResponseFormat::Text,
            "json_object" => ResponseFormat::JsonObject,
            "json_schema" => ResponseFormat::JsonSchema(JsonSchema {
                name: format.take("name")?.unwrap_or_else(|| "output".to_owned()),
                description: format.take("description")?,
                schema: format.need("schema")?,
                strict: format.take("strict")?,
            }),
            other => {
                return Err(ApiError::bad_request(format!(
                    "`text.format.type` {other:?} is not one of text, json_object, json_schema"
                )));
            }
        });
    }
    text.keep_rest("text", fields);
    Ok(())
}

/// `reasoning.effort` is the effort; a `summary` asked for means the client
/// sees the reasoning; the rest stays as sent.
fn reasoning(fields: &mut Fields, request: &mut ChatRequest) -> Result<(), ApiError> {
    let Some(reasoning) = fields.take::<Value>("reasoning")? else { return Ok(()) };
    let mut reasoning = Fields::new(reasoning, "reasoning.")?;
    request.reasoning_effort = reasoning.take("effort")?;
    let asks = |summary: Option<String>| summary.is_some_and(|summary| summary != "none");
    // `generate_summary` is the older spelling of `summary`.
    if asks(reasoning.take("summary")?) | asks(reasoning.take("generate_summary")?) {
        // A summary is text: any provider's reasoning serves.
        request.shows_reasoning = ReasoningShown::FromAny;
    }
    reasoning.keep_rest("reasoning", fields);
    Ok(())
}

/// What `include` asks for beyond what every target honours stays as sent.
fn include(fields: &mut Fields) -> Result<(), ApiError> {
    let Some(include) = fields.take::<Vec<String>>("include")? else { return Ok(()) };
    let rest: Vec<Value> =
        include.into_iter().filter(|item| !HONOURED_INCLUDES.contains(&item.as_str())).map(Value::String).collect();
    if !rest.is_empty() {
        fields.map.insert("include".into(), Value::Array(rest));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
