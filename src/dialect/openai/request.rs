//! OpenAI Chat Completions requests, checked and turned into the normalised
//! [`ChatRequest`] before anything goes upstream.
//!
//! [`parse`] is public so `tests/fuzz.rs` can feed it arbitrary bodies directly.

use serde::Deserialize;
use serde_json::Value;

use crate::dialect::{ApiError, Ingress};
use crate::event::{ChatRequest, Message, Role, Tool};

/// What an OpenAI client asked of the answer beyond its events.
pub struct Options {
    /// Whether a streamed answer ends with a usage chunk.
    pub include_usage: bool,
}

#[derive(Deserialize)]
struct WireRequest {
    model: String,
    messages: Vec<WireMessage>,
    #[serde(default)]
    stream: bool,
    stream_options: Option<StreamOptions>,
    max_tokens: Option<u32>,
    max_completion_tokens: Option<u32>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    n: Option<u32>,
    stop: Option<Stop>,
    tools: Option<Vec<WireTool>>,
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
struct WireMessage {
    role: String,
    content: Option<Content>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Deserialize)]
struct Part {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
}

#[derive(Deserialize)]
struct WireTool {
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    description: Option<String>,
    #[serde(default)]
    parameters: Value,
}

/// Parses and checks a request body.
pub fn parse(body: &[u8]) -> Result<Ingress<Options>, ApiError> {
    let wire: WireRequest =
        serde_json::from_slice(body).map_err(|err| ApiError::bad_request(format!("invalid request body: {err}")))?;
    if wire.messages.is_empty() {
        return Err(ApiError::bad_request("`messages` must contain at least one message"));
    }
    if wire.n.is_some_and(|n| n != 1) {
        return Err(ApiError::bad_request("`n` other than 1 is not supported"));
    }
    let messages = wire.messages.into_iter().enumerate().map(message).collect::<Result<_, _>>()?;
    let tools = wire
        .tools
        .unwrap_or_default()
        .into_iter()
        .map(|tool| Tool {
            name: tool.function.name,
            description: tool.function.description,
            parameters: tool.function.parameters,
        })
        .collect();
    Ok(Ingress {
        model: wire.model,
        stream: wire.stream,
        options: Options { include_usage: wire.stream_options.is_some_and(|options| options.include_usage) },
        request: ChatRequest {
            messages,
            max_tokens: wire.max_completion_tokens.or(wire.max_tokens),
            temperature: wire.temperature,
            top_p: wire.top_p,
            stop: match wire.stop {
                None => Vec::new(),
                Some(Stop::One(stop)) => vec![stop],
                Some(Stop::Many(stops)) => stops,
            },
            tools,
        },
    })
}

fn message((i, wire): (usize, WireMessage)) -> Result<Message, ApiError> {
    let role = match wire.role.as_str() {
        "system" | "developer" => Role::System,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        other => return Err(ApiError::bad_request(format!("messages[{i}].role {other:?} is not supported"))),
    };
    let content = match wire.content {
        None => String::new(),
        Some(Content::Text(text)) => text,
        Some(Content::Parts(parts)) => {
            let mut text = String::new();
            for part in parts {
                match (part.kind.as_str(), part.text) {
                    ("text", Some(fragment)) => text.push_str(&fragment),
                    (kind, _) => {
                        return Err(ApiError::bad_request(format!(
                            "messages[{i}] has a {kind:?} part; only text is supported"
                        )));
                    }
                }
            }
            text
        }
    };
    Ok(Message { role, content })
}
