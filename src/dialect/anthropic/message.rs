//! A whole answer as one Anthropic `message` body, for a request that did
//! not stream: its content blocks in the order they came.

use serde_json::{Map, Value, json};

use super::{stop_reason, usage_json};
use crate::event::{Event, FinishReason, Usage};

/// A content block being assembled.
enum Block {
    Text(String),
    Thinking { text: String, signature: String, signed: bool },
    Tool { index: u32, id: String, name: String, arguments: String },
}

/// Assembles a whole answer into one `message` body.
pub fn message(id: &str, model: &str, events: Vec<Event>) -> Value {
    let mut blocks: Vec<Block> = Vec::new();
    let mut usage = Usage::default();
    let mut finish = FinishReason::Stop;
    for event in events {
        match (event, blocks.last_mut()) {
            (Event::Text(more), Some(Block::Text(text))) => text.push_str(&more),
            (Event::Logprobs(_), _) => {}
            (Event::Text(text), _) => blocks.push(Block::Text(text)),
            (Event::Reasoning(more), Some(Block::Thinking { text, signed: false, .. })) => text.push_str(&more),
            (Event::Reasoning(text), _) => {
                blocks.push(Block::Thinking { text, signature: String::new(), signed: false })
            }
            (Event::Signature(more), Some(Block::Thinking { signature, signed, .. })) if !*signed => {
                signature.push_str(&more);
                *signed = true;
            }
            (Event::Signature(signature), _) => {
                blocks.push(Block::Thinking { text: String::new(), signature, signed: true });
            }
            (Event::ToolCall(call), Some(Block::Tool { index, arguments, .. }))
                if call.index == *index && call.id.is_none() =>
            {
                arguments.push_str(&call.arguments);
            }
            (Event::ToolCall(call), _) => blocks.push(Block::Tool {
                index: call.index,
                id: call.id.unwrap_or_default(),
                name: call.name.unwrap_or_default(),
                arguments: call.arguments,
            }),
            (Event::Usage(later), _) => usage.merge(later),
            (Event::Finish(reason), _) => finish = reason,
        }
    }
    let content: Vec<Value> = blocks.into_iter().map(block_json).collect();
    json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(finish),
        "stop_sequence": null,
        "usage": usage_json(usage),
    })
}

fn block_json(block: Block) -> Value {
    match block {
        Block::Text(text) => json!({ "type": "text", "text": text }),
        Block::Thinking { text, signature, .. } => {
            json!({ "type": "thinking", "thinking": text, "signature": signature })
        }
        Block::Tool { id, name, arguments, .. } => {
            json!({ "type": "tool_use", "id": id, "name": name, "input": input(&arguments) })
        }
    }
}

/// A call's arguments as the object Anthropic's `input` is; arguments that
/// are not one (a model's broken JSON) go as a string inside one, so none
/// of them is lost.
fn input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(value @ Value::Object(_)) => value,
        _ if arguments.trim().is_empty() => Value::Object(Map::new()),
        _ => json!({ "arguments": arguments }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::test_support;

    #[test]
    fn a_whole_answer_has_its_blocks_in_order_with_usage() {
        let call = |id, name, arguments| test_support::call(0, id, name, arguments);
        let events = vec![
            Event::Usage(Usage { input_tokens: Some(30), cached_input_tokens: Some(20), ..Usage::default() }),
            Event::Reasoning("Let me ".into()),
            Event::Reasoning("think.".into()),
            Event::Signature("sig-1".into()),
            Event::Text("Checking".into()),
            Event::Text(" now".into()),
            call(Some("toolu_1"), Some("get_weather"), ""),
            call(None, None, "{\"city\":"),
            call(None, None, "\"Paris\"}"),
            Event::Usage(Usage { output_tokens: Some(12), ..Usage::default() }),
            Event::Finish(FinishReason::ToolCalls),
        ];
        let body = message("msg_1", "claude-x", events);
        assert_eq!(
            body,
            json!({
                "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
                "content": [
                    { "type": "thinking", "thinking": "Let me think.", "signature": "sig-1" },
                    { "type": "text", "text": "Checking now" },
                    { "type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": { "city": "Paris" } },
                ],
                "stop_reason": "tool_use", "stop_sequence": null,
                "usage": { "input_tokens": 10, "output_tokens": 12, "cache_read_input_tokens": 20 },
            })
        );
    }

    #[test]
    fn broken_arguments_are_kept_as_a_string() {
        assert_eq!(input("{\"a\": 1"), json!({ "arguments": "{\"a\": 1" }));
        assert_eq!(input(""), json!({}));
    }
}
