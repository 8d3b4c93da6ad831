//! The simulated side of each kind, for `baton mock`, `baton demo`, the
//! tests and the benchmarks: how the kind's provider reads a request and
//! writes its answer, event by event, as its official API reference shows
//! it. Each kind's folder implements [`Simulated`]; `crate::mock` drives it
//! with faults and timing and knows no kind by name.

use std::collections::HashMap;
use std::net::SocketAddr;

use serde_json::Value;

/// The prompt tokens every simulated answer reports.
pub const PROMPT_TOKENS: usize = 10;

/// What a complete answer's usage reports: its text tokens, the reasoning
/// tokens before them, and the prompt tokens read from a cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Tokens of the answer itself.
    pub output: usize,
    /// Tokens of reasoning (counted among the output, as OpenAI and Anthropic do).
    pub reasoning: usize,
    /// Prompt tokens read from a cache.
    pub cached: usize,
}

/// A call to one of the request's tools that an answer ends with.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The call's id, which the tool's result will refer to.
    pub id: &'a str,
    /// The function called.
    pub name: &'a str,
    /// The JSON arguments, in the fragments they are streamed in.
    pub arguments: &'a [String],
}

/// How a complete answer ends.
#[derive(Debug, Clone, Copy)]
pub struct Ending<'a> {
    /// The index of the text block (1 after thinking, where a kind numbers blocks).
    pub text_block: usize,
    /// The tool call after the text, if any.
    pub call: Option<Call<'a>>,
    /// What the usage reports.
    pub counts: Counts,
}

/// A function a request offers the model.
#[derive(Debug, Clone, PartialEq)]
pub struct Offered {
    /// The function's name.
    pub name: String,
    /// The JSON Schema of its arguments.
    pub parameters: Value,
}

/// The form of answer a request asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// Any JSON object.
    Object,
    /// JSON valid for this schema.
    Schema(Value),
}

/// What one request asks for beyond words, read from the kind's own body.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Asked {
    /// The offered tool to call: the named one, or the first; none when
    /// the request turns tools off.
    pub tool: Option<Offered>,
    /// The content of each tool result the conversation ends with.
    pub tool_results: Vec<String>,
    /// JSON, when the request asks for it.
    pub json: Option<Json>,
    /// Images anywhere in the conversation.
    pub images: usize,
}

/// One event of an answer as its bytes on the wire (an SSE event, or a
/// binary frame for a kind that frames otherwise).
pub type WireEvent = Vec<u8>;

/// A kind's simulated provider: where it listens, how it reads a request
/// and how it writes each part of an answer. The mock decides what to
/// answer and when; this says how the kind writes it.
pub trait Simulated: Send + Sync {
    /// The `base_url` a config gives a provider of this kind listening at
    /// `addr`, following the kind's SDK convention.
    fn base_url(&self, addr: SocketAddr) -> String;

    /// The keys beyond `kind` and `base_url` that a `[[providers]]` entry
    /// needs to reach a simulated provider of this kind listening at `addr`
    /// (a region, a key, a key file of its own), one per line.
    fn config_keys(&self, addr: SocketAddr) -> String {
        let _ = addr;
        String::new()
    }

