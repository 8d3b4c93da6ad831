//! OpenAI Chat Completions requests, checked and turned into the normalised
//! [`ChatRequest`] before anything goes upstream. Every field is either
//! translated here or kept, verbatim and in order, in the request's `extra`
//! (a message's in its own), so nothing the client sent is lost.
//!
//! [`parse`] is public so `tests/fuzz.rs` can feed it arbitrary bodies directly.

use std::borrow::Cow;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
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

/// A field's value parsed straight into `T`; its error names the field by
/// its path (`temperature`, `messages[2].name`).
struct Labeled<T> {
    message: Option<usize>,
    name: &'static str,
    parsed: PhantomData<T>,
}

fn labeled<T>(message: Option<usize>, name: &'static str) -> Labeled<T> {
    Labeled { message, name, parsed: PhantomData }
}

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for Labeled<T> {
    type Value = T;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<T, D::Error> {
        T::deserialize(deserializer).map_err(|err| {
            // The parser adds the position to the labelled error again: say it once.
            let err = err.to_string();
            let err = without_position(&err);
            match self.message {
                Some(i) => de::Error::custom(format_args!("`messages[{i}].{}`: {err}", self.name)),
                None => de::Error::custom(format_args!("`{}`: {err}", self.name)),
            }
        })
    }
}

/// A field's name: borrowed from the body, unless it has escapes to undo.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a field name")
    }

    fn visit_borrowed_str<E: de::Error>(self, name: &'de str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Borrowed(name)))
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(name.to_owned())))
    }

    fn visit_string<E: de::Error>(self, name: String) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(name)))
    }
}

/// `message` without serde_json's closing "at line L column C".
fn without_position(message: &str) -> &str {
    match message.rsplit_once(" at line ") {
        Some((head, tail))
            if tail.split_once(" column ").is_some_and(|(line, column)| {
                [line, column].iter().all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            }) =>
        {
            head
        }
        _ => message,
    }
}

impl<'de> Deserialize<'de> for WireBody {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(BodyVisitor)
    }
}

struct BodyVisitor;

impl<'de> Visitor<'de> for BodyVisitor {
    type Value = WireBody;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a chat completion request, a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WireBody, A::Error> {
        let mut body = WireBody::default();
        while let Some(Key(key)) = map.next_key()? {
            match key.as_ref() {
                "model" => body.model = map.next_value_seed(labeled(None, "model"))?,
                "messages" => body.messages = map.next_value_seed(Messages)?,
                "n" => body.n = map.next_value_seed(labeled(None, "n"))?,
                "stream" => body.stream = map.next_value_seed(labeled(None, "stream"))?,
                "stream_options" => body.stream_options = map.next_value_seed(labeled(None, "stream_options"))?,
                "max_completion_tokens" => {
                    body.max_completion_tokens = map.next_value_seed(labeled(None, "max_completion_tokens"))?;
                }
                "max_tokens" => body.max_tokens = map.next_value_seed(labeled(None, "max_tokens"))?,
                "tools" => body.tools = map.next_value_seed(labeled(None, "tools"))?,
                "temperature" => body.temperature = map.next_value_seed(labeled(None, "temperature"))?,
                "top_p" => body.top_p = map.next_value_seed(labeled(None, "top_p"))?,
                "stop" => body.stop = map.next_value_seed(labeled(None, "stop"))?,
                "tool_choice" => body.tool_choice = map.next_value_seed(labeled(None, "tool_choice"))?,
                "parallel_tool_calls" => {
                    body.parallel_tool_calls = map.next_value_seed(labeled(None, "parallel_tool_calls"))?
                }
                "response_format" => body.response_format = map.next_value_seed(labeled(None, "response_format"))?,
                "reasoning_effort" => body.reasoning_effort = map.next_value_seed(labeled(None, "reasoning_effort"))?,
                // Typed when they hold what every dialect means by them
                // (vLLM's `top_k: -1` does not): else kept as sent.
                "user" | "top_k" | "prompt_cache_key" => {
                    let value: Value = map.next_value()?;
                    let top_k = value.as_u64().and_then(|k| u32::try_from(k).ok());
                    match (key.as_ref(), value) {
                        ("user", Value::String(user)) => body.user = Some(user),
                        ("prompt_cache_key", Value::String(cache_key)) => body.cache_key = Some(cache_key),
                        ("top_k", _) if top_k.is_some() => body.top_k = top_k,
                        (_, value) => {
                            body.extra.insert(key.into_owned(), value);
                        }
                    }
                }
                _ => {
                    let value = map.next_value()?;
                    body.extra.insert(key.into_owned(), value);
                }
            }
        }
        Ok(body)
    }
}

/// The messages, each read knowing its place for its errors.
struct Messages;

impl<'de> DeserializeSeed<'de> for Messages {
    type Value = Option<Vec<WireMessage>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for Messages {
    type Value = Option<Vec<WireMessage>>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("`messages`, a list of messages")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        // The hint is the client's: bounded, so it cannot reserve much before a message is read.
        let mut messages = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(message) = seq.next_element_seed(MessageAt(messages.len()))? {
            messages.push(message);
        }
        Ok(Some(messages))
    }
}

/// Message `i` of the conversation.
struct MessageAt(usize);

impl<'de> DeserializeSeed<'de> for MessageAt {
    type Value = WireMessage;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<WireMessage, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MessageAt {
    type Value = WireMessage;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "messages[{}] to be an object", self.0)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WireMessage, A::Error> {
        let mut message = WireMessage::default();
        let i = Some(self.0);
        while let Some(Key(key)) = map.next_key()? {
            match key.as_ref() {
                "role" => message.role = map.next_value_seed(labeled(i, "role"))?,
                "content" => message.content = map.next_value_seed(labeled(i, "content"))?,
                "tool_calls" => message.tool_calls = map.next_value_seed(labeled(i, "tool_calls"))?,
                "tool_call_id" => message.tool_call_id = map.next_value_seed(labeled(i, "tool_call_id"))?,
                "name" => message.name = map.next_value_seed(labeled(i, "name"))?,
                _ => {
                    let value = map.next_value()?;
                    message.extra.insert(key.into_owned(), value);
                }
            }
        }
        Ok(message)
    }
}

/// Parses and checks a request body.
pub fn parse(body: &[u8]) -> Result<Ingress<Options>, ApiError> {
    let body: WireBody =
        serde_json::from_slice(body).map_err(|err| ApiError::bad_request(format!("invalid request body: {err}")))?;
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
        other => return Err(ApiError::bad_request(format!("messages[{i}].role {other:?} is not supported"))),
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
