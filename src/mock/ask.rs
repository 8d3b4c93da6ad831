//! What a request asks of a simulated provider beyond words, read from the
//! provider's own body: a tool to call, the tool results to answer about,
//! JSON (for a schema or not), and the images it carries.

use serde_json::Value;

use super::RecordedRequest;
use crate::providers::ProviderKind;

/// A function the request offers the model.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Offered {
    pub name: String,
    /// The JSON Schema of its arguments.
    pub parameters: Value,
}

/// The form of answer the request asks for.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Json {
    /// Any JSON object.
    Object,
    /// JSON valid for this schema.
    Schema(Value),
}

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
        let body = &request.body;
        let (tools, tool_results, json, images) = match kind {
            ProviderKind::OpenAi => (openai_tool(body), openai_results(body), openai_json(body), openai_images(body)),
            ProviderKind::OpenAiResponses => {
                (responses_tool(body), responses_results(body), responses_json(body), responses_images(body))
            }
            ProviderKind::Anthropic => {
                (anthropic_tool(body), anthropic_results(body), anthropic_json(body), anthropic_images(body))
            }
            ProviderKind::Gemini => (gemini_tool(body), gemini_results(body), gemini_json(body), gemini_images(body)),
        };
        let call = tools.filter(|_| tool_results.is_empty());
        Ask { call, tool_results, json, images }
    }
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

fn array_at<'a>(value: &'a Value, pointer: &str) -> &'a [Value] {
    value.pointer(pointer).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// The offered function called `named`, or the first when none is named.
fn pick<'a>(
    tools: impl Iterator<Item = &'a Value>,
    named: Option<&str>,
    name_at: &str,
    schema_at: &[&str],
) -> Option<Offered> {
    let mut tools = tools.filter(|tool| str_at(tool, name_at).is_some()).peekable();
    let first = tools.peek().copied();
    let tool = match named {
        Some(named) => tools.find(|tool| str_at(tool, name_at) == Some(named)),
        None => first,
    }?;
    let parameters = schema_at.iter().find_map(|at| tool.pointer(at)).cloned().unwrap_or(Value::Null);
    Some(Offered { name: str_at(tool, name_at)?.to_owned(), parameters })
}

/// Text of a content that is a string or a list of text blocks.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|part| part.get("text").and_then(Value::as_str)).collect(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn count_parts(turns: &[Value], parts_at: &str, is_image: impl Fn(&Value) -> bool) -> usize {
    turns.iter().map(|turn| array_at(turn, parts_at).iter().filter(|part| is_image(part)).count()).sum()
}

fn openai_tool(body: &Value) -> Option<Offered> {
    if body.get("tool_choice").and_then(Value::as_str) == Some("none") {
        return None;
    }
    let named = str_at(body, "/tool_choice/function/name");
    pick(array_at(body, "/tools").iter(), named, "/function/name", &["/function/parameters"])
}

fn openai_results(body: &Value) -> Vec<String> {
    let messages = array_at(body, "/messages");
    let trailing = messages.iter().rev().take_while(|m| str_at(m, "/role") == Some("tool")).collect::<Vec<_>>();
    trailing.into_iter().rev().map(|message| text_of(message.get("content").unwrap_or(&Value::Null))).collect()
}

fn openai_json(body: &Value) -> Option<Json> {
    match str_at(body, "/response_format/type")? {
        "json_object" => Some(Json::Object),
        "json_schema" => Some(Json::Schema(body.pointer("/response_format/json_schema/schema")?.clone())),
        _ => None,
    }
}

fn openai_images(body: &Value) -> usize {
    count_parts(array_at(body, "/messages"), "/content", |part| str_at(part, "/type") == Some("image_url"))
}

fn responses_tool(body: &Value) -> Option<Offered> {
    if body.get("tool_choice").and_then(Value::as_str) == Some("none") {
        return None;
    }
    let named = str_at(body, "/tool_choice/name");
    let functions = array_at(body, "/tools").iter().filter(|tool| str_at(tool, "/type") == Some("function"));
    pick(functions, named, "/name", &["/parameters"])
}

/// The outputs of the calls the input ends with.
fn responses_results(body: &Value) -> Vec<String> {
    let input = array_at(body, "/input");
    let trailing = input.iter().rev().take_while(|item| str_at(item, "/type") == Some("function_call_output"));
    let mut results: Vec<String> = trailing.map(|item| text_of(item.get("output").unwrap_or(&Value::Null))).collect();
    results.reverse();
    results
}

fn responses_json(body: &Value) -> Option<Json> {
    match str_at(body, "/text/format/type")? {
        "json_object" => Some(Json::Object),
        "json_schema" => Some(Json::Schema(body.pointer("/text/format/schema")?.clone())),
        _ => None,
    }
}

fn responses_images(body: &Value) -> usize {
    count_parts(array_at(body, "/input"), "/content", |part| str_at(part, "/type") == Some("input_image"))
}

fn anthropic_tool(body: &Value) -> Option<Offered> {
    let choice = str_at(body, "/tool_choice/type");
    if choice == Some("none") {
        return None;
    }
    let named = if choice == Some("tool") { str_at(body, "/tool_choice/name") } else { None };
    pick(array_at(body, "/tools").iter(), named, "/name", &["/input_schema"])
}

