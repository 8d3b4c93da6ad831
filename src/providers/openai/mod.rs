//! OpenAI Chat Completions, the dialect of OpenAI and of every compatible
//! server (vLLM, Ollama, Groq, Azure and others).

mod decode;

use bytes::Bytes;
use serde::Serialize;
use serde_json::{Value, json};

use super::{Adapter, Decoder, ProviderError, Upstream, driver};
use crate::event::{ChatRequest, Role};

/// The OpenAI adapter.
pub struct OpenAi;

impl Adapter for OpenAi {
    fn request(&self, upstream: Upstream<'_>, req: &ChatRequest) -> Result<http::Request<Bytes>, ProviderError> {
        let url = format!("{}/chat/completions", upstream.base_url.trim_end_matches('/'));
        let bearer = upstream.api_key.map(|key| format!("Bearer {key}"));
        let headers: Vec<_> = bearer.iter().map(|value| ("authorization", value.as_str())).collect();
        driver::post_json(url, &headers, &body(upstream.model, req))
    }

    fn decoder(&self) -> Box<dyn Decoder> {
        Box::<decode::OpenAiDecoder>::default()
    }

    fn is_context_length(&self, message: &str) -> bool {
        message.contains("context length") || message.contains("context_length_exceeded")
    }
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<Value>,
    stream: bool,
    stream_options: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Value>,
}

/// Usage is always requested so the gateway can count tokens, whether or not
/// the client asked to see it.
fn body<'a>(model: &'a str, req: &'a ChatRequest) -> Body<'a> {
    let messages = req
        .messages
        .iter()
        .map(|message| {
            let role = match message.role {
                Role::System => "system",
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            json!({ "role": role, "content": message.content })
        })
        .collect();
    let tools = req
        .tools
        .iter()
        .map(|tool| {
            json!({ "type": "function", "function": {
                "name": tool.name, "description": tool.description, "parameters": tool.parameters,
            }})
        })
        .collect();
    Body {
        model,
        messages,
        stream: true,
        stream_options: json!({ "include_usage": true }),
        max_tokens: req.max_tokens,
        temperature: req.temperature,
        top_p: req.top_p,
        stop: &req.stop,
        tools,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Message;

    #[test]
    fn body_carries_messages_and_sampling_and_asks_for_usage() {
        let req = ChatRequest {
            messages: vec![
                Message { role: Role::System, content: "be brief".into() },
                Message { role: Role::User, content: "hi".into() },
            ],
            max_tokens: Some(50),
            temperature: Some(0.5),
            stop: vec!["END".into()],
            ..ChatRequest::default()
        };
        let value = serde_json::to_value(body("gpt-4o-mini", &req)).unwrap_or_default();
        assert_eq!(
            value,
            json!({
                "model": "gpt-4o-mini",
                "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
                "stream": true,
                "stream_options": {"include_usage": true},
                "max_tokens": 50,
                "temperature": 0.5,
                "stop": ["END"],
            })
        );
    }
}
