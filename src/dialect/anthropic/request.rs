//! Anthropic Messages requests, checked and turned into the normalised
//! [`ChatRequest`]. The body itself is kept too ([`Native`]), so an
//! anthropic-kind target gets it as sent; the translation serves every other
//! kind, and what it cannot translate stays in the request's `extra` (a
//! message's in its own) under Anthropic's names, to be refused by name.

use bytes::Bytes;
use http::HeaderMap;
use serde_json::{Map, Value};

use crate::dialect::fields::Fields;
use crate::dialect::{ApiError, Ingress};
use crate::request::{
    ChatRequest, ClientDialect, Image, JsonSchema, LimitField, Message, Native, Part, ReasoningShown, ResponseFormat,
    Role, Tool, ToolCall, ToolChoice,
};

/// The headers that belong to Anthropic's API and go with the body to an
/// anthropic-kind target.
const API_HEADERS: [&str; 2] = ["anthropic-version", "anthropic-beta"];

/// Parses and checks a `POST /v1/messages` body; `headers` give the API
/// version and betas the body goes upstream with.
pub fn parse(body: Bytes, headers: &HeaderMap) -> Result<Ingress<()>, ApiError> {
    let mut fields = body_fields(&body)?;
    let model: String = fields.need("model")?;
    let max_tokens: u32 = fields.need("max_tokens")?;
    let stream = fields.take("stream")?.unwrap_or(false);
    let mut request = conversation(&mut fields)?;
    request.max_tokens = Some(max_tokens);
    request.native = Some(Native::new(body, headers, &API_HEADERS));
    Ok(Ingress { model, stream, request, options: () })
}

/// Parses a `POST /v1/messages/count_tokens` body, which has no
/// `max_tokens`: the route it names and the conversation to count, with
/// the body as sent for an anthropic-kind target to count itself.
pub fn count_tokens_request(body: Bytes, headers: &HeaderMap) -> Result<(String, ChatRequest), ApiError> {
    let mut fields = body_fields(&body)?;
    let model: String = fields.need("model")?;
    let mut request = conversation(&mut fields)?;
    request.native = Some(Native::new(body, headers, &API_HEADERS));
    Ok((model, request))
}

fn body_fields(body: &[u8]) -> Result<Fields, ApiError> {
    let value: Value = crate::dialect::fields::json_body(body)?;
    Fields::new(value, "")
}

/// Everything but the model, the limit and `stream`: the conversation and
/// its settings.
fn conversation(fields: &mut Fields) -> Result<ChatRequest, ApiError> {
    let wire_messages: Vec<Value> = fields.need("messages")?;
    if wire_messages.is_empty() {
        return Err(ApiError::bad_request("`messages`: at least one message is required"));
    }
    let mut messages = system(fields.take("system")?)?;
    for (i, wire) in wire_messages.into_iter().enumerate() {
        message(i, wire, &mut messages)?;
    }
    let mut request = ChatRequest {
        messages,
        limit_field: LimitField::MaxCompletionTokens,
        temperature: fields.take("temperature")?,
        top_p: fields.take("top_p")?,
        top_k: fields.take("top_k")?,
        stop: fields.take("stop_sequences")?.unwrap_or_default(),
        dialect: ClientDialect::Messages,
        ..ChatRequest::default()
    };
    tools(fields, &mut request)?;
    if let Some(choice) = fields.take::<Value>("tool_choice")? {
        tool_choice(Fields::new(choice, "tool_choice.")?, &mut request)?;
    }
    metadata(fields, &mut request)?;
    thinking(fields, &mut request)?;
    output_config(fields, &mut request)?;
    request.extra = std::mem::take(&mut fields.map);
    Ok(request)
}

