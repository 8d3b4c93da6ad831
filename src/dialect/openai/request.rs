//! OpenAI Chat Completions requests, checked and turned into the normalised
//! [`ChatRequest`] before anything goes upstream. Every field is either
//! translated here or kept, verbatim and in order, in the request's `extra`
//! (a message's in its own), so nothing the client sent is lost.
//!
//! [`parse`] is public so `tests/fuzz.rs` can feed it arbitrary bodies directly.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::dialect::{ApiError, Ingress};
use crate::request::{
    ChatRequest, Image, JsonSchema, LimitField, Message, Part, ResponseFormat, Role, Tool, ToolCall, ToolChoice,
};

/// What an OpenAI client asked of the answer beyond its events.
pub struct Options {
    /// Whether a streamed answer ends with a usage chunk.
    pub include_usage: bool,
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Stop {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
struct WireTool {
    #[serde(rename = "type")]
    kind: String,
    function: Option<WireFunction>,
    cache_control: Option<Value>,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    description: Option<String>,
    #[serde(default)]
    parameters: Value,
    strict: Option<bool>,
}

#[derive(Deserialize)]
struct WireToolCall {
    id: String,
    function: WireCalled,
}

#[derive(Deserialize)]
struct WireCalled {
    name: String,
    #[serde(default)]
    arguments: String,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum WireToolChoice {
    Mode(String),
    Named { function: Named },
}

#[derive(Deserialize)]
struct Named {
    name: String,
}

#[derive(Deserialize)]
struct WireResponseFormat {
    #[serde(rename = "type")]
    kind: String,
    json_schema: Option<WireJsonSchema>,
}

#[derive(Deserialize)]
struct WireJsonSchema {
    name: String,
    description: Option<String>,
    #[serde(default)]
    schema: Value,
    strict: Option<bool>,
}

#[derive(Deserialize)]
struct WireImageUrl {
    url: String,
    detail: Option<String>,
}

/// The fields of a content part, taken out one by one: what is left is passed on.
struct Fields {
    map: Map<String, Value>,
    at: String,
}

impl Fields {
    /// Takes `name`, typed; absent and `null` are both `None`.
    fn take<T: DeserializeOwned>(&mut self, name: &str) -> Result<Option<T>, ApiError> {
        match self.map.remove(name) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => serde_json::from_value(value)
                .map(Some)
                .map_err(|err| ApiError::bad_request(format!("invalid request body: `{}{name}`: {err}", self.at))),
        }
    }
}

/// A body as it is read: each field baton translates parsed straight into
/// its type, every other kept as the client sent it.
#[derive(Default)]
struct WireBody {
    model: Option<String>,
    messages: Option<Vec<WireMessage>>,
    n: Option<u32>,
    stream: Option<bool>,
    stream_options: Option<StreamOptions>,
    max_completion_tokens: Option<u32>,
    max_tokens: Option<u32>,
    tools: Option<Vec<WireTool>>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    stop: Option<Stop>,
    tool_choice: Option<WireToolChoice>,
    parallel_tool_calls: Option<bool>,
    response_format: Option<WireResponseFormat>,
    reasoning_effort: Option<String>,
    user: Option<String>,
    top_k: Option<u32>,
    cache_key: Option<String>,
    extra: Map<String, Value>,
}

/// One message as it is read, like the body.
#[derive(Default)]
struct WireMessage {
    role: Option<String>,
    content: Option<Value>,
    tool_calls: Option<Vec<WireToolCall>>,
    tool_call_id: Option<String>,
    name: Option<String>,
    extra: Map<String, Value>,
}

/// Parses and checks a request body.
pub fn parse(body: &[u8]) -> Result<Ingress<Options>, ApiError> {
    let body: WireBody = crate::dialect::fields::json_body(body)?;
    let model = body.model.ok_or_else(|| ApiError::bad_request("invalid request body: missing field `model`"))?;
    let messages =
        body.messages.ok_or_else(|| ApiError::bad_request("invalid request body: missing field `messages`"))?;
    if messages.is_empty() {
        return Err(ApiError::bad_request("`messages` must contain at least one message"));
    }
    if body.n.is_some_and(|n| n != 1) {
        return Err(ApiError::bad_request("`n` other than 1 is not supported"));
    }
    let messages = messages.into_iter().enumerate().map(message).collect::<Result<_, _>>()?;
    let tools = body.tools.unwrap_or_default().into_iter().enumerate().map(tool).collect::<Result<_, _>>()?;
    let request = ChatRequest {
        messages,
        max_tokens: body.max_completion_tokens.or(body.max_tokens),
        limit_field: match body.max_completion_tokens {
            Some(_) => LimitField::MaxCompletionTokens,
            None => LimitField::MaxTokens,
        },
        temperature: body.temperature,
        top_p: body.top_p,
        stop: match body.stop {
            None => Vec::new(),
            Some(Stop::One(stop)) => vec![stop],
            Some(Stop::Many(stops)) => stops,
        },
        tools,
        tool_choice: body.tool_choice.map(tool_choice).transpose()?,
        parallel_tool_calls: body.parallel_tool_calls,
        response_format: body.response_format.map(response_format).transpose()?,
        reasoning_effort: body.reasoning_effort,
        top_k: body.top_k,
        user: body.user,
        cache_key: body.cache_key,
        extra: body.extra,
        ..ChatRequest::default()
    };
    let include_usage = body.stream_options.is_some_and(|options| options.include_usage);
    Ok(Ingress { model, stream: body.stream.unwrap_or(false), options: Options { include_usage }, request })
}

fn message((i, wire): (usize, WireMessage)) -> Result<Message, ApiError> {
    let role = wire.role.ok_or_else(|| ApiError::bad_request(format!("messages[{i}] has no `role`")))?;
    let role = match role.as_str() {
        "system" | "developer" => Role::System,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" => Role::Tool,
        other => {
            return Err(ApiError::bad_request(format!(
                "messages[{i}].role {other:?} is not one of system, developer, user, assistant, tool"
            )));
        }
    };
    let content = match wire.content {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(text)) => vec![Part::Text { text, cache: None }],
        Some(Value::Array(parts)) => {
            parts.into_iter().enumerate().map(|part| content_part(i, part)).collect::<Result<_, _>>()?
        }
        Some(_) => {
            return Err(ApiError::bad_request(format!("messages[{i}].content must be a string or an array of parts")));
        }
    };
    if role == Role::Tool && wire.tool_call_id.is_none() {
        return Err(ApiError::bad_request(format!("messages[{i}] has role \"tool\" but no `tool_call_id`")));
    }
    Ok(Message {
        role,
        content,
        tool_calls: wire
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .map(|call| ToolCall { id: call.id, name: call.function.name, arguments: call.function.arguments })
            .collect(),
        tool_call_id: wire.tool_call_id,
        name: wire.name,
        extra: wire.extra,
        made_by: None,
    })
}

fn content_part(i: usize, (j, part): (usize, Value)) -> Result<Part, ApiError> {
    let Value::Object(map) = part else {
        return Err(ApiError::bad_request(format!("messages[{i}].content[{j}] must be an object")));
    };
    let mut fields = Fields { map, at: format!("messages[{i}].content[{j}].") };
    let kind: String = fields.take("type")?.unwrap_or_default();
    match kind.as_str() {
        "text" => {
            let text = fields.take("text")?.ok_or_else(|| {
                ApiError::bad_request(format!("messages[{i}].content[{j}] is a text part without `text`"))
            })?;
            Ok(Part::Text { text, cache: fields.take("cache_control")? })
        }
        "image_url" => {
            let image: WireImageUrl = fields.take("image_url")?.ok_or_else(|| {
                ApiError::bad_request(format!("messages[{i}].content[{j}] is an image_url part without `image_url`"))
            })?;
            Ok(Part::Image(Image { url: image.url, detail: image.detail, cache: fields.take("cache_control")? }))
        }
        _ => {
            fields.map.insert("type".to_owned(), Value::String(kind));
            Ok(Part::Other(Value::Object(fields.map)))
        }
    }
}

fn tool((i, wire): (usize, WireTool)) -> Result<Tool, ApiError> {
    match (wire.kind.as_str(), wire.function) {
        ("function", Some(function)) => Ok(Tool {
            name: function.name,
            description: function.description,
            parameters: function.parameters,
            strict: function.strict,
            cache: wire.cache_control,
        }),
        ("function", None) => Err(ApiError::bad_request(format!("tools[{i}] has no `function`"))),
        (other, _) => Err(ApiError::bad_request(format!(
            "tools[{i}].type {other:?} is not supported: only \"function\" tools are"
        ))),
    }
}

fn tool_choice(wire: WireToolChoice) -> Result<ToolChoice, ApiError> {
    match wire {
        WireToolChoice::Mode(mode) => match mode.as_str() {
            "auto" => Ok(ToolChoice::Auto),
            "none" => Ok(ToolChoice::None),
            "required" => Ok(ToolChoice::Required),
            other => Err(ApiError::bad_request(format!("tool_choice {other:?} is not one of auto, none, required"))),
        },
        WireToolChoice::Named { function } => Ok(ToolChoice::Function(function.name)),
    }
}

fn response_format(wire: WireResponseFormat) -> Result<ResponseFormat, ApiError> {
    match (wire.kind.as_str(), wire.json_schema) {
        ("text", _) => Ok(ResponseFormat::Text),
        ("json_object", _) => Ok(ResponseFormat::JsonObject),
        ("json_schema", Some(schema)) => Ok(ResponseFormat::JsonSchema(JsonSchema {
            name: schema.name,
            description: schema.description,
            schema: schema.schema,
            strict: schema.strict,
        })),
        ("json_schema", None) => Err(ApiError::bad_request("response_format of type json_schema needs `json_schema`")),
        (other, _) => Err(ApiError::bad_request(format!(
            "response_format.type {other:?} is not one of text, json_object, json_schema"
        ))),
    }
}

mod read;
#[cfg(test)]
mod tests;
