//! Google Gemini `streamGenerateContent?alt=sse`: roles `user`/`model`, the
//! system prompt in `systemInstruction`, sampling in `generationConfig`.

mod decode;

use bytes::Bytes;
use serde::Serialize;
use serde_json::{Value, json};

use super::{Adapter, Decoder, ProviderError, Upstream, driver};
use crate::event::{ChatRequest, Role};

/// The Gemini adapter.
pub struct Gemini;

impl Adapter for Gemini {
    fn request(&self, upstream: Upstream<'_>, req: &ChatRequest) -> Result<http::Request<Bytes>, ProviderError> {
        let url = format!(
            "{}/v1beta/models/{}:streamGenerateContent?alt=sse",
            upstream.base_url.trim_end_matches('/'),
            upstream.model
        );
        let headers: Vec<_> = upstream.api_key.map(|key| ("x-goog-api-key", key)).into_iter().collect();
        driver::post_json(url, &headers, &body(req))
    }

    fn decoder(&self) -> Box<dyn Decoder> {
        Box::<decode::GeminiDecoder>::default()
    }

    fn is_context_length(&self, message: &str) -> bool {
        message.contains("exceeds the maximum number of tokens")
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    contents: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<Value>,
    generation_config: GenerationConfig<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Value>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop_sequences: &'a [String],
}

fn body(req: &ChatRequest) -> Body<'_> {
    let system: Vec<Value> =
        req.messages.iter().filter(|m| m.role == Role::System).map(|m| json!({ "text": m.content })).collect();
    let contents = req
        .messages
        .iter()
        .filter_map(|message| {
            let role = match message.role {
                Role::System => return None,
                Role::User => "user",
                Role::Assistant => "model",
            };
            Some(json!({ "role": role, "parts": [{ "text": message.content }] }))
        })
        .collect();
    let declarations: Vec<Value> = req
        .tools
        .iter()
        .map(|tool| json!({ "name": tool.name, "description": tool.description, "parameters": tool.parameters }))
        .collect();
    Body {
        contents,
        system_instruction: (!system.is_empty()).then(|| json!({ "parts": system })),
        generation_config: GenerationConfig {
            max_output_tokens: req.max_tokens,
            temperature: req.temperature,
            top_p: req.top_p,
            stop_sequences: &req.stop,
        },
        tools: if declarations.is_empty() { Vec::new() } else { vec![json!({ "functionDeclarations": declarations })] },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Message;

    #[test]
    fn roles_become_user_and_model_and_limits_move_to_generation_config() {
        let req = ChatRequest {
            messages: vec![
                Message { role: Role::System, content: "be brief".into() },
                Message { role: Role::User, content: "hi".into() },
                Message { role: Role::Assistant, content: "hello".into() },
            ],
            max_tokens: Some(64),
            top_p: Some(0.9),
            ..ChatRequest::default()
        };
        let value = serde_json::to_value(body(&req)).unwrap_or_default();
        assert_eq!(
            value,
            json!({
                "contents": [
                    {"role": "user", "parts": [{"text": "hi"}]},
                    {"role": "model", "parts": [{"text": "hello"}]},
                ],
                "systemInstruction": {"parts": [{"text": "be brief"}]},
                "generationConfig": {"maxOutputTokens": 64, "topP": 0.9},
            })
        );
    }
}
