//! Anthropic Messages: system prompt outside the messages, `max_tokens`
//! required, named stream events.

mod decode;

use bytes::Bytes;
use serde::Serialize;
use serde_json::{Value, json};

use super::{Adapter, Decoder, ProviderError, Upstream, driver};
use crate::event::{ChatRequest, Role};

/// The API version baton's wire format follows.
const API_VERSION: &str = "2023-06-01";

/// What `max_tokens` becomes when the client leaves it out: Anthropic requires one.
const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The Anthropic adapter.
pub struct Anthropic;

impl Adapter for Anthropic {
    fn request(&self, upstream: Upstream<'_>, req: &ChatRequest) -> Result<http::Request<Bytes>, ProviderError> {
        let url = format!("{}/v1/messages", upstream.base_url.trim_end_matches('/'));
        let mut headers = vec![("anthropic-version", API_VERSION)];
        headers.extend(upstream.api_key.map(|key| ("x-api-key", key)));
        driver::post_json(url, &headers, &body(upstream.model, req))
    }

    fn decoder(&self) -> Box<dyn Decoder> {
        Box::<decode::AnthropicDecoder>::default()
    }

    fn is_context_length(&self, message: &str) -> bool {
        message.contains("prompt is too long") || message.contains("context window")
    }
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<String>,
    messages: Vec<Value>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Value>,
}

fn body<'a>(model: &'a str, req: &'a ChatRequest) -> Body<'a> {
    let system: Vec<&str> =
        req.messages.iter().filter(|m| m.role == Role::System).map(|m| m.content.as_str()).collect();
    let messages = req
        .messages
        .iter()
        .filter_map(|message| match message.role {
            Role::System => None,
            Role::User => Some(json!({ "role": "user", "content": message.content })),
            Role::Assistant => Some(json!({ "role": "assistant", "content": message.content })),
        })
        .collect();
    let tools = req
        .tools
        .iter()
        .map(|tool| json!({ "name": tool.name, "description": tool.description, "input_schema": tool.parameters }))
        .collect();
    Body {
        model,
        max_tokens: req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        system: (!system.is_empty()).then(|| system.join("\n\n")),
        messages,
        stream: true,
        temperature: req.temperature,
        top_p: req.top_p,
        stop_sequences: &req.stop,
        tools,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Message;

    #[test]
    fn system_moves_out_and_max_tokens_is_always_set() {
        let req = ChatRequest {
            messages: vec![
                Message { role: Role::System, content: "be brief".into() },
                Message { role: Role::User, content: "hi".into() },
                Message { role: Role::Assistant, content: "hello".into() },
                Message { role: Role::User, content: "again".into() },
            ],
            stop: vec!["END".into()],
            ..ChatRequest::default()
        };
        let value = serde_json::to_value(body("claude-sonnet-4-5", &req)).unwrap_or_default();
        assert_eq!(
            value,
            json!({
                "model": "claude-sonnet-4-5",
                "max_tokens": DEFAULT_MAX_TOKENS,
                "system": "be brief",
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "hello"},
                    {"role": "user", "content": "again"},
                ],
                "stream": true,
                "stop_sequences": ["END"],
            })
        );
    }
}
