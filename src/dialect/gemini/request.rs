//! Gemini `generateContent` requests, checked and turned into the
//! normalised [`ChatRequest`]. The route and whether the answer streams
//! come from the path; the body itself is kept too ([`Native`]), so a
//! target that speaks Gemini gets it as sent, and the translation serves
//! every other kind. What it cannot translate stays in the request's
//! `extra` under Gemini's names, to be refused by name. Field names are
//! read in both spellings Google's API takes, `lowerCamelCase` and
//! `snake_case` (the Python SDK sends some of each).

use bytes::Bytes;
use http::request::Parts;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::{method_of, route_name};
use crate::dialect::fields::Fields;
use crate::dialect::{ApiError, Ingress};
use crate::request::{
    ChatRequest, ClientDialect, Image, JsonSchema, Message, Native, Part, ReasoningShown, ResponseFormat, Role, Tool,
    ToolCall, ToolChoice,
};

/// Parses a `generateContent` or `streamGenerateContent` request: the
/// route is the path's model, and only SSE streams (`?alt=sse`).
pub fn parse(body: Bytes, head: &Parts) -> Result<Ingress<()>, ApiError> {
    let path = head.uri.path();
    let (model, method) = method_of(path).ok_or_else(|| ApiError::not_found(path))?;
    let stream = match method {
        "generateContent" => false,
        "streamGenerateContent" => true,
        _ => return Err(ApiError::not_found(path)),
    };
    if stream && !head.uri.query().unwrap_or_default().split('&').any(|pair| pair == "alt=sse") {
        return Err(ApiError::bad_request(
            "streamGenerateContent is served as server-sent events only: add `?alt=sse` to the URL",
        ));
    }
    let model = route_name(model).to_owned();
    let mut request = conversation(body_fields(&body)?)?;
    request.native = Some(Native::new(body, &head.headers, &[]));
    Ok(Ingress { model, stream, request, options: () })
}

/// Parses a `countTokens` body, `{"contents": …}` or
/// `{"generateContentRequest": {…}}`, as the conversation to count.
pub fn count_tokens_request(body: &[u8]) -> Result<ChatRequest, ApiError> {
    let mut fields = body_fields(body)?;
    match take::<Value>(&mut fields, "generateContentRequest")? {
        Some(inner) => {
            let mut inner = Fields::new(inner, "generateContentRequest.")?;
            inner.map.remove("model");
            conversation(inner)
        }
        None => conversation(fields),
    }
}

fn body_fields(body: &[u8]) -> Result<Fields, ApiError> {
    let value: Value = crate::dialect::fields::json_body(body)?;
    Fields::new(value, "")
}

/// `name` in either of its spellings: as written (`lowerCamelCase`) or in
/// `snake_case`.
fn take<T: DeserializeOwned>(fields: &mut Fields, name: &str) -> Result<Option<T>, ApiError> {
    match fields.take(name)? {
        Some(value) => Ok(Some(value)),
        None => fields.take(&snake_case(name)),
    }
}

/// A count, which Google's API takes as any integral number (`40.0`).
fn take_count(fields: &mut Fields, name: &str) -> Result<Option<i64>, ApiError> {
    match take::<f64>(fields, name)? {
        Some(number) if number.fract() == 0.0 && number.abs() < 1e15 => Ok(Some(number as i64)),
        Some(number) => Err(ApiError::bad_request(format!("`{}{name}`: {number} is not an integer", fields.at))),
        None => Ok(None),
    }
}

/// A count that must fit a `u32` (a limit, a budget, `topK`).
fn take_u32(fields: &mut Fields, name: &str) -> Result<Option<u32>, ApiError> {
    take_count(fields, name)?
        .map(|count| {
            u32::try_from(count)
                .map_err(|_| ApiError::bad_request(format!("`{}{name}`: {count} is out of range", fields.at)))
        })
        .transpose()
}

fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The conversation and its settings.
fn conversation(mut fields: Fields) -> Result<ChatRequest, ApiError> {
    let contents: Vec<Value> =
        take(&mut fields, "contents")?.ok_or_else(|| ApiError::bad_request("`contents`: field required"))?;
    if contents.is_empty() {
        return Err(ApiError::bad_request("`contents`: at least one turn is required"));
    }
    let mut messages = match take::<Value>(&mut fields, "systemInstruction")? {
        Some(system) => vec![system_message(system)?],
        None => Vec::new(),
    };
    let mut calls = Calls::default();
    for (i, turn) in contents.into_iter().enumerate() {
        turn_messages(i, turn, &mut calls, &mut messages)?;
    }
    let mut request = ChatRequest { messages, dialect: ClientDialect::Gemini, ..ChatRequest::default() };
    tools(&mut fields, &mut request)?;
    tool_config(&mut fields, &mut request)?;
    if let Some(config) = take::<Value>(&mut fields, "generationConfig")? {
        let mut config = Fields::new(config, "generationConfig.")?;
        generation_config(&mut config, &mut request)?;
        for (name, value) in config.map {
            request.extra.insert(format!("generationConfig.{name}"), value);
        }
    }
    request.extra.extend(fields.map);
    Ok(request)
}

/// `systemInstruction`, a `Content` whose text parts are the instructions.
fn system_message(system: Value) -> Result<Message, ApiError> {
    let mut fields = Fields::new(system, "systemInstruction.")?;
    let parts: Vec<Value> = take(&mut fields, "parts")?.unwrap_or_default();
    let mut content = Vec::new();
    for (j, part) in parts.into_iter().enumerate() {
        let mut part = Fields::new(part, &format!("systemInstruction.parts[{j}]."))?;
        let text: String = take(&mut part, "text")?.ok_or_else(|| {
            ApiError::bad_request(format!("`systemInstruction.parts[{j}]`: only text parts are instructions"))
        })?;
        content.push(Part::Text { text, cache: None });
    }
    Ok(Message { content, ..Message::text(Role::System, "") })
}

/// The ids of the model's function calls that no result has answered yet:
/// Gemini's calls and results may come without ids, and are then paired
/// by name, in order.
#[derive(Default)]
struct Calls {
    open: Vec<(String, String)>,
}

impl Calls {
    /// A call's id: its own, or one made for it.
    fn called(&mut self, name: &str, id: Option<String>, turn: usize, n: usize) -> String {
        let id = id.unwrap_or_else(|| format!("call_{turn}_{n}_{name}"));
        self.open.push((name.to_owned(), id.clone()));
        id
    }

    /// The id of the call a result of `name` answers.
    fn answered(&mut self, name: &str, id: Option<String>) -> String {
        let position = match &id {
            Some(id) => self.open.iter().position(|(_, open)| open == id),
            None => self.open.iter().position(|(open, _)| open == name),
        };
        let found = position.map(|at| self.open.remove(at).1);
        id.or(found).unwrap_or_else(|| format!("call_{name}"))
    }
}

