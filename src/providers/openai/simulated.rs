//! How OpenAI's Chat Completions API writes its stream, as its API
//! reference shows it: `data:` chunks, a final usage chunk, `[DONE]`.

use std::net::SocketAddr;

use serde_json::{Value, json};

use crate::providers::simulate::{
    Asked, Call, Counts, Ending, Json, Offered, PROMPT_TOKENS, Simulated, WireEvent, array_at, count_parts, data, pick,
    str_at, text_of,
};

/// A simulated OpenAI, or any server compatible with it.
pub struct SimulatedOpenAi;

impl Simulated for SimulatedOpenAi {
    fn base_url(&self, addr: SocketAddr) -> String {
        format!("http://{addr}/v1")
    }

    fn is_chat_path(&self, path: &str) -> bool {
        path.ends_with("/chat/completions")
    }

    fn auth_header(&self, key: &str) -> (&'static str, String) {
        ("authorization", format!("Bearer {key}"))
    }

    fn asked(&self, body: &Value) -> Asked {
        Asked { tool: tool(body), tool_results: results(body), json: json_asked(body), images: images(body) }
    }

    fn opening(&self, model: &str, _thinking: bool, _cached: usize) -> Vec<WireEvent> {
        vec![data(&chunk(model, json!({"role": "assistant", "content": ""}), None))]
    }

    fn reasoning(&self, model: &str, text: &str) -> WireEvent {
        data(&chunk(model, json!({"reasoning_content": text}), None))
    }

    fn text_in(&self, model: &str, _block: usize, text: &str) -> WireEvent {
        data(&chunk(model, json!({"content": text}), None))
    }

    fn tool_call(&self, model: &str) -> Vec<WireEvent> {
        vec![data(&chunk(
            model,
            json!({"tool_calls": [{"index": 0, "id": "call_mock", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}),
            None,
        ))]
    }

    fn ending(&self, model: &str, end: &Ending<'_>) -> Vec<WireEvent> {
        let Counts { output, reasoning, cached } = end.counts;
        let mut usage = json!({"prompt_tokens": PROMPT_TOKENS, "completion_tokens": output + reasoning,
            "total_tokens": PROMPT_TOKENS + output + reasoning});
        if cached > 0 {
            usage["prompt_tokens_details"] = json!({"cached_tokens": cached});
        }
        if reasoning > 0 {
            usage["completion_tokens_details"] = json!({"reasoning_tokens": reasoning});
        }
        let mut events = end.call.map(|call| call_events(model, &call)).unwrap_or_default();
        let reason = if end.call.is_some() { "tool_calls" } else { "stop" };
        events.push(data(&chunk(model, json!({}), Some(reason))));
        events.push(data(&json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0,
            "model": model, "choices": [], "usage": usage})));
        events.push(b"data: [DONE]\n\n".to_vec());
        events
    }

    fn refusal(&self, model: &str) -> Vec<WireEvent> {
        vec![data(&chunk(model, json!({}), Some("content_filter"))), b"data: [DONE]\n\n".to_vec()]
    }

    fn error_event(&self) -> WireEvent {
        data(&json!({"error": {"message": "The server had an error while processing your request",
            "type": "server_error", "code": null}}))
    }

    fn malformed(&self) -> WireEvent {
        b"data: {\"choices\": [{\"delta\": {\"content\": tru\n\n".to_vec()
    }

    fn error_body(&self, _status: u16, message: &str) -> String {
        json!({"error": {"message": message, "type": "server_error", "param": null, "code": null}}).to_string()
    }

    fn context_length_message(&self) -> &'static str {
        "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."
    }

    fn huge_line(&self, padding: &str) -> WireEvent {
        data(&json!({"choices": [], "padding": padding}))
    }

    fn wrong_types(&self) -> WireEvent {
        data(&json!({"choices": [{"index": "0", "delta": {"content": 42}, "finish_reason": 7}]}))
    }

    fn overflowing_finish(&self, model: &str) -> Vec<WireEvent> {
        let max = u64::MAX;
        vec![
            data(&json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})),
            data(&json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": [], "usage": {"prompt_tokens": max, "completion_tokens": max, "total_tokens": max}})),
            b"data: [DONE]\n\n".to_vec(),
        ]
    }
}

/// One `chat.completion.chunk` of `delta`.
pub(crate) fn chunk(model: &str, delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": model,
        "system_fingerprint": null,
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
}

/// A tool call: the id and name first, then the arguments a fragment a chunk.
fn call_events(model: &str, call: &Call<'_>) -> Vec<WireEvent> {
    let head = json!({"tool_calls": [{"index": 0, "id": call.id, "type": "function",
        "function": {"name": call.name, "arguments": ""}}]});
    let mut events = vec![data(&chunk(model, head, None))];
    events.extend(call.arguments.iter().map(|fragment| {
        data(&chunk(model, json!({"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]}), None))
    }));
    events
}

fn tool(body: &Value) -> Option<Offered> {
    if body.get("tool_choice").and_then(Value::as_str) == Some("none") {
        return None;
    }
    let named = str_at(body, "/tool_choice/function/name");
    pick(array_at(body, "/tools").iter(), named, "/function/name", &["/function/parameters"])
}

fn results(body: &Value) -> Vec<String> {
    let messages = array_at(body, "/messages");
    let trailing = messages.iter().rev().take_while(|m| str_at(m, "/role") == Some("tool")).collect::<Vec<_>>();
    trailing.into_iter().rev().map(|message| text_of(message.get("content").unwrap_or(&Value::Null))).collect()
}

fn json_asked(body: &Value) -> Option<Json> {
    match str_at(body, "/response_format/type")? {
        "json_object" => Some(Json::Object),
        "json_schema" => Some(Json::Schema(body.pointer("/response_format/json_schema/schema")?.clone())),
        _ => None,
    }
}

fn images(body: &Value) -> usize {
    count_parts(array_at(body, "/messages"), "/content", |part| str_at(part, "/type") == Some("image_url"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offers_calls_and_results() {
        let weather = json!({"type": "object", "properties": {"city": {"type": "string"}}});
        let tools = json!([{"type": "function", "function": {"name": "get_weather", "parameters": weather}},
            {"type": "function", "function": {"name": "other", "parameters": {}}}]);
        let asked = SimulatedOpenAi.asked(&json!({"tools": tools, "messages": [{"role": "user", "content": "hi"}]}));
        assert_eq!(asked.tool, Some(Offered { name: "get_weather".into(), parameters: weather }));
        let named = SimulatedOpenAi
            .asked(&json!({"tools": tools, "tool_choice": {"type": "function", "function": {"name": "other"}}}));
        assert_eq!(named.tool.map(|c| c.name), Some("other".into()));
        let none = SimulatedOpenAi.asked(&json!({"tools": tools, "tool_choice": "none"}));
        assert_eq!(none.tool, None);
        let answered = SimulatedOpenAi.asked(&json!({"tools": tools, "messages": [
            {"role": "tool", "tool_call_id": "c", "content": "18C"},
            {"role": "tool", "tool_call_id": "d", "content": [{"type": "text", "text": "rain"}]}]}));
        assert_eq!(answered.tool_results, vec!["18C".to_owned(), "rain".to_owned()]);
    }
}
