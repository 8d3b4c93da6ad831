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

/// The fields of a body, taken out one by one: what is left is passed on.
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

    /// The fields no one took. An emptied map keeps the memory it was
    /// parsed into, and the request holds it until it ends: when nothing
    /// is left, an empty map that holds none takes its place.
    fn rest(self) -> Map<String, Value> {
        if self.map.is_empty() { Map::new() } else { self.map }
    }
}

/// Parses and checks a request body.
pub fn parse(body: &[u8]) -> Result<Ingress<Options>, ApiError> {
    let map: Map<String, Value> =
        serde_json::from_slice(body).map_err(|err| ApiError::bad_request(format!("invalid request body: {err}")))?;
    let mut fields = Fields { map, at: String::new() };
    let model: String =
        fields.take("model")?.ok_or_else(|| ApiError::bad_request("invalid request body: missing field `model`"))?;
    let messages: Vec<Map<String, Value>> = fields
        .take("messages")?
        .ok_or_else(|| ApiError::bad_request("invalid request body: missing field `messages`"))?;
    if messages.is_empty() {
        return Err(ApiError::bad_request("`messages` must contain at least one message"));
    }
    if fields.take::<u32>("n")?.is_some_and(|n| n != 1) {
        return Err(ApiError::bad_request("`n` other than 1 is not supported"));
    }
    let stream = fields.take("stream")?.unwrap_or(false);
    let include_usage = fields.take::<StreamOptions>("stream_options")?.is_some_and(|options| options.include_usage);
    let messages = messages.into_iter().enumerate().map(message).collect::<Result<_, _>>()?;
    let max_completion_tokens = fields.take("max_completion_tokens")?;
    let max_tokens = fields.take("max_tokens")?;
    let tools = fields.take::<Vec<WireTool>>("tools")?.unwrap_or_default();
    let tools = tools.into_iter().enumerate().map(tool).collect::<Result<_, _>>()?;
    let request = ChatRequest {
        messages,
        max_tokens: max_completion_tokens.or(max_tokens),
        limit_field: match max_completion_tokens {
            Some(_) => LimitField::MaxCompletionTokens,
            None => LimitField::MaxTokens,
        },
        temperature: fields.take("temperature")?,
        top_p: fields.take("top_p")?,
        stop: match fields.take("stop")? {
            None => Vec::new(),
            Some(Stop::One(stop)) => vec![stop],
            Some(Stop::Many(stops)) => stops,
        },
        tools,
        tool_choice: fields.take::<WireToolChoice>("tool_choice")?.map(tool_choice).transpose()?,
        parallel_tool_calls: fields.take("parallel_tool_calls")?,
        response_format: fields.take::<WireResponseFormat>("response_format")?.map(response_format).transpose()?,
        reasoning_effort: fields.take("reasoning_effort")?,
        extra: fields.rest(),
    };
    Ok(Ingress { model, stream, options: Options { include_usage }, request })
}

fn message((i, map): (usize, Map<String, Value>)) -> Result<Message, ApiError> {
    let mut fields = Fields { map, at: format!("messages[{i}].") };
    let role: String =
        fields.take("role")?.ok_or_else(|| ApiError::bad_request(format!("messages[{i}] has no `role`")))?;
    let role = match role.as_str() {
        "system" | "developer" => Role::System,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" => Role::Tool,
        other => return Err(ApiError::bad_request(format!("messages[{i}].role {other:?} is not supported"))),
    };
    let content = match fields.take::<Value>("content")? {
        None => Vec::new(),
        Some(Value::String(text)) => vec![Part::Text { text, cache: None }],
        Some(Value::Array(parts)) => {
            parts.into_iter().enumerate().map(|part| content_part(i, part)).collect::<Result<_, _>>()?
        }
        Some(_) => {
            return Err(ApiError::bad_request(format!("messages[{i}].content must be a string or an array of parts")));
        }
    };
    let tool_calls = fields.take::<Vec<WireToolCall>>("tool_calls")?.unwrap_or_default();
    let tool_call_id = fields.take::<String>("tool_call_id")?;
    if role == Role::Tool && tool_call_id.is_none() {
        return Err(ApiError::bad_request(format!("messages[{i}] has role \"tool\" but no `tool_call_id`")));
    }
    Ok(Message {
        role,
        content,
        tool_calls: tool_calls
            .into_iter()
            .map(|call| ToolCall { id: call.id, name: call.function.name, arguments: call.function.arguments })
            .collect(),
        tool_call_id,
        name: fields.take("name")?,
        extra: fields.rest(),
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

#[cfg(test)]
mod tests;