/// Turn `i`, appended to `out`: a model turn as one assistant message with
/// its function calls; a user turn as its function results, each a tool
/// message, and its other parts as one user message, in the client's order.
fn turn_messages(i: usize, turn: Value, calls: &mut Calls, out: &mut Vec<Message>) -> Result<(), ApiError> {
    let mut fields = Fields::new(turn, &format!("contents[{i}]."))?;
    let role = match take::<String>(&mut fields, "role")?.as_deref() {
        None | Some("user") => Role::User,
        Some("model") => Role::Assistant,
        Some(other) => {
            return Err(ApiError::bad_request(format!("`contents[{i}].role` {other:?} is not \"user\" or \"model\"")));
        }
    };
    let parts: Vec<Value> = take(&mut fields, "parts")?.unwrap_or_default();
    let mut message = Message { content: Vec::new(), ..Message::text(role, "") };
    message.extra = fields.map;
    for (j, part) in parts.into_iter().enumerate() {
        let mut part = Fields::new(part, &format!("contents[{i}].parts[{j}]."))?;
        if let Some(call) = take::<Value>(&mut part, "functionCall")? {
            let mut call = Fields::new(call, &format!("contents[{i}].parts[{j}].functionCall."))?;
            let name: String = call.need("name")?;
            let args: Value = call.take("args")?.unwrap_or_else(|| Value::Object(Map::new()));
            let id = calls.called(&name, call.take("id")?, i, j);
            message.tool_calls.push(ToolCall { id, name, arguments: args.to_string() });
            continue;
        }
        if let Some(result) = take::<Value>(&mut part, "functionResponse")? {
            let mut result = Fields::new(result, &format!("contents[{i}].parts[{j}].functionResponse."))?;
            let name: String = result.need("name")?;
            let response: Value = result.take("response")?.unwrap_or_else(|| Value::Object(Map::new()));
            let id = calls.answered(&name, result.take("id")?);
            let output = match response {
                Value::Object(mut object) if object.len() == 1 && object.contains_key("output") => {
                    object.remove("output").unwrap_or_default()
                }
                other => other,
            };
            let text = match output {
                Value::String(text) => text,
                other => other.to_string(),
            };
            out.push(Message { tool_call_id: Some(id), ..Message::text(Role::Tool, text) });
            continue;
        }
        message.content.extend(content_part(part)?);
    }
    if !message.content.is_empty() || !message.tool_calls.is_empty() || !message.extra.is_empty() {
        out.push(message);
    }
    Ok(())
}

/// A text, thought or media part; one of a type baton does not translate
/// (code execution, video metadata) goes as written, for a Gemini target only.
fn content_part(mut part: Fields) -> Result<Option<Part>, ApiError> {
    let thought = take::<bool>(&mut part, "thought")?.unwrap_or(false);
    // Gemini's own signature, which only the native path carries back.
    let _ = take::<Value>(&mut part, "thoughtSignature")?;
    if let Some(text) = take::<String>(&mut part, "text")? {
        if thought {
            return Ok(Some(Part::Thinking { text, signature: None }));
        }
        return Ok(Some(Part::Text { text, cache: None }));
    }
    for (name, field, address) in [("inlineData", "data", false), ("fileData", "fileUri", true)] {
        let Some(media) = take::<Value>(&mut part, name)? else { continue };
        let at = format!("{}{name}.", part.at);
        let mut media = Fields::new(media, &at)?;
        let mime: String = take(&mut media, "mimeType")?.unwrap_or_default();
        let data: String =
            take(&mut media, field)?.ok_or_else(|| ApiError::bad_request(format!("`{at}{field}`: field required")))?;
        if !mime.starts_with("image/") {
            let mut other = Map::new();
            other.insert(name.to_owned(), serde_json::json!({ "mimeType": mime, field: data }));
            return Ok(Some(Part::Other(Value::Object(other))));
        }
        let url = if address { data } else { format!("data:{mime};base64,{data}") };
        return Ok(Some(Part::Image(Image { url, detail: None, cache: None })));
    }
    if part.map.is_empty() {
        return Ok(None);
    }
    Ok(Some(Part::Other(Value::Object(part.map))))
}

/// `tools`: every function declaration, its parameters as JSON Schema; a
/// tool of another kind (`googleSearch`, `codeExecution`) stays under its
/// name, for a Gemini target only.
fn tools(fields: &mut Fields, request: &mut ChatRequest) -> Result<(), ApiError> {
    let tools: Vec<Value> = take(fields, "tools")?.unwrap_or_default();
    for (i, tool) in tools.into_iter().enumerate() {
        let mut tool = Fields::new(tool, &format!("tools[{i}]."))?;
        let declarations: Vec<Value> = take(&mut tool, "functionDeclarations")?.unwrap_or_default();
        for (j, declaration) in declarations.into_iter().enumerate() {
            let mut declaration = Fields::new(declaration, &format!("tools[{i}].functionDeclarations[{j}]."))?;
            let name: String = declaration.need("name")?;
            let description = declaration.take("description")?;
            let parameters = match take::<Value>(&mut declaration, "parametersJsonSchema")? {
                Some(schema) => Some(schema),
                None => declaration.take::<Value>("parameters")?,
            };
            let parameters = parameters.map(json_schema).unwrap_or(Value::Null);
            request.tools.push(Tool { name, description, parameters, strict: None, cache: None });
        }
        for (name, value) in tool.map {
            request.extra.insert(format!("tools[{i}].{name}"), value);
        }
    }
    Ok(())
}

