//! How Azure OpenAI writes its stream: OpenAI's chunks, after a first
//! chunk with no `choices` that carries the prompt's `prompt_filter_results`,
//! each later chunk with its `content_filter_results`; errors in Azure's shape.

use std::net::SocketAddr;

use serde_json::{Value, json};

use crate::providers::openai::simulated::SimulatedOpenAi;
use crate::providers::simulate::{Asked, Ending, Simulated, WireEvent, data};

/// A simulated Azure OpenAI resource.
pub struct SimulatedAzure;

/// Every category's verdict on text that passed the filter.
fn passed() -> Value {
    let safe = json!({"filtered": false, "severity": "safe"});
    json!({"hate": safe, "self_harm": safe, "sexual": safe, "violence": safe})
}

/// The OpenAI chunk `event` with the filter's verdict on its choice.
fn filtered(event: WireEvent) -> WireEvent {
    let text = String::from_utf8_lossy(&event);
    let Some(json) = text.strip_prefix("data: ").map(str::trim_end) else { return event };
    match serde_json::from_str::<Value>(json) {
        Ok(mut chunk) => {
            if let Some(choice) = chunk.pointer_mut("/choices/0") {
                choice["content_filter_results"] = passed();
            }
            data(&chunk)
        }
        Err(_) => event,
    }
}

impl Simulated for SimulatedAzure {
    fn base_url(&self, addr: SocketAddr) -> String {
        format!("http://{addr}")
    }

    fn is_chat_path(&self, path: &str) -> bool {
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        path.starts_with("/openai/deployments/")
            && path.ends_with("/chat/completions")
            && query.split('&').any(|pair| pair.starts_with("api-version=") && pair.len() > 12)
    }

    fn auth_header(&self, key: &str) -> (&'static str, String) {
        ("api-key", key.to_owned())
    }

    /// The deployment in the path: Azure ignores the body's `model`.
    fn model(&self, path: &str, _body: &Value) -> String {
        path.trim_start_matches("/openai/deployments/").split('/').next().unwrap_or_default().to_owned()
    }

    fn asked(&self, body: &Value) -> Asked {
        SimulatedOpenAi.asked(body)
    }

    fn retry_after_ms(&self) -> bool {
        true
    }

    fn opening(&self, model: &str, thinking: bool, cached: usize) -> Vec<WireEvent> {
        let prompt = data(&json!({"id": "", "object": "", "created": 0, "model": "", "choices": [],
            "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": passed()}]}));
        let mut events = vec![prompt];
        events.extend(SimulatedOpenAi.opening(model, thinking, cached).into_iter().map(filtered));
        events
    }

    fn reasoning(&self, model: &str, text: &str) -> WireEvent {
        filtered(SimulatedOpenAi.reasoning(model, text))
    }

    fn text_in(&self, model: &str, block: usize, text: &str) -> WireEvent {
        filtered(SimulatedOpenAi.text_in(model, block, text))
    }

    fn tool_call(&self, model: &str) -> Vec<WireEvent> {
        SimulatedOpenAi.tool_call(model).into_iter().map(filtered).collect()
    }

    fn ending(&self, model: &str, end: &Ending<'_>) -> Vec<WireEvent> {
        SimulatedOpenAi.ending(model, end).into_iter().map(filtered).collect()
    }

    /// The filter's verdict on the completion: violence, filtered.
    fn refusal(&self, model: &str) -> Vec<WireEvent> {
        let mut events = SimulatedOpenAi.refusal(model);
        if let Some(first) = events.first_mut() {
            let text = String::from_utf8_lossy(first).into_owned();
            let json = text.strip_prefix("data: ").map(str::trim_end).unwrap_or_default();
            if let Ok(mut chunk) = serde_json::from_str::<Value>(json) {
                let mut verdict = passed();
                verdict["violence"] = json!({"filtered": true, "severity": "medium"});
                if let Some(choice) = chunk.pointer_mut("/choices/0") {
                    choice["content_filter_results"] = verdict;
                }
                *first = data(&chunk);
            }
        }
        events
    }

    fn error_event(&self) -> WireEvent {
        SimulatedOpenAi.error_event()
    }

    fn malformed(&self) -> WireEvent {
        SimulatedOpenAi.malformed()
    }

    fn error_body(&self, status: u16, message: &str) -> String {
        json!({"error": {"code": status.to_string(), "message": message}}).to_string()
    }

    fn context_length_message(&self) -> &'static str {
        SimulatedOpenAi.context_length_message()
    }

    fn huge_line(&self, padding: &str) -> WireEvent {
        SimulatedOpenAi.huge_line(padding)
    }

    fn wrong_types(&self) -> WireEvent {
        SimulatedOpenAi.wrong_types()
    }

    fn overflowing_finish(&self, model: &str) -> Vec<WireEvent> {
        SimulatedOpenAi.overflowing_finish(model)
    }
}
