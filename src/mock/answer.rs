//! What a simulated provider answers to one request beyond its marker
//! words: the reasoning before it, a note of the images it saw, an answer
//! about the tool results the conversation ends with, JSON when asked for
//! it, and a call to an offered tool.

use serde_json::{Value, json};

use super::ask::{Ask, Json};
use super::{MockProvider, RecordedRequest, schema};
use crate::providers::ProviderKind;

/// How JSON answers are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum JsonStyle {
    /// Bare, and valid for the schema.
    #[default]
    Valid,
    /// Valid, inside a Markdown ```` ```json ```` fence, as models often write it.
    Fenced,
    /// Cut one character short: not JSON at all.
    Invalid,
}

/// How many fragments a JSON answer is streamed in.
const JSON_FRAGMENTS: usize = 4;
/// How many fragments a tool call's arguments are streamed in.
const ARGUMENT_FRAGMENTS: usize = 2;

/// A tool call an answer ends with.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct PlannedCall {
    pub id: String,
    pub name: String,
    /// The JSON arguments, in streamed fragments.
    pub arguments: Vec<String>,
}

/// One request's answer, short of the marker words and faults.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Answer {
    /// Reasoning deltas before the text.
    pub reasoning: usize,
    /// Text fragments before the marker words, or instead of them.
    pub lead: Vec<String>,
    /// Whether the marker words follow the lead (not after tool results or for JSON).
    pub words: bool,
    pub call: Option<PlannedCall>,
}

impl Answer {
    pub(super) fn for_request(provider: &MockProvider, request: &RecordedRequest) -> Answer {
        let kind = provider.kind;
        let ask = Ask::of(kind, request);
        let call = ask.call.as_ref().filter(|_| !provider.tool_call).map(|offered| {
            let arguments = match schema::example(&offered.parameters, "Paris") {
                object @ Value::Object(_) => object.to_string(),
                _ => "{}".to_owned(),
            };
            PlannedCall {
                id: call_id(kind, request),
                name: offered.name.clone(),
                arguments: fragments(&arguments, ARGUMENT_FRAGMENTS),
            }
        });
        let reasoning = provider.reasoning;
        if let Some(json) = &ask.json {
            let lead = fragments(&json_text(json, provider), JSON_FRAGMENTS);
            return Answer { reasoning, lead, words: false, call };
        }
        let mut lead = Vec::new();
        if ask.images > 0 {
            let plural = if ask.images == 1 { "" } else { "s" };
            lead.push(format!("saw {} image{plural}. ", ask.images));
        }
        if ask.tool_results.is_empty() {
            return Answer { reasoning, lead, words: true, call };
        }
        let said = format!("the tool said: {}", ask.tool_results.join("; "));
        lead.extend(said.split_inclusive(' ').map(str::to_owned));
        Answer { reasoning, lead, words: false, call }
    }
}

/// A call id unique within a conversation: the turn it is made in.
fn call_id(kind: ProviderKind, request: &RecordedRequest) -> String {
    let sim = super::wire::of_request(kind, request);
    let turn = request.body.get(sim.turns().0).and_then(Value::as_array).map_or(0, Vec::len);
    format!("{}_{turn}", sim.call_id_prefix())
}

/// The JSON answer: for the schema, or any object naming the provider.
fn json_text(json: &Json, provider: &MockProvider) -> String {
    let value = match json {
        Json::Object => json!({ "answer": provider.marker }),
        Json::Schema(schema) => schema::example(schema, "x"),
    };
    match provider.json_style {
        JsonStyle::Valid => value.to_string(),
        JsonStyle::Fenced => {
            let pretty = serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string());
            format!("```json\n{pretty}\n```")
        }
        JsonStyle::Invalid => {
            let mut text = value.to_string();
            text.pop();
            text
        }
    }
}

/// `text` in `count` pieces of about equal length (fewer when it is shorter).
fn fragments(text: &str, count: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(count.max(1)).max(1);
    chars.chunks(size).map(|piece| piece.iter().collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body: Value) -> RecordedRequest {
        RecordedRequest { path: String::new(), headers: Default::default(), body, fault: None }
    }

    #[test]
    fn fragments_join_back_to_the_text() {
        let pieces = fragments("{\"city\":\"Paris\"}", 4);
        assert_eq!(pieces.len(), 4);
        assert_eq!(pieces.concat(), "{\"city\":\"Paris\"}");
        assert_eq!(fragments("", 4), Vec::<String>::new());
    }

    #[test]
    fn json_styles() {
        let body = json!({"response_format": {"type": "json_object"}, "messages": []});
        let answer = |provider: MockProvider| Answer::for_request(&provider, &request(body.clone())).lead.concat();
        assert_eq!(answer(MockProvider::openai()), "{\"answer\":\"openai\"}");
        assert_eq!(answer(MockProvider::openai().json_fenced()), "```json\n{\n  \"answer\": \"openai\"\n}\n```");
        assert_eq!(answer(MockProvider::openai().json_invalid()), "{\"answer\":\"openai\"");
    }

    #[test]
    fn a_tool_result_is_answered_without_marker_words() {
        let body = json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]},
            {"role": "tool", "tool_call_id": "c", "content": "18C and sunny"}]});
        let answer = Answer::for_request(&MockProvider::openai(), &request(body));
        assert_eq!(answer.lead.concat(), "saw 1 image. the tool said: 18C and sunny");
        assert!(!answer.words && answer.call.is_none());
    }
}