/// Gemini's OpenAPI `Schema` as JSON Schema: its type names are upper case
/// (`OBJECT`), JSON Schema's lower. Google takes them upper case in its
/// JSON Schema fields too (the Gemini CLI sends them so), so those are read
/// the same way.
fn json_schema(schema: Value) -> Value {
    match schema {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, value)| match (key.as_str(), value) {
                    ("type", Value::String(kind)) => (key, Value::String(kind.to_ascii_lowercase())),
                    (_, value) => (key, json_schema(value)),
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(json_schema).collect()),
        other => other,
    }
}

/// `toolConfig.functionCallingConfig`: `AUTO`, `NONE`, `ANY`, or `ANY` of
/// one allowed function; anything else stays as written.
fn tool_config(fields: &mut Fields, request: &mut ChatRequest) -> Result<(), ApiError> {
    let Some(written) = take::<Value>(fields, "toolConfig")? else { return Ok(()) };
    match tool_choice(written.clone())? {
        Some(choice) => request.tool_choice = Some(choice),
        None => {
            request.extra.insert("toolConfig".to_owned(), written);
        }
    }
    Ok(())
}

/// The tool choice a `toolConfig` makes, if it is one every dialect has.
fn tool_choice(config: Value) -> Result<Option<ToolChoice>, ApiError> {
    let mut config = Fields::new(config, "toolConfig.")?;
    let Some(calling) = take::<Value>(&mut config, "functionCallingConfig")? else { return Ok(None) };
    let mut calling = Fields::new(calling, "toolConfig.functionCallingConfig.")?;
    let mode = take::<String>(&mut calling, "mode")?;
    let allowed: Vec<String> = take(&mut calling, "allowedFunctionNames")?.unwrap_or_default();
    if !config.map.is_empty() || !calling.map.is_empty() {
        return Ok(None);
    }
    Ok(match (mode.as_deref(), allowed.as_slice()) {
        (None | Some("AUTO" | "MODE_UNSPECIFIED"), []) => Some(ToolChoice::Auto),
        (Some("NONE"), []) => Some(ToolChoice::None),
        (Some("ANY"), []) => Some(ToolChoice::Required),
        (Some("ANY"), [only]) => Some(ToolChoice::Function(only.clone())),
        _ => None,
    })
}

/// `generationConfig`'s settings that every dialect has; the rest is left
/// in `config` for the caller to keep.
fn generation_config(config: &mut Fields, request: &mut ChatRequest) -> Result<(), ApiError> {
    request.max_tokens = take_u32(config, "maxOutputTokens")?;
    request.temperature = take(config, "temperature")?;
    request.top_p = take(config, "topP")?;
    request.top_k = take_u32(config, "topK")?;
    request.stop = take(config, "stopSequences")?.unwrap_or_default();
    if let Some(count) = take_count(config, "candidateCount")?.filter(|count| *count != 1) {
        config.map.insert("candidateCount".to_owned(), Value::from(count));
    }
    let mime = take::<String>(config, "responseMimeType")?;
    let schema = match take::<Value>(config, "responseJsonSchema")? {
        Some(schema) => Some(schema),
        None => take::<Value>(config, "responseSchema")?,
    };
    let schema = schema.map(json_schema);
    request.response_format = match (mime.as_deref(), schema) {
        (Some("application/json"), Some(schema)) => Some(ResponseFormat::JsonSchema(JsonSchema {
            name: "response".to_owned(),
            description: None,
            schema,
            strict: None,
        })),
        (Some("application/json"), None) => Some(ResponseFormat::JsonObject),
        (None | Some("text/plain"), None) => None,
        (mime, schema) => {
            if let Some(mime) = mime {
                config.map.insert("responseMimeType".to_owned(), Value::String(mime.to_owned()));
            }
            if let Some(schema) = schema {
                config.map.insert("responseJsonSchema".to_owned(), schema);
            }
            None
        }
    };
    if let Some(thinking) = take::<Value>(config, "thinkingConfig")? {
        let mut thinking = Fields::new(thinking, "generationConfig.thinkingConfig.")?;
        thinking_config(&mut thinking, request)?;
        thinking.keep_rest("thinkingConfig", config);
    }
    Ok(())
}