    /// The simulated wire of the model a request asks for, for a kind whose
    /// models speak different APIs (Vertex AI); this one for most kinds.
    fn for_model(&self, model: &str) -> Option<&'static dyn Simulated> {
        let _ = model;
        None
    }

    /// The answer to a request beside the chat ones (Vertex's token
    /// exchange), as its status and JSON body, given the key the simulated
    /// provider requires; `None` for a path the kind does not serve.
    fn side_answer(&self, path: &str, body: &Value, key: Option<&str>) -> Option<(u16, String)> {
        let _ = (path, body, key);
        None
    }

    /// The body a side endpoint answers 429 with when it throttles (the
    /// `token_throttled` fault); `None` for a kind with no side endpoint.
    fn throttled_side_answer(&self) -> Option<String> {
        None
    }

    /// A model id of this kind's form made of `name`, for a target of a
    /// simulated provider (Bedrock's ids are `anthropic.…`).
    fn model_named(&self, name: &str) -> String {
        name.to_owned()
    }

    /// Whether `path` (with its query) is where the kind's SDK sends a
    /// streaming chat request.
    fn is_chat_path(&self, path: &str) -> bool;

    /// Whether `path` is where the kind counts a request's tokens; most
    /// kinds have no such endpoint.
    fn is_count_path(&self, path: &str) -> bool {
        let _ = path;
        false
    }

    /// The header that carries `key`, and the value it must hold.
    fn auth_header(&self, key: &str) -> (&'static str, String);

    /// Whether a request to `path` with `headers` (names lowercased) and
    /// `body` proves `key`, the credential the simulated provider requires:
    /// its header holds it, or (Bedrock) its signature is the key's.
    fn authorized(&self, key: &str, path: &str, headers: &HashMap<String, String>, body: &[u8]) -> bool {
        let _ = (path, body);
        let (name, expected) = self.auth_header(key);
        headers.get(name) == Some(&expected)
    }

    /// The model a request asks for: in its path or in its body.
    fn model(&self, path: &str, body: &Value) -> String {
        let _ = path;
        body.get("model").and_then(Value::as_str).unwrap_or_default().to_owned()
    }

    /// The body's list of turns and the role the model's own turns have.
    fn turns(&self) -> (&'static str, &'static str) {
        ("messages", "assistant")
    }

    /// How the kind's tool call ids begin.
    fn call_id_prefix(&self) -> &'static str {
        "call_mock"
    }

    /// What the request body asks for beyond words.
    fn asked(&self, body: &Value) -> Asked;

    /// Whether a 429 says how long to wait in `retry-after-ms` too (Azure).
    fn retry_after_ms(&self) -> bool {
        false
    }

    /// The content type of a streamed answer.
    fn content_type(&self) -> &'static str {
        "text/event-stream"
    }

    /// Events before the first token, for an answer that may think first
    /// and reads `cached` of its prompt tokens from a cache.
    fn opening(&self, model: &str, thinking: bool, cached: usize) -> Vec<WireEvent>;

    /// One delta of reasoning.
    fn reasoning(&self, model: &str, text: &str) -> WireEvent;

    /// What ends the reasoning before the answer.
    fn end_of_reasoning(&self) -> Vec<WireEvent> {
        Vec::new()
    }

    /// One text token, in block `block` (1 after thinking).
    fn text_in(&self, model: &str, block: usize, text: &str) -> WireEvent;

    /// A whole tool call (`get_weather` for Paris) as the kind streams one.
    fn tool_call(&self, model: &str) -> Vec<WireEvent>;

    /// The events that end a complete answer, its tool call and end marker included.
    fn ending(&self, model: &str, end: &Ending<'_>) -> Vec<WireEvent>;

    /// An error reported inside the stream.
    fn error_event(&self) -> WireEvent;

    /// The events after the opening of an answer the kind's content filter
    /// refused before any token, end marker included.
    fn refusal(&self, model: &str) -> Vec<WireEvent>;

    /// An event no decoder can read.
    fn malformed(&self) -> WireEvent;

    /// The JSON body of an HTTP error, in the kind's error shape.
    fn error_body(&self, status: u16, message: &str) -> String;

    /// How the kind words a prompt that does not fit the context window.
    fn context_length_message(&self) -> &'static str;

    /// An event of the kind's own shape carrying no content, with
    /// `padding` as one unknown field on its single line.
    fn huge_line(&self, padding: &str) -> WireEvent;

    /// A first event in the kind's shape whose fields have the wrong types.
    fn wrong_types(&self) -> WireEvent;

    /// The events that end a complete answer, every usage count `u64::MAX`.
    fn overflowing_finish(&self, model: &str) -> Vec<WireEvent>;

    /// The answer to a count request, for a kind with a count endpoint.
    fn token_count(&self, body: &Value) -> String {
        let _ = body;
        String::new()
    }
}

/// An unnamed SSE event of `value`.
pub(super) fn data(value: &Value) -> WireEvent {
    format!("data: {value}\n\n").into_bytes()
}

/// A named SSE event of `value`.
pub(super) fn named(name: &str, value: &Value) -> WireEvent {
    format!("event: {name}\ndata: {value}\n\n").into_bytes()
}

/// The string at `pointer`.
pub(super) fn str_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

/// The array at `pointer`, empty when there is none.
pub(super) fn array_at<'a>(value: &'a Value, pointer: &str) -> &'a [Value] {
    value.pointer(pointer).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// The offered function called `named`, or the first when none is named.
pub(super) fn pick<'a>(
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
pub(super) fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|part| part.get("text").and_then(Value::as_str)).collect(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// How many parts at `parts_at` of all `turns` are images.
pub(super) fn count_parts(turns: &[Value], parts_at: &str, is_image: impl Fn(&Value) -> bool) -> usize {
    turns.iter().map(|turn| array_at(turn, parts_at).iter().filter(|part| is_image(part)).count()).sum()
}
