//! A whole answer as one OpenAI `chat.completion` body, for `stream: false`.

use serde_json::{Value, json};

use super::{Answer, OpenAiUsage};
use crate::event::{Event, FinishReason, Usage};

/// Assembles a whole answer into one `chat.completion` body.
pub fn completion(answer: Answer, events: Vec<Event>) -> Value {
    let (mut text, mut reasoning) = (String::new(), String::new());
    let mut calls: Vec<(String, String, String)> = Vec::new();
    let mut usage = Usage::default();
    let mut finish = FinishReason::Stop;
    let mut logprobs: Option<Vec<Value>> = None;
    for event in events {
        match event {
            Event::Text(fragment) => text.push_str(&fragment),
            Event::Reasoning(fragment) => reasoning.push_str(&fragment),
            Event::ToolCall(delta) => {
                let index = usize::try_from(delta.index).unwrap_or(usize::MAX).min(calls.len());
                if index == calls.len() {
                    calls.push(Default::default());
                }
                let (id, name, arguments) = &mut calls[index];
                if let Some(new_id) = delta.id {
                    *id = new_id;
                }
                if let Some(new_name) = delta.name {
                    *name = new_name;
                }
                arguments.push_str(&delta.arguments);
            }
            Event::Usage(later) => usage.merge(later),
            Event::Signature(_) => {}
            Event::Logprobs(more) => {
                let entries: Vec<Value> = serde_json::from_str(more.json()).unwrap_or_default();
                logprobs.get_or_insert_with(Vec::new).extend(entries);
            }
            Event::Finish(reason) => finish = reason,
        }
    }
    let mut message = json!({ "role": "assistant", "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { text.into() } });
    if !reasoning.is_empty()
        && let Some(fields) = message.as_object_mut()
    {
        fields.insert("reasoning_content".into(), reasoning.into());
    }
    if !calls.is_empty() {
        let calls: Vec<Value> = calls
            .into_iter()
            .map(|(id, name, arguments)| json!({ "id": id, "type": "function", "function": { "name": name, "arguments": arguments } }))
            .collect();
        if let Some(fields) = message.as_object_mut() {
            fields.insert("tool_calls".into(), calls.into());
        }
    }
    json!({
        "id": answer.id,
        "object": "chat.completion",
        "created": answer.created,
        "model": answer.model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": logprobs.map(|content| json!({ "content": content, "refusal": null })),
            "finish_reason": finish.as_str(),
        }],
        "usage": OpenAiUsage::from(usage),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::openai::test_support::{answer, call};

    #[test]
    fn a_whole_answer_assembles_text_calls_and_usage() {
        let events = vec![
            Event::Usage(Usage { input_tokens: Some(10), output_tokens: None, ..Usage::default() }),
            Event::Text("Checking".into()),
            call(0, Some("call_a"), Some("get_weather"), "{\"city\":"),
            call(0, None, None, "\"Paris\"}"),
            call(1, Some("call_b"), Some("get_time"), "{}"),
            Event::Usage(Usage { input_tokens: None, output_tokens: Some(12), ..Usage::default() }),
            Event::Finish(FinishReason::ToolCalls),
        ];
        let body = completion(answer(), events);
        let message = &body["choices"][0]["message"];
        assert_eq!(message["content"], "Checking");
        assert_eq!(
            message["tool_calls"][0]["function"],
            json!({ "name": "get_weather", "arguments": "{\"city\":\"Paris\"}" })
        );
        assert_eq!(message["tool_calls"][1]["id"], "call_b");
        assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(body["usage"], json!({ "prompt_tokens": 10, "completion_tokens": 12, "total_tokens": 22 }));
        assert_eq!(body["model"], "m");
    }
}