/// `thinkingConfig`: a budget (0 turns thinking off, -1 leaves it to the
/// model), a level as a reasoning effort, and whether the client sees the
/// thoughts.
fn thinking_config(thinking: &mut Fields, request: &mut ChatRequest) -> Result<(), ApiError> {
    if take::<bool>(thinking, "includeThoughts")? == Some(true) {
        request.shows_reasoning = ReasoningShown::FromAny;
    }
    match take_count(thinking, "thinkingBudget")? {
        Some(0) => request.reasoning_effort = Some("none".to_owned()),
        Some(-1) | None => {}
        Some(budget) => {
            request.thinking_budget = Some(u32::try_from(budget).map_err(|_| {
                ApiError::bad_request(format!(
                    "`generationConfig.thinkingConfig.thinkingBudget`: {budget} is out of range"
                ))
            })?);
        }
    }
    if let Some(level) = take::<String>(thinking, "thinkingLevel")? {
        match level.as_str() {
            "MINIMAL" | "LOW" | "MEDIUM" | "HIGH" => request.reasoning_effort = Some(level.to_ascii_lowercase()),
            "THINKING_LEVEL_UNSPECIFIED" => {}
            _ => {
                return Err(ApiError::bad_request(format!(
                    "`generationConfig.thinkingConfig.thinkingLevel` {level:?} is not MINIMAL, LOW, MEDIUM or HIGH"
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::dialect::test_support::head;

    fn parsed(body: Value) -> ChatRequest {
        let head = head("/v1beta/models/chat:generateContent", http::HeaderMap::new());
        parse(Bytes::from(body.to_string()), &head).unwrap_or_else(|err| panic!("{}", err.message())).request
    }

    #[test]
    fn upper_case_schema_types_become_json_schema_s_wherever_they_come() {
        let upper =
            json!({ "type": "OBJECT", "properties": { "type": { "type": "STRING" }, "n": { "type": "INTEGER" } } });
        let lower =
            json!({ "type": "object", "properties": { "type": { "type": "string" }, "n": { "type": "integer" } } });
        let request = parsed(json!({
            "contents": [{ "parts": [{ "text": "hi" }] }],
            "tools": [{ "functionDeclarations": [{ "name": "f", "parametersJsonSchema": upper }] }],
            "generationConfig": { "responseMimeType": "application/json", "responseJsonSchema": upper },
        }));
        assert_eq!(request.tools[0].parameters, lower);
        let Some(ResponseFormat::JsonSchema(schema)) = request.response_format else { panic!("a schema") };
        assert_eq!(schema.schema, lower);
    }

    #[test]
    fn snake_case_fields_and_integral_floats_are_read_as_google_reads_them() {
        let request = parsed(json!({
            "contents": [{ "role": "user", "parts": [{ "inline_data": { "mime_type": "image/png", "data": "iVBORw==" } }] }],
            "generation_config": { "top_k": 40.0, "max_output_tokens": 64,
                "thinking_config": { "include_thoughts": true, "thinking_budget": 1024 } },
        }));
        assert_eq!((request.top_k, request.max_tokens, request.thinking_budget), (Some(40), Some(64), Some(1024)));
        assert_eq!(request.shows_reasoning, ReasoningShown::FromAny);
        assert!(
            matches!(&request.messages[0].content[0], Part::Image(image) if image.url == "data:image/png;base64,iVBORw==")
        );
        assert!(request.extra.is_empty(), "{:?}", request.extra);
    }
}