fn anthropic_results(body: &Value) -> Vec<String> {
    let Some(last) = array_at(body, "/messages").last().filter(|m| str_at(m, "/role") == Some("user")) else {
        return Vec::new();
    };
    let results = array_at(last, "/content").iter().filter(|block| str_at(block, "/type") == Some("tool_result"));
    results.map(|block| text_of(block.get("content").unwrap_or(&Value::Null))).collect()
}

fn anthropic_json(body: &Value) -> Option<Json> {
    if str_at(body, "/output_config/format/type") == Some("json_schema") {
        return Some(Json::Schema(body.pointer("/output_config/format/schema")?.clone()));
    }
    let system = text_of(body.get("system").unwrap_or(&Value::Null)).to_lowercase();
    system.contains("json object").then_some(Json::Object)
}

fn anthropic_images(body: &Value) -> usize {
    count_parts(array_at(body, "/messages"), "/content", |block| str_at(block, "/type") == Some("image"))
}

fn gemini_tool(body: &Value) -> Option<Offered> {
    let mode = str_at(body, "/toolConfig/functionCallingConfig/mode");
    if mode == Some("NONE") {
        return None;
    }
    let named = str_at(body, "/toolConfig/functionCallingConfig/allowedFunctionNames/0");
    let declarations = array_at(body, "/tools").iter().flat_map(|tool| array_at(tool, "/functionDeclarations"));
    pick(declarations, named, "/name", &["/parametersJsonSchema", "/parameters"])
}

fn gemini_results(body: &Value) -> Vec<String> {
    let Some(last) = array_at(body, "/contents").last().filter(|c| str_at(c, "/role") == Some("user")) else {
        return Vec::new();
    };
    let responses = array_at(last, "/parts").iter().filter_map(|part| part.pointer("/functionResponse/response"));
    responses
        .map(|response| match response.as_object() {
            // A result that was not a JSON object comes wrapped in `output`, as Gemini documents.
            Some(fields) if fields.len() == 1 && fields.contains_key("output") => text_of(&response["output"]),
            _ => response.to_string(),
        })
        .collect()
}

fn gemini_json(body: &Value) -> Option<Json> {
    if str_at(body, "/generationConfig/responseMimeType") != Some("application/json") {
        return None;
    }
    let schema = ["/generationConfig/responseJsonSchema", "/generationConfig/responseSchema"]
        .iter()
        .find_map(|at| body.pointer(at));
    Some(schema.map_or(Json::Object, |schema| Json::Schema(schema.clone())))
}

fn gemini_images(body: &Value) -> usize {
    count_parts(array_at(body, "/contents"), "/parts", |part| {
        part.get("inlineData").is_some() || part.get("fileData").is_some()
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ask(kind: ProviderKind, body: Value) -> Ask {
        Ask::of(kind, &RecordedRequest { path: String::new(), headers: Default::default(), body, fault: None })
    }

    fn weather() -> Value {
        json!({"type": "object", "properties": {"city": {"type": "string"}}})
    }

    #[test]
    fn openai_offers_calls_and_results() {
        let tools = json!([{"type": "function", "function": {"name": "get_weather", "parameters": weather()}},
            {"type": "function", "function": {"name": "other", "parameters": {}}}]);
        let asked = ask(ProviderKind::OpenAi, json!({"tools": tools, "messages": [{"role": "user", "content": "hi"}]}));
        assert_eq!(asked.call, Some(Offered { name: "get_weather".into(), parameters: weather() }));
        let named = ask(
            ProviderKind::OpenAi,
            json!({"tools": tools, "tool_choice": {"type": "function", "function": {"name": "other"}}}),
        );
        assert_eq!(named.call.map(|c| c.name), Some("other".into()));
        let none = ask(ProviderKind::OpenAi, json!({"tools": tools, "tool_choice": "none"}));
        assert_eq!(none.call, None);
        let answered = ask(
            ProviderKind::OpenAi,
            json!({"tools": tools, "messages": [{"role": "tool", "tool_call_id": "c", "content": "18C"},
            {"role": "tool", "tool_call_id": "d", "content": [{"type": "text", "text": "rain"}]}]}),
        );
        assert_eq!((answered.call, answered.tool_results), (None, vec!["18C".to_owned(), "rain".to_owned()]));
    }

    #[test]
    fn anthropic_and_gemini_results_and_json() {
        let anthropic = ask(
            ProviderKind::Anthropic,
            json!({"tools": [{"name": "get_weather", "input_schema": weather()}],
            "system": "Answer with one JSON object and nothing else",
            "messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "u"}},
                {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "18C"}]}]}]}),
        );
        assert_eq!((anthropic.call, anthropic.tool_results), (None, vec!["18C".to_owned()]));
        assert_eq!((anthropic.json, anthropic.images), (Some(Json::Object), 1));
        let gemini = ask(
            ProviderKind::Gemini,
            json!({"generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": weather()},
            "contents": [{"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": "AA"}},
                {"functionResponse": {"name": "get_weather", "response": {"output": "18C"}}}]}]}),
        );
        assert_eq!(gemini.tool_results, vec!["18C".to_owned()]);
        assert_eq!((gemini.json, gemini.images), (Some(Json::Schema(weather())), 1));
    }
}
