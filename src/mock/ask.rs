//! What a request asks of a simulated provider beyond words, read from the
//! provider's own body by its kind ([`Simulated::asked`]): a tool to call,
//! the tool results to answer about, JSON (for a schema or not), and the
//! images it carries.

use super::RecordedRequest;
use crate::providers::ProviderKind;
pub(super) use crate::providers::simulate::{Json, Offered};

/// What one request asks for.
#[derive(Debug, Clone, PartialEq, Default)]
pub(super) struct Ask {
    /// The tool to call now: the named or first offered one, unless tools
    /// are turned off or the conversation ends with tool results.
    pub call: Option<Offered>,
    /// The content of each tool result the conversation ends with.
    pub tool_results: Vec<String>,
    pub json: Option<Json>,
    /// Images anywhere in the conversation.
    pub images: usize,
}

impl Ask {
    pub(super) fn of(kind: ProviderKind, request: &RecordedRequest) -> Ask {
        let asked = super::wire::of_request(kind, request).asked(&request.body);
        let call = asked.tool.filter(|_| asked.tool_results.is_empty());
        Ask { call, tool_results: asked.tool_results, json: asked.json, images: asked.images }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn ask(kind: ProviderKind, body: Value) -> Ask {
        Ask::of(kind, &RecordedRequest { path: String::new(), headers: Default::default(), body, fault: None })
    }

    #[test]
    fn a_conversation_ending_with_tool_results_calls_no_tool() {
        let tools = json!([{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]);
        let asked = ask(ProviderKind::OpenAi, json!({"tools": tools, "messages": [{"role": "user", "content": "hi"}]}));
        assert_eq!(asked.call.map(|call| call.name), Some("get_weather".to_owned()));
        let answered = ask(
            ProviderKind::OpenAi,
            json!({"tools": tools, "messages": [{"role": "tool", "tool_call_id": "c", "content": "18C"}]}),
        );
        assert_eq!((answered.call, answered.tool_results), (None, vec!["18C".to_owned()]));
        let anthropic = ask(
            ProviderKind::Anthropic,
            json!({"tools": [{"name": "get_weather", "input_schema": {}}],
            "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "18C"}]}]}),
        );
        assert_eq!((anthropic.call, anthropic.tool_results), (None, vec!["18C".to_owned()]));
    }
}