/// `system`, a string or text blocks, as one system message.
fn system(system: Option<Value>) -> Result<Vec<Message>, ApiError> {
    let content = match system {
        None => return Ok(Vec::new()),
        Some(Value::String(text)) => vec![Part::Text { text, cache: None }],
        Some(Value::Array(blocks)) => blocks
            .into_iter()
            .enumerate()
            .map(|(j, block)| {
                let mut block = Fields::new(block, &format!("system[{j}]."))?;
                match block.need::<String>("type")?.as_str() {
                    "text" => Ok(Part::Text { text: block.need("text")?, cache: block.take("cache_control")? }),
                    other => Err(ApiError::bad_request(format!("`system[{j}].type` {other:?} is not \"text\""))),
                }
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(ApiError::bad_request("`system` must be a string or a list of text blocks")),
    };
    Ok(vec![Message { content, ..Message::text(Role::System, "") }])
}

/// Message `i`, appended to `out`: an assistant turn as one message with
/// its tool calls; a user turn as its `tool_result` blocks, each a tool
/// message, and its other blocks as one user message, in the client's order.
fn message(i: usize, wire: Value, out: &mut Vec<Message>) -> Result<(), ApiError> {
    let mut fields = Fields::new(wire, &format!("messages[{i}]."))?;
    let role = match fields.need::<String>("role")?.as_str() {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        // Claude Code sends a mid-conversation system message to models it
        // thinks take one: an instruction in its place.
        "system" => Role::System,
        other => {
            return Err(ApiError::bad_request(format!(
                "`messages[{i}].role` {other:?} is not \"user\", \"assistant\" or \"system\""
            )));
        }
    };
    let blocks = match fields.need::<Value>("content")? {
        Value::String(text) => vec![Block::Part(Part::Text { text, cache: None })],
        Value::Array(blocks) => blocks
            .into_iter()
            .enumerate()
            .map(|(j, block)| content_block(i, j, role, block))
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(ApiError::bad_request(format!("`messages[{i}].content` must be a string or a list of blocks")));
        }
    };
    let mut current =
        Message { content: Vec::new(), extra: std::mem::take(&mut fields.map), ..Message::text(role, "") };
    for block in blocks {
        match block {
            Block::Part(part) => current.content.push(part),
            Block::Call(call) => current.tool_calls.push(call),
            Block::Result(result) => {
                if !current.content.is_empty() {
                    out.push(std::mem::replace(
                        &mut current,
                        Message { content: Vec::new(), ..Message::text(role, "") },
                    ));
                }
                out.push(result);
            }
        }
    }
    if !current.content.is_empty() || !current.tool_calls.is_empty() || !current.extra.is_empty() {
        out.push(current);
    }
    Ok(())
}

/// One content block, as what it becomes.
enum Block {
    Part(Part),
    Call(ToolCall),
    Result(Message),
}

fn content_block(i: usize, j: usize, role: Role, block: Value) -> Result<Block, ApiError> {
    let at = format!("messages[{i}].content[{j}].");
    let original = block.clone();
    let mut fields = Fields::new(block, &at)?;
    let kind: String = fields.need("type")?;
    let block = match (kind.as_str(), role) {
        ("text", _) => Block::Part(Part::Text { text: fields.need("text")?, cache: fields.take("cache_control")? }),
        ("image", _) => Block::Part(Part::Image(image(&mut fields)?)),
        ("thinking", Role::Assistant) => {
            Block::Part(Part::Thinking { text: fields.need("thinking")?, signature: fields.take("signature")? })
        }
        ("redacted_thinking", Role::Assistant) => Block::Part(Part::RedactedThinking(fields.need("data")?)),
        ("tool_use", Role::Assistant) => {
            let input: Value = fields.take("input")?.unwrap_or_else(|| Value::Object(Map::new()));
            Block::Call(ToolCall { id: fields.need("id")?, name: fields.need("name")?, arguments: input.to_string() })
        }
        ("tool_result", Role::User) => return Ok(Block::Result(tool_result(i, j, fields)?)),
        // Documents, search results, server tools' blocks: kept as sent.
        _ => return Ok(Block::Part(Part::Other(original))),
    };
    // A text or image block with more than baton translates (`citations`)
    // is kept as sent too, so none of it is lost.
    // A field set to `null` asks for nothing (SDKs write `"citations": null`).
    fields.map.retain(|_, value| !value.is_null());
    Ok(if fields.map.is_empty() { block } else { Block::Part(Part::Other(original)) })
}

/// An `image` block's source: base64 data as a `data:` URL, or its URL.
fn image(fields: &mut Fields) -> Result<Image, ApiError> {
    let cache = fields.take("cache_control")?;
    let mut source = Fields::new(fields.need("source")?, &format!("{}source.", fields.at))?;
    let url = match source.need::<String>("type")?.as_str() {
        "base64" => {
            let media_type: String = source.need("media_type")?;
            let data: String = source.need("data")?;
            format!("data:{media_type};base64,{data}")
        }
        "url" => source.need("url")?,
        other => {
            return Err(ApiError::bad_request(format!(
                "`{}type` {other:?} is not supported: only \"base64\" and \"url\" are",
                source.at
            )));
        }
    };
    Ok(Image { url, detail: None, cache })
}

/// A `tool_result` block as a tool message; `is_error` and anything else
/// it carries stays on the message, under Anthropic's names.
fn tool_result(i: usize, j: usize, mut fields: Fields) -> Result<Message, ApiError> {
    let id: String = fields.need("tool_use_id")?;
    let cache: Option<Value> = fields.take("cache_control")?;
    let content = match fields.take::<Value>("content")? {
        None => Vec::new(),
        Some(Value::String(text)) => vec![Part::Text { text, cache }],
        Some(Value::Array(blocks)) => {
            let mut parts = Vec::new();
            for (k, block) in blocks.into_iter().enumerate() {
                let at = format!("messages[{i}].content[{j}].content[{k}].");
                let original = block.clone();
                let mut block = Fields::new(block, &at)?;
                parts.push(match block.need::<String>("type")?.as_str() {
                    "text" => Part::Text { text: block.need("text")?, cache: block.take("cache_control")? },
                    "image" => Part::Image(image(&mut block)?),
                    _ => Part::Other(original),
                });
            }
            parts
        }
        Some(_) => {
            return Err(ApiError::bad_request(format!(
                "`messages[{i}].content[{j}].content` must be a string or a list of blocks"
            )));
        }
    };
    if fields.map.get("is_error").is_some_and(|v| v == &Value::Bool(false)) {
        fields.map.remove("is_error");
    }
    Ok(Message {
        content,
        tool_call_id: Some(id),
        extra: std::mem::take(&mut fields.map),
        ..Message::text(Role::Tool, "")
    })
}

/// Client tools become functions; Anthropic's own tools (web search, bash,
/// the text editor…) have no equivalent elsewhere and stay in `extra` as
/// `tools`, so a target of another kind names them.
fn tools(fields: &mut Fields, request: &mut ChatRequest) -> Result<(), ApiError> {
    let Some(wire) = fields.take::<Vec<Value>>("tools")? else { return Ok(()) };
    let mut own = Vec::new();
    for (i, tool) in wire.into_iter().enumerate() {
        let mut tool = Fields::new(tool, &format!("tools[{i}]."))?;
        match tool.take::<String>("type")?.as_deref() {
            None | Some("custom") => request.tools.push(Tool {
                name: tool.need("name")?,
                description: tool.take("description")?,
                parameters: tool.need("input_schema")?,
                strict: tool.take("strict")?,
                cache: tool.take("cache_control")?,
            }),
            Some(kind) => {
                tool.map.insert("type".into(), Value::String(kind.to_owned()));
                own.push(Value::Object(tool.map));
            }
        }
    }
    if !own.is_empty() {
        fields.map.insert("tools".into(), Value::Array(own));
    }
    Ok(())
}

fn tool_choice(mut choice: Fields, request: &mut ChatRequest) -> Result<(), ApiError> {
    request.tool_choice = Some(match choice.need::<String>("type")?.as_str() {
        "auto" => ToolChoice::Auto,
        "any" => ToolChoice::Required,
        "none" => ToolChoice::None,
        "tool" => ToolChoice::Function(choice.need("name")?),
        other => {
            return Err(ApiError::bad_request(format!(
                "`tool_choice.type` {other:?} is not one of auto, any, tool, none"
            )));
        }
    });
    request.parallel_tool_calls = choice.take::<bool>("disable_parallel_tool_use")?.map(|disabled| !disabled);
    Ok(())
}

/// `metadata.user_id` is the end user; other metadata stays as sent.
fn metadata(fields: &mut Fields, request: &mut ChatRequest) -> Result<(), ApiError> {
    let Some(metadata) = fields.take::<Value>("metadata")? else { return Ok(()) };
    let mut metadata = Fields::new(metadata, "metadata.")?;
    request.user = metadata.take("user_id")?;
    metadata.keep_rest("metadata", fields);
    Ok(())
}

/// `thinking` enabled with a budget is the request's thinking budget, and
/// the client sees the reasoning; another kind of thinking stays as sent.
fn thinking(fields: &mut Fields, request: &mut ChatRequest) -> Result<(), ApiError> {
    let Some(wire) = fields.take::<Value>("thinking")? else { return Ok(()) };
    let mut thinking = Fields::new(wire.clone(), "thinking.")?;
    match thinking.need::<String>("type")?.as_str() {
        "disabled" => {}
        "enabled" => {
            request.thinking_budget = Some(thinking.need("budget_tokens")?);
            // Sent back next turn, it must carry Anthropic's signature.
            request.shows_reasoning = ReasoningShown::FromOwnApi;
            // `display` and whatever else stays as sent.
            thinking.keep_rest("thinking", fields);
        }
        _ => {
            request.shows_reasoning = ReasoningShown::FromOwnApi;
            fields.map.insert("thinking".into(), wire);
        }
    }
    Ok(())
}

/// `output_config`: its `effort` and a JSON Schema `format` are translated;
/// the rest of it stays as sent.
fn output_config(fields: &mut Fields, request: &mut ChatRequest) -> Result<(), ApiError> {
    let Some(config) = fields.take::<Value>("output_config")? else { return Ok(()) };
    let mut config = Fields::new(config, "output_config.")?;
    request.reasoning_effort = config.take("effort")?;
    if let Some(format) = config.take::<Value>("format")? {
        let mut format = Fields::new(format, "output_config.format.")?;
        match format.need::<String>("type")?.as_str() {
            "json_schema" => {
                request.response_format = Some(ResponseFormat::JsonSchema(JsonSchema {
                    name: "output".into(),
                    description: None,
                    schema: format.need("schema")?,
                    strict: Some(true),
                }));
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "`output_config.format.type` {other:?} is not \"json_schema\""
                )));
            }
        }
    }
    config.keep_rest("output_config", fields);
    Ok(())
}

#[cfg(test)]
mod tests;
